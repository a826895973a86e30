//! The SQLite source and capture mode, end to end through the `sluice` binary: the capture
//! commands, snapshot + stream under a concurrent writer (with a kill -9 in the middle), the
//! quickstart, and one-line errors for bad input.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value as Json;

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("run sluice")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The one `error:` line of a failed command.
fn error_line(o: &Output) -> String {
    let (_, err) = text(o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err.lines()
        .rfind(|l| l.starts_with("error:"))
        .unwrap_or_default()
        .to_owned()
}

fn pipeline(dir: &Path, db: &Path, extra: &str) -> PathBuf {
    let text = format!(
        "name: sqlite_test\ndata_dir: {d}/data\noffsets: {{ flush_interval: 50ms }}\nrestart: {{ max_retries: 0 }}\n\
source:\n  type: sqlite\n  database.path: {db}\n  topic.prefix: app\n  poll.interval.ms: 20\n{extra}\
sinks:\n  - type: file\n    path: {d}/out.jsonl\n    schemas.enable: false\n",
        d = dir.display(),
        db = db.display()
    );
    let path = dir.join("pipeline.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn lines(dir: &Path) -> Vec<Json> {
    let text = std::fs::read_to_string(dir.join("out.jsonl")).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
    complete
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn start(path: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg(path)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs a pipeline until it has been idle for a second; it must end cleanly.
fn run_until_idle(path: &Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "--stop-when-idle", "1s"])
        .arg(path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The `op` of every event written so far (`-` for a tombstone).
fn ops(dir: &Path) -> Vec<String> {
    lines(dir)
        .iter()
        .map(|l| l["value"]["op"].as_str().unwrap_or("-").to_owned())
        .collect()
}

fn wait_lines(dir: &Path, n: usize) {
    let t0 = Instant::now();
    while lines(dir).len() < n {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "timed out waiting for {n} lines"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn capture_commands_enable_disable_and_refuse_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "create table t (id integer primary key, v text); create table nokey (a text, b int);",
    )
    .unwrap();
    let d = db.to_str().unwrap();
    let o = sluice(&["capture", "enable", d, "t"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(text(&o).0.contains("t: capture enabled"));
    assert!(text(&sluice(&["capture", "enable", d, "t"]))
        .0
        .contains("already in capture mode"));
    let e = error_line(&sluice(&["capture", "enable", d, "nokey"]));
    assert!(
        e.contains("`nokey` has no primary key") && e.contains("--key"),
        "{e}"
    );
    assert!(sluice(&["capture", "enable", d, "nokey", "--key", "a"])
        .status
        .success());
    let e = error_line(&sluice(&["capture", "enable", d, "missing"]));
    assert!(e.contains("no table `missing`"), "{e}");
    let gone = dir.path().join("gone.db");
    let e = error_line(&sluice(&["capture", "enable", gone.to_str().unwrap(), "t"]));
    assert!(e.contains("no such database file"), "{e}");
    // Changes are recorded in the same transaction as the table's.
    conn.execute_batch("insert into t values (1, 'a'); update t set v = 'b'; delete from t;")
        .unwrap();
    let n: i64 = conn
        .query_row("select count(*) from _sluice_ct_t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 3);
    assert!(text(&sluice(&["capture", "disable", d, "t"]))
        .0
        .contains("capture disabled"));
    let left: i64 = conn
        .query_row(
            "select count(*) from sqlite_master where name like '_sluice_%t'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(left, 0, "change table and triggers are gone");
}

#[test]
fn bad_input_is_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let run = |path: &Path| {
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("run")
            .arg(path)
            .output()
            .unwrap();
        error_line(&o)
    };
    let e = run(&pipeline(dir.path(), &db, ""));
    assert!(
        e.contains("does not exist") && e.contains("database.path"),
        "{e}"
    );
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("create table t (id integer primary key, v text)")
        .unwrap();
    let e = run(&pipeline(dir.path(), &db, ""));
    assert!(
        e.contains("is in capture mode: run `sluice capture enable"),
        "{e}"
    );
    assert!(sluice(&["capture", "enable", db.to_str().unwrap(), "t"])
        .status
        .success());
    conn.execute_batch("alter table t add column extra int")
        .unwrap();
    let e = run(&pipeline(dir.path(), &db, ""));
    assert!(
        e.contains("changed since capture was enabled") && e.contains("capture enable"),
        "{e}"
    );
}

/// The table's rows as the last event per key says they are (deletes remove them).
fn replay(lines: &[Json]) -> BTreeMap<i64, Json> {
    let mut state = BTreeMap::new();
    for l in lines {
        let Some(id) = l["key"]["id"].as_i64() else {
            continue;
        };
        match &l["value"] {
            Json::Null => {}
            v if v["op"] == "d" => {
                state.remove(&id);
            }
            v => {
                state.insert(id, v["after"].clone());
            }
        }
    }
    state
}

/// Table `t`'s rows: id → (n, s).
fn table_rows(conn: &Connection) -> BTreeMap<i64, (i64, String)> {
    let mut stmt = conn.prepare("select id, n, s from t order by id").unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

/// The same, rebuilt from the events of `t`.
fn replayed_rows(lines: &[Json]) -> BTreeMap<i64, (i64, String)> {
    replay(lines)
        .into_iter()
        .filter(|(_, after)| after.get("n").is_some())
        .map(|(id, after)| {
            let n = after["n"].as_i64().unwrap();
            (id, (n, after["s"].as_str().unwrap().to_owned()))
        })
        .collect()
}

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
    let path = pipeline(dir.path(), &db, "");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let conn = Connection::open(&db).unwrap();
            conn.busy_timeout(Duration::from_secs(10)).unwrap();
            let mut i: i64 = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let id = 1 + (i * 7919) % 2500;
                conn.execute_batch(&format!(
                    "begin; insert or replace into t values ({id}, {i}, 'w{i}', {i}.5, '2025-02-03 04:05:06'); update t set n = n + 1 where id = {}; delete from t where id = {}; commit;",
                    1 + (i * 104_729) % 2500,
                    1 + (i * 1299) % 2500
                ))
                .unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
            i
        })
    };
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

#[test]
fn the_quickstart_runs_to_completion_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let qs = dir.path().join("qs");
    let o = sluice(&[
        "quickstart",
        "--dir",
        qs.to_str().unwrap(),
        "--seconds",
        "2",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    for expected in [
        "inventory.customers      r  1000",
        "inventory.products       r  200",
        "inventory.customers      u  ",
    ] {
        assert!(err.contains(expected), "{expected} in:\n{err}");
    }
    assert!(
        out.contains("\"op\": \"u\""),
        "the console shows customer updates"
    );
    let events: Vec<Json> = std::fs::read_to_string(qs.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let count = |topic: &str, op: &str| {
        events
            .iter()
            .filter(|e| e["topic"] == topic && e["value"]["op"] == op)
            .count()
    };
    assert_eq!(count("inventory.customers", "r"), 1000);
    assert_eq!(count("inventory.products", "r"), 200);
    assert!(count("inventory.orders", "r") >= 3000);
    assert!(count("inventory.orders", "c") > 0);
    // Streamed changes carry the time they were made (the trigger's clock), before they were read.
    for e in events.iter().filter(|e| e["value"]["op"] == "u") {
        let made = e["value"]["source"]["ts_ms"].as_i64().unwrap();
        assert!(
            made > 1_700_000_000_000 && made <= e["value"]["ts_ms"].as_i64().unwrap(),
            "{e}"
        );
    }
    // Masked, hashed, truncated on the way.
    let customer = events
        .iter()
        .find(|e| e["topic"] == "inventory.customers")
        .unwrap();
    assert_eq!(customer["value"]["after"]["phone"], "********");
    assert_eq!(
        customer["value"]["after"]["email"].as_str().unwrap().len(),
        64
    );
    let product = events
        .iter()
        .find(|e| e["topic"] == "inventory.products")
        .unwrap();
    assert_eq!(
        product["value"]["after"]["description"]
            .as_str()
            .unwrap()
            .chars()
            .count(),
        24
    );

    // Again: it resumes, no second snapshot.
    let o = sluice(&[
        "quickstart",
        "--dir",
        qs.to_str().unwrap(),
        "--seconds",
        "1",
    ]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("resuming"), "{err}");
    assert!(
        !err.contains(" r  "),
        "no snapshot rows the second time:\n{err}"
    );
}

/// `--fresh` deletes only a directory the quickstart made: one that holds anything else is
/// left whole, with one line saying why.
#[test]
fn quickstart_fresh_never_deletes_a_directory_it_did_not_make() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("precious.txt"), "mine").unwrap();
    let o = sluice(&[
        "quickstart",
        "--dir",
        dir.path().to_str().unwrap(),
        "--fresh",
        "--seconds",
        "1",
    ]);
    let (_, err) = text(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("was not made by the quickstart"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("precious.txt")).unwrap(),
        "mine"
    );
    // Its own directory: made with the marker, and --fresh starts it over.
    let qs = dir.path().join("qs");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "quickstart",
            "--dir",
            qs.to_str().unwrap(),
            "--seconds",
            "1",
        ];
        args.extend_from_slice(extra);
        sluice(&args)
    };
    assert!(run(&[]).status.success());
    assert!(qs.join(".sluice-quickstart").is_file());
    let o = run(&["--fresh"]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("resuming"), "{err}");
}

#[test]
fn a_signal_row_snapshots_a_table_incrementally_under_a_writer_and_resumes_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "create table t (id integer primary key, n int not null, s text);
         with recursive g(v) as (select 1 union all select v + 1 from g where v < 20000) insert into t select v, v, 'row ' || v from g;
         create table debezium_signal (id text primary key, type text not null, data text);",
    )
    .unwrap();
    assert!(sluice(&[
        "capture",
        "enable",
        db.to_str().unwrap(),
        "t",
        "debezium_signal"
    ])
    .status
    .success());
    let path = pipeline(
        dir.path(),
        &db,
        "  snapshot.mode: no_data\n  signal.data.collection: main.debezium_signal\n  incremental.snapshot.chunk.size: 50\n",
    );
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let conn = Connection::open(&db).unwrap();
            conn.busy_timeout(Duration::from_secs(10)).unwrap();
            let mut i: i64 = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                conn.execute_batch(&format!(
                    "begin; update t set n = n + 1000000, s = 'w{i}' where id = {}; delete from t where id = {}; insert or replace into t values ({}, {i}, 'new'); commit;",
                    1 + (i * 7919) % 20000,
                    1 + (i * 104_729) % 20000,
                    20000 + i % 200
                ))
                .unwrap();
                std::thread::sleep(Duration::from_millis(3));
            }
        })
    };
    let mut child = start(&path, &[]);
    std::thread::sleep(Duration::from_millis(300));
    conn.execute(
        "insert into debezium_signal values ('s-1', 'execute-snapshot', '{\"data-collections\": [\"main.t\"], \"type\": \"incremental\"}')",
        [],
    )
    .unwrap();
    let snapshot_rows = |lines: &[Json]| lines.iter().filter(|l| l["value"]["op"] == "r").count();
    // Killed once a position with the snapshot's progress is committed (mid-snapshot).
    let t0 = Instant::now();
    while !std::fs::read_to_string(dir.path().join("data/offsets.json"))
        .unwrap_or_default()
        .contains("last_key")
    {
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

#[test]
fn a_stream_started_without_changes_resumes_from_where_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "create table t (id integer primary key, v text); insert into t values (1, 'old');",
    )
    .unwrap();
    assert!(sluice(&["capture", "enable", db.to_str().unwrap(), "t"])
        .status
        .success());
    let path = pipeline(dir.path(), &db, "  snapshot.mode: no_data\n");
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
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("create table t (id integer primary key, v text)")
        .unwrap();
    assert!(sluice(&["capture", "enable", db.to_str().unwrap(), "t"])
        .status
        .success());
    let path = pipeline(dir.path(), &db, "  purge.retention: 1h\n");
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

