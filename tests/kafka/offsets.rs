//! `offsets.store: kafka`: a pipeline whose data directory is gone continues from the position
//! committed in the compacted topic.

use std::time::Duration;

use crate::broker;
use crate::e2e::unique_prefix;
use crate::pg;

#[test]
fn offsets_in_kafka_survive_the_loss_of_the_data_directory() {
    let bootstrap = broker::shared();
    let db = pg::fresh_db("kafka_offsets");
    pg::psql(&db, "create table t (id int primary key, v text)");
    pg::psql(
        &db,
        "insert into t select g, 'snap' from generate_series(1, 10) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_prefix("offsets");
    let offsets: &[(&str, pg::Scalar)] = &[
        ("flush_interval", "50ms".into()),
        ("store", "kafka".into()),
        ("bootstrap.servers", (&bootstrap).into()),
        ("topic", (&topic).into()),
        ("properties", [("broker.address.family", "v4")].into()),
    ];
    let path = pg::base(dir.path(), &db, pg::source(&db), false)
        .setting("offsets", offsets)
        .write(dir.path());

    let mut child = pg::start(&path, &[]);
    pg::wait_lines(dir.path(), 10, &mut child);
    pg::psql(
        &db,
        "insert into t select g, 'first run' from generate_series(11, 15) g",
    );
    pg::wait_lines(dir.path(), 15, &mut child);
    pg::stop(&child);
    let said = pg::finish(child);
    assert!(said.contains("Created the Kafka offsets topic"), "{said}");
    assert_eq!(
        broker::topic_config(&bootstrap, &topic, "cleanup.policy").as_deref(),
        Some("compact"),
        "the offsets topic is compacted"
    );

    // Another machine: no data directory; more changes meanwhile.
    assert!(!dir.path().join("data/offsets.json").exists());
    let _ = std::fs::remove_dir_all(dir.path().join("data"));
    pg::psql(
        &db,
        "insert into t select g, 'while stopped' from generate_series(16, 20) g",
    );
    let mut child = pg::start(&path, &[]);
    pg::wait_lines(dir.path(), 20, &mut child);
    std::thread::sleep(Duration::from_millis(500));
    pg::stop(&child);
    pg::finish(child);

    let lines = pg::lines(dir.path());
    assert_eq!(lines.len(), 20, "no snapshot again, nothing twice");
    let ids: std::collections::BTreeSet<i64> = lines
        .iter()
        .filter_map(|l| l["value"]["after"]["id"].as_i64())
        .collect();
    assert_eq!(ids, (1..=20).collect());
    let snapshot_rows = lines.iter().filter(|l| l["value"]["op"] == "r").count();
    assert_eq!(snapshot_rows, 10);
    assert!(!broker::consume(&bootstrap, &[&topic], 1, Duration::from_secs(30)).is_empty());
    pg::drop_db(&db);
}

/// The store's reset (what `DELETE /connectors/{name}/offsets` does): a tombstone in the
/// compacted topic, so the pipeline has no position, also for a store opened afresh, while
/// another pipeline's stays.
#[test]
fn a_reset_forgets_a_pipelines_position_in_kafka() {
    use sluice_engine::offsets::OffsetStore;
    use sluice_engine::Position;
    use sluice_sinks::kafka::offsets::{KafkaOffsetStore, KafkaOffsetsConfig};

    let config = KafkaOffsetsConfig {
        bootstrap_servers: Some(broker::shared()),
        topic: unique_prefix("offsets-reset"),
        replication_factor: -1,
        properties: sluice_engine::config::Properties(
            [("broker.address.family".to_owned(), "v4".to_owned())].into(),
        ),
    };
    let store = KafkaOffsetStore::open(&config).unwrap();
    store
        .commit("a", &Position::Opaque(r#"{"lsn":7}"#.into()))
        .unwrap();
    store.commit("b", &Position::Offset(3)).unwrap();
    assert_eq!(
        store.load("a").unwrap(),
        Some(Position::Opaque(r#"{"lsn":7}"#.into()))
    );
    store.reset("a").unwrap();
    assert_eq!(store.load("a").unwrap(), None);
    let again = KafkaOffsetStore::open(&config).unwrap();
    assert_eq!(
        again.load("a").unwrap(),
        None,
        "forgotten for a new reader too"
    );
    assert_eq!(again.load("b").unwrap(), Some(Position::Offset(3)));
    again.commit("a", &Position::Offset(9)).unwrap();
    assert_eq!(again.load("a").unwrap(), Some(Position::Offset(9)));
}
