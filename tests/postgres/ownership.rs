//! What the user owns on the server is never destroyed: a slot or a publication that was there
//! before the pipeline is used and kept; only what the pipeline created is dropped or rewritten.

use super::common::*;

fn slot_exists(db: &str, slot: &str) -> bool {
    psql(
        db,
        &format!("select count(*) from pg_replication_slots where slot_name = '{slot}'"),
    )
    .trim()
        == "1"
}

fn published(db: &str, publication: &str) -> Vec<String> {
    psql(db, &format!("select tablename from pg_publication_tables where pubname = '{publication}' order by 1"))
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A slot another connector made (here by hand, as Debezium would) and its publication: the
/// snapshot a pipeline without offsets needs does not drop the slot (it reads its own snapshot
/// and streams from the slot's position, so rows written after the slot was made are there), the
/// publication gains the captured table and keeps its own, and `slot.drop.on.stop` keeps the
/// slot. A slot the pipeline created itself is dropped on stop.
#[test]
fn a_slot_and_a_publication_made_by_someone_else_are_kept() {
    let db = fresh_db("theirs");
    let slot = format!("{db}_theirs");
    psql(
        &db,
        "create table items (id int primary key, v text); create table other (id int primary key)",
    );
    psql(&db, "create publication theirs for table other");
    psql(
        &db,
        &format!("select pg_create_logical_replication_slot('{slot}', 'pgoutput')"),
    );
    psql(
        &db,
        "insert into items select g, 'v' || g from generate_series(1, 50) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let keys: &[(&str, Scalar)] = &[
        ("table.include.list", "public.items".into()),
        ("slot.drop.on.stop", true.into()),
    ];
    let theirs = source(&db)
        .set("slot.name", &slot)
        .set("publication.name", "theirs")
        .set_all(keys);
    let file = base(dir.path(), &db, theirs, false).write(dir.path());
    let mut child = start(&file, &[]);
    wait_lines(dir.path(), 50, &mut child);
    psql(&db, "insert into items values (51, 'streamed')");
    wait_lines(dir.path(), 51, &mut child);
    stop(&child);
    let log = finish(child);
    assert!(log.contains("not created by this pipeline"), "{log}");
    assert!(slot_exists(&db, &slot), "the user's slot was dropped");
    assert_eq!(published(&db, "theirs"), ["items", "other"]);
    let mut ids: Vec<i64> = lines(dir.path())
        .iter()
        .map(|e| e["key"]["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids, (1..=51).collect::<Vec<_>>());

    // The pipeline's own slot and publication: created, kept in sync, dropped on stop.
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(dir.path(), &db, keys, false);
    let mut child = start(&file, &[]);
    wait_lines(dir.path(), 51, &mut child);
    assert!(slot_exists(&db, &db));
    stop(&child);
    finish(child);
    assert!(!slot_exists(&db, &db), "the pipeline's own slot was kept");
    assert!(slot_exists(&db, &slot));
    psql(
        "postgres",
        &format!("select pg_drop_replication_slot('{slot}')"),
    );
    drop_db(&db);
}
