//! PostgreSQL → Kafka as Confluent Avro, through the test registry: every record's schema id
//! resolves to the schema derived from the same event's Connect schema (as the file sink wrote
//! it), its datum is that event's, apache-avro reads it, and a changed table registers a new
//! version.

use std::time::Duration;

use serde_json::Value as Json;
use sluice_engine::codec::decode_record;
use sluice_sinks::format::avro::{datum, schema};
use sluice_sinks::format::NameAdjustment;
use sluice_test_support::pipeline::Component;

use crate::broker::{self, Consumed};
use crate::e2e::{file_sink, kafka_pipeline, kafka_sink, unique_prefix};
use crate::pg;
use crate::registry::Registry;

/// The Kafka sink at `bootstrap` writing Avro through `registry`.
fn avro_sink(bootstrap: &str, registry: &Registry) -> Component {
    kafka_sink(bootstrap)
        .set("format", "avro")
        .set("schema.registry.url", &registry.url)
}

/// Splits the wire format: magic byte, schema id, datum.
fn wire(bytes: &[u8]) -> (u32, &[u8]) {
    assert_eq!(bytes[0], 0, "magic byte");
    (
        u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]),
        &bytes[5..],
    )
}

fn read(schema: &str, datum: &[u8]) -> Result<apache_avro::types::Value, String> {
    let schema = apache_avro::Schema::parse_str(schema).map_err(|e| e.to_string())?;
    apache_avro::reader::datum::GenericDatumReader::builder(&schema)
        .build()
        .and_then(|r| r.read_value(&mut &datum[..]))
        .map_err(|e| e.to_string())
}

/// Checks one Kafka record against the file sink's line of the same event.
fn check(registry: &Registry, record: &Consumed, line: &Json) {
    for (part, bytes) in [("key", &record.key), ("value", &record.value)] {
        let Some(expected) = decode_record(&line[part]).unwrap() else {
            assert!(bytes.is_none(), "{part} should be null");
            continue;
        };
        let (id, datum_bytes) = wire(bytes.as_deref().expect("a record"));
        let registered = registry.schema(id).expect("the id is registered");
        assert_eq!(
            registered,
            schema::derive(&expected.schema, NameAdjustment::Avro).json
        );
        let mut ours = Vec::new();
        datum::encode(&expected.schema, &expected.value, &mut ours).unwrap();
        assert_eq!(datum_bytes, &ours[..], "{part} datum");
        read(&registered, datum_bytes).unwrap_or_else(|e| panic!("apache-avro: {e}"));
    }
}

#[test]
fn avro_through_the_registry_matches_the_file_sink_and_evolves() {
    let registry = Registry::start();
    let bootstrap = broker::shared();
    let db = pg::fresh_db("kafka_avro");
    pg::psql(&db, "create type mood as enum ('sad', 'ok', 'happy'); create table t (id int primary key, name text not null, price numeric(10,2), ratio numeric, at timestamptz default now(), day date, tags text[], mood mood, doc jsonb, raw bytea, small smallint default 7)");
    pg::psql(&db, "insert into t (id, name, price, ratio, day, tags, mood, doc, raw) values (1, 'a', 12.34, 1.5, '2024-02-29', '{x,y}', 'ok', '{\"k\": 1}', '\\x0102'), (2, 'b', null, null, null, null, null, null, null)");
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("avro");
    let sinks = [avro_sink(&bootstrap, &registry), file_sink(dir.path())];
    let path = kafka_pipeline(dir.path(), &db, &prefix, sinks);
    let mut child = pg::start(&path, &[]);
    pg::wait_lines(dir.path(), 2, &mut child);
    pg::psql(
        &db,
        "update t set name = 'a2', price = -0.5 where id = 1; delete from t where id = 2",
    );
    pg::psql(&db, "alter table t add column extra text; insert into t (id, name, extra) values (3, 'c', 'new')");
    pg::psql(
        &db,
        "alter table t drop column ratio; insert into t (id, name) values (4, 'd')",
    );
    // 2 snapshot rows, an update, a delete and its tombstone, two inserts.
    pg::wait_lines(dir.path(), 7, &mut child);
    pg::stop(&child);
    pg::finish(child);

    let topic = format!("{prefix}.public.t");
    let records = broker::consume(&bootstrap, &[&topic], 7, Duration::from_secs(60));
    let lines = pg::lines(dir.path());
    assert_eq!(records.len(), lines.len());
    for (record, line) in records.iter().zip(&lines) {
        check(&registry, record, line);
    }
    // One key schema; the value schema changed twice (a column added, one dropped), and each
    // change is a new version of the subject.
    assert_eq!(registry.versions(&format!("{topic}-key")).len(), 1);
    assert_eq!(registry.versions(&format!("{topic}-value")).len(), 3);
    pg::drop_db(&db);
}

