//! Snapshot then stream: the events, their `source` blocks and offsets as seed 003 shows them.

use super::*;

#[test]
fn snapshot_then_changes_in_commit_order_with_debeziums_source_block() {
    let server = SqlServer::start("testDB");
    server.sql("CREATE TABLE dbo.customers (id int PRIMARY KEY, name nvarchar(50) NOT NULL, email varchar(80))");
    server.sql("INSERT INTO dbo.customers VALUES (1001, N'Sally', 'sally@example.org'); INSERT INTO dbo.customers VALUES (1002, N'George', NULL)");
    server.enable_cdc(&["dbo.customers"]);
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(dir.path(), &server, &[]);
    let mut child = start(&path, &[]);
    wait_events(dir.path(), 2, &mut child);
    let p = payloads(dir.path());
    assert_eq!(
        (p[0]["op"].as_str(), p[1]["op"].as_str()),
        (Some("r"), Some("r"))
    );
    assert_eq!(p[0]["source"]["snapshot"], "first");
    assert_eq!(p[1]["source"]["snapshot"], "last");
    assert_eq!(
        p[0]["after"],
        serde_json::json!({"id": 1001, "name": "Sally", "email": "sally@example.org"})
    );
    assert_eq!(p[1]["after"]["email"], Json::Null);
    assert!(p[0]["source"]["change_lsn"].is_null() && p[0]["source"]["event_serial_no"].is_null());
    let lsn = regex::Regex::new("^[0-9a-f]{8}:[0-9a-f]{8}:[0-9a-f]{4}$").unwrap();
    assert!(
        lsn.is_match(p[0]["source"]["commit_lsn"].as_str().unwrap()),
        "{}",
        p[0]["source"]
    );

    // A transaction of two inserts, an update, a delete and an update of the key.
    server.sql("BEGIN TRANSACTION; INSERT INTO dbo.customers VALUES (1003, N'Edward', NULL); INSERT INTO dbo.customers VALUES (1004, N'Anne', 'anne@example.org'); COMMIT");
    server.sql("UPDATE dbo.customers SET email = 'noreply@example.org' WHERE id = 1001");
    server.sql("DELETE FROM dbo.customers WHERE id = 1002");
    server.sql("UPDATE dbo.customers SET id = 2004 WHERE id = 1004");
    // 2 + 2 creates + 1 update + delete and tombstone + (delete, tombstone, create).
    wait_events(dir.path(), 10, &mut child);
    let all = lines(dir.path());
    let p: Vec<&Json> = all.iter().map(|l| &l["value"]["payload"]).collect();
    let ops: Vec<String> = p
        .iter()
        .map(|p| p["op"].as_str().unwrap_or("tombstone").to_owned())
        .collect();
    assert_eq!(
        ops,
        [
            "r",
            "r",
            "c",
            "c",
            "u",
            "d",
            "tombstone",
            "d",
            "tombstone",
            "c"
        ]
    );
    let s = |i: usize| &p[i]["source"];
    // One commit LSN for the transaction, change LSNs in its order, event numbers as seed 003
    // describes them: 1 for a create or a delete, 2 for an update (two change rows), 1 and 2
    // for the delete and create of a key update.
    assert_eq!(s(2)["commit_lsn"], s(3)["commit_lsn"]);
    assert!(s(2)["change_lsn"].as_str() < s(3)["change_lsn"].as_str());
    assert!(s(3)["commit_lsn"].as_str() < s(4)["commit_lsn"].as_str());
    assert_eq!(s(2)["event_serial_no"], 1);
    assert_eq!(s(4)["event_serial_no"], 2);
    assert_eq!(s(5)["event_serial_no"], 1);
    assert_eq!(
        (
            s(7)["event_serial_no"].as_i64(),
            s(9)["event_serial_no"].as_i64()
        ),
        (Some(1), Some(2))
    );
    assert_eq!(s(7)["change_lsn"], s(9)["change_lsn"]);
    assert_eq!(s(2)["snapshot"], "false");
    for i in [2, 4, 5] {
        assert_eq!(s(i)["connector"], "sqlserver");
        assert_eq!(s(i)["name"], "server1");
        assert_eq!(s(i)["db"], "testDB");
        assert_eq!(s(i)["schema"], "dbo");
        assert_eq!(s(i)["table"], "customers");
        assert!(
            s(i)["ts_ms"].as_i64().unwrap() > 1_700_000_000_000,
            "{}",
            s(i)
        );
    }
    assert_eq!(p[4]["before"]["email"], "sally@example.org");
    assert_eq!(p[4]["after"]["email"], "noreply@example.org");
    assert_eq!(p[5]["before"]["id"], 1002);
    assert_eq!(p[7]["before"]["id"], 1004);
    assert_eq!(p[9]["after"]["id"], 2004);
    // Topics, keys and schema names: `<topic.prefix>.<database>.<schema>.<table>`.
    assert_eq!(all[2]["topic"], "server1.testDB.dbo.customers");
    assert_eq!(all[2]["key"]["payload"], serde_json::json!({"id": 1003}));
    assert_eq!(
        all[2]["value"]["schema"]["name"],
        "server1.testDB.dbo.customers.Envelope"
    );
    assert_eq!(
        all[2]["key"]["schema"]["name"],
        "server1.testDB.dbo.customers.Key"
    );
    let source_schema = all[2]["value"]["schema"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "source")
        .unwrap();
    assert_eq!(
        source_schema["name"],
        "io.debezium.connector.sqlserver.Source"
    );
    let fields: Vec<&str> = source_schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "version",
            "connector",
            "name",
            "ts_ms",
            "snapshot",
            "db",
            "sequence",
            "ts_us",
            "ts_ns",
            "schema",
            "table",
            "change_lsn",
            "commit_lsn",
            "event_serial_no"
        ]
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        super::rebuilt(dir.path(), "server1.testDB.dbo.customers"),
        [
            (1001, "Sally".to_string()),
            (1003, "Edward".to_string()),
            (2004, "Anne".to_string())
        ]
        .into()
    );
}

