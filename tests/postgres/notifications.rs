//! Notifications to the sink channel, compared with Debezium 3.6.3's records for the same
//! incremental snapshot (`tests/fixtures/debezium/notifications.{properties,jsonl}`).

use serde_json::Value as Json;

use super::common::*;

/// The five-row table the notification fixtures were made from.
fn items(db: &str) {
    psql(db, "create table items (id int primary key, n int)");
    psql(
        db,
        "insert into items select g, g from generate_series(1, 5) g",
    );
}

#[test]
fn incremental_snapshot_notifications_match_debezium() {
    let db = fresh_db("notify");
    psql(&db, SIGNAL_TABLE);
    items(&db);
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        &[
            ("table.include.list", "public.items".into()),
            ("snapshot.mode", "no_data".into()),
            ("signal.data.collection", "public.debezium_signal".into()),
            ("incremental.snapshot.chunk.size", "3".into()),
            ("notification.enabled.channels", "sink,log".into()),
            ("notification.sink.topic.name", "dbz-notifications".into()),
        ],
        true,
    );
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    psql(
        &db,
        "insert into debezium_signal values ('ad-hoc-1', 'execute-snapshot', '{\"data-collections\": [\"public.items\"], \"type\": \"incremental\"}')",
    );
    // 6 notifications (SKIPPED at start) and 5 rows.
    wait_lines(dir.path(), 11, &mut child);
    stop(&child);
    finish(child);
    let blank = |mut e: Json| {
        e["value"]["payload"]["timestamp"] = Json::Null;
        if e["value"]["payload"]["aggregate_type"] == "Initial Snapshot" {
            // A fresh id on each side.
            e["key"]["payload"]["id"] = Json::Null;
            e["value"]["payload"]["id"] = Json::Null;
        }
        e
    };
    let ours: Vec<Json> = lines(dir.path())
        .into_iter()
        .map(|e| {
            if e["topic"] == "dbz-notifications" {
                blank(e)
            } else {
                Json::String(format!("row {}", e["value"]["payload"]["after"]["id"]))
            }
        })
        .collect();
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/debezium");
    let theirs: Vec<Json> = std::fs::read_to_string(fixtures.join("notifications.jsonl"))
        .unwrap()
        .lines()
        .map(|l| blank(serde_json::from_str(l).unwrap()))
        .collect();
    let rows = |ids: &[i64]| -> Vec<Json> {
        ids.iter()
            .map(|i| Json::String(format!("row {i}")))
            .collect()
    };
    // SKIPPED (no initial snapshot), STARTED, IN_PROGRESS, rows, IN_PROGRESS, rows, ...
    let mut expected = theirs[..3].to_vec();
    expected.extend(rows(&[1, 2, 3]));
    expected.push(theirs[3].clone());
    expected.extend(rows(&[4, 5]));
    expected.extend(theirs[4..].iter().cloned());
    assert_eq!(ours.len(), expected.len(), "{ours:#?}");
    for (i, (a, b)) in ours.iter().zip(&expected).enumerate() {
        assert_eq!(a, b, "record {i}");
    }
    drop_db(&db);
}

/// `Initial Snapshot` notifications, compared with Debezium 3.6.3's for the same two tables
/// (`tests/fixtures/debezium/notifications_initial.{properties,jsonl}`): the same records in the
/// same order among themselves, ids (fresh UUIDs on both sides) and timestamps aside.
#[test]
fn initial_snapshot_notifications_match_debezium() {
    let db = fresh_db("notify_initial");
    items(&db);
    psql(&db, "create table other (id int primary key)");
    psql(&db, "insert into other values (1)");
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        &[
            ("table.include.list", "public.items,public.other".into()),
            ("notification.enabled.channels", "sink,log".into()),
            ("notification.sink.topic.name", "dbz-notifications".into()),
        ],
        true,
    );
    let mut child = start(&file, &[]);
    // 6 rows and 6 notifications.
    wait_lines(dir.path(), 12, &mut child);
    stop(&child);
    finish(child);
    let ids_match = |e: &Json| e["key"]["payload"]["id"] == e["value"]["payload"]["id"];
    let blank = |mut e: Json| {
        assert!(ids_match(&e), "{e}");
        e["key"]["payload"]["id"] = Json::Null;
        e["value"]["payload"]["id"] = Json::Null;
        e["value"]["payload"]["timestamp"] = Json::Null;
        e
    };
    let events = lines(dir.path());
    let ours: Vec<Json> = events
        .iter()
        .filter(|e| e["topic"] == "dbz-notifications")
        .cloned()
        .map(blank)
        .collect();
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/debezium");
    let theirs: Vec<Json> = std::fs::read_to_string(fixtures.join("notifications_initial.jsonl"))
        .unwrap()
        .lines()
        .map(|l| blank(serde_json::from_str(l).unwrap()))
        .collect();
    assert_eq!(ours, theirs);
    // STARTED comes before the first row and COMPLETED after the last.
    assert_eq!(events[0]["value"]["payload"]["type"], "STARTED");
    assert_eq!(events[11]["value"]["payload"]["type"], "COMPLETED");
    drop_db(&db);
}

