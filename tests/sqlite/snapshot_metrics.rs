//! The metrics while a snapshot is read, held mid-way by a sink that does not answer yet
//! (backpressure stops the source): Debezium's snapshot gauges, Sluice's queues against their
//! limits, the commit lag growing; the pipeline stopped mid-snapshot (an aborted snapshot);
//! then the sink answers and the snapshot, read again, completes. A snapshot slowed by its sink
//! logs its progress every 10 s on a pipe, also while it holds the snapshot back entirely.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::admin::sample;
use super::serve::{serve, terminate, wait_state};
use super::*;
use sluice_test_support::pg::admin_call;

/// An HTTP receiver that holds every request until it is opened, then answers `200`.
struct Gate {
    port: u16,
    open: Arc<AtomicBool>,
}

impl Gate {
    fn start() -> Gate {
        Self::answering(false, Duration::ZERO)
    }

    /// A receiver open or not, answering each request after `delay`.
    fn answering(open: bool, delay: Duration) -> Gate {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicBool::new(open));
        let shared = open.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let open = shared.clone();
                std::thread::spawn(move || answer(stream, &open, delay));
            }
        });
        Gate { port, open }
    }

    /// An `http` sink sending to it.
    fn sink(&self) -> Component {
        let url = format!("http://127.0.0.1:{}/hook", self.port);
        Component::new("http").set("url", url)
    }
}

/// Answers the requests of one connection, each once the gate is open (and `delay` after).
fn answer(stream: TcpStream, open: &AtomicBool, delay: Duration) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end().to_ascii_lowercase();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        while !open.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(delay);
        if writer
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .is_err()
        {
            return;
        }
    }
}