#[test]
fn the_function_query_mode_reads_the_same_changes() {
    let server = SqlServer::start("fnDB");
    server.sql("CREATE TABLE dbo.customers (id int PRIMARY KEY, name nvarchar(50))");
    server.enable_cdc(&["dbo.customers"]);
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(
        dir.path(),
        &server,
        &[
            ("data.query.mode", "function".into()),
            ("streaming.fetch.size", 1u32.into()),
        ],
    );
    let mut child = start(&path, &[]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    server.sql("INSERT INTO dbo.customers VALUES (1, N'a'); UPDATE dbo.customers SET name = N'b' WHERE id = 1");
    wait_events(dir.path(), 2, &mut child);
    let p = payloads(dir.path());
    assert_eq!(
        (p[0]["op"].as_str(), p[1]["op"].as_str()),
        (Some("c"), Some("u"))
    );
    assert_eq!(p[1]["before"]["name"], "a");
    assert_eq!(p[1]["after"]["name"], "b");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn the_example_pipeline_runs_against_the_emulator() {
    let server = SqlServer::start("testDB");
    server.sql("CREATE TABLE dbo.customers (id int PRIMARY KEY, name nvarchar(50))");
    server.sql("INSERT INTO dbo.customers VALUES (1, N'a')");
    server.enable_cdc(&["dbo.customers"]);
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/sqlserver-file.yaml");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg(&example)
        .env("SLUICE_DATA_DIR", dir.path())
        .env("SLUICE_OUT_DIR", dir.path())
        .env("MSSQL_PORT", server.port.to_string())
        .env("MSSQL_PASSWORD", PASSWORD)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = dir.path().join("sqlserver-file/events.jsonl");
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&out)
        .unwrap_or_default()
        .contains("\"op\":\"r\"")
    {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "no snapshot event"
        );
        assert!(child.try_wait().unwrap().is_none(), "sluice stopped");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    server.sql("INSERT INTO dbo.customers VALUES (2, N'b')");
    while !std::fs::read_to_string(&out)
        .unwrap_or_default()
        .contains("\"op\":\"c\"")
    {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "no streamed event"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn transaction_metadata_and_heartbeats() {
    let server = SqlServer::start("txDB");
    server.sql("CREATE TABLE dbo.a (id int PRIMARY KEY); CREATE TABLE dbo.b (id int PRIMARY KEY)");
    server.enable_cdc(&["dbo.a", "dbo.b"]);
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(
        dir.path(),
        &server,
        &[
            ("provide.transaction.metadata", true.into()),
            ("heartbeat.interval.ms", 100u32.into()),
        ],
    );
    let mut child = start(&path, &[]);
    wait_for(dir.path(), "a heartbeat", &mut child, |l| {
        l.iter()
            .any(|e| e["topic"] == "__debezium-heartbeat.server1")
    });
    server.sql("BEGIN TRANSACTION; INSERT INTO dbo.a VALUES (1); INSERT INTO dbo.b VALUES (2); INSERT INTO dbo.a VALUES (3); COMMIT");
    wait_for(dir.path(), "the END record", &mut child, |l| {
        l.iter().any(|e| e["value"]["payload"]["status"] == "END")
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let all: Vec<Json> = lines(dir.path())
        .into_iter()
        .filter(|e| e["topic"] != "__debezium-heartbeat.server1")
        .collect();
    let topics: Vec<&str> = all.iter().map(|e| e["topic"].as_str().unwrap()).collect();
    assert_eq!(
        topics,
        [
            "server1.transaction",
            "server1.txDB.dbo.a",
            "server1.txDB.dbo.b",
            "server1.txDB.dbo.a",
            "server1.transaction"
        ]
    );
    let begin = &all[0]["value"]["payload"];
    let lsn = all[1]["value"]["payload"]["source"]["commit_lsn"]
        .as_str()
        .unwrap();
    assert_eq!(
        (begin["status"].as_str(), begin["id"].as_str()),
        (Some("BEGIN"), Some(lsn))
    );
    let blocks: Vec<(i64, i64)> = all[1..4]
        .iter()
        .map(|e| {
            let t = &e["value"]["payload"]["transaction"];
            assert_eq!(t["id"], lsn);
            (
                t["total_order"].as_i64().unwrap(),
                t["data_collection_order"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(blocks, [(1, 1), (2, 1), (3, 2)]);
    let end = &all[4]["value"]["payload"];
    assert_eq!(end["event_count"], 3);
    let mut collections: Vec<(String, i64)> = end["data_collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["data_collection"].as_str().unwrap().to_owned(),
                c["event_count"].as_i64().unwrap(),
            )
        })
        .collect();
    collections.sort();
    assert_eq!(
        collections,
        [("txDB.dbo.a".to_owned(), 2), ("txDB.dbo.b".to_owned(), 1)]
    );
    let beat = lines(dir.path())
        .into_iter()
        .find(|e| e["topic"] == "__debezium-heartbeat.server1")
        .unwrap();
    assert_eq!(beat["key"]["payload"]["serverName"], "server1");
}

#[test]
fn the_seeds_legacy_names_work_with_a_deprecation_warning() {
    let server = SqlServer::start("legacyDB");
    server.sql("CREATE TABLE dbo.customers (id int PRIMARY KEY); CREATE TABLE dbo.other (id int PRIMARY KEY)");
    server.sql("INSERT INTO dbo.customers VALUES (1); INSERT INTO dbo.other VALUES (2)");
    server.enable_cdc(&["dbo.customers", "dbo.other"]);
    let dir = tempfile::tempdir().unwrap();
    // The test source with `database.server.name` in place of `topic.prefix`.
    let legacy = connection(&server)
        .set("database.server.name", "legacy1")
        .set("poll.interval.ms", 50u32)
        .set("include.schema.changes", false)
        .set("snapshot.mode", "initial_only")
        .set("table.whitelist", "dbo\\.customers");
    let path = base(dir.path(), legacy).write(dir.path());
    let log = sluice_test_support::pg::finish(start(&path, &[]));
    assert!(
        log.contains(
            "`database.server.name` is deprecated (Debezium 1.x's name): use `topic.prefix`"
        ),
        "{log}"
    );
    assert!(log.contains("`table.whitelist` is deprecated"), "{log}");
    let all = lines(dir.path());
    let topics: Vec<&str> = all.iter().map(|e| e["topic"].as_str().unwrap()).collect();
    assert_eq!(topics, ["legacy1.legacyDB.dbo.customers"]);
}

#[test]
fn a_table_entering_capture_mode_while_streaming_is_announced_and_read() {
    let server = SqlServer::start("enterDB");
    server.sql("CREATE TABLE dbo.a (id int PRIMARY KEY)");
    server.enable_cdc(&["dbo.a"]);
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(
        dir.path(),
        &server,
        &[("include.schema.changes", true.into())],
    );
    let mut child = start(&path, &[]);
    wait_events(dir.path(), 1, &mut child);
    server.sql("INSERT INTO dbo.a VALUES (1)");
    wait_events(dir.path(), 2, &mut child);
    server.sql("CREATE TABLE dbo.b (id int PRIMARY KEY, v nvarchar(5))");
    server.sql("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'b', @role_name = NULL");
    server.sql("INSERT INTO dbo.b VALUES (7, N'x')");
    wait_events(dir.path(), 4, &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    let log = sluice_test_support::pg::log_of(&child);
    let all = lines(dir.path());
    let topics: Vec<&str> = all.iter().map(|e| e["topic"].as_str().unwrap()).collect();
    assert_eq!(
        topics,
        [
            "server1",
            "server1.enterDB.dbo.a",
            "server1",
            "server1.enterDB.dbo.b"
        ]
    );
    let change = &all[2]["value"]["payload"];
    assert_eq!(change["tableChanges"][0]["id"], "\"enterDB\".\"dbo\".\"b\"");
    assert_eq!(change["tableChanges"][0]["type"], "CREATE");
    assert_eq!(
        all[3]["value"]["payload"]["after"],
        serde_json::json!({"id": 7, "v": "x"})
    );
    assert!(
        log.contains("The table entered capture mode.")
            && log.contains("\"enterDB\".\"dbo\".\"b\""),
        "{log}"
    );
}

#[test]
fn every_isolation_mode_snapshots_then_streams() {
    for mode in [
        "snapshot",
        "repeatable_read",
        "exclusive",
        "read_committed",
        "read_uncommitted",
    ] {
        let server = SqlServer::start("isoDB");
        server.sql("CREATE TABLE dbo.t (id int PRIMARY KEY, v nvarchar(5))");
        server.sql("INSERT INTO dbo.t VALUES (1, N'a'); INSERT INTO dbo.t VALUES (2, N'b')");
        server.enable_cdc(&["dbo.t"]);
        let dir = tempfile::tempdir().unwrap();
        let path = pipeline(
            dir.path(),
            &server,
            &[("snapshot.isolation.mode", mode.into())],
        );
        let mut child = start(&path, &[]);
        wait_events(dir.path(), 2, &mut child);
        server.sql("UPDATE dbo.t SET v = N'c' WHERE id = 2");
        wait_events(dir.path(), 3, &mut child);
        child.kill().unwrap();
        child.wait().unwrap();
        let ops: Vec<String> = payloads(dir.path())
            .iter()
            .map(|p| p["op"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ops, ["r", "r", "u"], "{mode}");
    }
}

#[test]
fn skipped_operations_are_left_out_by_the_query() {
    let server = SqlServer::start("skipDB");
    server.sql("CREATE TABLE dbo.t (id int PRIMARY KEY, v nvarchar(5))");
    server.enable_cdc(&["dbo.t"]);
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(
        dir.path(),
        &server,
        &[
            ("skipped.operations", "u".into()),
            ("streaming.fetch.size", 2u32.into()),
        ],
    );
    let mut child = start(&path, &[]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    server.sql("INSERT INTO dbo.t VALUES (1, N'a'); UPDATE dbo.t SET v = N'b' WHERE id = 1; UPDATE dbo.t SET v = N'c' WHERE id = 1; DELETE FROM dbo.t WHERE id = 1; INSERT INTO dbo.t VALUES (2, N'z')");
    wait_events(dir.path(), 4, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let ops: Vec<String> = payloads(dir.path())
        .iter()
        .map(|p| p["op"].as_str().unwrap_or("tombstone").to_owned())
        .collect();
    assert_eq!(ops, ["c", "d", "tombstone", "c"]);
}

/// The snapshot announces its tables with the rows the server counts in each
/// (`sys.partitions`): the status's table counts, estimates and Debezium's `TotalTableCount`;
/// a table without a key (a heap) is counted too.
#[test]
fn the_snapshot_says_its_tables() {
    let server = SqlServer::start("planDB");
    server.sql("CREATE TABLE dbo.a (id int PRIMARY KEY); CREATE TABLE dbo.b (id int)");
    server.sql("INSERT INTO dbo.a VALUES (1); INSERT INTO dbo.b VALUES (2); INSERT INTO dbo.b VALUES (3); INSERT INTO dbo.b VALUES (4)");
    server.enable_cdc(&["dbo.a", "dbo.b"]);
    let dir = tempfile::tempdir().unwrap();
    let admin = sluice_test_support::pg::free_port();
    let path = base(dir.path(), source(&server))
        .setting("admin", &[("bind", format!("127.0.0.1:{admin}").into())])
        .write(dir.path());
    let mut child = start(&path, &[]);
    wait_events(dir.path(), 4, &mut child);
    let snapshot = sluice_test_support::pg::snapshot_done(admin, "sqlserver_test");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(snapshot["total_tables"], 2, "{snapshot}");
    assert_eq!(snapshot["estimated_rows"]["dbo.a"], 1, "{snapshot}");
    assert_eq!(snapshot["estimated_rows"]["dbo.b"], 3, "{snapshot}");
}
