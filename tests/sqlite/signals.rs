//! Signals (the signaling table, the file, http and kafka channels), incremental snapshots,
//! heartbeats.

use super::*;

#[test]
fn a_signal_row_snapshots_a_table_incrementally_under_a_writer_and_resumes_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, n int not null, s text);
         with recursive g(v) as (select 1 union all select v + 1 from g where v < 20000) insert into t select v, v, 'row ' || v from g;
         create table debezium_signal (id text primary key, type text not null, data text);",
        &["t", "debezium_signal"],
    );
    let path = pipeline(
        dir.path(),
        &db,
        &[
            ("snapshot.mode", "no_data".into()),
            ("signal.data.collection", "main.debezium_signal".into()),
            ("incremental.snapshot.chunk.size", 50i64.into()),
        ],
    );
    let stop = Arc::new(AtomicBool::new(false));
    let writer = writer(&db, &stop, Duration::from_millis(3), |i| {
        format!(
            "begin; update t set n = n + 1000000, s = 'w{i}' where id = {}; delete from t where id = {}; insert or replace into t values ({}, {i}, 'new'); commit;",
            1 + (i * 7919) % 20000,
            1 + (i * 104_729) % 20000,
            20000 + i % 200
        )
    });
    let mut child = start(&path, &[]);
    std::thread::sleep(Duration::from_millis(300));
    conn.execute(
        "insert into debezium_signal values ('s-1', 'execute-snapshot', '{\"data-collections\": [\"main.t\"], \"type\": \"incremental\"}')",
        [],
    )
    .unwrap();
    let snapshot_rows = |lines: &[Json]| lines.iter().filter(|l| l["value"]["op"] == "r").count();
    // Killed once a position with the snapshot's progress past a chunk is committed
    // (mid-snapshot): a progress committed before the first chunk has `"last_key":null`.
    let t0 = Instant::now();
    let past_a_chunk = || {
        let text =
            std::fs::read_to_string(dir.path().join("data/offsets.json")).unwrap_or_default();
        let offsets: Json = serde_json::from_str(&text).unwrap_or_default();
        offsets["pipelines"]
            .as_object()
            .into_iter()
            .flat_map(|p| p.values())
            .filter_map(|p| p["position"].as_str())
            .any(|position| position.contains("\"last_key\":["))
    };
    while !past_a_chunk() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the incremental snapshot did not start"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before_restart = lines(dir.path()).len();
    let child = start(&path, &["--stop-when-idle", "2s"]);
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Incremental snapshot completed"),
        "{stderr}"
    );

    let lines = lines(dir.path());
    assert!(lines
        .iter()
        .filter(|l| l["value"]["op"] == "r")
        .all(|l| l["value"]["source"]["snapshot"] == "incremental"));
    let table = table_rows(&conn);
    let replayed = replayed_rows(&lines);
    assert_eq!(
        replayed, table,
        "snapshot rows and streamed changes give the table's state"
    );
    // Resumed after the committed chunk, not from the start: a chunk (50 rows, ids from 1) was
    // committed before the kill, so the restart's first snapshot row is past id 50. (This
    // asserted fewer than 21,000 snapshot rows in all, which also counts the chunks emitted
    // between the last commit and the kill: about 1 run in 20 re-read more than 800 rows.)
    let first_resumed = lines[before_restart..]
        .iter()
        .find(|l| l["value"]["op"] == "r")
        .and_then(|l| l["value"]["after"]["id"].as_i64());
    assert!(
        first_resumed.is_some_and(|id| id > 50),
        "the restart's first snapshot row is {first_resumed:?}, of {} snapshot rows",
        snapshot_rows(&lines)
    );
}

/// A captured table `t` of `rows` rows and a pipeline that streams it (no snapshot) with the
/// `file` signal channel on `signals.jsonl`, chunks of `chunk` rows and sink notifications on
/// `app.notifications`.
pub(super) fn file_signals(rows: u32, chunk: u32) -> (tempfile::TempDir, PathBuf, PathBuf) {
    file_signals_with(rows, chunk, |pipeline| pipeline)
}

/// [`file_signals`] with `more` added to the pipeline (an admin endpoint, say).
pub(super) fn file_signals_with(
    rows: u32,
    chunk: u32,
    more: impl FnOnce(Pipeline) -> Pipeline,
) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = captured(
        dir.path(),
        &format!("create table t (id integer primary key, v text);
         with recursive g(v) as (select 1 union all select v + 1 from g where v < {rows}) insert into t select v, 'row ' || v from g;"),
        &["t"],
    );
    let signals = dir.path().join("signals.jsonl");
    let keys = [
        ("snapshot.mode", "no_data".into()),
        ("signal.enabled.channels", "file".into()),
        ("signal.file", (&signals).into()),
        ("signal.poll.interval.ms", 50u32.into()),
        ("incremental.snapshot.chunk.size", chunk.into()),
        ("notification.enabled.channels", "sink".into()),
        ("notification.sink.topic.name", "app.notifications".into()),
    ];
    let path = more(base(dir.path(), source(&db).set_all(&keys))).write(dir.path());
    (dir, signals, path)
}

