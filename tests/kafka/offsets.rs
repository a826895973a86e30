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
    let path = pg::pipeline(dir.path(), &db, "", false);
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "offsets: { flush_interval: 50ms }",
        &format!("offsets: {{ flush_interval: 50ms, store: kafka, bootstrap.servers: '{bootstrap}', topic: {topic}, properties: {{ broker.address.family: v4 }} }}"),
    );
    std::fs::write(&path, text).unwrap();

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
