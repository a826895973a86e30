//! The kit's Kafka schema history store against the broker: the records Debezium 3.6.3 wrote
//! for MariaDB (`tests/fixtures/debezium/schema_history`) stored on a topic and recovered by a
//! new store, as after a restart on another machine.

use sluice_kit::history::{table_id, FileStore, HistoryConfig, SchemaHistory};

use crate::broker;
use crate::e2e::unique_prefix;

fn fixture() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/debezium/schema_history/mariadb.dat")
}

fn config(topic: &str) -> HistoryConfig {
    HistoryConfig {
        kafka_topic: Some(topic.to_owned()),
        kafka_servers: Some(broker::shared()),
        ..HistoryConfig::default()
    }
}

/// `(file, pos)` not after the offset's.
fn at_or_before(pos: i64) -> impl Fn(&serde_json::Value) -> bool {
    move |p| (p["file"].as_str(), p["pos"].as_i64()) <= (Some("binlog.000001"), Some(pos))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_history_on_a_topic_is_recovered_by_a_new_store() {
    let rt = runtime();
    let topic = unique_prefix("history");
    let dir = tempfile::tempdir().unwrap();
    let open = || rt.block_on(SchemaHistory::open(&config(&topic), dir.path(), "unused"));
    let mut history = open().unwrap();
    assert!(!history.exists().unwrap(), "a new topic holds no history");
    assert_eq!(
        broker::topic_config(&broker::shared(), &topic, "retention.ms").as_deref(),
        Some("-1"),
        "the history is kept for ever"
    );
    assert_eq!(broker::partitions(&broker::shared()).get(&topic), Some(&1));
    let records = FileStore::new(fixture()).read_all().unwrap();
    for record in &records {
        let stored = rt.block_on(history.record(record.clone(), |_| true, |_| true));
        assert!(stored.unwrap());
    }
    drop(history);

    let again = open().unwrap();
    assert!(again.exists().unwrap());
    assert_eq!(
        again.records().unwrap(),
        records,
        "the same records, in order"
    );
    let customers = table_id(&["inventory", "customers"]);
    let before_alter = again.recover(at_or_before(1827)).unwrap();
    assert_eq!(before_alter.applied, 8);
    assert_eq!(
        before_alter.tables.get(&customers).map(|t| t.columns.len()),
        Some(6)
    );
    let end = again.recover(at_or_before(3523)).unwrap();
    assert_eq!(end.tables.get(&customers).map(|t| t.columns.len()), Some(7));
    assert_eq!(
        end.tables.ids().collect::<Vec<_>>(),
        [customers.as_str(), &table_id(&["inventory", "products"])]
    );
}

#[test]
fn a_topic_of_more_than_one_partition_is_refused() {
    let topic = unique_prefix("history_parts");
    broker::create_topic(&broker::shared(), &topic, 2);
    let dir = tempfile::tempdir().unwrap();
    let error = runtime()
        .block_on(SchemaHistory::open(&config(&topic), dir.path(), "unused"))
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("has 2 partitions") && error.contains("exactly one"),
        "{error}"
    );
}
