//! The snapshot's tables as the PostgreSQL source announces them: the status's estimated rows
//! (`pg_class.reltuples`) and table counts, and Debezium's `TotalTableCount` and
//! `RemainingTableCount`, through a running pipeline's admin endpoint.

use serde_json::Value as Json;

use super::common::*;

/// The value of the Prometheus sample whose line starts with `name{` and holds `label`.
fn sample(text: &str, name: &str, label: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn the_snapshot_says_its_tables_and_their_estimated_rows() {
    let db = fresh_db("snapshot_plan");
    psql(
        &db,
        "create table big (id int primary key); create table small (id int primary key)",
    );
    psql(
        &db,
        "insert into big select generate_series(1, 3000); insert into small values (1), (2)",
    );
    psql(&db, "analyze big");
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let path = base(dir.path(), &db, source(&db), false)
        .setting("admin", &[("bind", format!("127.0.0.1:{port}").into())])
        .write(dir.path());
    let mut child = start(&path, &[]);
    wait_lines(dir.path(), 3002, &mut child);
    // The status once the snapshot is done and counted (the counts are set twice a second).
    let t0 = std::time::Instant::now();
    let (status, metrics) = loop {
        let status: Json = admin_get(port, &format!("/pipelines/{db}"))
            .and_then(|(_, b)| serde_json::from_str(&b).ok())
            .unwrap_or_default();
        let metrics = admin_get(port, "/metrics")
            .map(|(_, b)| b)
            .unwrap_or_default();
        let remaining = sample(&metrics, "debezium_metrics_RemainingTableCount", "snapshot");
        if status["snapshot"]["remaining_tables"] == 0 && remaining == Some(0.0) {
            break (status, metrics);
        }
        assert!(t0.elapsed().as_secs() < 30, "{status}\n{metrics}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    stop(&child);
    finish(child);
    let snapshot = &status["snapshot"];
    assert_eq!(snapshot["total_tables"], 2, "{snapshot}");
    assert_eq!(snapshot["completed"], true, "{snapshot}");
    assert_eq!(
        snapshot["estimated_rows"]["public.big"], 3000,
        "analyzed: {snapshot}"
    );
    assert!(
        snapshot["estimated_rows"]["public.small"].is_null()
            || snapshot["estimated_rows"]["public.small"].is_u64(),
        "{snapshot}"
    );
    assert_eq!(
        snapshot["tables"][format!("{db}.public.big")],
        3000,
        "{snapshot}"
    );
    assert_eq!(
        sample(&metrics, "debezium_metrics_TotalTableCount", "snapshot"),
        Some(2.0),
        "{metrics}"
    );
    drop_db(&db);
}

/// A blocking snapshot asked for by a signal while streaming, on a terminal: a bar for its
/// table against the announced estimate while it is read, then the table's line.
#[test]
fn a_terminal_shows_a_blocking_snapshots_bar() {
    let db = fresh_db("blocking_bars");
    psql(&db, "create table items (id int primary key, v text)");
    psql(
        &db,
        "insert into items select g, 'x' from generate_series(1, 20000) g; analyze items",
    );
    let dir = tempfile::tempdir().unwrap();
    let signals = dir.path().join("signals.jsonl");
    let path = pipeline(
        dir.path(),
        &db,
        &[
            ("snapshot.mode", "no_data".into()),
            ("signal.enabled.channels", "file".into()),
            ("signal.file", (&signals).into()),
            ("signal.poll.interval.ms", "50".into()),
        ],
        false,
    );
    std::fs::write(
        &signals,
        "{\"id\": \"b-1\", \"type\": \"execute-snapshot\", \"data\": {\"data-collections\": [\"public.items\"], \"type\": \"blocking\"}}\n",
    )
    .unwrap();
    let command = format!(
        "{} run --stop-when-idle 5s {}",
        sluice().display(),
        path.display()
    );
    let o = std::process::Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .output()
        .expect("script (util-linux)");
    let shown = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{shown}");
    let bar = shown
        .split(['\r', '\n'])
        .find(|l| l.contains("dbserver1.public.items ") && l.contains("rows/s"));
    assert!(bar.is_some(), "no bar for the blocking snapshot: {shown}");
    assert!(
        shown.contains("dbserver1.public.items: 20000 rows read in"),
        "{shown}"
    );
    let reads = lines(dir.path())
        .iter()
        .filter(|l| l["value"]["op"] == "r")
        .count();
    assert_eq!(reads, 20_000);
    drop_db(&db);
}

/// A snapshot whose last table is empty (no row to mark `last`) is completed once the source
/// says so: Debezium's `SnapshotCompleted`, no table left, with no streamed change after it.
#[test]
fn a_snapshot_ending_with_an_empty_table_completes() {
    let db = fresh_db("empty_last");
    psql(
        &db,
        "create table a_rows (id int primary key); create table z_empty (id int primary key); insert into a_rows values (1), (2), (3)",
    );
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let path = base(dir.path(), &db, source(&db), false)
        .setting("admin", &[("bind", format!("127.0.0.1:{port}").into())])
        .write(dir.path());
    let mut child = start(&path, &[]);
    wait_lines(dir.path(), 3, &mut child);
    let t0 = std::time::Instant::now();
    let metrics = loop {
        let metrics = admin_get(port, "/metrics")
            .map(|(_, b)| b)
            .unwrap_or_default();
        if sample(&metrics, "debezium_metrics_SnapshotCompleted", "snapshot") == Some(1.0) {
            break metrics;
        }
        assert!(t0.elapsed().as_secs() < 20, "{metrics}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(
        sample(&metrics, "debezium_metrics_SnapshotRunning", "snapshot"),
        Some(0.0)
    );
    let status: Json = admin_get(port, &format!("/pipelines/{db}"))
        .and_then(|(_, b)| serde_json::from_str(&b).ok())
        .unwrap_or_default();
    assert_eq!(status["snapshot"]["completed"], true, "{status}");
    assert_eq!(lines(dir.path()).len(), 3, "no streamed change");
    stop(&child);
    finish(child);
    drop_db(&db);
}

/// A snapshot whose last batch ends with its notifications (to the sink), stderr a pipe: the
/// log says when it was read (the end is the batch's last snapshot row, not its last event;
/// missed, the progress would stay open and say "in progress" every 10 s while streaming).
#[test]
fn a_snapshot_ending_with_notifications_logs_its_end() {
    let db = fresh_db("read_notes");
    psql(
        &db,
        "create table items (id int primary key); insert into items select generate_series(1, 5)",
    );
    let dir = tempfile::tempdir().unwrap();
    let extra: &[(&str, Scalar)] = &[
        ("notification.enabled.channels", "sink".into()),
        ("notification.sink.topic.name", "dbz-notifications".into()),
    ];
    let path = pipeline(dir.path(), &db, extra, false);
    let mut child = start(&path, &[]);
    // Five rows, then the notifications (started, a table's scan started and done, completed).
    wait_lines(dir.path(), 8, &mut child);
    stop(&child);
    let log = finish(child);
    assert!(
        log.lines()
            .any(|l| l.contains("Snapshot read.") && l.contains("rows=")),
        "no end of the snapshot in the log:\n{log}"
    );
    drop_db(&db);
}
