//! Helpers: psql, fresh databases, pipelines, running `sluice`, reading its output.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

pub use crate::pipeline::{Component, Pipeline, Scalar};

/// The `sluice` binary of this build: next to the test or benchmark executable's `deps/`
/// folder (Cargo builds the binary for integration tests and benchmarks).
pub fn sluice() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().unwrap_or(Path::new("."));
    let dir = if dir.ends_with("deps") {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    dir.join(format!("sluice{}", std::env::consts::EXE_SUFFIX))
}

pub fn host() -> String {
    std::env::var("SLUICE_TEST_PG_HOST").unwrap_or_else(|_| "127.0.0.1".into())
}
pub fn port() -> String {
    std::env::var("SLUICE_TEST_PG_PORT").unwrap_or_else(|_| "5432".into())
}

/// Debezium's signaling table.
pub const SIGNAL_TABLE: &str =
    "create table debezium_signal (id varchar(64) primary key, type varchar(32) not null, data text)";

/// A local port nothing listens on right now (for an admin endpoint).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

pub fn psql(db: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-U",
            "postgres",
            "-h",
            &host(),
            "-p",
            &port(),
            "-d",
            db,
            "-c",
            sql,
        ])
        .output()
        .expect("psql");
    assert!(
        out.status.success(),
        "psql failed on {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh database named after the test (slots of an earlier run dropped first).
pub fn fresh_db(name: &str) -> String {
    let db = format!("sluice_{name}");
    psql("postgres", &format!("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '{db}' AND NOT active"));
    psql(
        "postgres",
        &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
    );
    psql("postgres", &format!("CREATE DATABASE {db}"));
    db
}

pub fn drop_db(db: &str) {
    let _ = Command::new("psql")
        .args(["-X", "-q", "-U", "postgres", "-h", &host(), "-p", &port(), "-d", "postgres", "-c",
            &format!("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '{db}' AND NOT active")])
        .output();
    let _ = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-U",
            "postgres",
            "-h",
            &host(),
            "-p",
            &port(),
            "-d",
            "postgres",
            "-c",
            &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
        ])
        .output();
}

/// The PostgreSQL source of database `db` on the test server: its slot and publication named
/// after it, topics under `dbserver1`.
pub fn source(db: &str) -> Component {
    Component::new("postgres")
        .set("database.hostname", host())
        .set(
            "database.port",
            port().parse::<u16>().expect("SLUICE_TEST_PG_PORT: a port"),
        )
        .set("database.user", "postgres")
        .set("database.dbname", db)
        .set("topic.prefix", "dbserver1")
        .set("slot.name", db)
        .set("publication.name", db)
        .set("publication.autocreate.mode", "filtered")
        .set("status.update.interval.ms", 200u32)
}

/// The test pipeline's file sink `out` (`dir/out.jsonl`), with or without schemas.
pub fn file_sink(dir: &Path, schemas: bool) -> Component {
    crate::pipeline::file_sink(dir.join("out.jsonl"), schemas).named("out")
}

/// The test pipeline of `source` under `dir`, named after `db`: offsets flushed every 50 ms,
/// no restarts, the file sink `out` ([`file_sink`]).
pub fn base(dir: &Path, db: &str, source: Component, schemas: bool) -> Pipeline {
    Pipeline::new(db, dir.join("data"))
        .setting("offsets", &[("flush_interval", "50ms".into())])
        .setting("restart", &[("max_retries", 0u32.into())])
        .source(source)
        .sink(file_sink(dir, schemas))
}

/// The test pipeline of `db` ([`base`]) with its source's `keys`, written as
/// `dir/pipeline.yaml`.
pub fn pipeline(dir: &Path, db: &str, keys: &[(&str, Scalar)], schemas: bool) -> PathBuf {
    base(dir, db, source(db).set_all(keys), schemas).write(dir)
}

/// What each started process wrote to stderr, by pid: read as it comes, so that a chatty
/// pipeline never blocks on a full pipe while the test waits for its output.
type Log = (
    std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    std::thread::JoinHandle<()>,
);
static LOGS: std::sync::Mutex<Option<std::collections::HashMap<u32, Log>>> =
    std::sync::Mutex::new(None);

pub fn start(pipeline: &Path, args: &[&str]) -> Child {
    spawn_logged(Command::new(sluice()).arg("run").arg(pipeline).args(args))
}

/// Starts `command` with its stderr kept for [`log_so_far`] and [`log_of`].
pub fn spawn_logged(command: &mut Command) -> Child {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sluice");
    let mut pipe = child.stderr.take().expect("stderr");
    let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = buffer.clone();
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut chunk = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    LOGS.lock()
        .unwrap()
        .get_or_insert_with(Default::default)
        .insert(child.id(), (buffer, reader));
    child
}

