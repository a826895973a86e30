//! Snapshot and stream under writers and kill -9, resuming, retention, snapshot modes.

use super::*;

#[test]
fn snapshot_and_stream_under_a_writer_end_in_the_tables_state_even_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("create table t (id integer primary key, n int not null, s text, price decimal(8,2), at datetime)").unwrap();
    conn.execute_batch("insert into t select value, value % 7, 'row ' || value, value * 0.25, '2025-01-01 10:00:00' from generate_series(1, 2000)")
        .unwrap_or_else(|_| {
            // generate_series is an extension; fall back to a recursive query.
            conn.execute_batch("with recursive g(v) as (select 1 union all select v + 1 from g where v < 2000) insert into t select v, v % 7, 'row ' || v, v * 0.25, '2025-01-01 10:00:00' from g").unwrap();
        });
    assert!(sluice(&["capture", "enable", db.to_str().unwrap(), "t"])
        .status
        .success());
    let path = pipeline(dir.path(), &db, &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = writer(&db, &stop, Duration::from_millis(2), |i| {
        let id = 1 + (i * 7919) % 2500;
        format!(
            "begin; insert or replace into t values ({id}, {i}, 'w{i}', {i}.5, '2025-02-03 04:05:06'); update t set n = n + 1 where id = {}; delete from t where id = {}; commit;",
            1 + (i * 104_729) % 2500,
            1 + (i * 1299) % 2500
        )
    });
    let mut child = start(&path, &[]);
    wait_lines(dir.path(), 2500);
    // Killed in the middle of the stream: nothing acknowledged is lost, the rest comes again.
    child.kill().unwrap();
    child.wait().unwrap();
    let child = start(&path, &["--stop-when-idle", "2s"]);
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let transactions = writer.join().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        transactions > 100,
        "the writer ran ({transactions} transactions)"
    );

    let lines = lines(dir.path());
    let snapshot_rows = lines.iter().filter(|l| l["value"]["op"] == "r").count();
    assert!(snapshot_rows >= 1900, "{snapshot_rows} snapshot rows");
    let table = table_rows(&conn);
    let replayed = replayed_rows(&lines);
    assert_eq!(replayed.len(), table.len());
    assert_eq!(replayed, table, "the last event per key is the table's row");
    // Acknowledged changes were purged from the change table.
    let left: i64 = conn
        .query_row("select count(*) from _sluice_ct_t", [], |r| r.get(0))
        .unwrap();
    let total: i64 = conn
        .query_row("select seq from _sluice_clock", [], |r| r.get(0))
        .unwrap();
    assert!(left < total / 10, "{left} of {total} change rows left");
}

/// Changes recorded before a pipeline's first snapshot are in it and not streamed again (the
/// snapshot and the stream meet, as Debezium's do); a change after it comes once. The snapshot's
/// sequence was committed before its first row went out.
#[test]
fn a_first_snapshot_does_not_repeat_the_changes_recorded_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text); insert into t values (1, 'a'), (2, 'b');",
        &["t"],
    );
    conn.execute_batch(
        "insert into t values (3, 'c'); update t set v = 'bb' where id = 2; delete from t where id = 1;",
    )
    .unwrap();
    let path = pipeline(dir.path(), &db, &[]);
    let mut child = start(&path, &[]);
    wait_lines(dir.path(), 2);
    conn.execute_batch("insert into t values (4, 'd');")
        .unwrap();
    wait_lines(dir.path(), 3);
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let seen: Vec<(String, i64, String)> = (lines(dir.path()).iter())
        .map(|l| {
            let after = &l["value"]["after"];
            (
                l["value"]["op"].as_str().unwrap_or("-").to_owned(),
                after["id"].as_i64().unwrap_or(0),
                after["v"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let want = [("r", 2, "bb"), ("r", 3, "c"), ("c", 4, "d")]
        .map(|(op, id, v)| (op.to_owned(), id, v.to_owned()));
    assert_eq!(seen, want);
}

/// The first snapshot's sequence is committed as soon as the sink has it (the source asks for
/// it), not at the next flush: with an hour between flushes the snapshot still starts at once.
#[test]
fn a_first_snapshot_does_not_wait_for_the_flush_interval() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text); insert into t values (1, 'a'), (2, 'b');",
        &["t"],
    );
    let path = base(dir.path(), source(&db))
        .setting("offsets", &[("flush_interval", "1h".into())])
        .write(dir.path());
    let mut child = start(&path, &[]);
    wait_lines(dir.path(), 2);
    child.kill().unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(dir.path().join("data/offsets.json")).unwrap();
    assert!(text.contains(r#"\"snapshot_completed\":false"#), "{text}");
}

#[test]
fn a_stream_started_without_changes_resumes_from_where_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text); insert into t values (1, 'old');",
        &["t"],
    );
    let path = pipeline(dir.path(), &db, &[("snapshot.mode", "no_data".into())]);
    // Nothing changes while it runs; its starting point is committed anyway.
    run_until_idle(&path);
    conn.execute_batch(
        "insert into t values (2, 'while stopped'); update t set v = 'changed' where id = 1;",
    )
    .unwrap();
    run_until_idle(&path);
    assert_eq!(
        ops(dir.path()),
        ["c", "u"],
        "the changes made while stopped"
    );
}

