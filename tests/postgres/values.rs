//! Values that cannot be represented: `event.processing.failure.handling.mode` decides, per
//! change, and says where (table, column, key) in one line.

use super::common::*;

const TABLE: &str = "create table nan (id int primary key, v numeric(10,2) not null); insert into nan values (1, 1.5), (2, 'NaN'), (3, 2.5)";

/// A `NOT NULL` numeric holding `NaN` has no Connect `Decimal` form (Debezium's null is not
/// allowed there). By default the pipeline stops with one line naming the column and the way
/// out; under `warn` that row is skipped with its key logged, the others are delivered, and the
/// stream goes on past such a change.
#[test]
fn an_unrepresentable_value_fails_or_is_skipped_with_its_key() {
    let db = fresh_db("values_nan");
    psql(&db, TABLE);
    let dir = tempfile::tempdir().unwrap();
    let source = "  table.include.list: public.nan\n  snapshot.mode: initial_only\n";
    let file = pipeline(dir.path(), &db, source, false);
    let (status, log) = wait_output(start(&file, &[]));
    assert!(!status.success(), "{log}");
    assert!(!log.contains("panicked"), "{log}");
    let line = log.lines().rfind(|l| l.contains("NaN")).unwrap_or_default();
    assert!(line.contains("public.nan.v"), "{log}");
    assert!(
        line.contains("event.processing.failure.handling.mode: warn"),
        "{log}"
    );

    let dir = tempfile::tempdir().unwrap();
    let source =
        "  table.include.list: public.nan\n  event.processing.failure.handling.mode: warn\n";
    let file = pipeline(dir.path(), &db, source, false);
    let mut child = start(&file, &[]);
    wait_lines(dir.path(), 2, &mut child);
    active_slot_pid(&db, &mut child);
    psql(
        &db,
        "insert into nan values (4, 'NaN'); insert into nan values (5, 7)",
    );
    wait_lines(dir.path(), 3, &mut child);
    stop(&child);
    let log = finish(child);
    let ids: Vec<i64> = lines(dir.path())
        .iter()
        .map(|l| l["value"]["after"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 3, 5]);
    let skipped: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Skipped a change"))
        .collect();
    assert_eq!(skipped.len(), 2, "{log}");
    assert!(
        skipped[0].contains(r#"{"id":2}"#) && skipped[0].contains("public.nan.v"),
        "{log}"
    );
    assert!(skipped[1].contains(r#"{"id":4}"#), "{log}");
    drop_db(&db);
}