/// What `child` (started by `start`) has written to stderr so far.
pub fn log_so_far(child: &Child) -> String {
    let logs = LOGS.lock().unwrap();
    match logs.as_ref().and_then(|l| l.get(&child.id())) {
        Some((buffer, _)) => String::from_utf8_lossy(&buffer.lock().unwrap()).into_owned(),
        None => String::new(),
    }
}

/// All that `child` (started by `start`, exited) wrote to stderr.
pub fn log_of(child: &Child) -> String {
    let entry = LOGS
        .lock()
        .unwrap()
        .get_or_insert_with(Default::default)
        .remove(&child.id());
    let Some((buffer, reader)) = entry else {
        return String::new();
    };
    let _ = reader.join();
    let text = String::from_utf8_lossy(&buffer.lock().unwrap()).into_owned();
    text
}

pub fn lines(dir: &Path) -> Vec<Json> {
    let text = std::fs::read_to_string(dir.join("out.jsonl")).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
    complete
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

pub fn wait_lines(dir: &Path, n: usize, child: &mut Child) {
    wait_for(dir, &format!("{n} lines"), child, |l| l.len() >= n);
}

/// The payloads of the events written so far in `dir/out.jsonl` (tombstones as `null`).
pub fn payloads(dir: &Path) -> Vec<Json> {
    lines(dir)
        .into_iter()
        .map(|l| l["value"]["payload"].clone())
        .collect()
}

/// Waits until `n` events (tombstones included) are written in `dir/out.jsonl`.
pub fn wait_events(dir: &Path, n: usize, child: &mut Child) {
    wait_for(dir, &format!("{n} events"), child, |l| l.len() >= n);
}

/// Waits until the lines written so far satisfy `done` (what it waits for is `what`, for the
/// timeout's message).
pub fn wait_for(dir: &Path, what: &str, child: &mut Child, done: impl Fn(&[Json]) -> bool) {
    let start = Instant::now();
    while !done(&lines(dir)) {
        if child.try_wait().expect("poll").is_some() {
            let err = log_of(child);
            panic!("sluice exited early:\n{err}");
        }
        if start.elapsed() > Duration::from_secs(120) {
            // Stop it so that it does not hold the test's slot, and show what it said.
            let _ = child.kill();
            let _ = child.wait();
            let err = log_of(child);
            panic!(
                "timed out waiting for {what} (have {} lines); sluice said:\n{err}",
                lines(dir).len()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` (started by `start`) to exit: its status and all it wrote to stderr.
#[allow(dead_code)] // used by the Kafka tests
pub fn wait_output(mut child: Child) -> (std::process::ExitStatus, String) {
    let status = child.wait().expect("wait");
    let stderr = log_of(&child);
    (status, stderr)
}

pub fn finish(mut child: Child) -> String {
    let status = child.wait().expect("wait");
    let stderr = log_of(&child);
    assert!(status.success(), "sluice failed: {stderr}");
    stderr
}

pub fn stop(child: &Child) {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
}

pub fn normalize(text: &str) -> String {
    let numbers = regex::Regex::new(r#""(ts_ms|ts_us|ts_ns|txId|lsn)":(-?\d+|null)"#).unwrap();
    let strings = regex::Regex::new(r#""(sequence|version|db)":"(?:[^"\\]|\\.)*""#).unwrap();
    let text = numbers.replace_all(text, "\"$1\":0");
    strings.replace_all(&text, "\"$1\":\"\"").into_owned()
}

pub fn run_expecting_failure(file: &Path) -> String {
    let out = Command::new(sluice())
        .arg("run")
        .arg(file)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "expected a failure:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
        .lines()
        .rfind(|l| l.starts_with("error:"))
        .unwrap_or_default()
        .to_owned()
}

/// Waits until the test's slot is held by a walsender, and returns its pid.
pub fn active_slot_pid(db: &str, child: &mut Child) -> i32 {
    let t0 = Instant::now();
    loop {
        // Active is not enough: a slot is active while it is being created, and creation waits
        // for every transaction running on the server to end; a change committed before its
        // consistent point is not streamed. Streaming (START_REPLICATION) comes after that.
        let pid = psql(db, &format!("select coalesce(max(s.active_pid), 0) from pg_replication_slots s join pg_stat_replication r on r.pid = s.active_pid where s.slot_name = '{db}' and r.state = 'streaming'"));
        let pid: i32 = pid.trim().parse().unwrap_or(0);
        if pid != 0 {
            return pid;
        }
        assert!(child.try_wait().unwrap().is_none(), "sluice stopped");
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "slot never became active"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn lsn_of(text: &str) -> u64 {
    let (hi, lo) = text.trim().split_once('/').expect("an LSN");
    (u64::from_str_radix(hi, 16).unwrap() << 32) | u64::from_str_radix(lo, 16).unwrap()
}

/// Every event of `ours` equals Debezium's in `theirs`, byte for byte once run-dependent
/// fields are blanked; a difference is reported by its JSON path.
pub fn assert_same_events(ours: &str, theirs: &str, what: &str) {
    fn differences(a: &Json, b: &Json, path: String, out: &mut Vec<String>) {
        match (a, b) {
            (Json::Object(x), Json::Object(y)) => {
                for (k, v) in x {
                    match y.get(k) {
                        Some(w) => differences(v, w, format!("{path}.{k}"), out),
                        None => out.push(format!("{path}.{k}: only ours ({v})")),
                    }
                }
                for k in y.keys().filter(|k| !x.contains_key(*k)) {
                    out.push(format!("{path}.{k}: only Debezium's ({})", y[k]));
                }
            }
            (Json::Array(x), Json::Array(y)) if x.len() == y.len() => {
                for (i, (v, w)) in x.iter().zip(y).enumerate() {
                    differences(v, w, format!("{path}[{i}]"), out);
                }
            }
            _ if a != b => out.push(format!("{path}: ours {a}, Debezium's {b}")),
            _ => {}
        }
    }
    for (i, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        let (a, b) = (normalize(a), normalize(b));
        if a != b {
            let mut found = Vec::new();
            let parse = |t: &str| serde_json::from_str::<Json>(t).unwrap();
            differences(&parse(&a), &parse(&b), String::new(), &mut found);
            panic!(
                "{what}: event {i} differs from Debezium's:\n{}",
                found.join("\n")
            );
        }
    }
    assert_eq!(ours.lines().count(), theirs.lines().count(), "{what}");
}

/// A FIFO `dir/fifo`, made now.
pub fn make_fifo(dir: &Path) -> PathBuf {
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    fifo
}

/// A variant of the test pipeline `pipeline` ([`base`], in `dir`) whose sink `out` writes into
/// a FIFO that the test reads at its own pace (no fsync), with small queues: backpressure then
/// holds the pipeline where the test stops reading, whatever the machine's speed. Writes the
/// variant as `dir/first.yaml`; returns it and the FIFO.
pub fn fifo_variant(dir: &Path, pipeline: Pipeline, schemas: bool) -> (PathBuf, PathBuf) {
    let fifo = make_fifo(dir);
    let sink = file_sink(dir, schemas)
        .set("path", &fifo)
        .set("fsync", false);
    let first_file = pipeline
        .top("max_queue_size", 1000u32)
        .top("max_batch_size", 100u32)
        .without_sinks()
        .sink(sink)
        .write_as(&dir.join("first.yaml"));
    (first_file, fifo)
}

/// `GET target` on a running pipeline's admin endpoint at 127.0.0.1:`port`: the status code
/// and the body (`None` when it does not answer).
pub fn admin_get(port: u16, target: &str) -> Option<(u16, String)> {
    admin_call(port, "GET", target, None)
}

/// `method target` on an admin endpoint at 127.0.0.1:`port`, as curl sends it (a JSON body
/// when given, none otherwise): the status code and the body (`None`: no answer). The read
/// waits up to 60 s (a Kafka Connect call may wait for a pipeline to stop).
pub fn admin_call(
    port: u16,
    method: &str,
    target: &str,
    body: Option<&str>,
) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let head = format!("{method} {target} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\naccept: */*\r\nconnection: close\r\n");
    let request = match body {
        Some(body) => format!(
            "{head}content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ),
        None => format!("{head}\r\n"),
    };
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, response.split_once("\r\n\r\n")?.1.to_owned()))
}

/// Waits (30 s at most) until pipeline `name`'s status at 127.0.0.1:`port` says its snapshot
/// has no table left to read; returns the status's `snapshot`.
pub fn snapshot_done(port: u16, name: &str) -> Json {
    let t0 = std::time::Instant::now();
    loop {
        let status: Json = admin_get(port, &format!("/pipelines/{name}"))
            .and_then(|(_, b)| serde_json::from_str(&b).ok())
            .unwrap_or_default();
        if status["snapshot"]["remaining_tables"] == 0 {
            return status["snapshot"].clone();
        }
        assert!(t0.elapsed().as_secs() < 30, "{status}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
