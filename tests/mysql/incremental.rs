//! Incremental snapshots (`execute-snapshot` signals) against the shared MariaDB: under a
//! concurrent writer the state replayed from the output equals the table; a kill -9 in the
//! middle resumes with the next chunk; the `file` channel with `additional-conditions`, the
//! notifications, and a refused signal; blocking snapshots from the signaling table and the
//! `file` channel.

use std::time::{Duration, Instant};

use super::consistency::{replay, seeded_table, table_state, writer_sql};
use super::*;

const SIGNALS: &str = "CREATE TABLE debezium_signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, data TEXT)";

/// A streaming pipeline (no snapshot) of `db` with the signaling table and chunks of `chunk`,
/// its source's `keys` set.
fn signal_pipeline(
    dir: &std::path::Path,
    db: &str,
    chunk: u32,
    keys: &[(&str, Scalar)],
) -> PathBuf {
    signal_parts(dir, db, chunk, keys).write(dir)
}

/// [`signal_pipeline`]'s parts.
fn signal_parts(dir: &std::path::Path, db: &str, chunk: u32, keys: &[(&str, Scalar)]) -> Pipeline {
    let source = source(dir, mariadb::server().port)
        .set_all(&[
            ("snapshot.mode", "no_data".into()),
            ("database.include.list", db.into()),
            (
                "signal.data.collection",
                format!("{db}.debezium_signal").into(),
            ),
            ("incremental.snapshot.chunk.size", chunk.into()),
            ("notification.enabled.channels", "sink".into()),
            ("notification.sink.topic.name", "notes".into()),
        ])
        .set_all(keys);
    base(dir, source)
        .top("max_batch_size", 100u32)
        .setting("offsets", &[("flush_interval", "20ms".into())])
}

