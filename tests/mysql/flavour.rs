//! `type: mariadb`: the mysql source speaking as Debezium's MariaDB connector.

use super::*;

#[test]
fn type_mariadb_names_its_connector_and_carries_each_transactions_gtid() {
    let server = mariadb::server();
    let db = mariadb::database("mysql_as_mariadb");
    mariadb::sql(&db, "CREATE TABLE t (id INT PRIMARY KEY)");
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
    // The server's own word for each transaction's GTID (`@@last_gtid` of the session).
    let gtids: Vec<String> = (1..=2)
        .map(|i| {
            mariadb::sql(
                &db,
                &format!("INSERT INTO t VALUES ({i}); SELECT @@last_gtid"),
            )
            .trim()
            .to_owned()
        })
        .collect();
    let ddl_gtid = mariadb::sql(&db, "ALTER TABLE t ADD v INT; SELECT @@last_gtid")
        .trim()
        .to_owned();
    sluice_test_support::pg::wait_lines(dir.path(), 9, &mut child);
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let lines = sluice_test_support::pg::lines(dir.path());
    for l in &lines {
        let source = &l["value"]["payload"]["source"];
        assert_eq!(source["connector"], "mariadb", "{l}");
        let source_schema = l["value"]["schema"]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["field"] == "source")
            .unwrap();
        assert_eq!(
            source_schema["name"],
            "io.debezium.connector.mariadb.Source"
        );
    }
    assert_eq!(
        lines[0]["key"]["schema"]["name"],
        "io.debezium.connector.mariadb.SchemaChangeKey"
    );
    assert!(
        lines[5]["value"]["payload"]["source"]["gtid"].is_null(),
        "a snapshot has none"
    );
    let what: Vec<String> = lines[6..]
        .iter()
        .map(|l| {
            format!(
                "{} {} {}",
                l["topic"], l["value"]["payload"]["ddl"], l["value"]["payload"]["op"]
            )
        })
        .collect();
    let streamed: Vec<&Json> = lines[6..]
        .iter()
        .map(|l| &l["value"]["payload"]["source"]["gtid"])
        .collect();
    assert_eq!(
        streamed,
        [
            &Json::from(gtids[0].as_str()),
            &Json::from(gtids[1].as_str()),
            &Json::from(ddl_gtid.as_str())
        ],
        "{what:#?}"
    );
}

/// `include.query` with `type: mariadb`: each streamed change carries the statement that made
/// it (MariaDB's ANNOTATE_ROWS event, read at the hole the server leaves where it was), every
/// statement of a transaction its own; snapshot rows and schema change events carry none.
#[test]
fn include_query_gives_each_change_its_statement_on_mariadb() {
    let server = mariadb::server();
    let db = mariadb::database("mariadb_include_query");
    mariadb::sql(
        &db,
        "CREATE TABLE t (id INT PRIMARY KEY, v INT); INSERT INTO t VALUES (1, 1)",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = mariadb_pipeline(
        dir.path(),
        server.port,
        &[
            ("database.include.list", db.as_str().into()),
            ("include.query", true.into()),
            ("include.schema.changes", false.into()),
        ],
    );
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), 1, &mut child);
    let statements = [
        "INSERT INTO t VALUES (2, 2), (3, 3)",
        "UPDATE t SET v = v + 10 WHERE id <= 2",
        "DELETE FROM t WHERE id = 3",
    ];
    mariadb::sql(
        &db,
        &format!(
            "{}; BEGIN; {}; {}; COMMIT",
            statements[0], statements[1], statements[2]
        ),
    );
    sluice_test_support::pg::wait_lines(dir.path(), 7, &mut child);
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let lines = sluice_test_support::pg::lines(dir.path());
    let got: Vec<(String, Json)> = lines
        .iter()
        .filter(|l| !l["value"].is_null())
        .map(|l| {
            let p = &l["value"]["payload"];
            (
                p["op"].as_str().unwrap().to_owned(),
                p["source"]["query"].clone(),
            )
        })
        .collect();
    let q = |i: usize| Json::from(statements[i]);
    assert_eq!(
        got,
        [
            ("r".to_owned(), Json::Null),
            ("c".to_owned(), q(0)),
            ("c".to_owned(), q(0)),
            ("u".to_owned(), q(1)),
            ("u".to_owned(), q(1)),
            ("d".to_owned(), q(2)),
        ]
    );
}

/// `gtid.source.excludes` with `type: mariadb`: the row changes of transactions whose GTID
/// source (`domain-server`) matches are left out, the others kept; a schema change of the
/// excluded source still applies (the next rows decode with it). `type: mysql` refuses the
/// setting with the way out.
#[test]
fn gtid_source_filters_leave_out_the_rows_of_matching_transactions() {
    let server = mariadb::server();
    let db = mariadb::database("mariadb_gtid_filter");
    mariadb::sql(
        &db,
        "CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (0)",
    );
    let dir = tempfile::tempdir().unwrap();
    let keys = [
        ("database.include.list", Scalar::from(&db)),
        ("include.schema.changes", false.into()),
        ("gtid.source.excludes", "7-.*".into()),
    ];
    let path = streaming_pipeline(dir.path(), server.port, &keys);
    let refused = error_line(&path);
    assert!(refused.contains("type: mariadb"), "{refused}");
    let path = mariadb_pipeline(dir.path(), server.port, &keys);
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), 1, &mut child);
    mariadb::sql(
        &db,
        "INSERT INTO t VALUES (1); SET SESSION gtid_domain_id = 7; INSERT INTO t VALUES (2); ALTER TABLE t ADD v INT; INSERT INTO t VALUES (3, 3); SET SESSION gtid_domain_id = 0; INSERT INTO t VALUES (4, 4)",
    );
    sluice_test_support::pg::wait_lines(dir.path(), 3, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(500));
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let after: Vec<Json> = sluice_test_support::pg::lines(dir.path())
        .iter()
        .map(|l| l["value"]["payload"]["after"].clone())
        .collect();
    assert_eq!(
        after,
        [
            serde_json::json!({"id": 0}),
            serde_json::json!({"id": 1}),
            serde_json::json!({"id": 4, "v": 4})
        ]
    );
}
