//! Snapshot options against the shared MariaDB: `snapshot.mode: always` and
//! `configuration_based`, `snapshot.select.statement.overrides`,
//! `snapshot.include.collection.list`, and `snapshot.locking.mode`.

use std::collections::BTreeMap;

use super::consistency::{replay, seeded_table, table_state, writer_sql};
use super::*;

/// `(op, id)` of each data event in `events` (tombstones left out).
fn ops(events: &[Json]) -> Vec<(String, i64)> {
    events
        .iter()
        .filter(|e| !e["value"]["payload"].is_null())
        .map(|e| {
            let p = &e["value"]["payload"];
            let row = if p["op"] == "d" {
                &p["before"]
            } else {
                &p["after"]
            };
            (
                p["op"].as_str().unwrap().to_owned(),
                row["id"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn seeded(test: &str) -> String {
    let db = mariadb::database(test);
    mariadb::sql(
        &db,
        "CREATE TABLE a (id INT PRIMARY KEY, note VARCHAR(10));\
         INSERT INTO a VALUES (1, 'one'), (2, 'two'), (3, 'three');\
         CREATE TABLE b (id INT PRIMARY KEY);\
         INSERT INTO b VALUES (10), (11)",
    );
    db
}

#[test]
fn always_snapshots_at_every_start_then_streams_from_there() {
    let db = seeded("mysql_always");
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(
        dir.path(),
        mariadb::server().port,
        &[
            ("table.include.list", format!("{db}\\.a").into()),
            ("snapshot.mode", "always".into()),
        ],
    );
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), 3, &mut child);
    mariadb::sql(&db, "INSERT INTO a VALUES (4, 'four')");
    sluice_test_support::pg::wait_lines(dir.path(), 4, &mut child);
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    // Changed while stopped: the next snapshot has it, the stream does not send it again.
    mariadb::sql(
        &db,
        "DELETE FROM a WHERE id = 1; INSERT INTO a VALUES (5, 'five')",
    );
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), 8, &mut child);
    mariadb::sql(&db, "INSERT INTO a VALUES (6, 'six')");
    sluice_test_support::pg::wait_lines(dir.path(), 9, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(500));
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let all = sluice_test_support::pg::lines(dir.path());
    let expected: Vec<(String, i64)> = [
        ("r", 1),
        ("r", 2),
        ("r", 3),
        ("c", 4),
        ("r", 2),
        ("r", 3),
        ("r", 4),
        ("r", 5),
        ("c", 6),
    ]
    .iter()
    .map(|(op, id)| ((*op).to_owned(), *id))
    .collect();
    assert_eq!(ops(&all), expected);
}

#[test]
fn configuration_based_does_what_its_flags_say() {
    let db = seeded("mysql_configuration_based");
    let dir = tempfile::tempdir().unwrap();
    let flags = |data: bool, schema: bool, stream: bool| {
        [
            ("table.include.list", Scalar::from(format!("{db}\\.a"))),
            (
                "snapshot.mode.configuration.based.snapshot.data",
                data.into(),
            ),
            (
                "snapshot.mode.configuration.based.snapshot.schema",
                schema.into(),
            ),
            (
                "snapshot.mode.configuration.based.start.stream",
                stream.into(),
            ),
            ("snapshot.mode", "configuration_based".into()),
        ]
    };
    // Schema and stream, no data: the rows already there are not read.
    let streaming = dir.path().join("streaming");
    std::fs::create_dir_all(&streaming).unwrap();
    let path = pipeline(
        &streaming,
        mariadb::server().port,
        &flags(false, true, true),
    );
    let mut child = sluice_test_support::pg::start(&path, &[]);
    // The stream is on once the log says so; a row inserted then is streamed.
    let t0 = std::time::Instant::now();
    while !sluice_test_support::pg::log_so_far(&child).contains("Binlog stream started") {
        assert!(t0.elapsed().as_secs() < 60, "no stream");
        assert!(child.try_wait().unwrap().is_none(), "sluice stopped");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    mariadb::sql(&db, "INSERT INTO a VALUES (7, 'seven')");
    sluice_test_support::pg::wait_lines(&streaming, 1, &mut child);
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let events = sluice_test_support::pg::lines(&streaming);
    assert_eq!(ops(&events), [("c".to_owned(), 7)]);
    // Data, no stream: the rows, then the run ends.
    let once = dir.path().join("once");
    std::fs::create_dir_all(&once).unwrap();
    let path = pipeline(&once, mariadb::server().port, &flags(true, true, false));
    run_ok(&path);
    let ids: Vec<i64> = ops(&sluice_test_support::pg::lines(&once))
        .into_iter()
        .map(|(_, id)| id)
        .collect();
    assert_eq!(ids, [1, 2, 3, 7]);
    // Streaming without the structure on a first start: refused, with the flag to set.
    let bare = dir.path().join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    let e = error_line(&pipeline(
        &bare,
        mariadb::server().port,
        &flags(false, false, true),
    ));
    assert!(e.contains("snapshot.schema: true"), "{e}");
}

#[test]
fn overrides_and_the_snapshot_collection_list_choose_the_rows_read() {
    let db = seeded("mysql_snapshot_choice");
    let dir = tempfile::tempdir().unwrap();
    let override_of = |table: &str| format!("snapshot.select.statement.overrides.{db}.{table}");
    let path = streaming_pipeline(
        dir.path(),
        mariadb::server().port,
        &[
            ("database.include.list", db.as_str().into()),
            (
                "snapshot.include.collection.list",
                format!("{db}\\.a").into(),
            ),
            (
                "snapshot.select.statement.overrides",
                format!("{db}.a").into(),
            ),
            (
                override_of("a").as_str(),
                format!("SELECT * FROM {db}.a WHERE id > 1 ORDER BY id DESC").into(),
            ),
            ("column.exclude.list", format!("{db}\\.a\\.note").into()),
        ],
    );
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), 2, &mut child);
    // `b` is not snapshotted but streamed.
    mariadb::sql(&db, "INSERT INTO b VALUES (12)");
    sluice_test_support::pg::wait_lines(dir.path(), 3, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let events = sluice_test_support::pg::lines(dir.path());
    let expected: Vec<(String, i64)> = [("r", 3), ("r", 2), ("c", 12)]
        .iter()
        .map(|(op, id)| ((*op).to_owned(), *id))
        .collect();
    assert_eq!(ops(&events), expected);
    // The override's `SELECT *` gives the kept columns only, by name.
    assert_eq!(
        events[0]["value"]["payload"]["after"],
        serde_json::json!({"id": 3})
    );
    assert_eq!(events[1]["value"]["payload"]["source"]["snapshot"], "last");
    assert_eq!(events[2]["topic"], format!("dbserver1.{db}.b"));
    // An override for a table that is not listed is refused at its line.
    let e = error_line(&pipeline(
        dir.path(),
        mariadb::server().port,
        &[(
            override_of("b").as_str(),
            format!("SELECT * FROM {db}.b").into(),
        )],
    ));
    assert!(e.contains("is not listed"), "{e}");
    // An override that leaves a captured column out is refused, naming it.
    std::fs::remove_dir_all(dir.path().join("data")).ok();
    let e = error_line(&pipeline(
        dir.path(),
        mariadb::server().port,
        &[
            ("table.include.list", format!("{db}\\.b").into()),
            (
                "snapshot.select.statement.overrides",
                format!("{db}.b").into(),
            ),
            (
                override_of("b").as_str(),
                format!("SELECT 1 AS x FROM {db}.b").into(),
            ),
        ],
    ));
    assert!(e.contains("returns no column `id`"), "{e}");
}

/// The concurrent-writer check of `consistency.rs` with `snapshot.locking.mode: <mode>`.
fn consistent_under_a_writer(mode: &str) {
    let db = seeded_table(&format!("mysql_locking_{mode}"), 1500);
    let dir = tempfile::tempdir().unwrap();
    let source = source(dir.path(), mariadb::server().port).set_all(&[
        ("snapshot.mode", "initial".into()),
        ("snapshot.locking.mode", mode.into()),
        ("database.include.list", db.as_str().into()),
    ]);
    let path = base(dir.path(), source)
        .top("max_batch_size", 100u32)
        .write(dir.path());
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || mariadb::sql(&db, &writer_sql(400, 1500)))
    };
    let child = sluice_test_support::pg::start(&path, &["--stop-when-idle", "3s"]);
    writer.join().unwrap();
    let log = sluice_test_support::pg::finish(child);
    let events = sluice_test_support::pg::lines(dir.path());
    let mut born: BTreeMap<i64, usize> = BTreeMap::new();
    for e in &events {
        if matches!(e["value"]["payload"]["op"].as_str(), Some("r" | "c")) {
            *born
                .entry(e["key"]["payload"]["id"].as_i64().unwrap())
                .or_default() += 1;
        }
    }
    assert!(
        born.values().all(|n| *n == 1),
        "a key was read or created twice"
    );
    assert_eq!(replay(&events), table_state(&db));
    let locked = log.contains("Global read lock taken");
    assert_eq!(locked, mode == "extended", "{log}");
    if locked {
        assert!(log.contains("Global read lock released"), "{log}");
    }
}

