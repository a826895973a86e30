//! PostgreSQL → Kafka end to end: what the broker holds equals the file sink's output of the
//! same run, partitioned as the Java producer would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value as Json;
use sluice_test_support::pipeline::{Component, Pipeline, Scalar};

use crate::broker::{self, java_partition, Consumed};
use crate::pg;

/// A topic prefix no earlier run used on a broker that keeps its topics.
pub(crate) fn unique_prefix(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{name}_{}", nanos % 1_000_000_000_000)
}

/// The test pipeline from `db` (named after it, topics under `prefix`), without sinks:
/// [`pg::base`] with its source, and without its file sink.
pub(crate) fn kafka_base(dir: &Path, db: &str, prefix: &str) -> Pipeline {
    let source = pg::source(db).set("topic.prefix", prefix);
    pg::base(dir, db, source, false).without_sinks()
}

/// [`kafka_base`] into `sinks`, written as `dir/pipeline.yaml`.
pub(crate) fn kafka_pipeline(
    dir: &Path,
    db: &str,
    prefix: &str,
    sinks: impl IntoIterator<Item = Component>,
) -> PathBuf {
    (sinks.into_iter())
        .fold(kafka_base(dir, db, prefix), Pipeline::sink)
        .write(dir)
}

/// The Kafka sink `kafka` at `bootstrap`, with `producer: { broker.address.family: v4 }` (a
/// `producer` set after replaces it).
pub(crate) fn kafka_sink(bootstrap: &str) -> Component {
    Component::new("kafka")
        .named("kafka")
        .set("bootstrap.servers", bootstrap)
        .set("producer", [("broker.address.family", "v4")])
}

/// The file sink `file` (`dir/out.jsonl`), for comparison.
pub(crate) fn file_sink(dir: &Path) -> Component {
    Component::new("file")
        .named("file")
        .set("path", dir.join("out.jsonl"))
}

fn json(bytes: &Option<Vec<u8>>) -> Json {
    bytes
        .as_ref()
        .map(|b| serde_json::from_slice(b).expect("JSON record"))
        .unwrap_or(Json::Null)
}

/// Per topic and key, the sequence of values, as the file sink wrote them.
fn by_key_from_file(lines: &[Json]) -> BTreeMap<(String, String), Vec<Json>> {
    let mut out: BTreeMap<(String, String), Vec<Json>> = BTreeMap::new();
    for l in lines {
        let topic = l["topic"].as_str().unwrap_or_default().to_owned();
        out.entry((topic, l["key"].to_string()))
            .or_default()
            .push(l["value"].clone());
    }
    out
}

/// The same from the broker's records (per key they sit in one partition, in order).
fn by_key_from_kafka(records: &[Consumed]) -> BTreeMap<(String, String), Vec<Json>> {
    let mut out: BTreeMap<(String, String), Vec<Json>> = BTreeMap::new();
    for r in records {
        out.entry((r.topic.clone(), json(&r.key).to_string()))
            .or_default()
            .push(json(&r.value));
    }
    out
}

