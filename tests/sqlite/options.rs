//! The kit's shared options the SQLite source implements: skipped operations, the failure
//! handling mode.

use super::*;

#[test]
fn skipped_operations_are_left_out_and_the_position_moves_past_them() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text); insert into t values (1, 'a');",
        &["t"],
    );
    let skip_updates = [
        ("skipped.operations", "u".into()),
        ("tombstones.on.delete", false.into()),
    ];
    let path = pipeline(dir.path(), &db, &skip_updates);
    run_until_idle(&path);
    assert_eq!(ops(dir.path()), ["r"]);
    // Only skipped changes: nothing is written, and the position still moves past them (the
    // change rows are purged, a restart does not read them again).
    conn.execute_batch("update t set v = 'b' where id = 1; update t set v = 'c' where id = 1;")
        .unwrap();
    run_until_idle(&path);
    assert_eq!(ops(dir.path()), ["r"]);
    let left: i64 = conn
        .query_row("select count(*) from _sluice_ct_t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left, 0, "skipped change rows are acknowledged and purged");
    conn.execute_batch(
        "insert into t values (2, 'x'); update t set v = 'y' where id = 2; delete from t where id = 1;",
    )
    .unwrap();
    run_until_idle(&path);
    assert_eq!(ops(dir.path()), ["r", "c", "d"]);
    let last = lines(dir.path()).pop().unwrap();
    assert_eq!(
        last["value"]["before"]["v"], "c",
        "the delete's before image is the last update's"
    );
}

