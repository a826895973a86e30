//! Faults on the mysql source: the server restarted mid-stream (the pipeline reconnects from
//! its committed position; nothing lost, nothing twice), the binlog purged past the committed
//! position, a server without the full row metadata, a partial row image, a sink stalled past
//! the server's `net_write_timeout`.

use sluice_test_support::mariadb::Restartable;
use sluice_test_support::pg::{self as run};

use super::{
    base, captured_pipeline, failed, fifo_pipeline, mariadb_pipeline, pipeline, source, source_of,
    streaming_pipeline,
};

#[test]
fn a_server_restart_mid_stream_loses_nothing_and_repeats_nothing() {
    let mut server = Restartable::start();
    server.sql(
        "",
        "CREATE DATABASE faults; CREATE TABLE faults.t (id INT PRIMARY KEY, v TEXT); \
         INSERT INTO faults.t VALUES (1, 'a'), (2, 'b')",
    );
    let dir = tempfile::tempdir().unwrap();
    // The pipeline restarts the source (`connect.keep.alive: false`; the source's own
    // reconnect is the stalled sink's test).
    let source = source(dir.path(), server.port).set_all(&[
        ("snapshot.mode", "initial".into()),
        ("database.include.list", "faults".into()),
        ("connect.keep.alive", false.into()),
    ]);
    let path = base(dir.path(), source)
        .setting(
            "restart",
            &[
                ("max_retries", 100u32.into()),
                ("initial_backoff", "100ms".into()),
                ("max_backoff", "500ms".into()),
            ],
        )
        .write(dir.path());
    let mut child = run::start(&path, &[]);
    run::wait_lines(dir.path(), 2, &mut child);
    server.sql(
        "faults",
        "INSERT INTO t VALUES (3, 'c'); UPDATE t SET v = 'bb' WHERE id = 2",
    );
    run::wait_lines(dir.path(), 4, &mut child);
    server.stop();
    std::thread::sleep(std::time::Duration::from_millis(500));
    server.restart();
    // Written after the restart, some before the source is back: all arrive, once.
    server.sql(
        "faults",
        "INSERT INTO t VALUES (4, 'd'); BEGIN; INSERT INTO t VALUES (5, 'e'); DELETE FROM t WHERE id = 1; COMMIT",
    );
    // c 4, c 5, d 1 and its tombstone.
    run::wait_lines(dir.path(), 8, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(500));
    run::stop(&child);
    let log = run::finish(child);
    let lines = run::lines(dir.path());
    let ops: Vec<String> = lines
        .iter()
        .map(|l| {
            let p = &l["value"]["payload"];
            match p["op"].as_str() {
                Some(op) => format!("{op}{}", l["key"]["payload"]["id"]),
                None => format!("tombstone{}", l["key"]["payload"]["id"]),
            }
        })
        .collect();
    assert_eq!(
        ops,
        ["r1", "r2", "c3", "u2", "c4", "c5", "d1", "tombstone1"],
        "{log}"
    );
    assert!(log.contains("restart"), "the source restarted: {log}");
}

