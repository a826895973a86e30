use proptest::prelude::*;
use sluice_kit::history::HistoryRecord;

use super::*;

/// The history real Debezium 3.6.3 wrote for the conformance fixtures (make.sh there).
const HISTORY: &str = include_str!("../../../../tests/fixtures/debezium/mysql/history.dat");

fn records() -> Vec<HistoryRecord> {
    HISTORY
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_statement_of_debeziums_history_gives_the_tables_it_recorded() {
    let mut model = Model::new(None);
    for record in records() {
        let session = record.database_name.clone().unwrap_or_default();
        let applied = model.apply(&session, &record.ddl).unwrap();
        let ours: Vec<TableChange> = applied.into_iter().flat_map(|a| a.changes).collect();
        assert_eq!(ours, record.table_changes, "after `{}`", record.ddl);
    }
    assert_eq!(model.tables().count(), 2);
}

#[test]
fn columns_move_rename_and_keep_the_primary_key() {
    let mut model = Model::new(Some("utf8mb4".into()));
    model
        .apply(
            "d",
            "CREATE TABLE t (a INT, b VARCHAR(3), c INT, PRIMARY KEY (a, c)) DEFAULT CHARSET=latin1",
        )
        .unwrap();
    let applied = model
        .apply(
            "d",
            "ALTER TABLE t CHANGE COLUMN c cc BIGINT UNSIGNED NOT NULL FIRST, ADD COLUMN z ENUM('x','y') AFTER a, RENAME COLUMN b TO bb",
        )
        .unwrap();
    let Some(TableChange {
        kind: ChangeKind::Alter,
        table: Some(t),
        ..
    }) = applied[0].changes.first()
    else {
        panic!("an ALTER: {applied:?}");
    };
    let names: Vec<(&str, i32)> = t
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.position))
        .collect();
    assert_eq!(names, [("cc", 1), ("a", 2), ("z", 3), ("bb", 4)]);
    assert_eq!(t.primary_key_column_names, ["a", "cc"]);
    assert_eq!(t.columns[0].type_name, "BIGINT UNSIGNED");
    assert_eq!(t.columns[2].enum_values, ["'x'", "'y'"]);
    assert_eq!(t.columns[2].charset_name.as_deref(), Some("latin1"));
    assert!(!t.columns[1].optional, "a key column is NOT NULL");
}

#[test]
fn renames_alter_the_new_table_and_drops_give_one_event_per_table() {
    let mut model = Model::new(None);
    model
        .apply("d", "CREATE TABLE a (id INT PRIMARY KEY)")
        .unwrap();
    model.apply("d", "CREATE TABLE c (id INT)").unwrap();
    let applied = model.apply("d", "RENAME TABLE a TO b").unwrap();
    let change = &applied[0].changes[0];
    assert_eq!(
        (
            change.kind,
            change.id.as_str(),
            change.previous_id.as_deref()
        ),
        (ChangeKind::Alter, "\"d\".\"b\"", Some("\"d\".\"a\""))
    );
    assert!(model.table("d", "b").is_some() && model.table("d", "a").is_none());
    let applied = model.apply("d", "ALTER TABLE b RENAME TO e").unwrap();
    assert_eq!(applied[0].changes[0].id, "\"d\".\"e\"");
    assert_eq!(applied[0].changes[0].kind, ChangeKind::Alter);
    let applied = model.apply("d", "DROP TABLE IF EXISTS e, c").unwrap();
    let ddl: Vec<(&str, &str)> = applied
        .iter()
        .map(|a| (a.ddl.as_deref().unwrap(), a.table.as_deref().unwrap()))
        .collect();
    assert_eq!(
        ddl,
        [
            ("DROP TABLE IF EXISTS `d`.`e`", "e,c"),
            ("DROP TABLE IF EXISTS `d`.`c`", "e,c")
        ]
    );
    assert_eq!(model.tables().count(), 0);
}