#[test]
fn a_value_that_does_not_fit_its_column_fails_or_is_skipped_per_mode() {
    let dir = tempfile::tempdir().unwrap();
    // SQLite keeps 'abc' in an INTEGER column; as an int64 it has no representation.
    let (db, conn) = captured(dir.path(), "create table t (id integer primary key, n integer); insert into t values (1, 10), (2, 'abc'), (3, 30);", &["t"]);
    let failing = pipeline(dir.path(), &db, &[]);
    let o = sluice(&["run", "--stop-when-idle", "1s", failing.to_str().unwrap()]);
    let e = error_line(&o);
    assert!(
        e.contains("table `t` column `n`")
            && e.contains("event.processing.failure.handling.mode: warn"),
        "{e}"
    );
    let warn = pipeline(
        dir.path(),
        &db,
        &[("event.processing.failure.handling.mode", "warn".into())],
    );
    let o = sluice(&["run", "--stop-when-idle", "1s", warn.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("Skipped a change that cannot be represented") && err.contains("column=\"n\""),
        "{err}"
    );
    let ids = |dir: &Path| {
        lines(dir)
            .iter()
            .map(|l| l["value"]["after"]["id"].as_i64().unwrap_or(-1))
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(dir.path()), [1, 3], "the snapshot leaves row 2 out");
    // Streamed: the bad update is left out, the position moves past it, the next change comes.
    conn.execute_batch("update t set n = 'x' where id = 1; insert into t values (4, 40);")
        .unwrap();
    let o = sluice(&["run", "--stop-when-idle", "1s", warn.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(ids(dir.path()), [1, 3, 4]);
    let left: i64 = conn
        .query_row("select count(*) from _sluice_ct_t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left, 0, "the skipped change was acknowledged and purged");
}

/// Skipped changes that fill a read's row limit must not let the stream jump past the rows
/// after them: with batches of 2, two skipped updates of `a` come before an insert into `a` and
/// after them an insert into `b`.
#[test]
fn skipped_changes_filling_a_read_do_not_hide_the_changes_after_them() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table a (id integer primary key, v text); create table b (id integer primary key); insert into a values (1, 'x');",
        &["a", "b"],
    );
    let path = base(dir.path(), source(&db).set("skipped.operations", "u"))
        .top("max_batch_size", 2u32)
        .top("max_queue_size", 8u32)
        .write(dir.path());
    run_until_idle(&path);
    conn.execute_batch(
        "update a set v = 'y' where id = 1; update a set v = 'z' where id = 1; insert into a values (2, 'new'); insert into b values (7);",
    )
    .unwrap();
    run_until_idle(&path);
    let created: Vec<(String, i64)> = lines(dir.path())
        .iter()
        .filter(|l| l["value"]["op"] == "c")
        .map(|l| {
            (
                l["topic"].as_str().unwrap().to_owned(),
                l["value"]["after"]["id"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        created,
        [("app.main.a".to_owned(), 2), ("app.main.b".to_owned(), 7)],
        "no insert lost behind the skipped updates"
    );
}

/// The kit's column lists and column properties in the SQLite source: an excluded column is
/// not in the events, a masked one is `N` stars, a truncated one is cut, each with the schema
/// parameter Debezium adds; a key column cannot be left out.
#[test]
fn column_lists_and_masks_shape_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, name text, email text, secret text, n integer);
         insert into t values (1, 'Alice', 'alice@example.com', 'hunter2', 7);",
        &["t"],
    );
    let options = [
        ("column.exclude.list", "main.t.secret".into()),
        ("column.mask.with.4.chars", "main.t.name".into()),
        ("column.truncate.to.5.chars", "main.t.email".into()),
    ];
    let path = pipeline_with_schemas(dir.path(), &db, &options);
    run_until_idle(&path);
    conn.execute_batch(
        "update t set name = 'Bob', email = 'bob@example.org', secret = 'x' where id = 1;",
    )
    .unwrap();
    run_until_idle(&path);
    let lines = lines(dir.path());
    assert_eq!(lines.len(), 2);
    let payload = |i: usize| &lines[i]["value"]["payload"];
    assert_eq!(
        payload(0)["after"],
        serde_json::json!({"id": 1, "name": "****", "email": "alice", "n": 7})
    );
    assert_eq!(payload(1)["before"]["email"], "alice");
    assert_eq!(payload(1)["after"]["email"], "bob@e");
    let after_schema = lines[0]["value"]["schema"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "after")
        .unwrap()["fields"]
        .as_array()
        .unwrap()
        .clone();
    let field = |name: &str| after_schema.iter().find(|f| f["field"] == name).cloned();
    assert!(field("secret").is_none(), "excluded from the schema");
    assert_eq!(
        field("name").unwrap()["parameters"],
        serde_json::json!({"masked": "true"})
    );
    assert_eq!(
        field("email").unwrap()["parameters"],
        serde_json::json!({"truncateLength": "5"})
    );

    let keyless = pipeline(
        dir.path(),
        &db,
        &[("column.exclude.list", "main.t.id".into())],
    );
    let e = error_line(&sluice(&["run", keyless.to_str().unwrap()]));
    assert!(e.contains("`main.t.id`, a key column"), "{e}");
}

/// `message.key.columns` in the SQLite source: the events' key is the named columns (a
/// nullable one stays optional), the table's own key still orders incremental snapshots.
#[test]
fn message_key_columns_set_the_events_key() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(dir.path(), "create table t (id integer primary key, code text, v text); insert into t values (1, 'a-1', 'x'), (2, null, 'y');", &["t"]);
    let keys = [("message.key.columns", "main.t:code,id".into())];
    let path = pipeline_with_schemas(dir.path(), &db, &keys);
    run_until_idle(&path);
    conn.execute_batch("update t set v = 'z' where id = 1;")
        .unwrap();
    run_until_idle(&path);
    let lines = lines(dir.path());
    let keys: Vec<&Json> = lines.iter().map(|l| &l["key"]["payload"]).collect();
    assert_eq!(
        keys,
        [
            &serde_json::json!({"code": "a-1", "id": 1}),
            &serde_json::json!({"code": null, "id": 2}),
            &serde_json::json!({"code": "a-1", "id": 1})
        ]
    );
    let fields = lines[0]["key"]["schema"]["fields"].as_array().unwrap();
    assert_eq!(fields[0]["field"], "code");
    assert_eq!(fields[0]["optional"], true);
    assert_eq!(fields[1]["optional"], false);
    let bad = pipeline(
        dir.path(),
        &db,
        &[("message.key.columns", "main.t:nope".into())],
    );
    let e = error_line(&sluice(&["run", bad.to_str().unwrap()]));
    assert!(
        e.contains("`message.key.columns` names column `nope`"),
        "{e}"
    );
}

/// `snapshot.select.statement.overrides` in the SQLite source: the snapshot of `main.t` runs
/// the given SELECT; the stream is unaffected; a SELECT of other columns is refused.
#[test]
fn a_snapshot_select_override_filters_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(dir.path(), "create table t (id integer primary key, v text); insert into t values (1, 'a'), (2, 'b'), (3, 'c');", &["t"]);
    let overrides = |sql: &str| {
        [
            ("snapshot.select.statement.overrides", "main.t".into()),
            ("snapshot.select.statement.overrides.main.t", sql.into()),
        ]
    };
    let wrong = pipeline(dir.path(), &db, &overrides("select id from t"));
    let e = error_line(&sluice(&["run", wrong.to_str().unwrap()]));
    assert!(
        e.contains("returns 1 columns; it must return the 2 captured ones"),
        "{e}"
    );
    let path = pipeline(
        dir.path(),
        &db,
        &overrides("select id, v from t where id <= 2"),
    );
    run_until_idle(&path);
    conn.execute_batch("insert into t values (4, 'd');")
        .unwrap();
    run_until_idle(&path);
    let seen: Vec<(String, i64)> = lines(dir.path())
        .iter()
        .map(|l| {
            (
                l["value"]["op"].as_str().unwrap().to_owned(),
                l["value"]["after"]["id"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("r".to_owned(), 1),
            ("r".to_owned(), 2),
            ("c".to_owned(), 4)
        ]
    );
}

/// `snapshot.include.collection.list` in the SQLite source: the snapshot reads `t` only; `u` is
/// streamed.
#[test]
fn the_snapshot_collection_list_chooses_the_tables_read() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key); insert into t values (1), (2);\
         create table u (id integer primary key); insert into u values (7);",
        &["t", "u"],
    );
    let path = pipeline(
        dir.path(),
        &db,
        &[("snapshot.include.collection.list", "t".into())],
    );
    run_until_idle(&path);
    conn.execute_batch("insert into u values (8);").unwrap();
    run_until_idle(&path);
    let seen: Vec<(String, i64)> = lines(dir.path())
        .iter()
        .map(|l| {
            (
                l["value"]["op"].as_str().unwrap().to_owned(),
                l["value"]["after"]["id"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("r".to_owned(), 1),
            ("r".to_owned(), 2),
            ("c".to_owned(), 8)
        ]
    );
}
