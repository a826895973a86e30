//! The schema history against the history Debezium 3.6.3 wrote for MariaDB
//! (`tests/fixtures/debezium/schema_history`), and the file store's crash cases.

use std::path::PathBuf;

use serde_json::{json, Value as Json};

use super::*;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/debezium/schema_history/mariadb.dat")
}

/// A MySQL binlog position comparator: `(file, pos)` not after `(file, pos)` of `offset`.
fn binlog_at_or_before(offset: (&'static str, i64)) -> impl Fn(&Json) -> bool {
    move |p: &Json| {
        let file = p["file"].as_str().unwrap_or_default();
        let pos = p["pos"].as_i64().unwrap_or_default();
        (file, pos) <= offset
    }
}

fn history_of(path: PathBuf) -> SchemaHistory {
    SchemaHistory {
        store: Store::File(FileStore::new(path)),
        only_captured_tables: false,
        only_captured_databases: false,
    }
}

fn columns(tables: &Tables, id: &str) -> Vec<String> {
    tables
        .get(id)
        .map(|t| t.columns.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default()
}

#[test]
fn debeziums_records_parse_and_serialise_back_unchanged() -> Result<(), HistoryError> {
    let text = std::fs::read_to_string(fixture()).map_err(|source| HistoryError::Io {
        what: "reading",
        path: fixture(),
        source,
    })?;
    let records = FileStore::new(fixture()).read_all()?;
    assert_eq!(records.len(), 11);
    for (line, record) in text.lines().zip(&records) {
        let original: Json = serde_json::from_str(line).map_err(HistoryError::Encode)?;
        let again = serde_json::to_value(record).map_err(HistoryError::Encode)?;
        assert_eq!(again, original, "record {line}");
    }
    Ok(())
}

#[test]
fn recovery_rebuilds_the_tables_at_the_restart_position() -> Result<(), HistoryError> {
    let history = history_of(fixture());
    let customers = table_id(&["inventory", "customers"]);
    let orders = table_id(&["inventory", "orders"]);
    let products = table_id(&["inventory", "products"]);

    let snapshot = history.recover(binlog_at_or_before(("binlog.000001", 1827)))?;
    assert_eq!((snapshot.read, snapshot.applied), (11, 8));
    assert_eq!(
        snapshot.tables.ids().collect::<Vec<_>>(),
        [&customers, &orders]
    );
    assert_eq!(
        columns(&snapshot.tables, &customers),
        ["id", "first_name", "last_name", "email", "score", "kind"]
    );
    let score = &snapshot
        .tables
        .get(&customers)
        .map(|t| t.columns[4].clone());
    let score = score
        .as_ref()
        .map(|c| (c.length, c.scale, c.default_value_expression.clone()));
    assert_eq!(score, Some((Some(10), Some(2), Some("1.50".to_owned()))));

    let altered = history.recover(binlog_at_or_before(("binlog.000001", 2452)))?;
    assert_eq!(
        columns(&altered.tables, &customers),
        [
            "id",
            "first_name",
            "last_name",
            "email",
            "phone",
            "score",
            "kind"
        ]
    );
    let last_name = altered
        .tables
        .get(&customers)
        .map(|t| (t.columns[2].length, t.columns[2].optional));
    assert_eq!(last_name, Some((Some(100), false)));
    assert!(
        altered.tables.get(&products).is_none(),
        "not created yet at 2452"
    );

    let end = history.recover(binlog_at_or_before(("binlog.000001", 3523)))?;
    assert_eq!(
        end.tables.ids().collect::<Vec<_>>(),
        [&customers, &products]
    );
    assert!(end.tables.get(&orders).is_none(), "dropped at 3523");
    assert_eq!(columns(&end.tables, &products), ["id", "name", "weight"]);
    Ok(())
}

fn record(pos: i64, db: &str, tables: &[&str]) -> HistoryRecord {
    let changes = tables
        .iter()
        .map(|t| TableChange {
            kind: ChangeKind::Create,
            id: table_id(&[db, t]),
            previous_id: None,
            table: Some(TableDef {
                default_charset_name: None,
                primary_key_column_names: vec!["id".into()],
                columns: vec![serde_json::from_value(json!({
                    "name": "id", "jdbcType": 4, "typeName": "INT", "position": 1, "optional": false
                }))
                .unwrap_or_else(|e| panic!("column: {e}"))],
                attributes: Vec::new(),
                comment: None,
            }),
            comment: Some(Json::Null),
        })
        .collect();
    HistoryRecord {
        source: json!({"server": "app"}),
        position: json!({"file": "binlog.000001", "pos": pos}),
        ts_ms: 0,
        database_name: Some(db.to_owned()),
        schema_name: None,
        ddl: format!("CREATE TABLE {}", tables.join(", ")),
        table_changes: changes,
    }
}

#[tokio::test]
async fn only_captured_tables_and_databases_are_stored_when_asked() -> Result<(), HistoryError> {
    let dir = tempfile::tempdir().map_err(|source| HistoryError::Io {
        what: "creating",
        path: "tmp".into(),
        source,
    })?;
    let config = HistoryConfig {
        only_captured_tables: true,
        only_captured_databases: true,
        ..HistoryConfig::default()
    };
    let mut history = SchemaHistory::open(&config, dir.path(), "history.jsonl").await?;
    assert!(!history.exists()?);
    let captured = |id: &str| id.ends_with("\"orders\"");
    let db = |name: &str| name == "shop";
    assert!(
        history
            .record(record(10, "shop", &["orders", "notes"]), captured, db)
            .await?
    );
    assert!(
        !history
            .record(record(20, "shop", &["notes"]), captured, db)
            .await?
    );
    assert!(
        !history
            .record(record(30, "other", &["orders"]), captured, db)
            .await?
    );
    let stored = history.records()?;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].table_changes.len(), 1, "`notes` left out");
    assert!(history.exists()?);

    let all = SchemaHistory::open(&HistoryConfig::default(), dir.path(), "all.jsonl").await?;
    let mut all = all;
    assert!(
        all.record(record(20, "shop", &["notes"]), captured, db)
            .await?
    );
    assert_eq!(all.records()?.len(), 1, "everything is stored by default");
    Ok(())
}