#[test]
fn statements_that_change_no_known_table_give_a_database_event() {
    let mut model = Model::new(None);
    model
        .apply("d", "CREATE TABLE a (id INT NOT NULL, v INT)")
        .unwrap();
    for ddl in [
        "CREATE INDEX i ON a (v)",
        "ALTER TABLE unknown ADD x INT",
        "CREATE TABLE a (id INT)",
        "CREATE TABLE n LIKE unknown",
    ] {
        let applied = model.apply("d", ddl).unwrap();
        assert_eq!(applied, [Applied::database("d", Some(""))], "{ddl}");
    }
    let applied = model.apply("d", "CREATE UNIQUE INDEX u ON a (id)").unwrap();
    let t = applied[0].changes[0].table.as_ref().unwrap();
    assert_eq!(
        t.primary_key_column_names,
        ["id"],
        "a unique key of NOT NULL columns"
    );
}

#[test]
fn defaults_read_as_debezium_reads_them() {
    let mut model = Model::new(None);
    let applied = model
        .apply(
            "d",
            "CREATE TABLE t (a VARCHAR(3) DEFAULT 'it''s', b INT NOT NULL DEFAULT -5, c TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, d INT NOT NULL, e INT DEFAULT NULL, f INT NOT NULL AUTO_INCREMENT COMMENT 'x', PRIMARY KEY (f))",
        )
        .unwrap();
    let t = applied[0].changes[0].table.as_ref().unwrap();
    let facts: Vec<(Option<&str>, bool, bool)> = t
        .columns
        .iter()
        .map(|c| {
            (
                c.default_value_expression.as_deref(),
                c.has_default_value,
                c.auto_incremented,
            )
        })
        .collect();
    assert_eq!(
        facts,
        [
            (Some("it''s"), true, false),
            (Some("-5"), true, false),
            (Some("1970-01-01 00:00:00"), true, true),
            (None, false, false),
            (None, true, false),
            (None, false, true),
        ]
    );
    assert_eq!(
        t.columns[5].comment, None,
        "comments only with include.schema.comments"
    );
}

#[test]
fn a_statement_the_parser_cannot_read_is_an_error_not_a_guess() {
    let mut model = Model::new(None);
    let err = model
        .apply("d", "ALTER TABLE t ADD COLUMN (a INT")
        .unwrap_err();
    assert!(err.0.contains("cannot be parsed"), "{err}");
    model
        .apply("d", "CREATE TABLE t (p POINT, g GEOMETRY)")
        .unwrap();
    let err = model.apply("d", "CREATE TABLE u (x FOO(3))").unwrap_err();
    assert!(err.0.contains("FOO"), "{err}");
}

#[test]
fn mysql_only_syntax_is_read_as_debeziums_parser_reads_it() {
    let mut model = Model::new(None);
    model
        .apply("d", "CREATE TABLE t (id INT PRIMARY KEY, nc NATIONAL CHAR(3), lv LONG VARCHAR, lvb LONG VARBINARY, cb CHAR(4) BINARY, vc VARCHAR(6) CHARSET latin1) DEFAULT CHARSET=utf8mb4")
        .unwrap();
    let applied = model
        .apply("d", "ALTER TABLE t ADD COLUMN (a INT DEFAULT 1, b VARCHAR(3)), CONVERT TO CHARACTER SET latin1")
        .unwrap();
    let t = applied[0].changes[0].table.clone().unwrap();
    let facts: Vec<(&str, &str, i32, Option<&str>)> = t
        .columns
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.type_name.as_str(),
                c.jdbc_type,
                c.charset_name.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        facts,
        [
            ("id", "INT", 4, None),
            ("nc", "NATIONAL CHAR", -15, Some("latin1")),
            ("lv", "LONG VARCHAR", 12, Some("latin1")),
            ("lvb", "LONG VARBINARY", 2004, None),
            ("cb", "CHAR BINARY", 1, Some("latin1")),
            ("vc", "VARCHAR", 12, Some("latin1")),
            ("a", "INT", 4, None),
            ("b", "VARCHAR", 12, Some("latin1")),
        ]
    );
    assert_eq!(t.default_charset_name.as_deref(), Some("latin1"));
    assert_eq!(t.columns[1].length, Some(3));
}