/// The kit's `file` signal channel in the SQLite source: an `execute-snapshot` line starts an
/// incremental snapshot (no signaling table needed), a malformed line is refused, the file is
/// emptied once read.
#[test]
fn a_file_signal_snapshots_a_table_incrementally() {
    let (dir, signals, path) = file_signals(120, 50);
    std::fs::write(
        &signals,
        "not json\n{\"id\": \"f-1\", \"type\": \"execute-snapshot\", \"data\": {\"data-collections\": [\"main.t\"]}}\n",
    )
    .unwrap();
    let o = sluice(&["run", "--stop-when-idle", "2s", path.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("Signal refused.") && err.contains("not json"),
        "{err}"
    );
    assert!(err.contains("Incremental snapshot completed."), "{err}");
    let reads: Vec<i64> = lines(dir.path())
        .iter()
        .filter(|l| l["value"]["op"] == "r" && l["value"]["source"]["snapshot"] == "incremental")
        .map(|l| l["value"]["after"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(reads, (1..=120).collect::<Vec<_>>());
    assert_eq!(
        std::fs::read_to_string(&signals).unwrap(),
        "",
        "the file is emptied"
    );
    // Debezium's notifications, in order around the rows.
    let all = lines(dir.path());
    let notes: Vec<(usize, &Json)> = all
        .iter()
        .enumerate()
        .filter(|(_, l)| l["topic"] == "app.notifications")
        .collect();
    let kinds: Vec<&str> = notes
        .iter()
        .map(|(_, n)| n["value"]["type"].as_str().unwrap())
        .collect();
    // One IN_PROGRESS per chunk (50, 50, 20 rows), before its rows, as Debezium.
    assert_eq!(
        kinds,
        [
            "STARTED",
            "IN_PROGRESS",
            "IN_PROGRESS",
            "IN_PROGRESS",
            "TABLE_SCAN_COMPLETED",
            "COMPLETED"
        ]
    );
    let first_row = all.iter().position(|l| l["value"]["op"] == "r").unwrap();
    let last_row = all.iter().rposition(|l| l["value"]["op"] == "r").unwrap();
    assert!(
        notes[0].0 < first_row && notes[1].0 < first_row && notes[4].0 > last_row,
        "STARTED and the first IN_PROGRESS before the rows, the scan's end after"
    );
    assert_eq!(
        notes[2].1["value"]["additional_data"],
        serde_json::json!({"connector_name": "app", "current_collection_in_progress": "main.t", "maximum_key": "120", "last_processed_key": "100", "data_collections": "main.t"})
    );
    let value = &notes[4].1["value"];
    assert_eq!(value["id"], "f-1");
    assert_eq!(value["aggregate_type"], "Incremental Snapshot");
    assert_eq!(
        value["additional_data"],
        serde_json::json!({"connector_name": "app", "scanned_collection": "main.t", "total_rows_scanned": "120", "status": "SUCCEEDED", "data_collections": "main.t"})
    );
    assert_eq!(
        notes[0].1["value"]["additional_data"]["data_collections"],
        "main.t"
    );
    assert_eq!(notes[0].1["key"], serde_json::json!({"id": "f-1"}));
}

/// Pause, resume and stop through the kit's tracker: a paused snapshot reads no chunk (and
/// its progress survives a restart), `resume-snapshot` goes on, `stop-snapshot` ends one with
/// Debezium's `ABORTED`, and a signal the source cannot carry out is refused with one.
#[test]
fn a_file_signal_pauses_resumes_and_stops_an_incremental_snapshot() {
    let (dir, signals, path) = file_signals(40, 15);
    let run = |signal_lines: &str| {
        std::fs::write(&signals, signal_lines).unwrap();
        let o = sluice(&["run", "--stop-when-idle", "1s", path.to_str().unwrap()]);
        let (_, err) = text(&o);
        assert!(o.status.success(), "{err}");
        err
    };
    let kinds = |from: usize| -> (Vec<String>, usize) {
        let all = lines(dir.path());
        let notes = all[from..]
            .iter()
            .filter(|l| l["topic"] == "app.notifications")
            .map(|n| n["value"]["type"].as_str().unwrap().to_owned())
            .collect();
        let reads = all[from..]
            .iter()
            .filter(|l| l["value"]["op"] == "r")
            .count();
        (notes, reads)
    };
    let execute =
        r#"{"id": "p-1", "type": "execute-snapshot", "data": {"data-collections": ["main.t"]}}"#;
    let err = run(&format!(
        "{execute}\n{{\"id\": \"p-2\", \"type\": \"pause-snapshot\"}}\n{{\"id\": \"b-1\", \"type\": \"execute-snapshot\", \"data\": {{\"data-collections\": [\"t\"], \"type\": \"blocking\"}}}}\n"
    ));
    assert!(err.contains("blocking snapshots"), "{err}");
    assert_eq!(
        kinds(0),
        (vec!["STARTED".into(), "PAUSED".into(), "ABORTED".into()], 0),
        "paused before its first chunk; the blocking one refused"
    );
    let seen = lines(dir.path()).len();
    run("{\"id\": \"p-3\", \"type\": \"resume-snapshot\"}\n");
    let (notes, reads) = kinds(seen);
    assert_eq!(reads, 40, "the paused snapshot goes on after the restart");
    assert_eq!(
        notes,
        [
            "RESUMED",
            "IN_PROGRESS",
            "IN_PROGRESS",
            "IN_PROGRESS",
            "TABLE_SCAN_COMPLETED",
            "COMPLETED"
        ]
    );
    let seen = lines(dir.path()).len();
    let stop = r#"{"id": "s-1", "type": "stop-snapshot", "data": {"type": "incremental"}}"#;
    run(&format!("{execute}\n{stop}\n"));
    assert_eq!(
        kinds(seen),
        (vec!["STARTED".into(), "ABORTED".into()], 0),
        "stopped before its first chunk"
    );
}

/// The `http` signal channel in the SQLite source: `sluice signal` posts to the admin
/// endpoint, and the reader thread takes the signal between polls.
#[test]
fn an_http_signal_snapshots_a_table_incrementally() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text);
         with recursive g(v) as (select 1 union all select v + 1 from g where v < 30) insert into t select v, 'row ' || v from g;",
        &["t"],
    );
    let port = sluice_test_support::pg::free_port();
    let keys = [
        ("snapshot.mode", "no_data".into()),
        ("signal.enabled.channels", "http".into()),
        ("incremental.snapshot.chunk.size", 10u32.into()),
    ];
    let path = pipeline(dir.path(), &db, &keys);
    let e = error_line(&sluice(&["run", path.to_str().unwrap()]));
    assert!(e.contains("needs the pipeline's admin endpoint"), "{e}");
    base(dir.path(), source(&db).set_all(&keys))
        .setting("admin", &[("bind", format!("127.0.0.1:{port}").into())])
        .write(dir.path());
    let child = start(&path, &[]);
    let signal =
        r#"{"id": "h-1", "type": "execute-snapshot", "data": {"data-collections": ["main.t"]}}"#;
    let t0 = Instant::now();
    while !sluice(&["signal", path.to_str().unwrap(), signal])
        .status
        .success()
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the admin endpoint did not answer"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_lines(dir.path(), 30);
    sluice_test_support::pg::stop(&child);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reads: Vec<i64> = lines(dir.path())
        .iter()
        .filter(|l| l["value"]["source"]["snapshot"] == "incremental")
        .map(|l| l["value"]["after"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(reads, (1..=30).collect::<Vec<_>>());
}

/// The kit's `kafka` channel in the SQLite source: a record keyed by `topic.prefix` starts an
/// incremental snapshot, one with another key is ignored, and the handled record is not read
/// again after a restart (its offset was committed).
#[cfg(feature = "kafka")]
#[test]
fn a_kafka_signal_snapshots_a_table_incrementally_once() {
    let bootstrap = sluice_test_support::broker::shared();
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text);
         with recursive g(v) as (select 1 union all select v + 1 from g where v < 30) insert into t select v, 'row ' || v from g;",
        &["t"],
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let topic = format!("sqlite-signals-{}", nanos % 1_000_000_000_000);
    let path = pipeline(
        dir.path(),
        &db,
        &[
            ("snapshot.mode", "no_data".into()),
            ("signal.enabled.channels", "kafka".into()),
            ("signal.kafka.bootstrap.servers", (&bootstrap).into()),
            ("signal.kafka.topic", (&topic).into()),
            ("signal.kafka.groupId", (&topic).into()),
            ("signal.consumer.broker.address.family", "v4".into()),
            ("incremental.snapshot.chunk.size", 10u32.into()),
        ],
    );
    let mut child = start(&path, &[]);
    // The channel creates the topic when it starts.
    let t0 = Instant::now();
    while !sluice_test_support::broker::partitions(&bootstrap).contains_key(&topic) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the signal topic was not created"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("sluice exited: {status}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let signal =
        r#"{"id": "k-1", "type": "execute-snapshot", "data": {"data-collections": ["main.t"]}}"#;
    sluice_test_support::broker::produce(&bootstrap, &topic, "another-connector", signal);
    sluice_test_support::broker::produce(&bootstrap, &topic, "app", signal);
    wait_lines(dir.path(), 30);
    std::thread::sleep(Duration::from_millis(300));
    sluice_test_support::pg::stop(&child);
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("Ignoring a signal record"), "{said}");
    let reads = |dir: &Path| -> Vec<i64> {
        lines(dir)
            .iter()
            .filter(|l| l["value"]["source"]["snapshot"] == "incremental")
            .map(|l| l["value"]["after"]["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(reads(dir.path()), (1..=30).collect::<Vec<_>>());

    // Restarted: the handled signal is not read again.
    let child = start(&path, &["--stop-when-idle", "3s"]);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(reads(dir.path()).len(), 30, "one snapshot of the 30 rows");
}

/// Heartbeats from the kit in the SQLite source: records on
/// `__debezium-heartbeat.<topic.prefix>` keyed by the server name, with
/// `heartbeat.action.query` run before each (its rows are captured like any other).
#[test]
fn heartbeats_are_sent_and_run_the_action_query() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = captured(
        dir.path(),
        "create table hb (id integer primary key autoincrement, at text);",
        &["hb"],
    );
    let path = pipeline(
        dir.path(),
        &db,
        &[
            ("heartbeat.interval.ms", 100i64.into()),
            (
                "heartbeat.action.query",
                "insert into hb (at) values (datetime('now'))".into(),
            ),
        ],
    );
    let o = sluice(&["run", "--stop-after-events", "8", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o).1);
    let lines = lines(dir.path());
    let beats: Vec<&Json> = lines
        .iter()
        .filter(|l| l["topic"] == "__debezium-heartbeat.app")
        .collect();
    assert!(beats.len() >= 2, "{lines:?}");
    assert_eq!(beats[0]["key"], serde_json::json!({"serverName": "app"}));
    assert!(beats[0]["value"]["ts_ms"].as_i64().is_some_and(|t| t > 0));
    let inserts = lines
        .iter()
        .filter(|l| l["topic"] == "app.main.hb" && l["value"]["op"] == "c")
        .count();
    assert!(
        inserts >= 1,
        "the action query's rows are captured: {lines:?}"
    );
}

/// The incremental snapshot's progress as `docs/positions.md` shows it (a position Sluice
/// wrote) resumes after its last key and ends at its maximum key: restarted from it, the source
/// reads rows 2,001 to 20,000 only, then streams the rows written since (past the maximum, so
/// not read).
#[test]
fn a_documented_position_resumes_its_incremental_snapshot_after_the_stored_key() {
    let page = include_str!("../../docs/positions.md");
    let sqlite = &page[page.find("\n## SQLite").unwrap()..];
    let position = sqlite
        .lines()
        .find(|l| l.contains("\"incremental\""))
        .unwrap()
        .trim();
    let documented: Json = serde_json::from_str(position).unwrap();
    assert_eq!(
        documented["incremental"]["last_key"],
        serde_json::json!([2000])
    );
    assert_eq!(
        documented["incremental"]["max_key"],
        serde_json::json!([20000])
    );
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text);
         with recursive g(v) as (select 1 union all select v + 1 from g where v < 20000) insert into t select v, 'row ' || v from g;",
        &["t"],
    );
    conn.execute_batch("insert into t values (20001, 'new'), (20002, 'new');")
        .unwrap();
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    let offsets = serde_json::json!({"pipelines": {"sqlite_test": {"position": position, "committed_at_ms": 0}}});
    std::fs::write(dir.path().join("data/offsets.json"), offsets.to_string()).unwrap();
    let path = pipeline(
        dir.path(),
        &db,
        &[("incremental.snapshot.chunk.size", 500i64.into())],
    );
    let o = sluice(&["run", "--stop-when-idle", "1s", path.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("Incremental snapshot completed."), "{err}");
    let all = lines(dir.path());
    let reads: Vec<i64> = all
        .iter()
        .filter(|l| l["value"]["op"] == "r")
        .map(|l| l["value"]["after"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(reads, (2001..=20000).collect::<Vec<_>>());
    assert!(all
        .iter()
        .filter(|l| l["value"]["op"] == "r")
        .all(|l| l["value"]["source"]["snapshot"] == "incremental"));
    let created: Vec<i64> = all
        .iter()
        .filter(|l| l["value"]["op"] == "c")
        .map(|l| l["value"]["after"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(created, [20001, 20002]);
}