/// Waits until `child`'s log says `what`.
fn wait_log(child: &mut std::process::Child, what: &str) {
    let t0 = Instant::now();
    while !sluice_test_support::pg::log_so_far(child).contains(what) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "sluice stopped: {}",
            sluice_test_support::pg::log_of(child)
        );
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            let log = sluice_test_support::pg::log_of(child);
            panic!("no `{what}` in the log: {log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The state `events` replay to is the table's; otherwise the keys that differ, with their
/// events.
fn assert_same_state(events: &[Json], db: &str) {
    let ours = replay(events);
    let table = table_state(db);
    let keys: std::collections::BTreeSet<&i64> = ours.keys().chain(table.keys()).collect();
    let wrong: Vec<String> = keys
        .into_iter()
        .filter(|k| ours.get(k) != table.get(k))
        .take(5)
        .map(|k| {
            let history: Vec<String> = events
                .iter()
                .filter(|e| e["key"]["payload"]["id"].as_i64() == Some(*k))
                .map(|e| {
                    let p = &e["value"]["payload"];
                    format!("{} {} {}", p["op"], p["after"], p["source"]["snapshot"])
                })
                .collect();
            format!(
                "{k}: ours {:?}, the table's {:?}; events {history:?}",
                ours.get(k),
                table.get(k)
            )
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

fn of_items(events: &[Json]) -> Vec<Json> {
    events
        .iter()
        .filter(|e| e["topic"].as_str().is_some_and(|t| t.ends_with(".items")))
        .cloned()
        .collect()
}

fn notes(events: &[Json]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["topic"] == "notes")
        .map(|e| {
            e["value"]["payload"]["type"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn an_incremental_snapshot_under_a_concurrent_writer_ends_with_the_table() {
    let db = seeded_table("mysql_incremental", 3000);
    mariadb::sql(&db, SIGNALS);
    mariadb::sql(
        &db,
        "CREATE TABLE others (id INT PRIMARY KEY); INSERT INTO others SELECT seq FROM seq_1_to_200",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = signal_pipeline(dir.path(), &db, 100, &[]);
    let mut child = sluice_test_support::pg::start(&path, &[]);
    wait_log(&mut child, "Binlog stream started");
    // Halfway through, a second signal adds a table to the running snapshot (the chunk in its
    // window then is read again).
    let mut sql = writer_sql(400, 3000);
    let half = sql
        .find("INSERT INTO items (n, note) VALUES (199,")
        .unwrap();
    sql.insert_str(
        half,
        &format!("INSERT INTO debezium_signal VALUES ('s2', 'execute-snapshot', '{{\"data-collections\": [\"{db}.others\"]}}');"),
    );
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || mariadb::sql(&db, &sql))
    };
    mariadb::sql(
        &db,
        &format!("INSERT INTO debezium_signal VALUES ('s1', 'execute-snapshot', '{{\"data-collections\": [\"{db}.items\"], \"type\": \"incremental\"}}')"),
    );
    writer.join().unwrap();
    wait_log(&mut child, "Incremental snapshot completed");
    // The writer's last step is streamed too.
    sluice_test_support::pg::wait_for(dir.path(), "the last write", &mut child, |lines| {
        lines
            .iter()
            .any(|l| l["value"]["payload"]["after"]["note"] == "w400")
    });
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let events = sluice_test_support::pg::lines(dir.path());
    let items = of_items(&events);
    let reads: Vec<&Json> = items
        .iter()
        .filter(|e| e["value"]["payload"]["op"] == "r")
        .collect();
    assert!(reads.len() > 2000, "{} rows read", reads.len());
    assert!(reads
        .iter()
        .all(|e| e["value"]["payload"]["source"]["snapshot"] == "incremental"));
    // The stream and the chunks together say what the table is.
    assert_same_state(&items, &db);
    let mut others: Vec<i64> = events
        .iter()
        .filter(|e| e["topic"].as_str().is_some_and(|t| t.ends_with(".others")))
        .map(|e| e["key"]["payload"]["id"].as_i64().unwrap())
        .collect();
    others.sort_unstable();
    assert_eq!(
        others,
        (1..=200).collect::<Vec<_>>(),
        "the added table, read once"
    );
    let notes = notes(&events);
    assert_eq!(
        notes.first().map(String::as_str),
        Some("STARTED"),
        "{notes:?}"
    );
    // 3000 rows and the writer's up to the maximum key when the scan started, in chunks of
    // 100, less the rows the writer deleted first; 2 chunks of `others`.
    let chunks = notes.iter().filter(|n| *n == "IN_PROGRESS").count();
    assert!((27..=42).contains(&chunks), "{chunks} chunks: {notes:?}");
    assert_eq!(
        &notes[notes.len() - 2..],
        ["TABLE_SCAN_COMPLETED", "COMPLETED"]
    );
    let scans = notes
        .iter()
        .filter(|n| *n == "TABLE_SCAN_COMPLETED")
        .count();
    assert_eq!(scans, 2, "{notes:?}");
}

#[test]
fn a_kill_9_during_an_incremental_snapshot_resumes_with_the_next_chunk() {
    let db = seeded_table("mysql_incremental_kill", 20_000);
    mariadb::sql(&db, SIGNALS);
    let dir = tempfile::tempdir().unwrap();
    let path = signal_pipeline(dir.path(), &db, 50, &[]);
    // The first run writes into a FIFO this test reads at its own pace: backpressure holds the
    // snapshot in the middle until the kill, whatever the machine's speed.
    let (first_file, fifo) = fifo_pipeline(
        dir.path(),
        signal_parts(dir.path(), &db, 50, &[]).top("max_queue_size", 500u32),
    );
    let mut child = sluice_test_support::pg::start(&first_file, &[]);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::io::BufReader::new(std::fs::File::open(fifo).unwrap()))
    };
    wait_log(&mut child, "Binlog stream started");
    mariadb::sql(
        &db,
        &format!("INSERT INTO debezium_signal VALUES ('s1', 'execute-snapshot', '{{\"data-collections\": [\"{db}.items\"]}}')"),
    );
    let mut seen: Vec<Json> = Vec::new();
    {
        use std::io::BufRead;
        let mut lines = reader.join().unwrap().lines();
        let mut items = 0;
        while items < 5000 {
            let line: Json = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
            if line["topic"]
                .as_str()
                .is_some_and(|t| t.ends_with(".items"))
            {
                items += 1;
            }
            seen.push(line);
        }
        // A position with the snapshot's progress is committed by now (offsets every 20 ms).
        std::thread::sleep(Duration::from_millis(200));
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let _ = sluice_test_support::pg::log_of(&child);
    let offsets = std::fs::read_to_string(dir.path().join("data/offsets.json")).unwrap();
    assert!(
        offsets.contains("incremental"),
        "no progress was committed: {offsets}"
    );
    mariadb::sql(&db, &writer_sql(100, 20_000));
    let mut child = sluice_test_support::pg::start(&path, &[]);
    wait_log(&mut child, "Incremental snapshot completed");
    std::thread::sleep(Duration::from_millis(500));
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let second = of_items(&sluice_test_support::pg::lines(dir.path()));
    let reads = second
        .iter()
        .filter(|e| e["value"]["payload"]["op"] == "r")
        .count();
    assert!(
        reads < 20_000 - 4000,
        "the restart read {reads} rows: it did not go on from the committed chunk"
    );
    let mut all = of_items(&seen);
    all.extend(second);
    assert_same_state(&all, &db);
}

#[test]
fn the_file_channel_takes_additional_conditions() {
    let db = seeded_table("mysql_incremental_file", 500);
    mariadb::sql(&db, SIGNALS);
    let dir = tempfile::tempdir().unwrap();
    let signal_file = dir.path().join("signals.jsonl");
    let extra = [
        ("signal.enabled.channels", Scalar::from("source,file")),
        ("signal.file", (&signal_file).into()),
        ("signal.poll.interval.ms", 50u32.into()),
    ];
    let path = signal_pipeline(dir.path(), &db, 64, &extra);
    let mut child = sluice_test_support::pg::start(&path, &[]);
    wait_log(&mut child, "Binlog stream started");
    let signal = serde_json::json!({"id": "f", "type": "execute-snapshot", "data": {"data-collections": [format!("{db}.items")], "additional-conditions": [{"data-collection": format!("{db}.items"), "filter": "n % 5 = 0"}]}});
    std::fs::write(&signal_file, format!("{signal}\n")).unwrap();
    wait_log(&mut child, "Incremental snapshot completed");
    std::thread::sleep(Duration::from_millis(300));
    sluice_test_support::pg::stop(&child);
    let log = sluice_test_support::pg::finish(child);
    let events = sluice_test_support::pg::lines(dir.path());
    let mut read: Vec<i64> = of_items(&events)
        .iter()
        .filter(|e| e["value"]["payload"]["op"] == "r")
        .map(|e| e["key"]["payload"]["id"].as_i64().unwrap())
        .collect();
    read.sort_unstable();
    let expected: Vec<i64> = (1..=500).filter(|i| i % 5 == 0).collect();
    assert_eq!(
        read,
        expected,
        "the rows the condition selects, once each: {:?} {log}",
        notes(&events)
    );
    let notes = notes(&events);
    assert_eq!(
        notes.last().map(String::as_str),
        Some("COMPLETED"),
        "{notes:?}"
    );
}

/// `surrogate-key`: chunks are read by another unique column than the primary key (here `n`,
/// which runs opposite to `id`), every row once; a surrogate key the table does not have
/// aborts the snapshot with a reason, and the stream goes on.
#[test]
fn a_surrogate_key_reads_the_chunks_by_another_column() {
    let db = seeded_table("mysql_incremental_surrogate", 500);
    mariadb::sql(&db, &format!("{SIGNALS}; UPDATE items SET n = 1001 - id"));
    let dir = tempfile::tempdir().unwrap();
    let signal_file = dir.path().join("signals.jsonl");
    let extra = [
        ("signal.enabled.channels", Scalar::from("file")),
        ("signal.file", (&signal_file).into()),
        ("signal.poll.interval.ms", 50u32.into()),
    ];
    let path = signal_pipeline(dir.path(), &db, 64, &extra);
    let mut child = sluice_test_support::pg::start(&path, &[]);
    wait_log(&mut child, "Binlog stream started");
    let signal = |id: &str, key: &str| {
        format!(
            "{}\n",
            serde_json::json!({"id": id, "type": "execute-snapshot", "data": {"data-collections": [format!("{db}.items")], "surrogate-key": key}})
        )
    };
    std::fs::write(&signal_file, signal("s", "n")).unwrap();
    wait_log(&mut child, "Incremental snapshot completed");
    let mut more = std::fs::OpenOptions::new()
        .append(true)
        .open(&signal_file)
        .unwrap();
    std::io::Write::write_all(&mut more, signal("t", "nope").as_bytes()).unwrap();
    wait_log(&mut child, "Incremental snapshot aborted");
    sluice_test_support::pg::stop(&child);
    let log = sluice_test_support::pg::finish(child);
    assert!(
        log.contains("the surrogate key `nope` is not a captured column"),
        "{log}"
    );
    let events = sluice_test_support::pg::lines(dir.path());
    let read: Vec<i64> = of_items(&events)
        .iter()
        .filter(|e| e["value"]["payload"]["op"] == "r")
        .map(|e| e["key"]["payload"]["id"].as_i64().unwrap())
        .collect();
    let expected: Vec<i64> = (1..=500).rev().collect();
    assert_eq!(read, expected, "in the order of `n`, once each: {log}");
    let notes = notes(&events);
    assert_eq!(
        notes.iter().filter(|n| *n == "COMPLETED").count(),
        1,
        "{notes:?}"
    );
    assert_eq!(
        notes.last().map(String::as_str),
        Some("ABORTED"),
        "{notes:?}"
    );
}

/// The kit's `kafka` channel in the mysql source: a record keyed by `topic.prefix` starts an
/// incremental snapshot (with its `additional-conditions`), one with another key is ignored, and
/// the handled record is not read again after a restart.
#[test]
fn a_kafka_signal_starts_an_incremental_snapshot_once() {
    let bootstrap = sluice_test_support::broker::shared();
    let db = seeded_table("mysql_incremental_kafka", 300);
    mariadb::sql(&db, SIGNALS);
    let dir = tempfile::tempdir().unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let topic = format!("{db}-signals-{}", nanos % 1_000_000_000_000);
    let extra = [
        ("signal.enabled.channels", Scalar::from("kafka")),
        ("signal.kafka.bootstrap.servers", (&bootstrap).into()),
        ("signal.kafka.topic", (&topic).into()),
        ("signal.kafka.groupId", (&topic).into()),
        ("signal.consumer.broker.address.family", "v4".into()),
    ];
    let path = signal_pipeline(dir.path(), &db, 64, &extra);
    let mut child = sluice_test_support::pg::start(&path, &[]);
    wait_log(&mut child, "Binlog stream started");
    let signal = serde_json::json!({"id": "k", "type": "execute-snapshot", "data": {"data-collections": [format!("{db}.items")], "additional-conditions": [{"data-collection": format!("{db}.items"), "filter": "n % 3 = 0"}]}}).to_string();
    sluice_test_support::broker::produce(&bootstrap, &topic, "another-connector", &signal);
    sluice_test_support::broker::produce(&bootstrap, &topic, "dbserver1", &signal);
    wait_log(&mut child, "Incremental snapshot completed");
    std::thread::sleep(Duration::from_millis(300));
    sluice_test_support::pg::stop(&child);
    let log = sluice_test_support::pg::finish(child);
    assert!(log.contains("Created the signal topic"), "{log}");
    assert!(log.contains("Ignoring a signal record"), "{log}");
    let read = |dir: &std::path::Path| -> Vec<i64> {
        let mut read: Vec<i64> = of_items(&sluice_test_support::pg::lines(dir))
            .iter()
            .filter(|e| e["value"]["payload"]["op"] == "r")
            .map(|e| e["key"]["payload"]["id"].as_i64().unwrap())
            .collect();
        read.sort_unstable();
        read
    };
    let expected: Vec<i64> = (1..=300).filter(|i| i % 3 == 0).collect();
    assert_eq!(read(dir.path()), expected, "{log}");

    // Restarted: the handled signal is not read again.
    let child = sluice_test_support::pg::start(&path, &["--stop-when-idle", "3s"]);
    let log = sluice_test_support::pg::finish(child);
    assert!(!log.contains("Snapshot requested"), "{log}");
    assert_eq!(read(dir.path()), expected);
}

/// Tables the stream has not met when the signal comes are described from the server then: one
/// created and filled while the stream ran but without the binlog (`sql_log_bin = 0`), and one
/// whose TABLE_MAP the stream saw before a binlog rotation (the rotation forgets table ids).
/// Both are read whole by one `execute-snapshot`.
#[test]
fn an_incremental_snapshot_reads_tables_the_stream_has_not_met() {
    let db = seeded_table("mysql_incremental_late", 10);
    mariadb::sql(&db, SIGNALS);
    let dir = tempfile::tempdir().unwrap();
    let path = signal_pipeline(dir.path(), &db, 16, &[]);
    let mut child = sluice_test_support::pg::start(&path, &[]);
    wait_log(&mut child, "Binlog stream started");
    mariadb::sql(
        &db,
        "SET SESSION sql_log_bin = 0; CREATE TABLE hidden (id INT PRIMARY KEY, v VARCHAR(10));          INSERT INTO hidden SELECT seq, CONCAT('h', seq) FROM seq_1_to_40; SET SESSION sql_log_bin = 1;          CREATE TABLE rotated (id INT PRIMARY KEY, v VARCHAR(10));          INSERT INTO rotated SELECT seq, CONCAT('r', seq) FROM seq_1_to_30; FLUSH BINARY LOGS",
    );
    // The rotated table's rows are streamed (30 `c` events) before the signal comes.
    let t0 = Instant::now();
    while sluice_test_support::pg::lines(dir.path())
        .iter()
        .filter(|e| e["topic"].as_str().is_some_and(|t| t.ends_with(".rotated")))
        .count()
        < 30
    {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the rotated table's rows were not streamed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    mariadb::sql(
        &db,
        &format!(
            "INSERT INTO debezium_signal VALUES ('late', 'execute-snapshot', '{{\"data-collections\": [\"{db}.hidden\", \"{db}.rotated\"]}}')"
        ),
    );
    wait_log(&mut child, "Incremental snapshot completed");
    std::thread::sleep(Duration::from_millis(300));
    sluice_test_support::pg::stop(&child);
    let log = sluice_test_support::pg::finish(child);
    assert!(!log.contains("Signal refused"), "{log}");
    let events = sluice_test_support::pg::lines(dir.path());
    let reads = |table: &str| -> Vec<i64> {
        let mut ids: Vec<i64> = events
            .iter()
            .filter(|e| e["topic"].as_str().is_some_and(|t| t.ends_with(table)))
            .filter(|e| e["value"]["payload"]["op"] == "r")
            .map(|e| e["key"]["payload"]["id"].as_i64().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    };
    assert_eq!(reads(".hidden"), (1..=40).collect::<Vec<_>>(), "{log}");
    assert_eq!(reads(".rotated"), (1..=30).collect::<Vec<_>>(), "{log}");
    let hidden = events
        .iter()
        .find(|e| e["topic"].as_str().is_some_and(|t| t.ends_with(".hidden")))
        .unwrap();
    assert_eq!(hidden["value"]["payload"]["after"]["v"], "h1");
}

#[test]
fn a_blocking_snapshot_reads_the_tables_whole_between_transactions() {
    let db = seeded_table("mysql_blocking", 2000);
    mariadb::sql(&db, SIGNALS);
    let dir = tempfile::tempdir().unwrap();
    let signal_file = dir.path().join("signals.jsonl");
    let extra = [
        ("signal.enabled.channels", Scalar::from("source,file")),
        ("signal.file", (&signal_file).into()),
        ("signal.poll.interval.ms", 50u32.into()),
    ];
    let path = signal_pipeline(dir.path(), &db, 64, &extra);
    let mut child = sluice_test_support::pg::start(&path, &[]);
    wait_log(&mut child, "Binlog stream started");
    // From the signaling table, in the middle of a concurrent writer.
    let mut sql = writer_sql(300, 2000);
    let half = sql
        .find("INSERT INTO items (n, note) VALUES (150,")
        .unwrap();
    sql.insert_str(
        half,
        &format!("INSERT INTO debezium_signal VALUES ('b1', 'execute-snapshot', '{{\"data-collections\": [\"{db}.items\"], \"type\": \"blocking\"}}');"),
    );
    mariadb::sql(&db, &sql);
    wait_log(&mut child, "Blocking snapshot: streaming resumes");
    // The stream's own row after the writer's: the backlog after the snapshot is out.
    super::consistency::stream_through(&db, dir.path(), "end", &mut child);
    let first = sluice_test_support::pg::lines(dir.path());
    let items = of_items(&first);
    let read = items
        .iter()
        .filter(|e| e["value"]["payload"]["op"] == "r")
        .count();
    assert!(read > 1900, "the table read whole: {read} rows");
    assert_eq!(
        items
            .iter()
            .rfind(|e| e["value"]["payload"]["op"] == "r")
            .unwrap()["value"]["payload"]["source"]["snapshot"],
        "last"
    );
    // The rows read whole, then the changes after them: the table.
    assert_same_state(&items, &db);
    // A condition the server cannot read: the snapshot fails, the stream goes on past it.
    let bad = serde_json::json!({"id": "b0", "type": "execute-snapshot", "data": {"data-collections": [format!("{db}.items")], "type": "blocking", "additional-conditions": [{"data-collection": format!("{db}.items"), "filter": "no_such_column = 1"}]}});
    std::fs::write(&signal_file, format!("{bad}\n")).unwrap();
    wait_log(&mut child, "Blocking snapshot failed");
    // From the file channel, with a condition.
    let signal = serde_json::json!({"id": "b2", "type": "execute-snapshot", "data": {"data-collections": [format!("{db}.items")], "type": "blocking", "additional-conditions": [{"data-collection": format!("{db}.items"), "filter": "n % 5 = 0"}]}});
    std::fs::write(&signal_file, format!("{signal}\n")).unwrap();
    let t0 = Instant::now();
    while sluice_test_support::pg::log_so_far(&child)
        .matches("Blocking snapshot: streaming resumes")
        .count()
        < 2
    {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no second blocking snapshot"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let all = sluice_test_support::pg::lines(dir.path());
    let mut second: Vec<i64> = of_items(&all[first.len()..])
        .iter()
        .filter(|e| e["value"]["payload"]["op"] == "r")
        .map(|e| e["value"]["payload"]["after"]["n"].as_i64().unwrap())
        .collect();
    second.sort_unstable();
    let table: Vec<i64> = mariadb::sql(&db, "SELECT n FROM items WHERE n % 5 = 0 ORDER BY n")
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(second, table);
}
