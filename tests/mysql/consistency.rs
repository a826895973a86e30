//! Snapshot/stream consistency and crashes, against the shared MariaDB: the state replayed
//! from the output equals the table, across the snapshot → stream boundary under a concurrent
//! writer and across a kill -9 of Sluice mid-stream and mid-snapshot.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::*;

/// The table's state as the output says: each key's last image (a delete or tombstone
/// removes it).
pub(super) fn replay(events: &[Json]) -> BTreeMap<i64, Json> {
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

pub(super) fn table_state(db: &str) -> BTreeMap<i64, Json> {
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
pub(super) fn writer_sql(steps: usize, seeded: usize) -> String {
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

pub(super) fn seeded_table(test: &str, rows: usize) -> String {
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
    small_batches(dir, mariadb::server().port, db).write(dir)
}

/// [`captured_pipeline`]'s parts with batches of 100 and offsets flushed every 20 ms.
fn small_batches(dir: &std::path::Path, port: u16, db: &str) -> Pipeline {
    let source = source(dir, port)
        .set("snapshot.mode", "initial")
        .set("database.include.list", db);
    base(dir, source)
        .top("max_batch_size", 100u32)
        .setting("offsets", &[("flush_interval", "20ms".into())])
}

/// Waits until the output holds `note` (an event of that writer step).
pub(super) fn wait_for_note(dir: &std::path::Path, note: &str, child: &mut std::process::Child) {
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

/// Inserts a row noted `note` and waits until the stream has created it: everything written
/// before it has been streamed. (A note of the writer's own can also come in a snapshot's
/// rows, read at a later position than the stream's backlog.)
pub(super) fn stream_through(
    db: &str,
    dir: &std::path::Path,
    note: &str,
    child: &mut std::process::Child,
) {
    mariadb::sql(
        db,
        &format!("INSERT INTO items (n, note) VALUES (0, '{note}')"),
    );
    sluice_test_support::pg::wait_for(dir, &format!("the stream's `{note}`"), child, |events| {
        events.iter().any(|e| {
            let p = &e["value"]["payload"];
            p["op"] == "c" && p["after"]["note"] == note
        })
    });
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

/// Runs `path` and kills it as soon as the first megabyte of its snapshot is out (the snapshot
/// reads ~300k rows/s: the file's size is watched, not its lines).
fn kill_in_the_snapshot(dir: &std::path::Path, path: &std::path::Path) {
    let mut child = sluice_test_support::pg::start(path, &[]);
    let t0 = Instant::now();
    while std::fs::metadata(dir.join("out.jsonl")).map_or(0, |m| m.len()) < 1 << 20 {
        assert!(child.try_wait().unwrap().is_none(), "sluice stopped");
        assert!(t0.elapsed() < Duration::from_secs(60), "no snapshot output");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn kill_9_during_the_snapshot_restarts_it_and_loses_nothing() {
    let db = seeded_table("mysql_kill_snapshot", 50_000);
    let dir = tempfile::tempdir().unwrap();
    let path = consistency_pipeline(dir.path(), &db);
    kill_in_the_snapshot(dir.path(), &path);
    let before = sluice_test_support::pg::lines(dir.path()).len();
    assert!(
        before < 50_000,
        "the snapshot finished before the kill; seed more rows"
    );
    mariadb::sql(&db, &writer_sql(200, 50_000));
    let child = sluice_test_support::pg::start(&path, &["--stop-when-idle", "3s"]);
    sluice_test_support::pg::finish(child);
    let events = sluice_test_support::pg::lines(dir.path());
    // The snapshot was taken again and the binlog read again from the first snapshot's
    // position, committed before its first row: a row the first run read and the writer
    // deleted meanwhile is deleted downstream too, so the whole output replays to the table.
    assert_eq!(replay(&events), table_state(&db));
}

/// A snapshot cut off, then a captured table altered before the next start, on a server without
/// the full row metadata: the binlog cannot be read again from the cut-off position with today's
/// structure, so the new snapshot streams from its own position (said in a warning) instead of
/// stopping at every start. (With the full metadata, the default of the tests' server, the
/// kill scenario reads it again.)
#[test]
fn a_table_altered_after_a_cut_off_snapshot_takes_a_new_snapshot_from_its_own_position() {
    let server = mariadb::Restartable::start_with("--binlog-row-metadata=MINIMAL");
    server.sql("", "CREATE DATABASE altered");
    server.sql(
        "altered",
        "CREATE TABLE items (id INT AUTO_INCREMENT PRIMARY KEY, n INT NOT NULL, note VARCHAR(20) NOT NULL);\
         INSERT INTO items (n, note) SELECT seq, CONCAT('seed', seq) FROM seq_1_to_50000",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = small_batches(dir.path(), server.port, "altered").write(dir.path());
    kill_in_the_snapshot(dir.path(), &path);
    server.sql(
        "altered",
        "UPDATE items SET n = n + 1 WHERE id = 1; ALTER TABLE items ADD COLUMN extra INT; \
         INSERT INTO items (n, note, extra) VALUES (7, 'after', 1)",
    );
    let child = sluice_test_support::pg::start(&path, &["--stop-when-idle", "3s"]);
    let log = sluice_test_support::pg::finish(child);
    assert!(log.contains("cannot be read again"), "{log}");
    let events = sluice_test_support::pg::lines(dir.path());
    assert!(events
        .iter()
        .any(|e| e["value"]["payload"]["after"]["note"] == "after"));
}

/// The rows of `table`'s events of kind `op` in `events`, by key.
fn keys_of(events: &[Json], table: &str, op: &str) -> Vec<i64> {
    events
        .iter()
        .filter(|e| {
            let p = &e["value"]["payload"];
            p["source"]["table"] == table && p["op"] == op
        })
        .map(|e| e["key"]["payload"]["id"].as_i64().unwrap())
        .collect()
}

/// A kill -9 inside one large transaction (20000 rows of `b`, then 20000 of `a`, updates and
/// deletes), held there by a FIFO read at the test's pace: the restart reads the transaction
/// again from its GTID event and skips the binlog events (and rows) delivered before, as
/// Debezium's `event`/`row` offsets do; with transaction metadata, the counts go on where
/// they were and END counts the whole transaction.
#[test]
fn a_kill_9_inside_a_large_transaction_resumes_where_it_stopped() {
    let db = mariadb::database("mysql_kill_tx");
    mariadb::sql(
        &db,
        "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(8) NOT NULL); CREATE TABLE b (id INT PRIMARY KEY, v VARCHAR(8) NOT NULL)",
    );
    let dir = tempfile::tempdir().unwrap();
    let keys = [
        ("database.include.list", Scalar::from(&db)),
        ("provide.transaction.metadata", true.into()),
    ];
    let path = mariadb_pipeline(dir.path(), mariadb::server().port, &keys);
    let source = source_of("mariadb", dir.path(), mariadb::server().port)
        .set("snapshot.mode", "initial")
        .set_all(&keys);
    let (first_file, fifo) = fifo_pipeline(
        dir.path(),
        base(dir.path(), source)
            .top("max_queue_size", 1000u32)
            .top("max_batch_size", 100u32)
            .setting("offsets", &[("flush_interval", "20ms".into())]),
    );
    let mut child = sluice_test_support::pg::start(&first_file, &[]);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::io::BufReader::new(std::fs::File::open(fifo).unwrap()))
    };
    // The stream runs once the (empty) snapshot is done.
    let t0 = Instant::now();
    while !sluice_test_support::pg::log_so_far(&child).contains("Binlog stream started") {
        assert!(t0.elapsed() < Duration::from_secs(60), "no binlog stream");
        std::thread::sleep(Duration::from_millis(20));
    }
    mariadb::sql(
        &db,
        "BEGIN; INSERT INTO b SELECT seq, 'b' FROM seq_1_to_20000; \
         INSERT INTO a SELECT seq, 'a' FROM seq_1_to_20000; \
         UPDATE a SET v = 'u' WHERE id % 3 = 0; DELETE FROM a WHERE id % 5 = 0; COMMIT",
    );
    let mut seen: Vec<Json> = Vec::new();
    {
        use std::io::BufRead;
        let reader = reader.join().unwrap();
        // BEGIN, the rows of b, then 8000 rows of a.
        for line in reader.lines().take(1 + 20000 + 8000) {
            seen.push(serde_json::from_str(&line.unwrap()).unwrap());
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let _ = sluice_test_support::pg::log_of(&child);
    let offsets = std::fs::read_to_string(dir.path().join("data/offsets.json")).unwrap();
    assert!(
        offsets.contains("event"),
        "no position inside the transaction was committed: {offsets}"
    );
    let child = sluice_test_support::pg::start(&path, &["--stop-when-idle", "3s"]);
    sluice_test_support::pg::finish(child);
    let after = sluice_test_support::pg::lines(dir.path());
    // Resumed inside the transaction: none of b again, and a from where the committed position
    // was (behind what the FIFO's reader had read by the sink's unflushed batches at most).
    assert!(keys_of(&after, "b", "c").is_empty(), "b was read again");
    let resumed = keys_of(&after, "a", "c");
    assert!(
        !resumed.is_empty() && resumed.len() < 20000 - 8000 + 4000,
        "the restart did not resume inside the transaction ({} creates of a again)",
        resumed.len()
    );
    // The transaction's event numbers go on without a gap or a repeat, and END counts all.
    let orders: Vec<i64> = after
        .iter()
        .filter_map(|e| e["value"]["payload"]["transaction"]["total_order"].as_i64())
        .collect();
    assert!(
        orders.windows(2).all(|w| w[1] == w[0] + 1),
        "a gap or a repeat after the restart"
    );
    let seen_last = seen
        .iter()
        .filter_map(|e| e["value"]["payload"]["transaction"]["total_order"].as_i64())
        .max()
        .unwrap();
    assert!(
        orders[0] <= seen_last + 1,
        "events between the runs are lost"
    );
    let end = after.last().unwrap();
    assert_eq!(end["value"]["payload"]["status"], "END", "{end}");
    let updates = 20000 / 3;
    let deletes = 20000 / 5;
    let total = (20000 + 20000 + updates + deletes) as i64;
    assert_eq!(end["value"]["payload"]["event_count"], total);
    assert_eq!(*orders.last().unwrap(), total);
    // Nothing lost: every row of a and b was created in one run or the other.
    let mut all = seen;
    all.extend(after);
    for table in ["a", "b"] {
        let created: std::collections::BTreeSet<i64> =
            keys_of(&all, table, "c").into_iter().collect();
        assert_eq!(created.len(), 20000, "creates of {table} lost");
    }
}