fn end_to_end(name: &str, schemas: bool) {
    let db = pg::fresh_db(name);
    pg::psql(&db, "create table customers (id serial primary key, name text not null, email text, score numeric(10,2))");
    pg::psql(&db, "insert into customers (name, email, score) select 'c' || g, 'c' || g || '@example.com', g * 1.5 from generate_series(1, 50) g");
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix(name);
    let bootstrap = broker::shared();
    let kafka = kafka_sink(&bootstrap)
        .set("schemas.enable", schemas)
        .set("headers", ["op", "table", "position"])
        .set(
            "topic.creation",
            Scalar::map(&[("partitions", 3u32.into())]),
        );
    let file = file_sink(dir.path()).set("schemas.enable", schemas);
    let path = kafka_pipeline(dir.path(), &db, &prefix, [kafka, file]);
    let mut child = pg::start(&path, &[]);
    pg::wait_lines(dir.path(), 50, &mut child);
    pg::psql(&db, "insert into customers (name, email, score) select 'n' || g, null, g from generate_series(1, 30) g");
    pg::psql(
        &db,
        "update customers set email = 'changed' where id % 5 = 0",
    );
    pg::psql(&db, "delete from customers where id between 41 and 45");
    // 50 snapshot rows, 30 inserts, 16 updates, 5 deletes each with a tombstone.
    let total = 50 + 30 + 16 + 10;
    pg::wait_lines(dir.path(), total, &mut child);
    pg::stop(&child);
    pg::finish(child);

    let topic = format!("{prefix}.public.customers");
    let records = broker::consume(&bootstrap, &[&topic], total, Duration::from_secs(60));
    assert_eq!(records.len(), total, "no record twice");
    let lines = pg::lines(dir.path());
    assert_eq!(by_key_from_kafka(&records), by_key_from_file(&lines));

    let parts = broker::partitions(&bootstrap);
    assert_eq!(
        parts.get(&topic),
        Some(&3),
        "created with topic.creation.partitions"
    );
    let mut used = std::collections::BTreeSet::new();
    for r in &records {
        let key = r.key.as_ref().expect("keyed table");
        assert_eq!(
            r.partition,
            java_partition(key, 3),
            "partitioned like Kafka's Java producer"
        );
        used.insert(r.partition);
        let value = json(&r.value);
        match value.get("payload").unwrap_or(&value) {
            Json::Null => assert!(!r.headers.contains_key("op"), "a tombstone has no op"),
            v => {
                assert_eq!(r.headers.get("op").map(String::as_str), v["op"].as_str());
                assert_eq!(
                    r.headers.get("table").map(String::as_str),
                    Some("public.customers")
                );
                assert!(
                    r.headers.get("position").is_some_and(|p| p.contains("lsn")),
                    "{:?}",
                    r.headers
                );
            }
        }
    }
    assert_eq!(used.len(), 3, "keys spread over the partitions");
    pg::drop_db(&db);
}

#[test]
fn json_with_schemas_matches_the_file_sink() {
    end_to_end("kafka_json_schemas", true);
}

#[test]
fn json_without_schemas_matches_the_file_sink() {
    end_to_end("kafka_json_plain", false);
}

