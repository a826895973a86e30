//! Heartbeats on the mysql source (`heartbeat.interval.ms`, `heartbeat.action.query`): records
//! equal to Debezium's (its heartbeat fixture), the action query's rows captured, and the
//! committed position moving past writes to tables that are not captured.

use std::time::{Duration, Instant};

use sluice_test_support::mariadb;
use sluice_test_support::pg::{self as run, normalize};

use super::pipeline;

#[test]
fn heartbeats_match_debezium_and_carry_the_position_past_other_tables() {
    let server = mariadb::server();
    let db = mariadb::database("mysql_heartbeat");
    mariadb::sql(
        &db,
        "CREATE TABLE hb (id INT AUTO_INCREMENT PRIMARY KEY, at DATETIME); \
         CREATE TABLE busy (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(
        dir.path(),
        server.port,
        &[
            ("table.include.list", format!("{db}.hb").into()),
            ("heartbeat.interval.ms", 100u32.into()),
            (
                "heartbeat.action.query",
                format!("INSERT INTO {db}.hb (at) VALUES (NOW())").into(),
            ),
            ("snapshot.mode", "no_data".into()),
        ],
    );
    let mut child = run::start(&path, &[]);
    let out = dir.path().join("out.jsonl");
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let beats = text
            .matches(r#"{"topic":"__debezium-heartbeat.dbserver1""#)
            .count();
        if beats >= 2 && text.contains(&format!(r#"{{"topic":"dbserver1.{db}.hb""#)) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no heartbeat records or action query rows within 60 s: {text}"
        );
        assert!(child.try_wait().unwrap().is_none(), "sluice stopped");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Writes to a table that is not captured: the committed position moves past them.
    mariadb::sql(&db, "INSERT INTO busy (v) VALUES ('z'), ('zz')");
    let end: u64 = mariadb::sql("", "SHOW MASTER STATUS")
        .split('\t')
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    run::stop(&child);
    let log = run::finish(child);
    let committed = log
        .lines()
        .rfind(|l| l.contains("committed="))
        .unwrap_or_default();
    let pos: u64 = regex::Regex::new(r#"\\?"pos\\?":(\d+)"#)
        .unwrap()
        .captures(committed)
        .and_then(|c| c[1].parse().ok())
        .unwrap_or_else(|| panic!("no committed position: {log}"));
    assert!(
        pos >= end,
        "committed {pos} before the busy insert's end {end}: {log}"
    );
    let fixture = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/debezium/heartbeat.jsonl"
    ))
    .unwrap();
    let theirs = normalize(fixture.lines().next().unwrap());
    let text = std::fs::read_to_string(&out).unwrap();
    let beat = text
        .lines()
        .find(|l| l.starts_with(r#"{"topic":"__debezium-heartbeat.dbserver1""#))
        .unwrap();
    assert_eq!(normalize(beat), theirs);
}
