//! MariaDB's own DDL and column types (`type: mariadb`), streamed from a private MariaDB
//! 10.11: the server is the oracle. After each statement the schema change event's columns
//! must be the columns `information_schema` then lists, and the next row must carry them;
//! `UUID`, `INET4` and `INET6` values must read as the server prints them, in the snapshot
//! and in the stream. Debezium cannot be the oracle here: its grammar stops on `INET4`/`INET6`
//! and keeps a replaced table's old structure.

use super::*;

/// The columns of `db`.`table` as the server lists them: `name TYPE` in order.
fn server_columns(db: &str, table: &str) -> Vec<String> {
    let out = mariadb::sql(
        db,
        &format!(
            "SELECT CONCAT(COLUMN_NAME, ' ', UPPER(DATA_TYPE)) FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = '{db}' AND TABLE_NAME = '{table}' ORDER BY ORDINAL_POSITION"
        ),
    );
    out.lines().map(str::to_owned).collect()
}

/// The columns of a schema change event's (first) table change: `name TYPE` in order.
fn event_columns(event: &Json) -> Vec<String> {
    let table = &event["value"]["payload"]["tableChanges"][0]["table"];
    (table["columns"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default())
    .iter()
    .map(|c| {
        format!(
            "{} {}",
            c["name"].as_str().unwrap(),
            c["typeName"].as_str().unwrap()
        )
    })
    .collect()
}

#[test]
fn mariadb_only_ddl_leaves_the_schema_the_server_has() {
    let server = mariadb::server();
    let db = mariadb::database("mariadb_own_ddl");
    mariadb::sql(&db, "CREATE TABLE t (id INT PRIMARY KEY, a INT)");
    let dir = tempfile::tempdir().unwrap();
    let path = mariadb_pipeline(
        dir.path(),
        server.port,
        &[
            ("database.include.list", db.as_str().into()),
            ("include.schema.changes", true.into()),
            (
                "schema.history.internal.store.only.captured.databases.ddl",
                true.into(),
            ),
        ],
    );
    let mut child = sluice_test_support::pg::start(&path, &[]);
    // SET, DROP TABLE, DROP DATABASE, CREATE DATABASE, USE, CREATE TABLE.
    sluice_test_support::pg::wait_lines(dir.path(), 6, &mut child);
    let statements = [
        "CREATE OR REPLACE TABLE t (id INT PRIMARY KEY, b VARCHAR(10))",
        "ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT",
        "ALTER TABLE t ADD COLUMN IF NOT EXISTS c BIGINT",
        "ALTER TABLE t MODIFY COLUMN IF EXISTS zz BIGINT",
        "ALTER TABLE t CHANGE COLUMN IF EXISTS c c2 BIGINT",
        "ALTER TABLE t WAIT 5 ADD COLUMN IF NOT EXISTS (d INT, c2 INT)",
        "ALTER TABLE t NOWAIT DROP COLUMN IF EXISTS d, ALGORITHM=NOCOPY",
        "ALTER TABLE t ADD COLUMN g INT AS (id * 2) PERSISTENT, ADD COLUMN h BLOB",
        "ALTER TABLE t DROP COLUMN h, ADD COLUMN u UUID, ADD COLUMN ip INET6 AFTER b",
        "ALTER TABLE IF EXISTS t ADD COLUMN IF NOT EXISTS n INT INVISIBLE",
        "RENAME TABLE IF EXISTS nosuch TO other",
    ];
    let mut expected = Vec::new();
    for (i, statement) in statements.iter().enumerate() {
        mariadb::sql(&db, statement);
        expected.push(server_columns(&db, "t"));
        mariadb::sql(&db, &format!("INSERT INTO t (id) VALUES ({i})"));
    }
    // A sequence is no table: neither its DDL nor its state rows (NEXTVAL) give events.
    mariadb::sql(
        &db,
        "CREATE OR REPLACE SEQUENCE s; SELECT NEXTVAL(s); SELECT NEXTVAL(s)",
    );
    mariadb::sql(
        &db,
        &format!("INSERT INTO t (id) VALUES ({})", statements.len()),
    );
    let last = statements.len();
    let done = |l: &[Json]| {
        l.iter()
            .any(|e| e["value"]["payload"]["after"]["id"] == last)
    };
    sluice_test_support::pg::wait_for(dir.path(), "the last row", &mut child, done);
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let lines = sluice_test_support::pg::lines(dir.path());
    let what: Vec<String> = (lines.iter())
        .map(|l| {
            format!(
                "{} {} {}",
                l["topic"], l["value"]["payload"]["ddl"], l["value"]["payload"]["op"]
            )
        })
        .collect();
    // One schema change event and one row per statement, after the snapshot's six.
    assert_eq!(lines.len(), 7 + 2 * statements.len(), "{what:#?}");
    for (i, statement) in statements.iter().enumerate() {
        let (ddl, row) = (&lines[6 + 2 * i], &lines[7 + 2 * i]);
        // A rename gives each table its own statement (Debezium's `RENAME TABLE a TO b`).
        let written = statement.replace("RENAME TABLE IF EXISTS", "RENAME TABLE");
        assert_eq!(ddl["value"]["payload"]["ddl"], written, "{what:#?}");
        // Every statement but the rename of a missing table describes `t`.
        if !statement.starts_with("RENAME") {
            assert_eq!(event_columns(ddl), expected[i], "after `{statement}`");
        }
        let fields: Vec<&str> = (row["value"]["payload"]["after"].as_object().unwrap().keys())
            .map(String::as_str)
            .collect();
        let server: Vec<&str> = expected[i]
            .iter()
            .map(|c| c.split(' ').next().unwrap())
            .collect();
        assert_eq!(fields, server, "the row after `{statement}`");
    }
    // The replaced table's event is a CREATE; the no-op statements change nothing.
    assert_eq!(
        lines[6]["value"]["payload"]["tableChanges"][0]["type"],
        "CREATE"
    );
}

/// Tables MariaDB writes in ways the source cannot follow stop it with one line that names the
/// table and the way out: a system-versioned table (its deletes arrive as updates, its
/// history rows as inserts) and a COMPRESSED column (no binlog decoder for its type).
#[test]
fn versioned_tables_and_compressed_columns_are_refused_with_the_fix() {
    let server = mariadb::server();
    for (name, create, says) in [
        (
            "versioned",
            "CREATE TABLE v (id INT PRIMARY KEY, x INT) WITH SYSTEM VERSIONING",
            "system-versioned",
        ),
        (
            "compressed",
            "CREATE TABLE v (id INT PRIMARY KEY, x BLOB COMPRESSED)",
            "COMPRESSED column",
        ),
    ] {
        let db = mariadb::database(&format!("mariadb_refused_{name}"));
        mariadb::sql(
            &db,
            "CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1)",
        );
        let dir = tempfile::tempdir().unwrap();
        let path = mariadb_pipeline(
            dir.path(),
            server.port,
            &[("database.include.list", db.as_str().into())],
        );
        let mut child = sluice_test_support::pg::start(&path, &[]);
        sluice_test_support::pg::wait_lines(dir.path(), 1, &mut child);
        // Created after the snapshot's position: the DDL (versioned) or the first row (compressed) stops it.
        mariadb::sql(&db, &format!("{create}; INSERT INTO v (id) VALUES (1)"));
        let (log, e) = failed(child);
        assert!(
            e.contains(says) && e.contains("table.exclude.list"),
            "{name}: {e}\n{log}"
        );
        assert_eq!(e.lines().count(), 1);
        // Made before the start: the snapshot (or the first row) stops it the same way.
        let _ = std::fs::remove_dir_all(dir.path().join("data"));
        let _ = std::fs::remove_file(dir.path().join("out.jsonl"));
        let mut child = sluice_test_support::pg::start(&path, &[]);
        // The snapshot reads a COMPRESSED column (a query: both tables' rows); a streamed row
        // stops it.
        let t0 = std::time::Instant::now();
        while child.try_wait().unwrap().is_none()
            && sluice_test_support::pg::lines(dir.path()).len() < 2
        {
            assert!(
                t0.elapsed().as_secs() < 60,
                "{name}: no snapshot and no exit"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        mariadb::sql(&db, "INSERT INTO v (id) VALUES (2)");
        let (log, e) = failed(child);
        assert!(
            e.contains(says) && e.contains("table.exclude.list"),
            "{name} before the start: {e}\n{log}"
        );
        // Left out, the same table is no obstacle.
        let _ = std::fs::remove_dir_all(dir.path().join("data"));
        let _ = std::fs::remove_file(dir.path().join("out.jsonl"));
        let source = source_of("mariadb", dir.path(), server.port).set_all(&[
            ("database.include.list", db.as_str().into()),
            ("table.exclude.list", format!("{db}\\.v").into()),
        ]);
        let path = base(dir.path(), source).write(dir.path());
        run_ok(&path);
    }
}

/// MariaDB's UUID, INET4 and INET6 columns read as the server prints them, in the snapshot
/// (result sets: the server's text) and in the stream (binlog bytes, printed by Sluice), with
/// Debezium's MariaDB schema for UUID (`io.debezium.data.Uuid`); INVISIBLE columns included.
#[test]
fn uuid_and_inet_columns_read_as_the_server_prints_them() {
    let server = mariadb::server();
    let db = mariadb::database("mariadb_uuid_inet");
    let values = [
        (
            "123e4567-e89b-12d3-a456-426655440000",
            "10.1.2.3",
            "::ffff:1.2.3.4",
        ),
        ("ffffffff-0000-0000-0000-000000000000", "0.0.0.0", "fe80::"),
        (
            "00000000-0000-0000-0000-000000000001",
            "255.255.255.0",
            "2001:db8::1:0:0:1",
        ),
        (
            "a0000000-0000-0000-0000-000000000000",
            "1.0.0.0",
            "::1.2.3.4",
        ),
    ];
    let insert = |table: &str| {
        let rows: Vec<String> = (values.iter())
            .map(|(u, i4, i6)| format!("('{u}', '{i4}', '{i6}')"))
            .collect();
        mariadb::sql(
            &db,
            &format!("INSERT INTO {table} VALUES {}", rows.join(", ")),
        );
    };
    // An INVISIBLE column is read too (`SELECT *` would leave it out).
    let create = "(id UUID PRIMARY KEY, ip4 INET4 NOT NULL, ip6 INET6, n INT INVISIBLE DEFAULT 7)";
    mariadb::sql(&db, &format!("CREATE TABLE snap {create}"));
    insert("snap");
    let dir = tempfile::tempdir().unwrap();
    let path = mariadb_pipeline(
        dir.path(),
        server.port,
        &[("database.include.list", db.as_str().into())],
    );
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), values.len(), &mut child);
    mariadb::sql(&db, &format!("CREATE TABLE streamed {create}"));
    insert("streamed");
    sluice_test_support::pg::wait_lines(dir.path(), 2 * values.len(), &mut child);
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    // The server's own text of each row.
    let server_rows: Vec<String> = mariadb::sql(
        &db,
        "SELECT CONCAT_WS(' ', id, ip4, ip6) FROM snap ORDER BY id",
    )
    .lines()
    .map(str::to_owned)
    .collect();
    let lines = sluice_test_support::pg::lines(dir.path());
    for (table, events) in [
        ("snap", &lines[..values.len()]),
        ("streamed", &lines[values.len()..]),
    ] {
        let mut ours: Vec<String> = (events.iter())
            .map(|l| {
                let a = &l["value"]["payload"]["after"];
                let text = |f: &str| a[f].as_str().unwrap().to_owned();
                format!("{} {} {}", text("id"), text("ip4"), text("ip6"))
            })
            .collect();
        let mut theirs = server_rows.clone();
        ours.sort();
        theirs.sort();
        assert_eq!(ours, theirs, "{table}");
        assert!(
            events
                .iter()
                .all(|l| l["value"]["payload"]["after"]["n"] == 7),
            "{table}"
        );
        let fields = &events[0]["value"]["schema"]["fields"][1]["fields"];
        assert_eq!(
            fields[0]["name"], "io.debezium.data.Uuid",
            "{table}: {fields}"
        );
        assert_eq!(fields[0]["version"], 1);
        assert_eq!(fields[1]["type"], "string");
        assert_eq!(fields[1]["optional"], false);
        assert_eq!(fields[2]["optional"], true);
        assert_eq!(
            events[0]["key"]["schema"]["fields"][0]["name"],
            "io.debezium.data.Uuid"
        );
    }
}