/// `format: cloudevents` on the Kafka sink: each record's value is the CloudEvent the file
/// sink writes for the same event (Debezium's `CloudEventsConverter` in JSON), its key the
/// event's key, and a delete's tombstone stays a tombstone.
#[test]
fn cloudevents_records_match_the_file_sink() {
    let db = pg::fresh_db("kafka_cloudevents");
    pg::psql(
        &db,
        "create table customers (id serial primary key, name text not null)",
    );
    pg::psql(
        &db,
        "insert into customers (name) select 'c' || g from generate_series(1, 20) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("kafka_cloudevents");
    let bootstrap = broker::shared();
    let format: &[(&str, Scalar)] = &[
        ("format", "cloudevents".into()),
        ("schemas.enable", false.into()),
    ];
    let sinks = [
        kafka_sink(&bootstrap).set_all(format),
        file_sink(dir.path()).set_all(format),
    ];
    let path = kafka_pipeline(dir.path(), &db, &prefix, sinks);
    let mut child = pg::start(&path, &[]);
    pg::wait_lines(dir.path(), 20, &mut child);
    pg::psql(
        &db,
        "update customers set name = 'x' where id <= 3; delete from customers where id = 4",
    );
    // 20 reads, 3 updates, a delete and its tombstone.
    let total = 20 + 3 + 2;
    pg::wait_lines(dir.path(), total, &mut child);
    pg::stop(&child);
    pg::finish(child);
    let topic = format!("{prefix}.public.customers");
    let records = broker::consume(&bootstrap, &[&topic], total, Duration::from_secs(60));
    assert_eq!(records.len(), total, "no record twice");
    let lines = pg::lines(dir.path());
    assert_eq!(by_key_from_kafka(&records), by_key_from_file(&lines));
    let events: Vec<Json> = records.iter().map(|r| json(&r.value)).collect();
    let update = events
        .iter()
        .find(|v| v["iodebeziumop"] == "u")
        .unwrap_or_else(|| panic!("an update among {events:?}"));
    assert_eq!(update["specversion"], "1.0");
    assert_eq!(update["datacontenttype"], "application/json");
    assert_eq!(update["data"]["after"]["name"], "x", "{update}");
    assert!(
        update["type"]
            .as_str()
            .is_some_and(|t| t.starts_with("io.debezium")),
        "{update}"
    );
    assert_eq!(
        events.iter().filter(|v| v.is_null()).count(),
        1,
        "the tombstone"
    );
    pg::drop_db(&db);
}

#[test]
fn topics_are_created_with_their_groups_settings_or_left_alone() {
    let bootstrap = broker::shared();
    let db = pg::fresh_db("kafka_topics");
    pg::psql(
        &db,
        "create table plain (id int primary key); create table special (id int primary key)",
    );
    pg::psql(
        &db,
        "insert into plain values (1), (2); insert into special values (1), (2)",
    );
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("topics");
    let special = Scalar::map(&[
        ("include", r".*\.special".into()),
        ("partitions", 4u32.into()),
        ("config", [("cleanup.policy", "compact")].into()),
    ]);
    let creation = Scalar::map(&[
        ("partitions", 2u32.into()),
        ("groups", Scalar::List(vec![special])),
    ]);
    let path = kafka_pipeline(
        dir.path(),
        &db,
        &prefix,
        [kafka_sink(&bootstrap).set("topic.creation", creation)],
    );
    pg::finish(pg::start(&path, &["--stop-when-idle", "2s"]));
    let parts = broker::partitions(&bootstrap);
    assert_eq!(parts.get(&format!("{prefix}.public.plain")), Some(&2));
    assert_eq!(parts.get(&format!("{prefix}.public.special")), Some(&4));
    // The group's topic configuration reached the broker; the other topic has the default.
    assert_eq!(
        broker::topic_config(
            &bootstrap,
            &format!("{prefix}.public.special"),
            "cleanup.policy"
        )
        .as_deref(),
        Some("compact")
    );
    assert_ne!(
        broker::topic_config(
            &bootstrap,
            &format!("{prefix}.public.plain"),
            "cleanup.policy"
        )
        .as_deref(),
        Some("compact")
    );

    // With creation off, an existing topic is used as it is.
    let prefix = unique_prefix("topics_off");
    let topic = format!("{prefix}.public.plain");
    broker::create_topic(&bootstrap, &topic, 5);
    pg::psql(&db, "drop table special");
    let dir = tempfile::tempdir().unwrap();
    let source = pg::source(&db)
        .set("topic.prefix", &prefix)
        .set("slot.name", format!("{db}_2"));
    let kafka =
        kafka_sink(&bootstrap).set("topic.creation", Scalar::map(&[("enable", false.into())]));
    let path = kafka_base(dir.path(), &db, &prefix)
        .source(source)
        .sink(kafka)
        .write(dir.path());
    pg::finish(pg::start(&path, &["--stop-when-idle", "2s"]));
    assert_eq!(
        broker::consume(&bootstrap, &[&topic], 2, Duration::from_secs(30)).len(),
        2
    );
    assert_eq!(broker::partitions(&bootstrap).get(&topic), Some(&5));
    pg::drop_db(&db);
}

/// `pipelines/postgres-kafka.yaml` as shipped (only environment variables set): a signal record
/// snapshots the table into Kafka, offsets go to the Kafka topic.
#[test]
fn the_example_pipeline_runs_as_shipped() {
    let bootstrap = broker::shared();
    let db = pg::fresh_db("kafka_example");
    pg::psql(&db, pg::SIGNAL_TABLE);
    pg::psql(&db, "create table customers (id int primary key, name text); insert into customers select g, 'n' || g from generate_series(1, 30) g");
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("example");
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/postgres-kafka.yaml");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg(&file)
        .env("KAFKA_BOOTSTRAP", &bootstrap)
        .env("PGHOST", pg::host())
        .env("PGPORT", pg::port())
        .env("PGDATABASE", &db)
        .env("SLUICE_SLOT", &db)
        .env("SLUICE_TOPIC_PREFIX", &prefix)
        .env("SLUICE_OFFSETS_TOPIC", format!("{prefix}-offsets"))
        .env("SLUICE_DATA_DIR", dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    pg::active_slot_pid(&db, &mut child);
    let signal = r#"{"id":"e-1","type":"execute-snapshot","data":{"data-collections":["public.customers"]}}"#;
    broker::produce(&bootstrap, &format!("{prefix}-signal"), &prefix, signal);
    let topic = format!("{prefix}.public.customers");
    let records = broker::consume(&bootstrap, &[&topic], 30, Duration::from_secs(60));
    pg::stop(&child);
    pg::finish(child);
    assert_eq!(broker::partitions(&bootstrap).get(&topic), Some(&6));
    let ids: std::collections::BTreeSet<i64> = records
        .iter()
        .map(|r| json(&r.value)["payload"]["after"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, (1..=30).collect());
    assert!(!broker::consume(
        &bootstrap,
        &[&format!("{prefix}-offsets")],
        1,
        Duration::from_secs(30)
    )
    .is_empty());
    pg::drop_db(&db);
}

/// `sluice import` of a Debezium PostgreSQL connector's Kafka Connect JSON (as registered with
/// `POST /connectors`, the tutorial's shape with an `unwrap` SMT and schemaless JSON, and a
/// Filter SMT with a Groovy condition): the printed pipeline validates, runs unchanged, and its
/// topic holds the flattened rows the condition keeps.
#[test]
fn an_imported_debezium_connector_runs_as_the_pipeline_it_prints() {
    let db = pg::fresh_db("imported_connector");
    pg::psql(
        &db,
        "create table customers (id int primary key, name text not null)",
    );
    pg::psql(
        &db,
        "insert into customers values (1, 'Sally'), (2, 'George'), (3, 'Ann')",
    );
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("imported");
    let bootstrap = broker::shared();
    let connector = serde_json::json!({
        "name": prefix,
        "config": {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "tasks.max": "1",
            "database.hostname": pg::host(),
            "database.port": pg::port(),
            "database.user": "postgres",
            "database.password": "${env:PGPASSWORD_UNUSED}",
            "database.dbname": db,
            "topic.prefix": prefix,
            "plugin.name": "pgoutput",
            "slot.name": db,
            "publication.name": db,
            "publication.autocreate.mode": "filtered",
            "table.include.list": "public.customers",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "transforms": "keep,unwrap",
            "transforms.keep.type": "io.debezium.transforms.Filter",
            "transforms.keep.language": "jsr223.groovy",
            "transforms.keep.condition": "value.op == 'r' && value.after.id != 2",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.unwrap.drop.tombstones": "false"
        }
    });
    let file = dir.path().join("connector.json");
    std::fs::write(&file, connector.to_string()).unwrap();
    let o = std::process::Command::new(pg::sluice())
        .args(["import", "--bootstrap-servers", &bootstrap])
        .arg(&file)
        .output()
        .unwrap();
    let yaml = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        yaml.contains("  type: postgres\n")
            && yaml.contains("  - type: filter\n")
            && yaml.contains("  - type: unwrap\n"),
        "{yaml}"
    );
    assert!(
        !yaml.contains("tasks.max") && !yaml.contains("converter"),
        "{yaml}"
    );
    // The same connector as Kafka Connect's standalone `.properties` file (a comment, `:` and
    // `=` separators, a continued line, an escaped `=`): the same pipeline.
    let mut text = format!("# {prefix}, as connect-standalone reads it\nname: {prefix}\n");
    for (key, value) in connector["config"].as_object().unwrap() {
        let value = value.as_str().unwrap().replace('=', "\\=");
        match key.as_str() {
            "transforms.keep.condition" => {
                let (head, tail) = value.split_at(value.find("&&").unwrap());
                text.push_str(&format!("{key} = {head}\\\n    {tail}\n"));
            }
            _ => text.push_str(&format!("{key}={value}\n")),
        }
    }
    let properties = dir.path().join("connector.properties");
    std::fs::write(&properties, text).unwrap();
    let o = std::process::Command::new(pg::sluice())
        .args(["import", "--bootstrap-servers", &bootstrap])
        .arg(&properties)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The same pipeline; only the header comment names the other file.
    let body = |y: &str| y.split_once('\n').map(|(_, rest)| rest.to_owned());
    let imported = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(imported.contains("connector.properties"), "{imported}");
    assert_eq!(body(&imported), body(&yaml), "from .properties");
    let path = dir.path().join("imported.yaml");
    std::fs::write(&path, &yaml).unwrap();
    let o = std::process::Command::new(pg::sluice())
        .args(["run", "--stop-when-idle", "3s"])
        .arg(&path)
        .current_dir(dir.path())
        .env("PGPASSWORD_UNUSED", "")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let topic = format!("{prefix}.public.customers");
    let records = broker::consume(&bootstrap, &[&topic], 2, Duration::from_secs(60));
    let values: Vec<Json> = records.iter().map(|r| json(&r.value)).collect();
    assert_eq!(
        values,
        [
            serde_json::json!({"id": 1, "name": "Sally"}),
            serde_json::json!({"id": 3, "name": "Ann"})
        ],
        "George filtered out by Debezium's Filter SMT's condition, the rest flattened by the unwrap transform, without schemas"
    );
    pg::drop_db(&db);
}