#[test]
fn record_name_strategies_name_subjects_after_the_records() {
    let registry = Registry::start();
    let bootstrap = broker::shared();
    let db = pg::fresh_db("kafka_avro_rns");
    pg::psql(
        &db,
        "create table t (id int primary key, v text); insert into t values (1, 'x')",
    );
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("avro_rns");
    let avro = avro_sink(&bootstrap, &registry)
        .set(
            "key.subject.name.strategy",
            "io.confluent.kafka.serializers.subject.RecordNameStrategy",
        )
        .set("value.subject.name.strategy", "TopicRecordNameStrategy");
    let path = kafka_pipeline(dir.path(), &db, &prefix, [avro]);
    pg::finish(pg::start(&path, &["--stop-when-idle", "2s"]));
    let topic = format!("{prefix}.public.t");
    assert_eq!(
        broker::consume(&bootstrap, &[&topic], 1, Duration::from_secs(30)).len(),
        1
    );
    assert_eq!(
        registry.subjects(),
        vec![format!("{topic}-{topic}.Envelope"), format!("{topic}.Key")]
    );
    pg::drop_db(&db);
}

#[test]
fn an_unreachable_registry_fails_at_startup_with_one_line() {
    let db = pg::fresh_db("kafka_avro_noreg");
    pg::psql(&db, "create table t (id int primary key)");
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", pg::free_port());
    let avro = kafka_sink(&broker::shared())
        .set("format", "avro")
        .set("schema.registry.url", &url);
    let path = kafka_pipeline(dir.path(), &db, "x", [avro]);
    let last = pg::run_expecting_failure(&path);
    assert!(
        last.contains(&format!("cannot reach the schema registry at {url}")),
        "{last}"
    );
    assert!(last.contains("check `schema.registry.url`"), "{last}");
    pg::drop_db(&db);
}

#[test]
fn registry_credentials_are_used_and_wrong_ones_fail_at_startup_with_one_line() {
    let registry = Registry::start_with_auth("sluice:s3cret");
    let bootstrap = broker::shared();
    let db = pg::fresh_db("kafka_avro_auth");
    pg::psql(
        &db,
        "create table t (id int primary key); insert into t values (1)",
    );
    for (info, ok) in [("sluice:s3cret", true), ("sluice:wrong", false)] {
        let dir = tempfile::tempdir().unwrap();
        let prefix = unique_prefix("avro_auth");
        let avro = avro_sink(&bootstrap, &registry).set("basic.auth.user.info", info);
        let path = kafka_pipeline(dir.path(), &db, &prefix, [avro]);
        if ok {
            pg::finish(pg::start(&path, &["--stop-when-idle", "2s"]));
            assert_eq!(
                registry.versions(&format!("{prefix}.public.t-value")).len(),
                1
            );
        } else {
            let last = pg::run_expecting_failure(&path);
            assert!(last.contains("check `basic.auth.user.info`"), "{last}");
            assert!(
                !last.contains("wrong"),
                "no credentials in messages: {last}"
            );
        }
    }
    pg::drop_db(&db);
}

#[test]
fn names_avro_rejects_are_adjusted() {
    let registry = Registry::start();
    let bootstrap = broker::shared();
    let db = pg::fresh_db("kafka_avro_names");
    pg::psql(&db, "create table \"order-items\" (id int primary key, \"unit-price\" numeric(8,2)); insert into \"order-items\" values (1, 2.5)");
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("avro_names");
    let avro = avro_sink(&bootstrap, &registry);
    let path = kafka_pipeline(dir.path(), &db, &prefix, [avro]);
    pg::finish(pg::start(&path, &["--stop-when-idle", "2s"]));
    let topic = format!("{prefix}.public.order-items");
    let records = broker::consume(&bootstrap, &[&topic], 1, Duration::from_secs(30));
    let (id, datum) = wire(records[0].value.as_deref().unwrap());
    let schema = registry.schema(id).unwrap();
    assert!(
        schema.contains(&format!("\"namespace\":\"{prefix}.public.order_items\"")),
        "{schema}"
    );
    assert!(schema.contains("\"name\":\"unit_price\""), "{schema}");
    read(&schema, datum).unwrap_or_else(|e| panic!("apache-avro: {e}"));
    pg::drop_db(&db);
}
