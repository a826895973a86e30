//! Debezium's column properties and SMTs against Debezium 3.6.3 output for the same rows and
//! changes (`tests/fixtures/debezium/columns_*`).

use std::path::Path;

use super::common::*;

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/debezium")
}

/// Runs the columns fixture's setup, snapshot and changes through a pipeline with the source's
/// `keys` and `transforms` (at top level), and compares with `expected`.
fn golden(name: &str, keys: &[(&str, Scalar)], transforms: &[Component], expected: &str) {
    golden_of(
        ("columns_setup.sql", "columns_changes.sql", 4),
        name,
        keys,
        transforms,
        expected,
    );
}

/// [`golden`] with another fixture's setup and changes, and its snapshot's rows.
fn golden_of(
    (setup, changes, snapshot_rows): (&str, &str, usize),
    name: &str,
    keys: &[(&str, Scalar)],
    transforms: &[Component],
    expected: &str,
) {
    let read = |f: &str| std::fs::read_to_string(fixtures().join(f)).unwrap();
    let db = fresh_db(name);
    psql(&db, &read(setup));
    let dir = tempfile::tempdir().unwrap();
    let mut chain = base(dir.path(), &db, source(&db).set_all(keys), true);
    for transform in transforms {
        chain = chain.transform(transform.clone());
    }
    let file = chain.write(dir.path());
    let mut child = start(&file, &[]);
    wait_lines(dir.path(), snapshot_rows, &mut child);
    psql(&db, &read(changes));
    let theirs = read(expected);
    wait_lines(dir.path(), theirs.lines().count(), &mut child);
    stop(&child);
    finish(child);
    let ours = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert_eq!(ours.lines().count(), theirs.lines().count());
    let lsn =
        regex::Regex::new(r#""__(lsn|source_ts_ms|ts_ms)":\d+|"__source_db":"[^"]*""#).unwrap();
    for (i, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        let (a, b) = (normalize(a), normalize(b));
        assert_eq!(
            lsn.replace_all(&a, "\"__${1}\":0"),
            lsn.replace_all(&b, "\"__${1}\":0"),
            "event {i} differs from Debezium's"
        );
    }
    drop_db(&db);
}

/// `column.mask.with.N.chars` (N = 5 and 0; a NULL is masked too), `column.mask.hash` v1
/// SHA-256 and v2 MD5 (cut to the column's length), `column.truncate.to.4.chars`,
/// `message.key.columns`, and RegexRouter.
#[test]
fn column_properties_and_regex_router_match_debezium() {
    golden(
        "columns_a",
        &[
            ("table.include.list", "public.gold".into()),
            ("column.mask.with.5.chars", "public.gold.ssn".into()),
            ("column.mask.with.0.chars", "public.gold.code".into()),
            (
                "column.mask.hash.SHA-256.with.salt.CzQMA0cB5K",
                "public.gold.email".into(),
            ),
            (
                "column.mask.hash.v2.MD5.with.salt.pepper",
                "public.gold.name".into(),
            ),
            ("column.truncate.to.4.chars", "public.gold.notes".into()),
            ("message.key.columns", "public.gold:n,id".into()),
        ],
        &[Component::new("route")
            .set("regex", r"dbserver1\.public\.(.*)")
            .set("replacement", "cdc.$1")],
        "columns_a.jsonl",
    );
}

/// `column.mask.hash.v2` on columns of named types (`xml`, `json`, `uuid`): Debezium marks
/// them `masked` (their names kept) and passes their values unhashed; `text` and `varchar`
/// are hashed (the latter cut to its length).
#[test]
fn hash_masks_of_named_types_match_debezium() {
    golden_of(
        ("masked_setup.sql", "masked_changes.sql", 2),
        "columns_masked",
        &[
            ("table.include.list", "public.masked".into()),
            (
                "column.mask.hash.v2.SHA-256.with.salt.salt",
                "public.masked.x,public.masked.j,public.masked.u,public.masked.t,public.masked.v"
                    .into(),
            ),
        ],
        &[],
        "masked.jsonl",
    );
}

/// `column.propagate.source.type` (type, length, scale and name parameters), and a column both
/// propagated and masked gets only the mask, as in Debezium.
#[test]
fn propagated_source_types_match_debezium() {
    golden(
        "columns_c",
        &[
            ("table.include.list", "public.gold".into()),
            (
                "column.propagate.source.type",
                "public.gold.name,public.gold.n,public.gold.notes".into(),
            ),
            ("column.mask.with.3.chars", "public.gold.notes".into()),
        ],
        &[],
        "columns_c.jsonl",
    );
}

/// ExtractNewRecordState (`rewrite-with-tombstone`, `add.fields`) then ByLogicalTableRouter
/// (key field `__dbz__physicalTableIdentifier`).
#[test]
fn unwrap_and_logical_table_router_match_debezium() {
    golden(
        "columns_b",
        &[("table.include.list", "public.gold".into())],
        &[
            Component::new("unwrap")
                .set("delete.tombstone.handling.mode", "rewrite-with-tombstone")
                .set("add.fields", "op,table,lsn,source.ts_ms"),
            Component::new("reroute")
                .set("topic.regex", r"dbserver1\.public\.(gold)")
                .set("topic.replacement", "all.tables"),
        ],
        "columns_b.jsonl",
    );
}

/// ExtractNewRecordState `delete-to-tombstone` with envelope and source fields added.
#[test]
fn unwrap_delete_to_tombstone_matches_debezium() {
    golden(
        "columns_d",
        &[("table.include.list", "public.gold".into())],
        &[Component::new("unwrap")
            .set("delete.tombstone.handling.mode", "delete-to-tombstone")
            .set("add.fields", ["ts_ms", "source.db", "name"])],
        "columns_d.jsonl",
    );
}

/// Fan-out with different shapes: a pipeline-level mask, then the raw envelope to one file and,
/// through the second sink's own chain (unwrap, filter, key, columns), flat rows to another.
/// Every position is committed, including those of events the filter dropped.
#[test]
fn two_sinks_with_their_own_chains() {
    let read = |f: &str| std::fs::read_to_string(fixtures().join(f)).unwrap();
    let db = fresh_db("two_chains");
    psql(&db, &read("columns_setup.sql"));
    let dir = tempfile::tempdir().unwrap();
    // Not the test pipeline: no restarts, the source's default user and status interval.
    let gold = Component::new("postgres")
        .set("database.hostname", host())
        .set("database.port", port().parse::<u16>().unwrap())
        .set("database.dbname", &db)
        .set("topic.prefix", "dbserver1")
        .set("slot.name", &db)
        .set("publication.name", &db)
        .set("publication.autocreate.mode", "filtered")
        .set("table.include.list", "public.gold");
    let mask = Component::new("mask")
        .set("columns", "public.gold.ssn")
        .set("chars", 4u32);
    let raw = Component::new("file")
        .named("raw")
        .set("path", dir.path().join("out.jsonl"))
        .set("schemas.enable", false);
    let rows = Component::new("file")
        .named("rows")
        .set("path", dir.path().join("rows.jsonl"))
        .set("schemas.enable", false)
        .transform(
            Component::new("unwrap")
                .set("delete.tombstone.handling.mode", "rewrite")
                .set("add.fields", "op"),
        )
        .transform(Component::new("filter").set("condition", "__op != 'd' && n < 10"))
        .transform(Component::new("key").set("message.key.columns", "public.gold:code"))
        .transform(
            Component::new("columns")
                .set("exclude", r"public\.gold\.(email|notes)")
                .set("rename", [(r"public\.gold\.name", "full_name")]),
        );
    let file = Pipeline::new(&db, dir.path().join("data"))
        .setting("offsets", &[("flush_interval", "50ms".into())])
        .source(gold)
        .transform(mask)
        .sink(raw)
        .sink(rows)
        .write(dir.path());
    let mut child = start(&file, &["--stop-when-idle", "2s"]);
    wait_lines(dir.path(), 4, &mut child);
    psql(&db, &read("columns_changes.sql"));
    let log = finish(child);
    let raw = lines(dir.path());
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(dir.path().join("rows.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // 4 snapshot rows, insert, update, delete, tombstone.
    assert_eq!(raw.len(), 8);
    assert!(raw.iter().filter(|e| !e["value"].is_null()).all(|e| {
        let row = if e["value"]["op"] == "d" {
            &e["value"]["before"]
        } else {
            &e["value"]["after"]
        };
        row["ssn"] == "****"
    }));
    // Unwrapped rows: the update (n = 10) and the delete are filtered out, the tombstone is
    // dropped by `rewrite`; keys come from `code`; email and notes are gone; name is renamed.
    let ids: Vec<i64> = rows
        .iter()
        .map(|r| r["value"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
    assert_eq!(rows[0]["key"], serde_json::json!({"code": "AB12"}));
    assert_eq!(rows[2]["key"], serde_json::json!({"code": null}));
    assert_eq!(
        rows[0]["value"],
        serde_json::json!({"id": 1, "full_name": "Anne", "ssn": "****", "code": "AB12", "n": 1, "__deleted": "false", "__op": "r"})
    );
    assert!(log.contains("events=8 committed={\"lsn\":"), "{log}");
    drop_db(&db);
}

/// `message.key.columns` gives a table without a primary key a key (snapshot and stream, the
/// delete's tombstone included).
#[test]
fn message_key_columns_key_a_table_without_primary_key() {
    let db = fresh_db("keyless");
    psql(&db, "create table logs (code text not null, line text); alter table logs replica identity full; insert into logs values ('a', 'one')");
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        &[
            ("table.include.list", "public.logs".into()),
            ("message.key.columns", r"public\.logs:code".into()),
        ],
        false,
    );
    let mut child = start(&file, &[]);
    wait_lines(dir.path(), 1, &mut child);
    psql(
        &db,
        "insert into logs values ('b', 'two'); delete from logs where code = 'a'",
    );
    wait_lines(dir.path(), 4, &mut child);
    stop(&child);
    let stderr = finish(child);
    assert!(!stderr.contains("no primary key"), "{stderr}");
    let keys: Vec<serde_json::Value> = lines(dir.path()).iter().map(|e| e["key"].clone()).collect();
    assert_eq!(
        keys,
        [
            serde_json::json!({"code": "a"}),
            serde_json::json!({"code": "b"}),
            serde_json::json!({"code": "a"}),
            serde_json::json!({"code": "a"}),
        ]
    );
    drop_db(&db);
}

/// `message.key.columns` on nullable columns leaves rows and their schema as they are: a NULL
/// stays NULL in the key (whose fields are optional) and in the value; the key is read before
/// masking (`column.mask.with`, hashes v1 and v2 on `text` and `varchar`); a change of the
/// key columns is a delete, a tombstone and a create, as Debezium 3.6.3 emits them for the
/// same rows and changes (`keycols_*`, REPLICA IDENTITY FULL).
#[test]
fn message_key_columns_on_nullable_columns_change_no_value() {
    let read = |f: &str| std::fs::read_to_string(fixtures().join(f)).unwrap();
    let db = fresh_db("keycols");
    psql(&db, &read("keycols_setup.sql"));
    psql(&db, "alter table keyed replica identity full");
    let dir = tempfile::tempdir().unwrap();
    let keys: &[(&str, Scalar)] = &[
        ("table.include.list", "public.keyed".into()),
        ("message.key.columns", "public.keyed:region,n".into()),
        (
            "column.mask.hash.v2.SHA-256.with.salt.s4lt",
            "public.keyed.code".into(),
        ),
        (
            "column.mask.hash.MD5.with.salt.pepper",
            "public.keyed.note".into(),
        ),
        ("column.mask.with.4.chars", "public.keyed.region".into()),
    ];
    let file = pipeline(dir.path(), &db, keys, true);
    let mut child = start(&file, &[]);
    wait_lines(dir.path(), 3, &mut child);
    active_slot_pid(&db, &mut child);
    psql(&db, &read("keycols_changes.sql"));
    let theirs = read("keycols.jsonl");
    wait_lines(dir.path(), theirs.lines().count(), &mut child);
    stop(&child);
    finish(child);
    let ours = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert_same_events(&ours, &theirs, "message.key.columns");
    drop_db(&db);
}