/// kill -9 at 20 random moments, half inside a snapshot (started afresh, no offsets) and half
/// in the stream, under a writer that inserts, updates and deletes: the state rebuilt from
/// everything written equals the table. (A cut-off snapshot used to restart its stream at the
/// new snapshot's sequence, so a row an earlier run emitted and that was deleted since stayed.)
#[test]
fn kill_9_at_random_moments_under_a_writer_rebuilds_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("create table t (id integer primary key, n int not null, s text); with recursive g(v) as (select 1 union all select v + 1 from g where v < 10000) insert into t select v, v, 'row ' || v from g;").unwrap();
    assert!(sluice(&["capture", "enable", db.to_str().unwrap(), "t"])
        .status
        .success());
    let path = pipeline(dir.path(), &db, "");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let conn = Connection::open(&db).unwrap();
            conn.busy_timeout(Duration::from_secs(10)).unwrap();
            let mut i: i64 = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                conn.execute_batch(&format!(
                    "begin; insert or replace into t values ({}, {i}, 'w{i}'); update t set n = n + 1 where id = {}; delete from t where id = {}; commit;",
                    1 + (i * 7919) % 12000,
                    1 + (i * 104_729) % 12000,
                    1 + (i * 1299) % 12000
                ))
                .unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let out = dir.path().join("out.jsonl");
    let size = || std::fs::metadata(&out).map_or(0, |m| m.len());
    let mut moments = Moments::from_clock();
    for round in 0..20 {
        if round % 2 == 0 {
            let _ = std::fs::remove_file(dir.path().join("data/offsets.json"));
        }
        let before = size();
        let mut child = start(&path, &[]);
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

use sluice_test_support::moments::Moments;

use sluice_test_support::procstat;

/// Lines of the output file, counted without parsing it.
fn line_count(dir: &Path) -> usize {
    std::fs::read(dir.join("out.jsonl"))
        .map(|b| b.iter().filter(|c| **c == b'\n').count())
        .unwrap_or(0)
}

/// 60 rows of 5 MB (300 MB): the snapshot, then an update of every row in one transaction
/// (changes of 10 MB, before and after), pass in batches cut by bytes: peak RSS stays under
/// 256 MiB with default limits (a dozen changes in flight). Before, one poll read every change
/// of the transaction into one batch.
#[test]
fn rows_larger_than_the_queue_pass_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "create table t (id integer primary key, v text not null); \
         with recursive g(i) as (select 1 union all select i + 1 from g where i < 60) \
         insert into t select i, hex(randomblob(2500000)) from g",
    )
    .unwrap();
    assert!(sluice(&["capture", "enable", db.to_str().unwrap(), "t"])
        .status
        .success());
    let path = pipeline(dir.path(), &db, "");
    let mut child = start(&path, &[]);
    let wait = |n: usize, child: &mut Child| {
        let t0 = Instant::now();
        while line_count(dir.path()) < n {
            assert!(child.try_wait().unwrap().is_none(), "sluice stopped");
            assert!(t0.elapsed() < Duration::from_secs(300), "timed out at {n}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait(60, &mut child);
    conn.execute_batch("update t set v = v || 'x'").unwrap();
    wait(120, &mut child);
    let peak = procstat::peak_rss_mib(child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    eprintln!("peak RSS {peak} MiB");
    assert!(
        peak < 256,
        "peak RSS {peak} MiB for 300 MB of rows and 600 MB of changes"
    );
}

/// `snapshot.mode` decided by the kit's snapshotter, across restarts of one pipeline:
/// `initial_only` does nothing once its snapshot completed; `configuration_based` follows its
/// flags; `recovery` is refused (no schema history here).
#[test]
fn snapshot_modes_follow_the_stored_offsets_and_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "create table t (id integer primary key, v text); insert into t values (1, 'a'), (2, 'b');",
    )
    .unwrap();
    assert!(sluice(&["capture", "enable", db.to_str().unwrap(), "t"])
        .status
        .success());
    let run = |extra: &str| {
        run_until_idle(&pipeline(dir.path(), &db, extra));
        ops(dir.path())
    };
    let only = "  snapshot.mode: initial_only\n";
    assert_eq!(run(only), ["r", "r"]);
    conn.execute_batch("insert into t values (3, 'c');")
        .unwrap();
    assert_eq!(
        run(only),
        ["r", "r"],
        "a completed initial_only snapshot: nothing to do"
    );
    let data_only = "  snapshot.mode: configuration_based\n  snapshot.mode.configuration.based.snapshot.data: true\n";
    assert_eq!(
        run(data_only),
        ["r", "r", "r", "r", "r"],
        "snapshots again, does not stream"
    );
    let stream_only = "  snapshot.mode: configuration_based\n  snapshot.mode.configuration.based.start.stream: true\n";
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
    let path = pipeline(dir.path(), &db, "  snapshot.mode: recovery\n");
    let o = sluice(&["validate", path.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("schema history") && err.contains("sqlite"),
        "{err}"
    );
}

#[test]
fn skipped_operations_are_left_out_and_the_position_moves_past_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "create table t (id integer primary key, v text); insert into t values (1, 'a');",
    )
    .unwrap();
    assert!(sluice(&["capture", "enable", db.to_str().unwrap(), "t"])
        .status
        .success());
    let skip_updates = "  skipped.operations: u\n  tombstones.on.delete: false\n";
    let path = pipeline(dir.path(), &db, skip_updates);
    run_until_idle(&path);
    assert_eq!(ops(dir.path()), ["r"]);
    // Only skipped changes: nothing is written, and the position still moves past them (the
    // change rows are purged, a restart does not read them again).
    conn.execute_batch("update t set v = 'b' where id = 1; update t set v = 'c' where id = 1;")
        .unwrap();
    run_until_idle(&path);
    assert_eq!(ops(dir.path()), ["r"]);
    let left: i64 = conn
        .query_row("select count(*) from _sluice_ct_t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left, 0, "skipped change rows are acknowledged and purged");
    conn.execute_batch(
        "insert into t values (2, 'x'); update t set v = 'y' where id = 2; delete from t where id = 1;",
    )
    .unwrap();
    run_until_idle(&path);
    assert_eq!(ops(dir.path()), ["r", "c", "d"]);
    let last = lines(dir.path()).pop().unwrap();
    assert_eq!(
        last["value"]["before"]["v"], "c",
        "the delete's before image is the last update's"
    );
}

#[test]
fn the_reader_thread_logs_inside_its_stage_span() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("create table t (id integer primary key); insert into t values (1);")
        .unwrap();
    assert!(sluice(&["capture", "enable", db.to_str().unwrap(), "t"])
        .status
        .success());
    let path = pipeline(dir.path(), &db, "");
    let o = sluice(&["run", "--stop-when-idle", "1s", path.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    // "Snapshot completed." comes from the reader thread the source stage spawns.
    let line = err
        .lines()
        .find(|l| l.contains("Snapshot completed."))
        .unwrap_or_default();
    assert!(
        line.contains("stage{pipeline=sqlite_test component=source generation=0}"),
        "{err}"
    );
}

#[test]
fn a_value_that_does_not_fit_its_column_fails_or_is_skipped_per_mode() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    // SQLite keeps 'abc' in an INTEGER column; as an int64 it has no representation.
    conn.execute_batch(
        "create table t (id integer primary key, n integer); insert into t values (1, 10), (2, 'abc'), (3, 30);",
    )
    .unwrap();
    assert!(sluice(&["capture", "enable", db.to_str().unwrap(), "t"])
        .status
        .success());
    let failing = pipeline(dir.path(), &db, "");
    let o = sluice(&["run", "--stop-when-idle", "1s", failing.to_str().unwrap()]);
    let e = error_line(&o);
    assert!(
        e.contains("table `t` column `n`")
            && e.contains("event.processing.failure.handling.mode: warn"),
        "{e}"
    );
    let warn = pipeline(
        dir.path(),
        &db,
        "  event.processing.failure.handling.mode: warn\n",
    );
    let o = sluice(&["run", "--stop-when-idle", "1s", warn.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("Skipped a change that cannot be represented") && err.contains("column=\"n\""),
        "{err}"
    );
    let ids = |dir: &Path| {
        lines(dir)
            .iter()
            .map(|l| l["value"]["after"]["id"].as_i64().unwrap_or(-1))
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(dir.path()), [1, 3], "the snapshot leaves row 2 out");
    // Streamed: the bad update is left out, the position moves past it, the next change comes.
    conn.execute_batch("update t set n = 'x' where id = 1; insert into t values (4, 40);")
        .unwrap();
    let o = sluice(&["run", "--stop-when-idle", "1s", warn.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(ids(dir.path()), [1, 3, 4]);
    let left: i64 = conn
        .query_row("select count(*) from _sluice_ct_t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left, 0, "the skipped change was acknowledged and purged");
}

/// Skipped changes that fill a read's row limit must not let the stream jump past the rows
/// after them: with batches of 2, two skipped updates of `a` come before an insert into `a` and
/// after them an insert into `b`.
#[test]
fn skipped_changes_filling_a_read_do_not_hide_the_changes_after_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "create table a (id integer primary key, v text); create table b (id integer primary key); insert into a values (1, 'x');",
    )
    .unwrap();
    assert!(
        sluice(&["capture", "enable", db.to_str().unwrap(), "a", "b"])
            .status
            .success()
    );
    let path = pipeline(dir.path(), &db, "  skipped.operations: u\n");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "name: sqlite_test\n",
        "name: sqlite_test\nmax_batch_size: 2\nmax_queue_size: 8\n",
    );
    std::fs::write(&path, text).unwrap();
    run_until_idle(&path);
    conn.execute_batch(
        "update a set v = 'y' where id = 1; update a set v = 'z' where id = 1; insert into a values (2, 'new'); insert into b values (7);",
    )
    .unwrap();
    run_until_idle(&path);
    let created: Vec<(String, i64)> = lines(dir.path())
        .iter()
        .filter(|l| l["value"]["op"] == "c")
        .map(|l| {
            (
                l["topic"].as_str().unwrap().to_owned(),
                l["value"]["after"]["id"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        created,
        [("app.main.a".to_owned(), 2), ("app.main.b".to_owned(), 7)],
        "no insert lost behind the skipped updates"
    );
}

/// The kit's `file` signal channel in the SQLite source: an `execute-snapshot` line starts an
/// incremental snapshot (no signaling table needed), a malformed line is refused, the file is
/// emptied once read.
#[test]
fn a_file_signal_snapshots_a_table_incrementally() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "create table t (id integer primary key, v text);
         with recursive g(v) as (select 1 union all select v + 1 from g where v < 120) insert into t select v, 'row ' || v from g;",
    )
    .unwrap();
    assert!(sluice(&["capture", "enable", db.to_str().unwrap(), "t"])
        .status
        .success());
    let signals = dir.path().join("signals.jsonl");
    std::fs::write(
        &signals,
        "not json\n{\"id\": \"f-1\", \"type\": \"execute-snapshot\", \"data\": {\"data-collections\": [\"main.t\"]}}\n",
    )
    .unwrap();
    let path = pipeline(
        dir.path(),
        &db,
        &format!(
            "  snapshot.mode: no_data\n  signal.enabled.channels: file\n  signal.file: {}\n  signal.poll.interval.ms: 50\n  incremental.snapshot.chunk.size: 50\n",
            signals.display()
        ),
    );
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
}

/// Heartbeats from the kit in the SQLite source: records on
/// `__debezium-heartbeat.<topic.prefix>` keyed by the server name, with
/// `heartbeat.action.query` run before each (its rows are captured like any other).
#[test]
fn heartbeats_are_sent_and_run_the_action_query() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("create table hb (id integer primary key autoincrement, at text);")
        .unwrap();
    assert!(sluice(&["capture", "enable", db.to_str().unwrap(), "hb"])
        .status
        .success());
    let path = pipeline(
        dir.path(),
        &db,
        "  heartbeat.interval.ms: 100\n  heartbeat.action.query: insert into hb (at) values (datetime('now'))\n",
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

/// The `http` signal channel in the SQLite source: `sluice signal` posts to the admin
/// endpoint, and the reader thread takes the signal between polls.
#[test]
fn an_http_signal_snapshots_a_table_incrementally() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "create table t (id integer primary key, v text);
         with recursive g(v) as (select 1 union all select v + 1 from g where v < 30) insert into t select v, 'row ' || v from g;",
    )
    .unwrap();
    assert!(sluice(&["capture", "enable", db.to_str().unwrap(), "t"])
        .status
        .success());
    let port = sluice_test_support::pg::free_port();
    let path = pipeline(
        dir.path(),
        &db,
        "  snapshot.mode: no_data\n  signal.enabled.channels: http\n  incremental.snapshot.chunk.size: 10\n",
    );
    let e = error_line(&sluice(&["run", path.to_str().unwrap()]));
    assert!(e.contains("needs the pipeline's admin endpoint"), "{e}");
    let text_of = std::fs::read_to_string(&path).unwrap().replace(
        "name: sqlite_test\n",
        &format!("name: sqlite_test\nadmin: {{ bind: \"127.0.0.1:{port}\" }}\n"),
    );
    std::fs::write(&path, text_of).unwrap();
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