proptest! {
    /// Statements made of MariaDB's words in any order are parsed or refused: never a panic.
    #[test]
    fn mariadb_words_in_any_order_are_parsed_or_refused(words in proptest::collection::vec(proptest::sample::select(vec![
        "ALTER", "TABLE", "t", "ADD", "COLUMN", "IF", "NOT", "EXISTS", "MODIFY", "CHANGE", "RENAME",
        "DROP", "WAIT", "5", "NOWAIT", "(", ")", ",", "c", "INT", "COMPRESSED", "=", "PERSISTENT",
        "AS", "ROW", "START", "PRIMARY", "KEY", "ALGORITHM", "NOCOPY", "CREATE", "OR", "REPLACE",
        "SEQUENCE", "UUID", "INET6", ";",
    ]), 0..24)) {
        let mut model = Model::new(None);
        let _ = model.apply("d", "CREATE TABLE t (id INT PRIMARY KEY, c INT)");
        let _ = model.apply("d", &words.join(" "));
    }

    /// Any text, and any cut of a real statement, is parsed or refused: never a panic.
    #[test]
    fn any_text_is_parsed_or_refused(text in "\\PC{0,200}", cut in 0usize..2000) {
        let mut model = Model::new(None);
        let _ = model.apply("d", &text);
        for record in records() {
            let end = record.ddl.char_indices().map(|(i, _)| i).take_while(|i| *i <= cut).last().unwrap_or(0);
            let _ = model.apply("inventory", &record.ddl[..end]);
        }
    }
}

#[test]
fn a_model_replayed_from_the_history_equals_the_one_the_statements_built() {
    let mut parsed = Model::new(None);
    let mut replayed = Model::new(None);
    for record in records() {
        parsed
            .apply(record.database_name.as_deref().unwrap_or(""), &record.ddl)
            .unwrap();
        replayed.replay(&record).unwrap();
    }
    assert_eq!(parsed.server_charset.as_deref(), Some("latin1"));
    assert_eq!(replayed.tables, parsed.tables);
    assert_eq!(replayed.databases, parsed.databases);
    assert_eq!(key_of("\"d\".\"t.x\""), Some(("d".into(), "t.x".into())));
}

#[test]
fn table_options_partitions_and_tolerated_repeats_change_no_column() {
    let mut model = Model::new(None);
    model
        .apply(
            "d",
            "CREATE TABLE p (id INT NOT NULL, PRIMARY KEY (id)) ENGINE=InnoDB\n PARTITION BY HASH (id) PARTITIONS 4",
        )
        .unwrap();
    assert_eq!(model.table("d", "p").unwrap().columns.len(), 1);
    for ddl in [
        "ALTER TABLE p ENGINE=InnoDB",
        "ALTER TABLE p COMMENT='x', FORCE",
        "ALTER TABLE p ADD PARTITION PARTITIONS 2",
        "ALTER TABLE p RENAME INDEX a TO b",
    ] {
        let applied = model.apply("d", ddl);
        assert!(
            applied.is_ok() || ddl.contains("RENAME"),
            "{ddl}: {applied:?}"
        );
    }
    assert!(!changes_no_column("ALTER TABLE p ADD x INT"));
    assert!(!changes_no_column("ALTER TABLE p RENAME INDEX a TO b"));
    // A DDL the snapshot's structure already shows, seen again in the stream.
    model.apply("d", "ALTER TABLE p ADD COLUMN v INT").unwrap();
    model.apply("d", "ALTER TABLE p ADD COLUMN v INT").unwrap();
    model
        .apply("d", "ALTER TABLE p DROP COLUMN IF EXISTS w")
        .unwrap();
    let names: Vec<&str> = model
        .table("d", "p")
        .unwrap()
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["id", "v"]);
    // Keys: a prefix length is not part of the name; PRIMARY KEY beats a UNIQUE column.
    model
        .apply(
            "d",
            "CREATE TABLE k (a INT UNIQUE, b INT PRIMARY KEY, n VARCHAR(20))",
        )
        .unwrap();
    assert_eq!(
        model.table("d", "k").unwrap().primary_key_column_names,
        ["b"]
    );
    model
        .apply(
            "d",
            "CREATE TABLE q (n VARCHAR(20) NOT NULL, PRIMARY KEY (`n`(10)))",
        )
        .unwrap();
    assert_eq!(
        model.table("d", "q").unwrap().primary_key_column_names,
        ["n"]
    );
    // A rename keeps the old name in the history record, so a recovery drops it.
    let applied = model.apply("d", "ALTER TABLE q RENAME TO r").unwrap();
    assert_eq!(
        applied[0].changes[0].previous_id.as_deref(),
        Some("\"d\".\"q\"")
    );
}