/// A server without the full row metadata (`binlog_row_metadata=MINIMAL`): unsigned values
/// still decode right (the binlog carries no signedness then), and a schema change of a
/// captured table stops the stream with one line, rather than decode rows with a wrong schema.
#[test]
fn without_full_row_metadata_unsigned_values_decode_and_a_schema_change_stops_the_stream() {
    let server = Restartable::start();
    server.sql(
        "",
        "SET GLOBAL binlog_row_metadata = MINIMAL; CREATE DATABASE minimal; \
         CREATE TABLE minimal.u (id INT PRIMARY KEY, tiu TINYINT UNSIGNED, iu INT UNSIGNED, \
         biu BIGINT UNSIGNED)",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = streaming_pipeline(
        dir.path(),
        server.port,
        &[("database.include.list", "minimal".into())],
    );
    let mut child = run::start(&path, &[]);
    // The stream is up once a row written after the start arrives.
    server.sql("minimal", "INSERT INTO u VALUES (1, 1, 1, 1)");
    run::wait_lines(dir.path(), 1, &mut child);
    server.sql(
        "minimal",
        "INSERT INTO u VALUES (2, 255, 4294967295, 9223372036854775807)",
    );
    run::wait_lines(dir.path(), 2, &mut child);
    let lines = run::lines(dir.path());
    let after = &lines[1]["value"]["payload"]["after"];
    assert_eq!(after["tiu"], 255, "{after}");
    assert_eq!(after["iu"], 4_294_967_295_u64, "{after}");
    assert_eq!(after["biu"], 9_223_372_036_854_775_807_u64, "{after}");
    server.sql("minimal", "ALTER TABLE u ADD COLUMN extra INT");
    let (log, e) = failed(child);
    assert!(
        e.contains("a schema change in `minimal`") && e.contains("binlog_row_metadata"),
        "{log}"
    );
}

/// A change written with partial row images (a session's `binlog_row_image=MINIMAL`) stops the
/// stream with one line, rather than put values on the wrong columns.
#[test]
fn a_partial_row_image_stops_the_stream_with_one_line() {
    let server = sluice_test_support::mariadb::server();
    let db = sluice_test_support::mariadb::database("mysql_partial_image");
    sluice_test_support::mariadb::sql(
        &db,
        "CREATE TABLE t (id INT PRIMARY KEY, a TEXT, b TEXT); INSERT INTO t VALUES (1, 'a', 'b')",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = captured_pipeline(dir.path(), server.port, &db);
    let mut child = run::start(&path, &[]);
    run::wait_lines(dir.path(), 1, &mut child);
    sluice_test_support::mariadb::sql(
        &db,
        "INSERT INTO t VALUES (2, 'c', 'd'); SET SESSION binlog_row_image = MINIMAL; UPDATE t SET b = 'x' WHERE id = 2",
    );
    let (log, e) = failed(child);
    assert!(e.contains("binlog_row_image"), "{log}");
    // Nothing of the partial change was written (the insert before it may or may not have been
    // when the pipeline stopped: uncommitted, it is read again at the next start).
    let lines = run::lines(dir.path());
    assert!(
        lines.iter().all(|l| l["value"]["payload"]["op"] != "u"),
        "{log}"
    );
}

/// The binlog file of the committed position purged while the pipeline was stopped: the start
/// stops with one line naming it and the fix; `snapshot.mode: when_needed` takes a new
/// snapshot instead (every row again, then the stream).
#[test]
fn a_purged_binlog_stops_the_start_unless_when_needed_snapshots_again() {
    let server = Restartable::start();
    server.sql(
        "",
        "CREATE DATABASE purged; CREATE TABLE purged.t (id INT PRIMARY KEY); \
         INSERT INTO purged.t VALUES (1)",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = streaming_pipeline(
        dir.path(),
        server.port,
        &[("database.include.list", "purged".into())],
    );
    let mut child = run::start(&path, &[]);
    run::wait_lines(dir.path(), 1, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    run::stop(&child);
    run::finish(child);
    server.sql("purged", "INSERT INTO t VALUES (2); FLUSH BINARY LOGS");
    // A file a replica's dump thread still reads is kept: purge until the old one is gone.
    purge_to_current(&server);
    let e = super::error_line(&path);
    assert!(
        e.contains("is no longer on the server") && e.contains("when_needed"),
        "{e}"
    );
    let again = pipeline(
        dir.path(),
        server.port,
        &[
            ("database.include.list", "purged".into()),
            ("snapshot.mode", "when_needed".into()),
        ],
    );
    let mut child = run::start(&again, &[]);
    run::wait_lines(dir.path(), 3, &mut child);
    server.sql("purged", "INSERT INTO t VALUES (3)");
    run::wait_lines(dir.path(), 4, &mut child);
    run::stop(&child);
    run::finish(child);
    let lines = run::lines(dir.path());
    let seen: Vec<(String, i64)> = lines
        .iter()
        .map(|l| {
            let v = &l["value"]["payload"];
            (
                v["op"].as_str().unwrap().to_owned(),
                v["after"]["id"].as_i64().unwrap(),
            )
        })
        .collect();
    let expected = [("r", 1), ("r", 1), ("r", 2), ("c", 3)].map(|(o, i)| (o.to_owned(), i));
    assert_eq!(seen, expected);
}

/// Purges binlog files until the current one is the only one left (a file a dump thread
/// still reads is kept a moment).
fn purge_to_current(server: &Restartable) {
    let current = server.sql("", "SHOW MASTER STATUS");
    let current = current.split('\t').next().unwrap().to_owned();
    let t0 = std::time::Instant::now();
    loop {
        server.sql("", &format!("PURGE BINARY LOGS TO '{current}'"));
        if server.sql("", "SHOW BINARY LOGS").lines().count() == 1 {
            return;
        }
        assert!(t0.elapsed().as_secs() < 30, "the old binlog was not purged");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `type: mariadb` keeps Debezium's `gtids` in its offsets: a committed position whose binlog
/// file was purged resumes from its GTID position (nothing lost, nothing twice), and when the
/// transactions after it were purged too the start stops with the server's reason.
#[test]
fn type_mariadb_resumes_from_its_gtid_position_when_the_binlog_file_is_gone() {
    let server = Restartable::start();
    server.sql(
        "",
        "CREATE DATABASE g; CREATE TABLE g.t (id INT PRIMARY KEY); INSERT INTO g.t VALUES (1)",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = mariadb_pipeline(
        dir.path(),
        server.port,
        &[("database.include.list", "g".into())],
    );
    let mut child = run::start(&path, &[]);
    run::wait_lines(dir.path(), 1, &mut child);
    server.sql("g", "INSERT INTO t VALUES (2)");
    run::wait_lines(dir.path(), 2, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    run::stop(&child);
    run::finish(child);
    let offsets = std::fs::read_to_string(dir.path().join("data/offsets.json")).unwrap();
    let last_gtid = server.sql("", "SELECT @@gtid_binlog_pos");
    assert!(
        offsets.contains(&format!("\\\"gtids\\\":\\\"{}\\\"", last_gtid.trim())),
        "{offsets} has no gtids {last_gtid}"
    );
    // The committed file is gone; the transaction after the position is in the new one.
    server.sql("g", "FLUSH BINARY LOGS; INSERT INTO t VALUES (3)");
    purge_to_current(&server);
    let mut child = run::start(&path, &[]);
    run::wait_lines(dir.path(), 3, &mut child);
    server.sql("g", "INSERT INTO t VALUES (4)");
    run::wait_lines(dir.path(), 4, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    run::stop(&child);
    let log = run::finish(child);
    assert!(
        log.contains("Resuming from the committed GTID position"),
        "{log}"
    );
    let seen: Vec<(String, i64)> = run::lines(dir.path())
        .iter()
        .map(|l| {
            let v = &l["value"]["payload"];
            (
                v["op"].as_str().unwrap().to_owned(),
                v["after"]["id"].as_i64().unwrap(),
            )
        })
        .collect();
    let expected = [("r", 1), ("c", 2), ("c", 3), ("c", 4)].map(|(o, i)| (o.to_owned(), i));
    assert_eq!(seen, expected);
    // A transaction after the position purged with its file: the start stops with the fix,
    // and `when_needed` takes a new snapshot.
    server.sql(
        "g",
        "INSERT INTO t VALUES (5); FLUSH BINARY LOGS; INSERT INTO t VALUES (6)",
    );
    purge_to_current(&server);
    let e = super::error_line(&path);
    assert!(
        e.contains("is no longer on the server") && e.contains("when_needed"),
        "{e}"
    );
    let source = source_of("mariadb", dir.path(), server.port).set_all(&[
        ("database.include.list", "g".into()),
        ("snapshot.mode", "when_needed".into()),
    ]);
    let again = base(dir.path(), source).write(dir.path());
    let mut child = run::start(&again, &[]);
    run::wait_lines(dir.path(), 4 + 6, &mut child);
    run::stop(&child);
    run::finish(child);
}

/// A sink stalled far longer than the server's `net_write_timeout` (here 2 s, for 12 s): the
/// source stops reading the binlog while its queue is full, the server gives up writing to it
/// and drops the connection. The source opens it again from the event it got to (inside one
/// of the large transactions, whose events read before are skipped): nothing is lost and
/// nothing comes twice, and the pipeline does not restart.
#[test]
fn a_sink_stalled_past_net_write_timeout_loses_nothing_and_repeats_nothing() {
    let server = Restartable::start_with("--net-write-timeout=2 --net-read-timeout=2");
    server.sql(
        "",
        "CREATE DATABASE stall; CREATE TABLE stall.t (id INT PRIMARY KEY, v VARCHAR(200))",
    );
    let dir = tempfile::tempdir().unwrap();
    let source = source(dir.path(), server.port).set_all(&[
        ("snapshot.mode", "initial".into()),
        ("database.include.list", "stall".into()),
    ]);
    let stalled = base(dir.path(), source)
        .setting(
            "restart",
            &[
                ("max_retries", 100u32.into()),
                ("initial_backoff", "100ms".into()),
                ("max_backoff", "500ms".into()),
            ],
        )
        .top("max_queue_size", 200u32)
        .top("max_batch_size", 50u32);
    let (path, fifo) = fifo_pipeline(dir.path(), stalled);
    let mut child = run::start(&path, &[]);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::io::BufReader::new(std::fs::File::open(fifo).unwrap()))
    };
    let t0 = std::time::Instant::now();
    while !run::log_so_far(&child).contains("Binlog stream started") {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "no binlog stream"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "{}",
            run::log_of(&child)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Far more than the queue, the pipe and the sockets hold, in several transactions.
    for part in 0..4 {
        let from = part * 25_000 + 1;
        server.sql(
            "stall",
            &format!(
                "INSERT INTO t SELECT seq, REPEAT('x', 150) FROM seq_{from}_to_{}",
                from + 24_999
            ),
        );
    }
    // Nobody reads for 12 s.
    std::thread::sleep(std::time::Duration::from_secs(12));
    let mut reader = reader.join().unwrap();
    let mut ids = std::collections::BTreeSet::new();
    let mut lines = 0usize;
    while ids.len() < 100_000 {
        use std::io::BufRead;
        let mut line = String::new();
        // A restarted pipeline opens the FIFO again: read on from the new writer.
        if reader.read_line(&mut line).unwrap() == 0 {
            reader = std::io::BufReader::new(std::fs::File::open(&fifo).unwrap());
            continue;
        }
        let line: serde_json::Value = serde_json::from_str(&line).unwrap();
        lines += 1;
        if let Some(id) = line["key"]["payload"]["id"].as_i64() {
            ids.insert(id);
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(240),
            "{} of 100000 rows after 240 s",
            ids.len()
        );
    }
    run::stop(&child);
    let log = run::finish(child);
    assert_eq!(ids.len(), 100_000, "rows lost: {log}");
    // Dropped by the server, the source read on from the event it got to.
    assert_eq!(lines, 100_000, "events for 100000 rows: {log}");
    assert!(
        log.contains("The binlog connection dropped; reconnecting")
            && log.contains("Binlog connection open again"),
        "the source reconnected: {log}"
    );
    assert!(!log.contains("restarting"), "the pipeline restarted: {log}");
}

/// Without the full row metadata, rows of a captured table the source knows no structure of
/// (made under `sql_log_bin = 0` after the start) stop the stream with one line naming the
/// table and the fix (`inconsistent.schema.handling.mode: fail`, the default); under `warn`
/// they are logged and passed over, and the stream goes on.
#[test]
fn rows_of_a_table_of_unknown_structure_follow_inconsistent_schema_handling_mode() {
    let server = Restartable::start();
    server.sql(
        "",
        "SET GLOBAL binlog_row_metadata = MINIMAL; CREATE DATABASE unknown; \
         CREATE TABLE unknown.t (id INT PRIMARY KEY)",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = streaming_pipeline(
        dir.path(),
        server.port,
        &[("database.include.list", "unknown".into())],
    );
    let late = "SET SESSION sql_log_bin = 0; CREATE TABLE late (id INT PRIMARY KEY); \
                SET SESSION sql_log_bin = 1; INSERT INTO late VALUES (1); INSERT INTO t VALUES (2)";
    let mut child = run::start(&path, &[]);
    server.sql("unknown", "INSERT INTO t VALUES (1)");
    run::wait_lines(dir.path(), 1, &mut child);
    server.sql("unknown", late);
    let (log, e) = failed(child);
    assert!(
        e.contains("`unknown.late`")
            && e.contains("binlog_row_metadata")
            && e.contains("inconsistent.schema.handling.mode: warn"),
        "{log}"
    );
    // Under `warn` (a pipeline of its own, started before another such table is made):
    // passed over, logged; the row of `t` after it arrives.
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(
        dir.path(),
        server.port,
        &[
            ("inconsistent.schema.handling.mode", "warn".into()),
            ("database.include.list", "unknown".into()),
            ("snapshot.mode", "no_data".into()),
        ],
    );
    let mut child = run::start(&path, &[]);
    let t0 = std::time::Instant::now();
    while !run::log_so_far(&child).contains("Binlog stream started") {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "no binlog stream"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    server.sql("unknown", "INSERT INTO t VALUES (3)");
    run::wait_lines(dir.path(), 1, &mut child);
    server.sql(
        "unknown",
        &late.replace("late", "later").replace("(2)", "(4)"),
    );
    run::wait_lines(dir.path(), 2, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    run::stop(&child);
    let log = run::finish(child);
    assert!(
        log.contains("inconsistent.schema.handling.mode: warn"),
        "{log}"
    );
    let lines = run::lines(dir.path());
    let streamed: Vec<(String, i64)> = lines
        .iter()
        .filter(|l| l["value"]["payload"]["op"] == "c")
        .map(|l| {
            let topic = l["topic"].as_str().unwrap().to_owned();
            (topic, l["key"]["payload"]["id"].as_i64().unwrap())
        })
        .collect();
    assert_eq!(
        streamed,
        [
            ("dbserver1.unknown.t".to_owned(), 3),
            ("dbserver1.unknown.t".to_owned(), 4)
        ],
        "{log}"
    );
}

/// A DDL that gives no event (`type: mariadb`, schema change events off) ends its GTID group:
/// a binlog connection dropped after it (its dump thread killed on the server) is opened again
/// past it, so the DDL is not applied twice (a column `CHANGE`d twice would stop the source),
/// and the rows after it arrive once with the new column.
#[test]
fn a_killed_binlog_connection_reconnects_past_a_ddl_without_events() {
    let server = Restartable::start();
    server.sql(
        "",
        "CREATE DATABASE killed; CREATE TABLE killed.t (id INT PRIMARY KEY, c INT)",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = mariadb_pipeline(
        dir.path(),
        server.port,
        &[("database.include.list", "killed".into())],
    );
    let mut child = run::start(&path, &[]);
    // The stream is up once a row written after the start arrives.
    server.sql("killed", "INSERT INTO t VALUES (1, 1)");
    run::wait_lines(dir.path(), 1, &mut child);
    server.sql("killed", "ALTER TABLE t CHANGE c d INT");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let dump = server.sql(
        "",
        "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'",
    );
    let dump = dump.trim();
    assert!(!dump.is_empty(), "no binlog dump thread");
    server.sql("", &format!("KILL {dump}"));
    server.sql("killed", "INSERT INTO t VALUES (2, 2)");
    run::wait_lines(dir.path(), 2, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    run::stop(&child);
    let log = run::finish(child);
    assert!(log.contains("Binlog connection open again"), "{log}");
    let lines = run::lines(dir.path());
    let after: Vec<String> = lines
        .iter()
        .map(|l| l["value"]["payload"]["after"].to_string())
        .collect();
    assert_eq!(after, [r#"{"id":1,"c":1}"#, r#"{"id":2,"d":2}"#], "{log}");
}
