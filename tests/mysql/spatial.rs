//! Spatial columns (`GEOMETRY`, `POINT`, `LINESTRING`, `POLYGON`, the `MULTI*` types and
//! `GEOMETRYCOLLECTION`, with and without an SRID), snapshotted and streamed, against real
//! Debezium's events of them (`reference-spatial.jsonl`, made by `make-streamed.sh`).

use sluice_test_support::mariadb;
use sluice_test_support::pg::{self as run, assert_same_events};

use super::{blank, ours, streaming_pipeline, FIXTURES};

/// A fixture's SQL without its `CREATE DATABASE` and `USE` lines (the test has its own
/// database).
fn statements(file: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{file}"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("CREATE DATABASE") && !l.starts_with("USE "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn spatial_columns_snapshot_and_stream_as_debezium_maps_them() {
    let server = mariadb::server();
    let db = mariadb::database("inventory_spatial");
    mariadb::sql(&db, &statements("spatial.sql"));
    let dir = tempfile::tempdir().unwrap();
    // With `include.query`, as the fixture was made: Debezium's MySQL connector reads MySQL's
    // ROWS_QUERY events, which MariaDB does not write, so `source.query` stays null.
    let path = streaming_pipeline(
        dir.path(),
        server.port,
        &[
            ("database.include.list", db.as_str().into()),
            ("include.query", true.into()),
        ],
    );
    let mut child = run::start(&path, &[]);
    run::wait_lines(dir.path(), 2, &mut child);
    mariadb::sql(&db, &statements("spatial-changes.sql"));
    run::wait_lines(dir.path(), 8, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    run::stop(&child);
    run::finish(child);
    let theirs: String = std::fs::read_to_string(format!("{FIXTURES}/reference-spatial.jsonl"))
        .unwrap()
        .lines()
        .map(|l| format!("{}\n", blank(l)))
        .collect();
    let ours = ours(dir.path(), &db, 0);
    assert_same_events(&ours, &theirs, "mysql spatial columns, snapshot and stream");
}