#[tokio::test]
async fn a_torn_append_is_skipped_and_a_corrupt_record_is_an_error() -> Result<(), HistoryError> {
    let dir = tempfile::tempdir().map_err(|source| HistoryError::Io {
        what: "creating",
        path: "tmp".into(),
        source,
    })?;
    let path = dir.path().join("h.jsonl");
    let mut history = history_of(path.clone());
    assert!(matches!(
        history.recover(|_| true),
        Err(HistoryError::Missing(_))
    ));
    history
        .record(record(10, "shop", &["a"]), |_| true, |_| true)
        .await?;
    // A crash in the middle of the second append.
    let full = serde_json::to_string(&record(20, "shop", &["b"])).map_err(HistoryError::Encode)?;
    let torn = &full[..full.len() / 2];
    let append = |text: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|source| HistoryError::Io {
                what: "opening",
                path: path.clone(),
                source,
            })?;
        f.write_all(text.as_bytes())
            .map_err(|source| HistoryError::Io {
                what: "writing",
                path: path.clone(),
                source,
            })
    };
    append(torn)?;
    let recovered = history.recover(|_| true)?;
    assert_eq!(recovered.tables.len(), 1, "the torn record is ignored");
    // The next append starts on a line of its own; the torn line stays skipped.
    history
        .record(record(30, "shop", &["c"]), |_| true, |_| true)
        .await?;
    let ids: Vec<String> = history
        .recover(|_| true)?
        .tables
        .ids()
        .map(str::to_owned)
        .collect();
    assert_eq!(ids, [table_id(&["shop", "a"]), table_id(&["shop", "c"])]);
    // A line that is complete JSON but not a record names its place.
    append("{\"not\": \"a record\"}\n")?;
    let error = history
        .recover(|_| true)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("h.jsonl:4") && error.contains("snapshot.mode: recovery"),
        "{error}"
    );
    Ok(())
}

proptest::proptest! {
    /// Whatever a history file holds, reading it is an answer (records or an error naming the
    /// line), never a panic.
    #[test]
    fn any_file_content_reads_without_panicking(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
        let dir = tempfile::tempdir().map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        let path = dir.path().join("h.jsonl");
        std::fs::write(&path, &bytes).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        let _ = FileStore::new(path).read_all();
    }

    /// Records with any names, statements and positions are stored and read back unchanged.
    #[test]
    fn records_round_trip_through_the_file(
        db in "[a-z\"\\\\ .]{0,8}",
        tables in proptest::collection::vec("[a-zA-Z0-9_\"'\\\\.\u{e9}]{1,8}", 0..4),
        pos in proptest::prelude::any::<i64>(),
        ddl in "\\PC{0,40}",
    ) {
        let dir = tempfile::tempdir().map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        let path = dir.path().join("h.jsonl");
        let names: Vec<&str> = tables.iter().map(String::as_str).collect();
        let mut written = record(pos, &db, &names);
        written.ddl = ddl;
        let mut store = FileStore::new(&path);
        store.append(&written).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        let read = store.read_all().map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        proptest::prop_assert_eq!(read, vec![written]);
    }
}
