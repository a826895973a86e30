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
use sluice_test_support::moments::Moments;
use sluice_test_support::pipeline::{Component, Pipeline, Scalar};
use sluice_test_support::procstat;

mod admin;
mod capture;
mod consistency;
mod data_dir;
mod options;
mod progress;
mod quickstart;
mod scenarios;
mod serve;
mod signals;
// A gate of the http sink holds the snapshot back.
#[cfg(feature = "http")]
mod snapshot_metrics;

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

/// The test source reading `db`: topics under `app`, polled every 20 ms.
fn source(db: &Path) -> Component {
    Component::new("sqlite")
        .set("database.path", db)
        .set("topic.prefix", "app")
        .set("poll.interval.ms", 20u32)
}

/// The test pipeline of `source` under `dir`: offsets flushed every 50 ms, no restarts, a file
/// sink (`out.jsonl`, without schemas).
fn base(dir: &Path, source: Component) -> Pipeline {
    Pipeline::new("sqlite_test", dir.join("data"))
        .setting("offsets", &[("flush_interval", "50ms".into())])
        .setting("restart", &[("max_retries", 0u32.into())])
        .source(source)
        .sink(file_sink(dir, false))
}

/// The test pipeline's file sink (`out.jsonl`), with or without schemas.
fn file_sink(dir: &Path, schemas: bool) -> Component {
    sluice_test_support::pipeline::file_sink(dir.join("out.jsonl"), schemas)
}

/// The test pipeline of `db` with its source's `keys`, its events written with their schemas.
fn pipeline_with_schemas(dir: &Path, db: &Path, keys: &[(&str, Scalar)]) -> PathBuf {
    base(dir, source(db).set_all(keys))
        .without_sinks()
        .sink(file_sink(dir, true))
        .write(dir)
}

/// The test pipeline of `db`, its source's `keys` set, written in `dir`.
fn pipeline(dir: &Path, db: &Path, keys: &[(&str, Scalar)]) -> PathBuf {
    base(dir, source(db).set_all(keys)).write(dir)
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

/// Lines of the output file, counted without parsing it.
fn line_count(dir: &Path) -> usize {
    std::fs::read(dir.join("out.jsonl"))
        .map(|b| b.iter().filter(|c| **c == b'\n').count())
        .unwrap_or(0)
}

/// A writer thread that runs `transaction(i)` for i = 1, 2, ... every `pause` until `stop`;
/// it returns the count it ran.
fn writer(
    db: &Path,
    stop: &Arc<AtomicBool>,
    pause: Duration,
    transaction: impl Fn(i64) -> String + Send + 'static,
) -> std::thread::JoinHandle<i64> {
    let (db, stop) = (db.to_owned(), stop.clone());
    std::thread::spawn(move || {
        let conn = Connection::open(&db).unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        let mut i: i64 = 0;
        while !stop.load(Ordering::Relaxed) {
            i += 1;
            conn.execute_batch(&transaction(i)).unwrap();
            std::thread::sleep(pause);
        }
        i
    })
}

/// `app.db` in `dir`, made by `sql`, with `tables` put into capture mode.
fn captured(dir: &Path, sql: &str, tables: &[&str]) -> (PathBuf, Connection) {
    let db = dir.join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(sql).unwrap();
    let path = db.to_str().unwrap().to_owned();
    let mut args = vec!["capture", "enable", path.as_str()];
    args.extend(tables);
    assert!(sluice(&args).status.success());
    (db, conn)
}