#[test]
fn extended_locking_holds_the_global_read_lock_and_stays_consistent() {
    consistent_under_a_writer("extended");
}

#[test]
fn no_locking_on_mariadb_stays_consistent_for_the_rows() {
    consistent_under_a_writer("none");
}

#[test]
fn a_lock_the_user_may_not_take_is_one_line_with_the_grant() {
    let db = seeded("mysql_no_reload");
    let user = format!("noreload_{}", std::process::id());
    mariadb::sql(
        "",
        &format!(
            "CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY 'pw';\
             CREATE USER IF NOT EXISTS '{user}'@'localhost' IDENTIFIED BY 'pw';\
             GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'%';\
             GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'localhost'"
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let no_reload = source(dir.path(), mariadb::server().port)
        .set("database.user", &user)
        .set_all(&[
            ("database.include.list", db.as_str().into()),
            ("database.password", "pw".into()),
        ]);
    let path = base(dir.path(), no_reload.clone()).write(dir.path());
    // Without a lock (the default on MariaDB) the user reads the snapshot.
    run_ok(&path);
    assert_eq!(sluice_test_support::pg::lines(dir.path()).len(), 5);
    std::fs::remove_dir_all(dir.path().join("data")).unwrap();
    let locking = |mode: &str| {
        let source = no_reload.clone().set("snapshot.locking.mode", mode);
        base(dir.path(), source).write(dir.path())
    };
    let e = error_line(&locking("extended"));
    assert!(
        e.contains("RELOAD") && e.contains("snapshot.locking.mode: none"),
        "{e}"
    );
    let e = error_line(&locking("minimal_percona"));
    assert!(e.contains("Percona"), "{e}");
    mariadb::sql(
        "",
        &format!("DROP USER '{user}'@'%'; DROP USER '{user}'@'localhost'"),
    );
}

/// The snapshot announces its tables with the server's estimates
/// (`information_schema.TABLES.TABLE_ROWS`): the status's `estimated_rows` and table counts.
#[test]
fn the_snapshot_says_its_tables_and_their_estimated_rows() {
    let db = seeded("mysql_snapshot_plan");
    mariadb::sql(&db, "ANALYZE TABLE a");
    let dir = tempfile::tempdir().unwrap();
    let port = sluice_test_support::pg::free_port();
    let source = source(dir.path(), mariadb::server().port).set_all(&[
        ("snapshot.mode", "initial".into()),
        ("database.include.list", db.as_str().into()),
    ]);
    let path = base(dir.path(), source)
        .setting("admin", &[("bind", format!("127.0.0.1:{port}").into())])
        .write(dir.path());
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), 5, &mut child);
    let snapshot = sluice_test_support::pg::snapshot_done(port, "mysql_test");
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    assert_eq!(snapshot["total_tables"], 2, "{snapshot}");
    assert_eq!(
        snapshot["estimated_rows"][format!("{db}.a")],
        3,
        "analyzed: {snapshot}"
    );
    assert!(
        snapshot["estimated_rows"][format!("{db}.b")].is_u64(),
        "{snapshot}"
    );
}