/// `GET /metrics` until `check` holds of it (30 s at most).
fn metrics_until(port: u16, what: &str, check: impl Fn(&str) -> bool) -> String {
    let t0 = Instant::now();
    loop {
        let text = admin_call(port, "GET", "/metrics", None).map_or(String::new(), |(_, b)| b);
        if check(&text) {
            return text;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{what}:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The first sample of `name` whose labels contain `label`, if any.
fn value(text: &str, name: &str, label: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn status(port: u16) -> Json {
    let (s, body) = admin_call(port, "GET", "/pipelines/slow", None).unwrap();
    assert_eq!(s, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn a_snapshot_held_by_its_sink_shows_in_the_metrics_while_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (db, _conn) = captured(
        root,
        "create table t (id integer primary key, v text);
         with recursive g(v) as (select 1 union all select v + 1 from g where v < 200) insert into t select v, 'row' from g;",
        &["t"],
    );
    let gate = Gate::start();
    let watched = root.join("pipelines");
    std::fs::create_dir(&watched).unwrap();
    Pipeline::new("slow", root.join("data-slow"))
        .top("shutdown_timeout", "1s")
        .top("max_batch_size", 4u32)
        .top("max_queue_size", 8u32)
        .setting("offsets", &[("flush_interval", "50ms".into())])
        .source(source(&db))
        .sink(gate.sink())
        .write_as(&watched.join("slow.yaml"));
    let port = sluice_test_support::pg::free_port();
    let child = serve(port, &watched, &root.join("serve"));
    wait_state(port, "slow", "RUNNING");

    // Held mid-way: running, some rows read, the table still to finish.
    let snapshot = "context=\"snapshot\"";
    let m = metrics_until(port, "the snapshot running, held", |m| {
        value(m, "debezium_metrics_SnapshotRunning", snapshot) == Some(1.0)
            && m.contains("debezium_metrics_RemainingTableCount{")
            && value(m, "sluice_queue_events", "queue=\"sink:http\"").is_some_and(|n| n > 0.0)
    });
    let rows = sample(&m, "debezium_metrics_RowsScanned", "table=");
    assert!(rows > 0.0 && rows < 200.0, "rows read so far: {rows}\n{m}");
    assert_eq!(
        sample(&m, "debezium_metrics_TotalTableCount", snapshot),
        1.0
    );
    assert_eq!(
        sample(&m, "debezium_metrics_RemainingTableCount", snapshot),
        1.0
    );
    assert_eq!(
        sample(&m, "debezium_metrics_SnapshotCompleted", snapshot),
        0.0
    );
    assert_eq!(
        sample(&m, "debezium_metrics_SnapshotAborted", snapshot),
        0.0
    );
    let source_queue = "pipeline=\"slow\",queue=\"source\"";
    assert_eq!(
        sample(&m, "sluice_queue_max_events", source_queue),
        8.0,
        "{m}"
    );
    assert!(sample(&m, "sluice_queue_max_bytes", source_queue) > 0.0);
    assert!(
        sample(&m, "sluice_queue_events", "queue=\"sink:http\"") > 0.0,
        "{m}"
    );
    // Nothing is durable in the sink: the commit lag grows, and the status says so.
    std::thread::sleep(Duration::from_millis(800));
    let m = metrics_until(port, "the commit lag", |m| {
        m.contains("sluice_commit_lag_seconds{pipeline=\"slow\"}")
    });
    let lag = sample(&m, "sluice_commit_lag_seconds", "pipeline=\"slow\"");
    assert!(lag >= 0.5, "commit lag {lag}\n{m}");
    let s = status(port);
    assert_eq!(s["snapshot"]["running"], true, "{s}");
    assert!(s["commit_lag_ms"].as_u64().unwrap() >= 500, "{s}");
    let rows_now = sample(&m, "debezium_metrics_RowsScanned", "table=");
    assert!(rows_now < 200.0, "still held: {rows_now}");
    // Its duration grows while it runs.
    metrics_until(port, "a second of snapshot", |m| {
        value(m, "debezium_metrics_SnapshotDurationInSeconds", snapshot).is_some_and(|s| s >= 1.0)
    });

    // Stopped mid-snapshot: aborted, no longer running, not connected.
    let (code, body) = admin_call(port, "PUT", "/connectors/slow/stop", None).unwrap();
    assert_eq!(code, 204, "{body}");
    let m = metrics_until(port, "the snapshot aborted", |m| {
        value(m, "debezium_metrics_SnapshotAborted", snapshot) == Some(1.0)
    });
    assert_eq!(
        sample(&m, "debezium_metrics_SnapshotRunning", snapshot),
        0.0
    );
    assert_eq!(
        sample(&m, "debezium_metrics_SnapshotCompleted", snapshot),
        0.0
    );
    assert_eq!(
        sample(&m, "debezium_metrics_Connected", "context=\"streaming\""),
        0.0
    );
    let took = sample(&m, "debezium_metrics_SnapshotDurationInSeconds", snapshot);
    assert!(took >= 1.0, "the aborted snapshot's duration: {took}");
    let s = status(port);
    assert_eq!(
        (&s["snapshot"]["aborted"], &s["snapshot"]["completed"]),
        (&Json::Bool(true), &Json::Bool(false)),
        "{s}"
    );

    // The sink answers; resumed, the snapshot is read again whole and completes.
    gate.open.store(true, Ordering::Relaxed);
    let (code, _) = admin_call(port, "PUT", "/connectors/slow/resume", None).unwrap();
    assert_eq!(code, 202);
    let m = metrics_until(port, "the snapshot completed", |m| {
        value(m, "debezium_metrics_SnapshotCompleted", snapshot) == Some(1.0)
    });
    assert_eq!(
        sample(&m, "debezium_metrics_SnapshotAborted", snapshot),
        0.0
    );
    // The table counts follow within half a second.
    let m = metrics_until(port, "no table left", |m| {
        value(m, "debezium_metrics_RemainingTableCount", snapshot) == Some(0.0)
    });
    // Read again whole: its rows counted afresh, not added to the aborted read's.
    assert_eq!(sample(&m, "debezium_metrics_RowsScanned", "table="), 200.0);
    let sink = "component=\"sink:http\"";
    let m = metrics_until(port, "the sink's batches", |m| {
        value(m, "sluice_events_sent_total", sink).is_some_and(|n| n >= 200.0)
    });
    assert!(sample(&m, "sluice_bytes_sent_total", sink) > 200.0, "{m}");
    assert!(sample(&m, "sluice_bytes_received_total", "component=\"source\"") > 200.0);
    assert!(
        sample(&m, "sluice_batch_duration_seconds_count", sink) >= 50.0,
        "{m}"
    );
    assert!(
        m.contains("sluice_batch_duration_seconds_bucket{") && m.contains("le=\"0.001\""),
        "a histogram with buckets: {m}"
    );
    let lag = metrics_until(port, "no commit lag", |m| {
        m.lines().any(|l| {
            l.starts_with("sluice_commit_lag_seconds{pipeline=\"slow\"}") && l.ends_with(" 0")
        })
    });
    assert!(!lag.is_empty());
    terminate(child);
}

/// A snapshot that takes a while (a sink answering each event after 40 ms), its stderr a pipe:
/// a progress line every 10 s with the rows so far and the table being read, then its end.
#[test]
fn a_long_snapshot_on_a_pipe_logs_its_progress() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::answering(true, Duration::from_millis(40));
    let path = slow_table_pipeline(dir.path(), "slow", &gate);
    let o = sluice(&["run", "--stop-when-idle", "2s", path.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let progress = err
        .lines()
        .find(|l| l.contains("Snapshot in progress."))
        .unwrap_or_else(|| panic!("no progress line:\n{err}"));
    assert!(
        progress.contains("reading=app.main.t") && progress.contains("rows="),
        "{progress}"
    );
    assert!(
        err.contains("Snapshot read.") && err.contains("rows=300"),
        "{err}"
    );
}

/// A snapshot its sink holds back entirely (no row passes for over 10 s), its stderr a pipe:
/// the progress line still comes, with the rows read so far; the sink answers, the end comes.
#[test]
fn a_snapshot_held_by_its_sink_still_logs_its_progress() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::start();
    let path = slow_table_pipeline(dir.path(), "held", &gate);
    let child = sluice_test_support::pg::spawn_logged(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("run")
            .arg(&path),
    );
    let t0 = Instant::now();
    let line = loop {
        let log = sluice_test_support::pg::log_so_far(&child);
        if let Some(line) = log.lines().find(|l| l.contains("Snapshot in progress.")) {
            break line.to_owned();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no progress line:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(!gate.open.load(Ordering::Relaxed));
    let rows: u64 = (line.split("rows=").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(rows > 0 && rows < 300, "{line}");
    assert!(line.contains("reading=app.main.t"), "{line}");
    gate.open.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    while !sluice_test_support::pg::log_so_far(&child).contains("Snapshot read.") {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the snapshot did not end"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    terminate(child);
}

/// A table of 300 rows in `root` and pipeline `name` reading it into `gate`, in batches of 4
/// through queues of 8 (so the sink sets the snapshot's pace); the pipeline file.
fn slow_table_pipeline(root: &Path, name: &str, gate: &Gate) -> PathBuf {
    let (db, _conn) = captured(
        root,
        "create table t (id integer primary key, v text);
         with recursive g(v) as (select 1 union all select v + 1 from g where v < 300) insert into t select v, 'row' from g;",
        &["t"],
    );
    Pipeline::new(name, root.join("data"))
        .top("max_batch_size", 4u32)
        .top("max_queue_size", 8u32)
        .source(source(&db))
        .sink(gate.sink())
        .write_as(&root.join(format!("{name}.yaml")))
}
