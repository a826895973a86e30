//! Snapshots on demand besides the incremental one: blocking snapshots (the stream pauses, the
//! listed tables are read, filtered by `additional-conditions`, the stream resumes; a restart
//! afterwards does not repeat them), and back-filling a table newly added to the include list.

use serde_json::Value as Json;

use super::common::*;

/// Signals from the source channel and the file channel; rows as `op: r` with Debezium's
/// snapshot markers, only the filtered ones, between the changes streamed before and after the
/// signal; a restart continues after the snapshot instead of reading it again.
#[test]
fn blocking_snapshot_reads_filtered_tables_between_streamed_changes() {
    let db = fresh_db("blocking");
    psql(&db, SIGNAL_TABLE);
    psql(
        &db,
        "create table items (id int primary key, n int not null)",
    );
    psql(
        &db,
        "insert into items select g, g from generate_series(1, 50) g",
    );
    psql(&db, "create table other (id int primary key)");
    psql(&db, "insert into other select generate_series(1, 10)");
    let dir = tempfile::tempdir().unwrap();
    let signals = dir.path().join("signals.jsonl");
    std::fs::write(&signals, "").unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        &[
            ("table.include.list", "public.items,public.other".into()),
            ("snapshot.mode", "no_data".into()),
            ("signal.data.collection", "public.debezium_signal".into()),
            ("signal.enabled.channels", "source,file".into()),
            ("signal.file", (&signals).into()),
            ("signal.poll.interval.ms", "50".into()),
        ],
        false,
    );
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    psql(&db, "update items set n = -1 where id = 1");
    wait_lines(dir.path(), 1, &mut child);
    psql(
        &db,
        "insert into debezium_signal values ('block-1', 'execute-snapshot', '{\"type\": \"blocking\", \"data-collections\": [\"public.items\"], \"additional-conditions\": [{\"data-collection\": \"public.items\", \"filter\": \"id <= 20\"}]}')",
    );
    psql(&db, "update items set n = -2 where id = 2");
    // update 1, 20 snapshot rows, update 2 (the signaling table is not captured).
    wait_lines(dir.path(), 22, &mut child);
    let events = lines(dir.path());
    let items: Vec<&Json> = events
        .iter()
        .filter(|e| e["topic"] == "dbserver1.public.items")
        .collect();
    let ops: Vec<String> = items
        .iter()
        .map(|e| e["value"]["op"].as_str().unwrap_or("").to_owned())
        .collect();
    let mut expected = vec!["u".to_owned()];
    expected.extend(std::iter::repeat_n("r".to_owned(), 20));
    expected.push("u".to_owned());
    assert_eq!(ops, expected, "streamed, snapshot, streamed: {items:?}");
    let ids: Vec<i64> = items[1..21]
        .iter()
        .map(|e| e["value"]["after"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, (1..=20).collect::<Vec<_>>());
    let markers: Vec<&str> = items[1..21]
        .iter()
        .map(|e| e["value"]["source"]["snapshot"].as_str().unwrap())
        .collect();
    assert_eq!(markers[0], "first");
    assert_eq!(markers[19], "last");
    assert!(markers[1..19].iter().all(|m| *m == "true"), "{markers:?}");
    // The row read by the snapshot has the value committed before it (update 1 is visible).
    assert_eq!(items[1]["value"]["after"]["n"], -1);

    // The file channel, no filter.
    std::fs::write(
        &signals,
        "{\"id\": \"block-2\", \"type\": \"execute-snapshot\", \"data\": {\"type\": \"blocking\", \"data-collections\": [\"public.other\"]}}\n",
    )
    .unwrap();
    wait_lines(dir.path(), 32, &mut child);
    let other = lines(dir.path())
        .into_iter()
        .filter(|e| e["topic"] == "dbserver1.public.other" && e["value"]["op"] == "r")
        .count();
    assert_eq!(other, 10);
    stop(&child);
    let log = finish(child);
    assert!(
        log.contains("Blocking snapshot: streaming resumes."),
        "{log}"
    );

    // Restarted: the snapshots are not read again; a new change comes through.
    let before = lines(dir.path()).len();
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    psql(&db, "update items set n = -3 where id = 3");
    wait_lines(dir.path(), before + 1, &mut child);
    stop(&child);
    finish(child);
    let after = lines(dir.path());
    assert_eq!(after.len(), before + 1, "{:?}", &after[before..]);
    assert_eq!(after[before]["value"]["after"]["n"], -3);
    drop_db(&db);
}

