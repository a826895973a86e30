//! `type: mariadb`: the mysql source speaking as Debezium's MariaDB connector.

use super::*;

#[test]
fn type_mariadb_names_its_connector_and_carries_each_transactions_gtid() {
    let server = mariadb::server();
    let db = mariadb::database("mysql_as_mariadb");
    mariadb::sql(&db, "CREATE TABLE t (id INT PRIMARY KEY)");
    let dir = tempfile::tempdir().unwrap();
    let path = streaming_pipeline(
        dir.path(),
        server.port,
        &format!("  database.include.list: {db}\n  include.schema.changes: true\n  schema.history.internal.store.only.captured.databases.ddl: true\n"),
    )
    .replace_text("type: mysql\n", "type: mariadb\n");
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
