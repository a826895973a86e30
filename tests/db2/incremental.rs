//! Incremental snapshots (Debezium's `execute-snapshot` signal) from the signaling table (in
//! capture mode, as Debezium's Db2 connector requires) and the `file` channel.

use super::*;

#[test]
fn a_signal_row_snapshots_a_table_in_chunks_while_writers_change_it() {
    let db = Db2::start("incremental", true);
    customers(&db);
    db.sql("INSERT INTO \"DB2INST1\".\"CUSTOMERS\" SELECT g, 'row ' || g FROM generate_series(0, 99) g");
    db.sql("CREATE TABLE \"DB2INST1\".\"DEBEZIUM_SIGNAL\" (\"ID\" varchar(64) PRIMARY KEY, \"TYPE\" varchar(32) NOT NULL, \"DATA\" varchar(2048))");
    db.add_table("DB2INST1", "CUSTOMERS");
    db.add_table("DB2INST1", "DEBEZIUM_SIGNAL");
    let dir = tempfile::tempdir().unwrap();
    let keys = [
        ("snapshot.mode", "no_data".into()),
        ("table.include.list", "DB2INST1.CUSTOMERS".into()),
        ("signal.data.collection", "DB2INST1.DEBEZIUM_SIGNAL".into()),
        ("incremental.snapshot.chunk.size", 9u32.into()),
    ];
    let mut child = start(&pipeline(dir.path(), &db, &keys), &[]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let writer = {
        let database = db.database.clone();
        std::thread::spawn(move || {
            let t = "\"DB2INST1\".\"CUSTOMERS\"";
            for i in 0..60 {
                let sql = match i % 3 {
                    0 => format!(
                        "UPDATE {t} SET \"NAME\" = 'changed {i}' WHERE \"ID\" = {}",
                        (i * 7) % 100
                    ),
                    1 => format!("DELETE FROM {t} WHERE \"ID\" = {}", (i * 13) % 100),
                    _ => format!("INSERT INTO {t} VALUES ({}, 'new {i}')", 1000 + i),
                };
                sluice_test_support::pg::psql(&database, &sql);
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        })
    };
    db.sql(r#"INSERT INTO "DB2INST1"."DEBEZIUM_SIGNAL" VALUES ('s1', 'execute-snapshot', '{"data-collections": ["DB2INST1.CUSTOMERS"], "type": "incremental"}')"#);
    writer.join().unwrap();
    let expected = table_rows(&db);
    wait_for(dir.path(), "the table's state", &mut child, |_| {
        rebuilt(dir.path()) == expected
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let all = lines(dir.path());
    let reads: Vec<&Json> = all
        .iter()
        .map(|l| &l["value"]["payload"])
        .filter(|p| p["op"] == "r")
        .collect();
    assert!(reads.len() >= 60, "{} rows read", reads.len());
    assert!(reads
        .iter()
        .all(|p| p["source"]["snapshot"] == "incremental"));
    let ids: Vec<i64> = reads
        .iter()
        .map(|p| p["after"]["ID"].as_i64().unwrap())
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "chunks in key order: {ids:?}"
    );
    assert!(
        all.iter()
            .all(|l| l["topic"] == "db2server.DB2INST1.CUSTOMERS"),
        "only the captured table's events"
    );
    assert_eq!(rebuilt(dir.path()), expected);
}

#[test]
fn the_file_channel_snapshots_with_additional_conditions() {
    let db = Db2::start("incremental_file", true);
    customers(&db);
    db.sql("INSERT INTO \"DB2INST1\".\"CUSTOMERS\" SELECT g, CASE WHEN g % 3 = 0 THEN 'blue' ELSE 'red' END FROM generate_series(0, 29) g");
    db.add_table("DB2INST1", "CUSTOMERS");
    let dir = tempfile::tempdir().unwrap();
    let signals = dir.path().join("signals.jsonl");
    std::fs::write(&signals, "").unwrap();
    let keys = [
        ("snapshot.mode", "no_data".into()),
        ("signal.enabled.channels", "file".into()),
        ("signal.file", (&signals).into()),
        ("signal.poll.interval.ms", 50u32.into()),
        ("incremental.snapshot.chunk.size", 2u32.into()),
    ];
    let path = pipeline(dir.path(), &db, &keys);
    let mut child = start(&path, &[]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::fs::write(&signals, "{\"id\":\"f1\",\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"DB2INST1.CUSTOMERS\"],\"additional-conditions\":[{\"data-collection\":\"DB2INST1.CUSTOMERS\",\"filter\":\"\\\"NAME\\\" = 'blue'\"}]}}\n").unwrap();
    wait_events(dir.path(), 4, &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    // Killed after some chunks: the restart goes on from the last chunk delivered.
    let mut child = start(&path, &[]);
    wait_for(dir.path(), "the ten blue rows", &mut child, |_| {
        rebuilt(dir.path()).len() >= 10
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let ids: Vec<i64> = rebuilt(dir.path()).into_keys().collect();
    let blue: Vec<i64> = (0..30).filter(|i| i % 3 == 0).collect();
    assert_eq!(ids, blue, "the blue rows, and only them");
}

#[test]
fn a_blocking_snapshot_from_the_signaling_table_reads_the_table_whole() {
    let db = Db2::start("blocking", true);
    customers(&db);
    db.sql("INSERT INTO \"DB2INST1\".\"CUSTOMERS\" SELECT g, 'row ' || g FROM generate_series(1, 15) g");
    db.sql("CREATE TABLE \"DB2INST1\".\"DEBEZIUM_SIGNAL\" (\"ID\" varchar(64) PRIMARY KEY, \"TYPE\" varchar(32) NOT NULL, \"DATA\" varchar(2048))");
    db.add_table("DB2INST1", "CUSTOMERS");
    db.add_table("DB2INST1", "DEBEZIUM_SIGNAL");
    let dir = tempfile::tempdir().unwrap();
    let keys = [
        ("snapshot.mode", "no_data".into()),
        ("table.include.list", "DB2INST1.CUSTOMERS".into()),
        ("signal.data.collection", "DB2INST1.DEBEZIUM_SIGNAL".into()),
    ];
    let mut child = start(&pipeline(dir.path(), &db, &keys), &[]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    db.sql(r#"INSERT INTO "DB2INST1"."DEBEZIUM_SIGNAL" VALUES ('b1', 'execute-snapshot', '{"data-collections": ["DB2INST1.CUSTOMERS"], "type": "blocking"}')"#);
    wait_events(dir.path(), 15, &mut child);
    db.sql("UPDATE \"DB2INST1\".\"CUSTOMERS\" SET \"NAME\" = 'after' WHERE \"ID\" = 3");
    wait_events(dir.path(), 16, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let p = payloads(dir.path());
    let reads: Vec<i64> = p
        .iter()
        .filter(|p| p["op"] == "r")
        .map(|p| p["after"]["ID"].as_i64().unwrap())
        .collect();
    assert_eq!(reads, (1..=15).collect::<Vec<i64>>());
    assert_eq!(
        (p[15]["op"].as_str(), p[15]["after"]["NAME"].as_str()),
        (Some("u"), Some("after"))
    );
    assert_eq!(p.len(), 16);
}

/// A blocking snapshot cut by SIGKILL runs again after the restart: the request travels in the
/// positions until its last row, so the rows lost with the kill are read (rows delivered before
/// it come twice, as Debezium documents for blocking snapshots).
#[test]
fn a_blocking_snapshot_cut_by_a_kill_runs_again_after_the_restart() {
    const ROWS: i64 = 100_000;
    let db = Db2::start("blocking_kill", true);
    customers(&db);
    db.sql(&format!("INSERT INTO \"DB2INST1\".\"CUSTOMERS\" SELECT g, 'row ' || g FROM generate_series(1, {ROWS}) g"));
    db.sql("CREATE TABLE \"DB2INST1\".\"DEBEZIUM_SIGNAL\" (\"ID\" varchar(64) PRIMARY KEY, \"TYPE\" varchar(32) NOT NULL, \"DATA\" varchar(2048))");
    db.add_table("DB2INST1", "CUSTOMERS");
    db.add_table("DB2INST1", "DEBEZIUM_SIGNAL");
    let dir = tempfile::tempdir().unwrap();
    let keys = [
        ("snapshot.mode", "no_data".into()),
        ("table.include.list", "DB2INST1.CUSTOMERS".into()),
        ("signal.data.collection", "DB2INST1.DEBEZIUM_SIGNAL".into()),
    ];
    let path = pipeline(dir.path(), &db, &keys);
    let mut child = start(&path, &[]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    db.sql(r#"INSERT INTO "DB2INST1"."DEBEZIUM_SIGNAL" VALUES ('b1', 'execute-snapshot', '{"data-collections": ["DB2INST1.CUSTOMERS"], "type": "blocking"}')"#);
    // SIGKILL as soon as the first rows are out.
    let out = dir.path().join("out.jsonl");
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&out).is_ok_and(|t| t.contains("\"op\":\"r\"")) {
        assert!(t0.elapsed().as_secs() < 60, "no snapshot row came");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = payloads(dir.path()).len();
    assert!(
        before < ROWS as usize,
        "the kill came after the snapshot's {before} rows: nothing was cut"
    );
    let mut child = start(&path, &[]);
    // Lines counted, not parsed: the file grows by the whole table again.
    let t0 = std::time::Instant::now();
    while std::fs::read_to_string(&out).map_or(0, |t| t.lines().count()) < before + ROWS as usize {
        assert!(child.try_wait().unwrap().is_none(), "sluice stopped");
        assert!(
            t0.elapsed().as_secs() < 120,
            "the snapshot was not read again"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let after: Vec<i64> = payloads(dir.path())[before..]
        .iter()
        .filter(|p| p["op"] == "r")
        .map(|p| p["after"]["ID"].as_i64().unwrap())
        .collect();
    assert_eq!(
        after,
        (1..=ROWS).collect::<Vec<i64>>(),
        "read again in full after the restart"
    );
}

/// Chunks by a primary key of a date, a decimal and a character column, then by a
/// `surrogate-key` of type `TIMESTAMP` (running opposite to the primary key): every row once,
/// in the order of the columns chunks are read by.
#[test]
fn chunks_go_by_keys_of_other_types_and_by_a_surrogate_key() {
    let db = Db2::start("incremental_keys", true);
    db.sql("CREATE SCHEMA \"DB2INST1\"; CREATE TABLE \"DB2INST1\".\"ORDERS\" (\"DAY\" date NOT NULL, \"AMOUNT\" decimal(10,2) NOT NULL, \"CODE\" char(6) NOT NULL, \"STAMP\" timestamp(6) NOT NULL UNIQUE, \"N\" integer, PRIMARY KEY (\"DAY\", \"AMOUNT\", \"CODE\"))");
    let rows: i64 = 40;
    db.sql(&format!("INSERT INTO \"DB2INST1\".\"ORDERS\" SELECT DATE '2024-01-01' + g % 3, (g % 5) + (g * 3 % 100) / 100.0, 'c' || lpad((g * 7919 % 1000)::text, 5, '0'), TIMESTAMP '2024-03-01 00:00:00' + (10000 - g * 7) * INTERVAL '1.000003 second', g FROM generate_series(0, {}) g", rows - 1));
    db.add_table("DB2INST1", "ORDERS");
    let dir = tempfile::tempdir().unwrap();
    let signals = dir.path().join("signals.jsonl");
    std::fs::write(&signals, "").unwrap();
    let keys = [
        ("snapshot.mode", "no_data".into()),
        ("signal.enabled.channels", "file".into()),
        ("signal.file", (&signals).into()),
        ("signal.poll.interval.ms", 50u32.into()),
        ("incremental.snapshot.chunk.size", 3u32.into()),
    ];
    let mut child = start(&pipeline(dir.path(), &db, &keys), &[]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let append = |text: &str| {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&signals)
            .unwrap();
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
    };
    append("{\"id\":\"k\",\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"DB2INST1.ORDERS\"]}}\n");
    wait_events(dir.path(), rows as usize, &mut child);
    append("{\"id\":\"s\",\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"DB2INST1.ORDERS\"],\"surrogate-key\":\"STAMP\"}}\n");
    wait_events(dir.path(), 2 * rows as usize, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let all = payloads(dir.path());
    assert_eq!(all.len(), 2 * rows as usize);
    let n = |p: &Json| p["after"]["N"].as_i64().unwrap();
    let by_key: Vec<i64> = all[..rows as usize].iter().map(n).collect();
    let by_stamp: Vec<i64> = all[rows as usize..].iter().map(n).collect();
    let mut expected: Vec<(i64, i64, i64, i64)> = (0..rows)
        .map(|g| (g % 3, (g % 5) * 100 + g * 3 % 100, g * 7919 % 1000, g))
        .collect();
    expected.sort();
    let expected: Vec<i64> = expected.into_iter().map(|e| e.3).collect();
    assert_eq!(by_key, expected, "the primary key's order, each row once");
    let falling: Vec<i64> = (0..rows).rev().collect();
    assert_eq!(
        by_stamp, falling,
        "the surrogate key's order, each row once"
    );
}