#[test]
fn acknowledged_changes_are_kept_for_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text)",
        &["t"],
    );
    let path = pipeline(dir.path(), &db, &[("purge.retention", "1h".into())]);
    let mut child = start(&path, &["--stop-when-idle", "1s"]);
    std::thread::sleep(Duration::from_millis(300));
    conn.execute_batch(
        "insert into t values (1, 'a'); insert into t values (2, 'b'); update t set v = 'c';",
    )
    .unwrap();
    wait_lines(dir.path(), 4);
    assert!(child.wait().unwrap().success());
    let kept: i64 = conn
        .query_row("select count(*) from _sluice_ct_t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        kept, 4,
        "an hour's retention keeps the acknowledged changes"
    );
}

/// kill -9 at 20 random moments, half inside a snapshot (the first, then `snapshot.mode:
/// always`: read again at each start) and half in the stream, under a writer that inserts,
/// updates and deletes: the state rebuilt from everything written equals the table. (A cut-off
/// snapshot used to restart its stream at the new snapshot's sequence, so a row an earlier run
/// emitted and that was deleted since stayed.)
#[test]
fn kill_9_at_random_moments_under_a_writer_rebuilds_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(dir.path(), "create table t (id integer primary key, n int not null, s text); with recursive g(v) as (select 1 union all select v + 1 from g where v < 10000) insert into t select v, v, 'row ' || v from g;", &["t"]);
    let path = pipeline(dir.path(), &db, &[]);
    let always = dir.path().join("always.yaml");
    base(dir.path(), source(&db).set("snapshot.mode", "always")).write_as(&always);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = writer(&db, &stop, Duration::from_millis(2), |i| {
        format!(
            "begin; insert or replace into t values ({}, {i}, 'w{i}'); update t set n = n + 1 where id = {}; delete from t where id = {}; commit;",
            1 + (i * 7919) % 12000,
            1 + (i * 104_729) % 12000,
            1 + (i * 1299) % 12000
        )
    });
    let out = dir.path().join("out.jsonl");
    let size = || std::fs::metadata(&out).map_or(0, |m| m.len());
    let mut moments = Moments::from_clock();
    for round in 0..20 {
        let before = size();
        let mut child = start(if round % 2 == 0 { &always } else { &path }, &[]);
        let t0 = Instant::now();
        while size() == before {
            assert!(child.try_wait().unwrap().is_none(), "the pipeline stopped");
            assert!(t0.elapsed() < Duration::from_secs(60), "no output");
            std::thread::sleep(Duration::from_millis(2));
        }
        let window = if round % 2 == 0 { 60 } else { 300 };
        std::thread::sleep(Duration::from_millis(moments.below(window)));
        child.kill().unwrap();
        child.wait().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let child = start(&path, &["--stop-when-idle", "2s"]);
    let done = child.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let lines = lines(dir.path());
    let table = table_rows(&conn);
    let replayed = replayed_rows(&lines);
    let alive = replayed.keys().filter(|k| !table.contains_key(k)).count();
    let lost = table.keys().filter(|k| !replayed.contains_key(k)).count();
    assert!(
        alive == 0 && lost == 0,
        "{alive} deleted rows alive, {lost} rows missing"
    );
    assert_eq!(replayed, table);
}

/// `snapshot.mode` decided by the kit's snapshotter, across restarts of one pipeline:
/// `initial_only` does nothing once its snapshot completed; `configuration_based` follows its
/// flags; `recovery` is refused (no schema history here).
#[test]
fn snapshot_modes_follow_the_stored_offsets_and_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text); insert into t values (1, 'a'), (2, 'b');",
        &["t"],
    );
    let run = |keys: &[(&str, Scalar)]| {
        run_until_idle(&pipeline(dir.path(), &db, keys));
        ops(dir.path())
    };
    let only = &[("snapshot.mode", "initial_only".into())];
    assert_eq!(run(only), ["r", "r"]);
    conn.execute_batch("insert into t values (3, 'c');")
        .unwrap();
    assert_eq!(
        run(only),
        ["r", "r"],
        "a completed initial_only snapshot: nothing to do"
    );
    let data_only = &[
        ("snapshot.mode", "configuration_based".into()),
        (
            "snapshot.mode.configuration.based.snapshot.data",
            true.into(),
        ),
    ];
    assert_eq!(
        run(data_only),
        ["r", "r", "r", "r", "r"],
        "snapshots again, does not stream"
    );
    let stream_only = &[
        ("snapshot.mode", "configuration_based".into()),
        (
            "snapshot.mode.configuration.based.start.stream",
            true.into(),
        ),
    ];
    conn.execute_batch("update t set v = 'd' where id = 1;")
        .unwrap();
    let ops = run(stream_only);
    // No snapshot: the stream starts at the stored position, which a snapshot taken with a
    // stored offset keeps at the older of its own point and the offset (so nothing between the
    // two is skipped): the insert of 3 comes again, then the update.
    assert_eq!(
        &ops[5..],
        ["c", "u"],
        "streams from the stored position without a snapshot"
    );
    let path = pipeline(dir.path(), &db, &[("snapshot.mode", "recovery".into())]);
    let o = sluice(&["validate", path.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("schema history") && err.contains("sqlite"),
        "{err}"
    );
}