/// A blocking snapshot sends the initial snapshot's notifications, as Debezium 3.6.3 does
/// (`tests/fixtures/debezium/notifications_blocking.jsonl`, same properties as
/// `notifications.properties`).
#[test]
fn blocking_snapshot_notifications_match_debezium() {
    let db = fresh_db("notify_blocking");
    psql(&db, SIGNAL_TABLE);
    items(&db);
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        &[
            ("table.include.list", "public.items".into()),
            ("snapshot.mode", "no_data".into()),
            ("signal.data.collection", "public.debezium_signal".into()),
            ("notification.enabled.channels", "sink,log".into()),
            ("notification.sink.topic.name", "dbz-notifications".into()),
        ],
        true,
    );
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    psql(
        &db,
        "insert into debezium_signal values ('block-1', 'execute-snapshot', '{\"data-collections\": [\"public.items\"], \"type\": \"blocking\"}')",
    );
    // 5 rows and 5 notifications (SKIPPED at start).
    wait_lines(dir.path(), 10, &mut child);
    stop(&child);
    finish(child);
    let blank = |mut e: Json| {
        e["key"]["payload"]["id"] = Json::Null;
        e["value"]["payload"]["id"] = Json::Null;
        e["value"]["payload"]["timestamp"] = Json::Null;
        e
    };
    let ours: Vec<Json> = lines(dir.path())
        .into_iter()
        .filter(|e| e["topic"] == "dbz-notifications")
        .map(blank)
        .collect();
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/debezium");
    let theirs: Vec<Json> = std::fs::read_to_string(fixtures.join("notifications_blocking.jsonl"))
        .unwrap()
        .lines()
        .map(|l| blank(serde_json::from_str(l).unwrap()))
        .collect();
    assert_eq!(ours, theirs);
    drop_db(&db);
}

/// `pipelines/postgres-signals.yaml` as shipped (only environment variables set): an incremental
/// snapshot asked over HTTP with `sluice signal`, its rows and notifications in the output.
#[test]
fn the_signals_example_pipeline_runs() {
    let db = fresh_db("example_signals");
    psql(&db, SIGNAL_TABLE);
    psql(
        &db,
        "create table customers (id int primary key, name text)",
    );
    psql(
        &db,
        "insert into customers select g, 'c' || g from generate_series(1, 10) g",
    );
    let admin_port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/postgres-signals.yaml");
    let sluice = |args: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
        c.args(args)
            .arg(&example)
            .env("PGHOST", host())
            .env("PGPORT", port())
            .env("PGDATABASE", &db)
            .env("SLUICE_SLOT", &db)
            .env("SLUICE_ADMIN", format!("127.0.0.1:{admin_port}"))
            .env("SLUICE_DATA_DIR", dir.path())
            .env("SLUICE_OUT_DIR", dir.path());
        c
    };
    let mut child = sluice(&["run"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    active_slot_pid(&db, &mut child);
    let out = sluice(&["signal"])
        .arg(r#"{"id": "ex-1", "type": "execute-snapshot", "data": {"data-collections": ["public.customers"]}}"#)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = dir.path().join("postgres-signals/events.jsonl");
    let read = || -> Vec<Json> {
        std::fs::read_to_string(&events)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let t0 = std::time::Instant::now();
    while !read()
        .iter()
        .any(|e| e["topic"] == "dbserver1.notifications" && e["value"]["type"] == "COMPLETED")
    {
        assert!(child.try_wait().unwrap().is_none(), "sluice stopped");
        assert!(
            t0.elapsed().as_secs() < 60,
            "no COMPLETED notification: {:?}",
            read()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    stop(&child);
    finish(child);
    let all = read();
    let rows = all
        .iter()
        .filter(|e| e["value"]["source"]["snapshot"] == "incremental")
        .count();
    assert_eq!(rows, 10);
    let kinds: Vec<&str> = all
        .iter()
        .filter(|e| e["topic"] == "dbserver1.notifications")
        .map(|e| e["value"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "SKIPPED",
            "STARTED",
            "IN_PROGRESS",
            "TABLE_SCAN_COMPLETED",
            "COMPLETED"
        ]
    );
    drop_db(&db);
}