/// Debezium's `NumberOfEventsFiltered` counts the binlog's row changes of tables not captured.
#[test]
fn changes_of_tables_not_captured_are_counted_as_filtered() {
    let db = seeded("mysql_filtered_metric");
    let dir = tempfile::tempdir().unwrap();
    let port = sluice_test_support::pg::free_port();
    let source = source(dir.path(), mariadb::server().port).set_all(&[
        ("snapshot.mode", "initial".into()),
        ("table.include.list", format!("{db}\\.a").into()),
    ]);
    let path = base(dir.path(), source)
        .setting("admin", &[("bind", format!("127.0.0.1:{port}").into())])
        .write(dir.path());
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), 3, &mut child);
    mariadb::sql(
        &db,
        "INSERT INTO b VALUES (12); INSERT INTO b VALUES (13); INSERT INTO a VALUES (4, 'four')",
    );
    sluice_test_support::pg::wait_lines(dir.path(), 4, &mut child);
    let t0 = std::time::Instant::now();
    let filtered = loop {
        let metrics = sluice_test_support::pg::admin_get(port, "/metrics")
            .map(|(_, b)| b)
            .unwrap_or_default();
        let value = metrics
            .lines()
            .find(|l| {
                l.starts_with("debezium_metrics_NumberOfEventsFiltered{")
                    && l.contains("context=\"streaming\"")
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok());
        if value.is_some_and(|v| v >= 2.0) {
            break value;
        }
        assert!(t0.elapsed().as_secs() < 30, "{metrics}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    // At least the two inserts into b (the server is shared: other tests' tables count too).
    assert!(filtered.is_some_and(|v| v >= 2.0), "{filtered:?}");
}