#[test]
fn a_case_insensitive_model_matches_names_whatever_their_case_and_keeps_the_first() {
    for case_insensitive in [false, true] {
        let mut model = Model::new(None);
        model.set_case_insensitive(case_insensitive);
        model
            .apply("d", "CREATE TABLE Items (Id INT PRIMARY KEY)")
            .unwrap();
        let applied = model.apply("D", "ALTER TABLE ITEMS ADD v INT").unwrap();
        let altered = applied[0].changes.first();
        if case_insensitive {
            // The table keeps the name its CREATE gave it.
            assert_eq!(altered.unwrap().id, "\"d\".\"Items\"");
            assert_eq!(model.table("d", "items").unwrap().columns.len(), 2);
            model.apply("d", "DROP TABLE ITEMS").unwrap();
            assert!(model.table("d", "Items").is_none());
        } else {
            // Another table: the ALTER names one the model does not know.
            assert!(altered.is_none());
            assert!(model.table("d", "items").is_none());
            assert_eq!(model.table("d", "Items").unwrap().columns.len(), 1);
        }
    }
}

/// MariaDB's own syntax (Debezium's MariaDB grammar), each statement applied in turn: the
/// columns it leaves (as `name:TYPE`), or the refusal's words.
#[test]
fn mariadb_syntax_leaves_the_structure_mariadb_makes() {
    let steps: Vec<(&str, Result<&str, &str>)> = vec![
        ("CREATE TABLE t (id INT PRIMARY KEY, a INT)", Ok("id:INT,a:INT")),
        ("CREATE OR REPLACE TABLE t (id INT PRIMARY KEY, b VARCHAR(10))", Ok("id:INT,b:VARCHAR")),
        ("ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT", Ok("id:INT,b:VARCHAR,c:INT")),
        // MariaDB leaves an existing column as it is (Debezium would redefine it).
        ("ALTER TABLE t ADD COLUMN IF NOT EXISTS c BIGINT", Ok("id:INT,b:VARCHAR,c:INT")),
        ("ALTER TABLE t ADD IF NOT EXISTS (c BIGINT, d INT)", Ok("id:INT,b:VARCHAR,c:INT,d:INT")),
        ("ALTER TABLE t DROP IF EXISTS zz, DROP COLUMN IF EXISTS d", Ok("id:INT,b:VARCHAR,c:INT")),
        // Absent columns: nothing to change (Debezium would stop).
        ("ALTER TABLE t MODIFY COLUMN IF EXISTS zz BIGINT, CHANGE IF EXISTS yy y INT", Ok("id:INT,b:VARCHAR,c:INT")),
        ("ALTER TABLE t RENAME COLUMN IF EXISTS xx TO x, ALTER COLUMN IF EXISTS ww SET DEFAULT 1", Ok("id:INT,b:VARCHAR,c:INT")),
        ("ALTER TABLE t MODIFY IF EXISTS c BIGINT", Ok("id:INT,b:VARCHAR,c:BIGINT")),
        ("ALTER TABLE t CHANGE COLUMN IF EXISTS c c2 BIGINT", Ok("id:INT,b:VARCHAR,c2:BIGINT")),
        ("ALTER TABLE IF EXISTS t WAIT 5 ADD e INT, ALGORITHM=NOCOPY", Ok("id:INT,b:VARCHAR,c2:BIGINT,e:INT")),
        ("ALTER TABLE t NOWAIT DROP e, ADD PRIMARY KEY IF NOT EXISTS (b)", Ok("id:INT,b:VARCHAR,c2:BIGINT")),
        ("ALTER TABLE t ADD g INT AS (id * 2) PERSISTENT, ADD h BLOB COMPRESSED=zlib", Ok("id:INT,b:VARCHAR,c2:BIGINT,g:INT,h:BLOB")),
        ("ALTER TABLE t ADD INDEX IF NOT EXISTS ix (g), DROP INDEX IF EXISTS iy", Ok("id:INT,b:VARCHAR,c2:BIGINT,g:INT,h:BLOB")),
        ("CREATE TABLE u (id UUID PRIMARY KEY, i4 INET4, i6 INET6 NOT NULL, n INT INVISIBLE, c VARCHAR(20) /*M!100301 COMPRESSED*/) ROW_FORMAT=COMPRESSED", Ok("id:UUID,i4:INET4,i6:INET6,n:INT,c:VARCHAR")),
        ("RENAME TABLE IF EXISTS u TO u2", Ok("id:UUID,i4:INET4,i6:INET6,n:INT,c:VARCHAR")),
        ("DROP TABLE IF EXISTS u2 WAIT 3", Ok("")),
        ("CREATE OR REPLACE SEQUENCE s", Ok("")),
        ("CREATE TABLE v (id INT PRIMARY KEY, x INT) WITH SYSTEM VERSIONING", Err("system-versioned")),
        ("CREATE TABLE v (id INT PRIMARY KEY, s TIMESTAMP(6) AS ROW START, e TIMESTAMP(6) AS ROW END, PERIOD FOR SYSTEM_TIME(s, e))", Err("system-versioned")),
        ("ALTER TABLE t ADD SYSTEM VERSIONING", Err("system-versioned")),
        ("CREATE TABLE w (id INT PRIMARY KEY, nowait INT, wait INT)", Ok("id:INT,nowait:INT,wait:INT")),
        // Statements that need a rewrite keep columns and tables named like MariaDB's words.
        ("CREATE TABLE g (a NATIONAL CHAR(3), compressed INT, nowait INT, wait INT, CHECK (compressed = 1))", Ok("a:NATIONAL CHAR,compressed:INT,nowait:INT,wait:INT")),
        ("CREATE TABLE nowait (id INT PRIMARY KEY, b LONG VARCHAR)", Ok("id:INT,b:LONG VARCHAR")),
        ("ALTER TABLE nowait WAIT 2 ADD COLUMN IF NOT EXISTS compressed BLOB COMPRESSED NOT NULL", Ok("id:INT,b:LONG VARCHAR,compressed:BLOB")),
        ("ALTER TABLE nowait ADD c VARCHAR(9) CHARACTER SET latin1 COMPRESSED, ADD persistent INT, ALGORITHM = NOCOPY", Ok("id:INT,b:LONG VARCHAR,compressed:BLOB,c:VARCHAR,persistent:INT")),
        ("ALTER TABLE nowait CHANGE persistent wait INT, ADD nowait INT", Ok("id:INT,b:LONG VARCHAR,compressed:BLOB,c:VARCHAR,wait:INT,nowait:INT")),
        ("DROP TABLE IF EXISTS d.nowait, w WAIT 3", Ok("")),
        (";; CREATE TABLE z2 (id INT PRIMARY KEY, a INT); ALTER TABLE z2 ADD COLUMN IF NOT EXISTS a BIGINT", Ok("id:INT,a:INT;id:INT,a:INT")),
    ];
    let mut model = Model::new(Some("utf8mb4".into()));
    for (statement, expected) in steps {
        let got = model.apply("d", statement).map(|applied| {
            let tables: Vec<String> = (applied.iter().flat_map(|a| a.changes.iter()))
                .filter_map(|c| c.table.as_ref())
                .map(|t| {
                    let columns: Vec<String> = (t.columns.iter())
                        .map(|c| format!("{}:{}", c.name, c.type_name))
                        .collect();
                    columns.join(",")
                })
                .collect();
            tables.join(";")
        });
        match (got, expected) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "after `{statement}`"),
            (Err(e), Err(words)) => assert!(e.0.contains(words), "`{statement}`: {e}"),
            (got, _) => panic!("`{statement}`: {got:?}"),
        }
    }
    let key = &model.table("d", "t").unwrap().primary_key_column_names;
    assert_eq!(
        key,
        &["id"],
        "a key added IF NOT EXISTS to a table that has one"
    );
}