/// A table added to `table.include.list` is back-filled by a signal: the pipeline restarts
/// with the new list, the stream goes on from its committed position (a change made while it
/// was down arrives, nothing is snapshotted again), and `execute-snapshot` reads the new table.
#[test]
fn a_newly_included_table_is_back_filled_by_a_signal() {
    let db = fresh_db("backfill");
    psql(&db, SIGNAL_TABLE);
    psql(
        &db,
        "create table items (id int primary key, n int not null)",
    );
    psql(
        &db,
        "insert into items select g, g from generate_series(1, 5) g",
    );
    psql(&db, "create table extra (id int primary key, v text)");
    psql(
        &db,
        "insert into extra select g, 'old' from generate_series(1, 300) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let keys = |tables: &str| -> Vec<(&'static str, Scalar)> {
        vec![
            ("table.include.list", tables.into()),
            ("signal.data.collection", "public.debezium_signal".into()),
            ("incremental.snapshot.chunk.size", "64".into()),
        ]
    };
    let file = pipeline(dir.path(), &db, &keys("public.items"), false);
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    wait_lines(dir.path(), 5, &mut child);
    stop(&child);
    finish(child);

    // Down: a change to a captured table, and the new table changes too.
    psql(&db, "update items set n = -1 where id = 1");
    psql(
        &db,
        "update extra set v = 'changed while down' where id = 7",
    );
    let file = pipeline(dir.path(), &db, &keys("public.items,public.extra"), false);
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    psql(
        &db,
        "insert into debezium_signal values ('backfill-1', 'execute-snapshot', '{\"data-collections\": [\"public.extra\"]}')",
    );
    psql(&db, "update extra set v = 'after' where id = 8");
    // 5 snapshot rows, the update while down, 300 back-filled rows, the update after (whose
    // back-filled row is dropped when the update lands inside its chunk's window): wait for
    // the update and every back-filled key.
    wait_for(
        dir.path(),
        "the back-fill and the update after it",
        &mut child,
        |events| {
            let extra: std::collections::BTreeSet<i64> = events
                .iter()
                .filter(|e| e["value"]["source"]["table"] == "extra")
                .filter_map(|e| e["value"]["after"]["id"].as_i64())
                .collect();
            extra.len() == 300
                && events
                    .iter()
                    .any(|e| e["value"]["op"] == "u" && e["value"]["after"]["v"] == "after")
        },
    );
    stop(&child);
    finish(child);
    let events = lines(dir.path());
    let table = |e: &Json| {
        e["value"]["source"]["table"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    let items_reads = events
        .iter()
        .filter(|e| table(e) == "items" && e["value"]["op"] == "r")
        .count();
    assert_eq!(items_reads, 5, "items was not snapshotted again");
    assert!(events
        .iter()
        .any(|e| table(e) == "items" && e["value"]["after"]["n"] == -1));
    let backfilled: std::collections::BTreeMap<i64, String> = events
        .iter()
        .filter(|e| table(e) == "extra")
        .map(|e| {
            (
                e["value"]["after"]["id"].as_i64().unwrap(),
                e["value"]["after"]["v"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(backfilled.len(), 300);
    assert_eq!(backfilled[&7], "changed while down");
    assert_eq!(backfilled[&8], "after");
    assert!(events
        .iter()
        .filter(|e| table(e) == "extra" && e["value"]["op"] == "r")
        .all(|e| e["value"]["source"]["snapshot"] == "incremental"));
    drop_db(&db);
}

/// The `http` channel: `sluice signal PIPELINE.yaml '<json>'` posts to the admin endpoint;
/// an incremental and a blocking snapshot come that way; a malformed signal is refused by the
/// client with a reason; a stopped pipeline is reported as unreachable.
#[test]
fn signals_over_http_with_the_sluice_signal_command() {
    let db = fresh_db("http_signal");
    psql(&db, SIGNAL_TABLE);
    psql(
        &db,
        "create table items (id int primary key, n int not null)",
    );
    psql(
        &db,
        "insert into items select g, g from generate_series(1, 100) g",
    );
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let keys: &[(&str, Scalar)] = &[
        ("table.include.list", "public.items".into()),
        ("snapshot.mode", "no_data".into()),
        ("signal.data.collection", "public.debezium_signal".into()),
        ("signal.enabled.channels", "source,http".into()),
        ("incremental.snapshot.chunk.size", "30".into()),
    ];
    let file = base(dir.path(), &db, source(&db).set_all(keys), false)
        .setting("admin", &[("bind", format!("127.0.0.1:{port}").into())])
        .write(dir.path());
    let signal = |json: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("signal")
            .arg(&file)
            .arg(json)
            .output()
            .unwrap()
    };
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    let out = signal(
        r#"{"id": "h-1", "type": "execute-snapshot", "data": {"data-collections": ["public.items"]}}"#,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "signal queued");
    wait_lines(dir.path(), 100, &mut child);
    assert!(lines(dir.path())
        .iter()
        .all(|e| e["value"]["source"]["snapshot"] == "incremental"));

    let out = signal(r#"{"type": "execute-snapshot"}"#);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a signal needs a string `id`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = signal(
        r#"{"id": "h-2", "type": "execute-snapshot", "data": {"type": "blocking", "data-collections": ["public.items"], "additional-conditions": [{"data-collection": "public.items", "filter": "id <= 3"}]}}"#,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_lines(dir.path(), 103, &mut child);
    let markers: Vec<String> = lines(dir.path())[100..]
        .iter()
        .map(|e| {
            e["value"]["source"]["snapshot"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(markers, ["first", "true", "last"]);
    stop(&child);
    finish(child);

    let out = signal(r#"{"id": "h-3", "type": "log", "data": {"message": "hi"}}"#);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot reach the admin endpoint"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop_db(&db);
}
