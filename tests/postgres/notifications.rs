//! Notifications to the sink channel, compared with Debezium 3.6.3's records for the same
//! incremental snapshot (`tests/fixtures/debezium/notifications.{properties,jsonl}`).

use serde_json::Value as Json;

use super::common::*;

#[test]
fn incremental_snapshot_notifications_match_debezium() {
    let db = fresh_db("notify");
    psql(
        &db,
        "create table debezium_signal (id varchar(64) primary key, type varchar(32) not null, data text)",
    );
    psql(&db, "create table items (id int primary key, n int)");
    psql(
        &db,
        "insert into items select g, g from generate_series(1, 5) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.items\n  snapshot.mode: no_data\n  signal.data.collection: public.debezium_signal\n  \
incremental.snapshot.chunk.size: 3\n  notification.enabled.channels: sink,log\n  notification.sink.topic.name: dbz-notifications\n",
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
    psql(&db, "create table items (id int primary key, n int)");
    psql(
        &db,
        "insert into items select g, g from generate_series(1, 5) g",
    );
    psql(&db, "create table other (id int primary key)");
    psql(&db, "insert into other values (1)");
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.items,public.other\n  notification.enabled.channels: sink,log\n  notification.sink.topic.name: dbz-notifications\n",
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
    psql(
        &db,
        "create table debezium_signal (id varchar(64) primary key, type varchar(32) not null, data text)",
    );
    psql(&db, "create table items (id int primary key, n int)");
    psql(
        &db,
        "insert into items select g, g from generate_series(1, 5) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.items\n  snapshot.mode: no_data\n  signal.data.collection: public.debezium_signal\n  \
notification.enabled.channels: sink,log\n  notification.sink.topic.name: dbz-notifications\n",
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
