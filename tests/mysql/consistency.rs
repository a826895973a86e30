//! Snapshot/stream consistency and crashes, against the shared MariaDB: the state replayed
//! from the output equals the table, across the snapshot → stream boundary under a concurrent
//! writer and across a kill -9 of Sluice mid-stream and mid-snapshot.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::*;

/// The table's state as the output says: each key's last image (a delete or tombstone
/// removes it).
fn replay(events: &[Json]) -> BTreeMap<i64, Json> {
    let mut state = BTreeMap::new();
    for e in events {
        let key = e["key"]["payload"]["id"].as_i64().expect("a key");
        let value = &e["value"]["payload"];
        match value["op"].as_str() {
            _ if value.is_null() => {
                state.remove(&key);
            }
            Some("r" | "c" | "u") => {
                state.insert(key, value["after"].clone());
            }
            Some("d") => {
                state.remove(&key);
            }
            other => panic!("unexpected op {other:?}"),
        }
    }
    state
}

fn table_state(db: &str) -> BTreeMap<i64, Json> {
    mariadb::sql(db, "SELECT id, n, note FROM items ORDER BY id")
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let id: i64 = f[0].parse().unwrap();
            let n: i64 = f[1].parse().unwrap();
            (id, serde_json::json!({"id": id, "n": n, "note": f[2]}))
        })
        .collect()
}

/// Inserts, updates and deletes, one statement per transaction with a multi-statement
/// transaction every tenth step (at most ~800 steps: the text is one argument of the client,
/// which Linux caps at 128 KiB).
fn writer_sql(steps: usize, seeded: usize) -> String {
    let mut sql = String::new();
    for i in 1..=steps {
        let tx = i % 10 == 0;
        if tx {
            sql.push_str("BEGIN;");
        }
        sql.push_str(&format!(
            "INSERT INTO items (n, note) VALUES ({i}, 'w{i}');\
             UPDATE items SET n = n + 1, note = 'u{i}' WHERE id = {};\
             DELETE FROM items WHERE id = {};",
            1 + (i * 7) % seeded,
            2 + (i * 13) % seeded
        ));
        if tx {
            sql.push_str("COMMIT;");
        }
    }
    sql
}

fn seeded_table(test: &str, rows: usize) -> String {
    let db = mariadb::database(test);
    mariadb::sql(
        &db,
        &format!(
            "CREATE TABLE items (id INT AUTO_INCREMENT PRIMARY KEY, n INT NOT NULL, note VARCHAR(20) NOT NULL);\
             INSERT INTO items (n, note) SELECT seq, CONCAT('seed', seq) FROM seq_1_to_{rows}"
        ),
    );
    db
}

fn consistency_pipeline(dir: &std::path::Path, db: &str) -> PathBuf {
    captured_pipeline(dir, mariadb::server().port, db).replace_text(
        "restart: { max_retries: 0 }\n",
        "restart: { max_retries: 0 }\nmax_batch_size: 100\noffsets: { flush_interval: 20ms }\n",
    )
}

/// Waits until the output holds `note` (an event of that writer step).
fn wait_for_note(dir: &std::path::Path, note: &str, child: &mut std::process::Child) {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(dir.join("out.jsonl")).unwrap_or_default();
        if text.contains(note) {
            return;
        }
        assert!(child.try_wait().unwrap().is_none(), "sluice stopped");
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no `{note}` in the output"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_snapshot_meets_the_stream_under_a_concurrent_writer() {
    let db = seeded_table("mysql_concurrent", 1500);
    let dir = tempfile::tempdir().unwrap();
    let path = consistency_pipeline(dir.path(), &db);
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || mariadb::sql(&db, &writer_sql(400, 1500)))
    };
    let child = sluice_test_support::pg::start(&path, &["--stop-when-idle", "3s"]);
    writer.join().unwrap();
    sluice_test_support::pg::finish(child);
    let events = sluice_test_support::pg::lines(dir.path());
    // A key is read by the snapshot or created by the stream, once.
    let mut born: BTreeMap<i64, usize> = BTreeMap::new();
    for e in &events {
        if matches!(e["value"]["payload"]["op"].as_str(), Some("r" | "c")) {
            *born
                .entry(e["key"]["payload"]["id"].as_i64().unwrap())
                .or_default() += 1;
        }
    }
    assert!(
        born.values().all(|n| *n == 1),
        "a key was read or created twice"
    );
    assert_eq!(replay(&events), table_state(&db));
}

#[test]
fn kill_9_during_the_stream_loses_nothing() {
    let db = seeded_table("mysql_kill_stream", 100);
    let dir = tempfile::tempdir().unwrap();
    let path = consistency_pipeline(dir.path(), &db);
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), 100, &mut child);
    // The stream goes on in a new binlog file (a rotate event mid-stream).
    mariadb::sql("", "FLUSH BINARY LOGS");
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || mariadb::sql(&db, &writer_sql(600, 100)))
    };
    wait_for_note(dir.path(), "\"w200\"", &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    writer.join().unwrap();
    let child = sluice_test_support::pg::start(&path, &["--stop-when-idle", "3s"]);
    sluice_test_support::pg::finish(child);
    let events = sluice_test_support::pg::lines(dir.path());
    assert_eq!(
        replay(&events),
        table_state(&db),
        "the output replayed is not the table after a kill -9 mid-stream"
    );
    let files: std::collections::BTreeSet<&str> = events
        .iter()
        .filter_map(|e| e["value"]["payload"]["source"]["file"].as_str())
        .collect();
    assert!(
        files.len() >= 2,
        "the stream followed the rotation: {files:?}"
    );
}

#[test]
fn kill_9_during_the_snapshot_restarts_it_and_loses_nothing() {
    let db = seeded_table("mysql_kill_snapshot", 50_000);
    let dir = tempfile::tempdir().unwrap();
    let path = consistency_pipeline(dir.path(), &db);
    let mut child = sluice_test_support::pg::start(&path, &[]);
    // Killed as soon as the first megabyte is out (the snapshot reads ~300k rows/s: the file's
    // size is watched, not its lines).
    let t0 = Instant::now();
    while std::fs::metadata(dir.path().join("out.jsonl")).map_or(0, |m| m.len()) < 1 << 20 {
        assert!(t0.elapsed() < Duration::from_secs(60), "no snapshot output");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = sluice_test_support::pg::lines(dir.path()).len();
    assert!(
        before < 50_000,
        "the snapshot finished before the kill; seed more rows"
    );
    mariadb::sql(&db, &writer_sql(200, 50_000));
    let child = sluice_test_support::pg::start(&path, &["--stop-when-idle", "3s"]);
    sluice_test_support::pg::finish(child);
    let events = sluice_test_support::pg::lines(dir.path());
    // The snapshot was taken again, from the start (its rows may repeat the first run's; a
    // row the first run read and the writer deleted meanwhile is not in it): the second
    // run's events replay to the table.
    assert_eq!(replay(&events[before..]), table_state(&db));
}
