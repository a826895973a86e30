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
    let extra = "  snapshot.mode: no_data\n  table.include.list: DB2INST1.CUSTOMERS\n  signal.data.collection: DB2INST1.DEBEZIUM_SIGNAL\n  incremental.snapshot.chunk.size: 9\n";
    let mut child = start(&pipeline(dir.path(), &db, extra), &[]);
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
    let extra = format!(
        "  snapshot.mode: no_data\n  signal.enabled.channels: file\n  signal.file: {}\n  signal.poll.interval.ms: 50\n  incremental.snapshot.chunk.size: 2\n",
        signals.display()
    );
    let path = pipeline(dir.path(), &db, &extra);
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
    let extra = "  snapshot.mode: no_data\n  table.include.list: DB2INST1.CUSTOMERS\n  signal.data.collection: DB2INST1.DEBEZIUM_SIGNAL\n";
    let mut child = start(&pipeline(dir.path(), &db, extra), &[]);
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
    let extra = "  snapshot.mode: no_data\n  table.include.list: DB2INST1.CUSTOMERS\n  signal.data.collection: DB2INST1.DEBEZIUM_SIGNAL\n";
    let path = pipeline(dir.path(), &db, extra);
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
