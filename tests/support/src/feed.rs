//! A small SQLite source feeding a sink under test through the `sluice` binary: a database
//! with `t(id, v)` in capture mode, and a pipeline from it to a file sink (`out.jsonl`, for
//! comparison) beside the sinks under test. Shared by the sink suites (`tests/messages/`,
//! `tests/end_to_end/http.rs`, ...).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::pg::{log_of, sluice};
use crate::pipeline::{Component, Pipeline};

/// A database with `t(id, v)` in capture mode holding rows `1..=n`.
pub fn database(dir: &Path, n: i64) -> (PathBuf, Connection) {
    let db = dir.join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("create table t (id integer primary key, v text)")
        .unwrap();
    insert(&conn, 1..=n);
    let o = Command::new(sluice())
        .args(["capture", "enable", db.to_str().unwrap(), "t"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (db, conn)
}

/// Rows `ids` (`v` is `v<id>`), in one transaction.
pub fn insert(conn: &Connection, ids: std::ops::RangeInclusive<i64>) {
    conn.execute_batch("begin").unwrap();
    for id in ids {
        conn.execute(
            "insert into t values (?1, ?2)",
            rusqlite::params![id, format!("v{id}")],
        )
        .unwrap();
    }
    conn.execute_batch("commit").unwrap();
}

/// The test pipeline of the database `db` under `dir`: offsets flushed every 50 ms, no
/// restarts, the source (topics start with `prefix`, polled every 20 ms) and the file sink
/// `file` (`out.jsonl`, for comparison).
pub fn base(dir: &Path, db: &Path, prefix: &str) -> Pipeline {
    let source = Component::new("sqlite")
        .set("database.path", db)
        .set("topic.prefix", prefix)
        .set("poll.interval.ms", 20u32);
    Pipeline::new("sink_test", dir.join("data"))
        .setting("offsets", &[("flush_interval", "50ms".into())])
        .setting("restart", &[("max_retries", 0u32.into())])
        .source(source)
        .sink(
            Component::new("file")
                .named("file")
                .set("path", dir.join("out.jsonl")),
        )
}

/// A pipeline from the database to the file sink (`out.jsonl`) and `sinks` ([`base`]),
/// written as `dir/pipeline.yaml`; topics start with `prefix`.
pub fn pipeline(
    dir: &Path,
    db: &Path,
    prefix: &str,
    sinks: impl IntoIterator<Item = Component>,
) -> PathBuf {
    (sinks.into_iter())
        .fold(base(dir, db, prefix), Pipeline::sink)
        .write(dir)
}

/// Runs the pipeline until it has been idle for 2 s.
pub fn run_until_idle(path: &Path) -> Output {
    Command::new(sluice())
        .args(["run", "--stop-when-idle", "2s"])
        .arg(path)
        .output()
        .unwrap()
}

/// Its stderr, after checking it succeeded.
pub fn ok(o: &Output) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    stderr
}

/// The last `error:` line of a run that failed.
pub fn error_line(o: &Output) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
        .lines()
        .rfind(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line: {stderr}"))
        .to_owned()
}

/// Waits until `done` holds, failing when the pipeline `child` (started by
/// [`crate::pg::start`]) exits first or two minutes pass.
pub fn wait_until(
    what: &str,
    child: &mut std::process::Child,
    done: impl Fn(&std::process::Child) -> bool,
) {
    let t0 = Instant::now();
    while !done(child) {
        if child.try_wait().unwrap().is_some() {
            panic!("sluice exited early:\n{}", log_of(child));
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("timed out waiting for {what}:\n{}", log_of(child));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ids in first-seen order where each is above the last: at-least-once delivery in order
/// (a block sent again repeats ids) reduced to what a consumer that drops repeats keeps.
pub fn in_order(ids: impl IntoIterator<Item = i64>) -> Vec<i64> {
    let mut seen: Vec<i64> = Vec::new();
    for id in ids {
        if seen.last().is_none_or(|&last| id > last) {
            seen.push(id);
        }
    }
    seen
}

/// Runs the example `pipelines/<name>.yaml` as shipped, in `dir`, on a quickstart database made
/// there (`sluice quickstart --seconds 1`), with `env` (the service's address) set, until it has
/// been idle for 2 s.
pub fn run_example(dir: &Path, name: &str, env: &[(&str, &str)]) -> Output {
    let qs = dir.join("qs");
    let o = Command::new(sluice())
        .args(["quickstart", "--seconds", "1", "--dir"])
        .arg(&qs)
        .current_dir(dir)
        .output()
        .unwrap();
    ok(&o);
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../pipelines")
        .join(format!("{name}.yaml"));
    Command::new(sluice())
        .args(["run", "--stop-when-idle", "2s"])
        .arg(example)
        .env("SLUICE_QUICKSTART_DIR", &qs)
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Keeps a service away for 30 s while `rows` are written, checking that the pipeline `child`
/// waits (it does not exit) with flat memory (its queues are bounded: the source stops
/// reading); `away` stops the service, `back` starts it again.
pub fn outage(
    child: &mut std::process::Child,
    away: impl FnOnce(),
    write: impl FnOnce(),
    back: impl FnOnce(),
) {
    away();
    write();
    std::thread::sleep(Duration::from_secs(10));
    let early = crate::procstat::rss_kib(child.id());
    std::thread::sleep(Duration::from_secs(20));
    let late = crate::procstat::rss_kib(child.id());
    assert!(
        child.try_wait().unwrap().is_none(),
        "the pipeline stopped while the service was away:\n{}",
        crate::pg::log_so_far(child)
    );
    assert!(
        late <= early + 16 * 1024,
        "memory grew from {early} KiB to {late} KiB while the service was away"
    );
    back();
}

/// The ids of the `after` images of JSON values (with or without schemas), in order; values that
/// are not change events (tombstone bodies, heartbeats) are left out.
pub fn after_ids<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<i64> {
    values
        .into_iter()
        .filter_map(|text| {
            let value: serde_json::Value = serde_json::from_str(text).ok()?;
            let envelope = value.get("payload").unwrap_or(&value);
            envelope["after"]["id"].as_i64()
        })
        .collect()
}
