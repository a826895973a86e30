//! Snapshot then stream: the events, their `source` blocks and offsets as Debezium's Db2
//! connector makes them; restarts; bad setups.

use super::*;

#[test]
fn snapshot_then_changes_in_commit_order_with_debeziums_source_block() {
    let db = Db2::start("stream", true);
    customers(&db);
    db.sql("INSERT INTO \"DB2INST1\".\"CUSTOMERS\" VALUES (1001, 'Sally'), (1002, 'George')");
    db.add_table("DB2INST1", "CUSTOMERS");
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(
        dir.path(),
        &db,
        &[("provide.transaction.metadata", true.into())],
    );
    let mut child = start(&path, &[]);
    wait_events(dir.path(), 2, &mut child);
    let p = payloads(dir.path());
    assert_eq!(
        (p[0]["op"].as_str(), p[1]["op"].as_str()),
        (Some("r"), Some("r"))
    );
    assert_eq!(
        (
            p[0]["source"]["snapshot"].as_str(),
            p[1]["source"]["snapshot"].as_str()
        ),
        (Some("first"), Some("last"))
    );
    assert_eq!(
        p[0]["after"],
        serde_json::json!({"ID": 1001, "NAME": "Sally"})
    );
    let source = p[0]["source"].as_object().unwrap();
    let fields: Vec<&str> = source.keys().map(String::as_str).collect();
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
            "commit_lsn"
        ]
    );
    assert_eq!(
        (
            source["connector"].as_str(),
            source["db"].as_str(),
            source["schema"].as_str(),
            source["table"].as_str()
        ),
        (
            Some("db2"),
            Some("TESTDB"),
            Some("DB2INST1"),
            Some("CUSTOMERS")
        )
    );
    let lsn = regex::Regex::new("^[0-9a-f]{8}:[0-9a-f]{8}:[0-9a-f]{16}$").unwrap();
    assert!(
        lsn.is_match(source["commit_lsn"].as_str().unwrap()),
        "{source:?}"
    );
    assert!(source["change_lsn"].is_null());
    let key = &lines(dir.path())[0]["key"];
    assert_eq!(key["payload"], serde_json::json!({"ID": 1001}));
    assert_eq!(key["schema"]["name"], "db2server.DB2INST1.CUSTOMERS.Key");

    // A transaction of two inserts, an update, a delete, and an update of the key.
    db.sql("BEGIN; INSERT INTO \"DB2INST1\".\"CUSTOMERS\" VALUES (1003, 'Edward'); INSERT INTO \"DB2INST1\".\"CUSTOMERS\" VALUES (1004, 'Anne'); COMMIT");
    db.sql("UPDATE \"DB2INST1\".\"CUSTOMERS\" SET \"NAME\" = 'Sal' WHERE \"ID\" = 1001");
    db.sql("DELETE FROM \"DB2INST1\".\"CUSTOMERS\" WHERE \"ID\" = 1002");
    db.sql("UPDATE \"DB2INST1\".\"CUSTOMERS\" SET \"ID\" = 2004 WHERE \"ID\" = 1004");
    // 2 reads; 4 transactions with BEGIN and END each; 2 creates, 1 update, delete +
    // tombstone, delete + tombstone + create.
    wait_events(dir.path(), 2 + 8 + 2 + 1 + 2 + 3, &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    let all = lines(dir.path());
    let data: Vec<&Json> = all
        .iter()
        .filter(|l| l["topic"] != "db2server.transaction")
        .collect();
    let ops: Vec<&str> = data
        .iter()
        .map(|l| l["value"]["payload"]["op"].as_str().unwrap_or("tombstone"))
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
    let update = &data[4]["value"]["payload"];
    assert_eq!(
        update["before"],
        serde_json::json!({"ID": 1001, "NAME": "Sally"})
    );
    assert_eq!(
        update["after"],
        serde_json::json!({"ID": 1001, "NAME": "Sal"})
    );
    let (c1, c2) = (
        &data[2]["value"]["payload"]["source"],
        &data[3]["value"]["payload"]["source"],
    );
    assert_eq!(
        c1["commit_lsn"], c2["commit_lsn"],
        "one transaction, one commit LSN"
    );
    assert!(
        lsn.is_match(c1["change_lsn"].as_str().unwrap()) && c1["change_lsn"] != c2["change_lsn"]
    );
    assert!(c1["commit_lsn"].as_str().unwrap() > source["commit_lsn"].as_str().unwrap());
    // The key update: the delete (old key), its tombstone, the create (new key), at one position.
    assert_eq!(data[7]["value"]["payload"]["before"]["ID"], 1004);
    assert_eq!(data[8]["key"]["payload"]["ID"], 1004);
    assert_eq!(data[9]["value"]["payload"]["after"]["ID"], 2004);
    assert_eq!(
        data[7]["value"]["payload"]["source"]["change_lsn"],
        data[9]["value"]["payload"]["source"]["change_lsn"]
    );
    // Transaction records: BEGIN/END around each transaction, the commit LSN as its id.
    let tx: Vec<&Json> = all
        .iter()
        .filter(|l| l["topic"] == "db2server.transaction")
        .map(|l| &l["value"]["payload"])
        .collect();
    assert_eq!(tx.len(), 8);
    assert_eq!(
        (tx[0]["status"].as_str(), tx[1]["status"].as_str()),
        (Some("BEGIN"), Some("END"))
    );
    assert_eq!(tx[0]["id"], c1["commit_lsn"]);
    assert_eq!(tx[1]["event_count"], 2);
    assert_eq!(
        tx[1]["data_collections"][0]["data_collection"],
        "DB2INST1.CUSTOMERS"
    );
    assert_eq!(data[3]["value"]["payload"]["transaction"]["total_order"], 2);
    assert_eq!(rebuilt(dir.path()), table_rows(&db));
}

#[test]
fn schema_change_events_at_the_snapshot_and_when_a_table_enters_capture_mode() {
    let db = Db2::start("schema", true);
    customers(&db);
    db.add_table("DB2INST1", "CUSTOMERS");
    db.sql("CREATE TABLE \"DB2INST1\".\"ORDERS\" (\"ID\" bigint PRIMARY KEY, \"AMOUNT\" decimal(10,2), \"AT\" timestamp(6) NOT NULL)");
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(dir.path(), &db, &[("include.schema.changes", true.into())]);
    let mut child = start(&path, &[]);
    wait_events(dir.path(), 1, &mut child);
    db.add_table("DB2INST1", "ORDERS");
    db.sql("INSERT INTO \"DB2INST1\".\"ORDERS\" VALUES (1, 12.50, '2024-01-02 03:04:05.123456')");
    wait_events(dir.path(), 3, &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    let all = lines(dir.path());
    assert_eq!(all[0]["topic"], "db2server");
    assert_eq!(
        all[0]["key"]["payload"],
        serde_json::json!({"databaseName": "TESTDB"})
    );
    assert_eq!(
        all[0]["key"]["schema"]["name"],
        "io.debezium.connector.db2.SchemaChangeKey"
    );
    let p = &all[0]["value"]["payload"];
    assert_eq!(
        (p["databaseName"].as_str(), p["schemaName"].as_str()),
        (Some("TESTDB"), Some("DB2INST1"))
    );
    assert!(p["ddl"].is_null());
    let change = &p["tableChanges"][0];
    assert_eq!(
        (change["type"].as_str(), change["id"].as_str()),
        (Some("CREATE"), Some("\"DB2INST1\".\"CUSTOMERS\""))
    );
    assert_eq!(
        change["table"]["primaryKeyColumnNames"],
        serde_json::json!(["ID"])
    );
    let id = &change["table"]["columns"][0];
    assert_eq!(
        (
            id["name"].as_str(),
            id["jdbcType"].as_i64(),
            id["typeName"].as_str(),
            id["length"].as_i64(),
            id["scale"].as_i64(),
            id["position"].as_i64(),
            id["optional"].as_bool()
        ),
        (
            Some("ID"),
            Some(4),
            Some("INTEGER"),
            Some(10),
            Some(0),
            Some(1),
            Some(false)
        )
    );
    let name = &change["table"]["columns"][1];
    assert_eq!(
        (
            name["jdbcType"].as_i64(),
            name["typeName"].as_str(),
            name["length"].as_i64()
        ),
        (Some(12), Some("VARCHAR"), Some(40))
    );
    assert_eq!(p["source"]["snapshot"], "true");
    // ORDERS entered capture mode while streaming: its schema change event, then its row.
    let p = &all[1]["value"]["payload"];
    assert_eq!(p["tableChanges"][0]["id"], "\"DB2INST1\".\"ORDERS\"");
    let at = &p["tableChanges"][0]["table"]["columns"][2];
    assert_eq!(
        (
            at["jdbcType"].as_i64(),
            at["typeName"].as_str(),
            at["scale"].as_i64()
        ),
        (Some(93), Some("TIMESTAMP"), Some(6))
    );
    assert_eq!(all[2]["topic"], "db2server.DB2INST1.ORDERS");
    assert_eq!(
        all[2]["value"]["payload"]["after"]["AT"],
        1_704_164_645_123_456i64
    );
}

#[test]
fn an_online_schema_change_is_an_alter_event_then_rows_of_the_new_structure() {
    let db = Db2::start("alter", true);
    customers(&db);
    db.add_table("DB2INST1", "CUSTOMERS");
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(dir.path(), &db, &[("include.schema.changes", true.into())]);
    let mut child = start(&path, &[]);
    wait_events(dir.path(), 1, &mut child);
    db.sql("INSERT INTO \"DB2INST1\".\"CUSTOMERS\" VALUES (1, 'a')");
    wait_events(dir.path(), 2, &mut child);
    // Seed 002's online procedure: the table locked and marked inactive, the table and its
    // change-data table altered alike, marked active again.
    db.sql(
        "BEGIN; LOCK TABLE \"DB2INST1\".\"CUSTOMERS\"; \
        UPDATE asncdc.ibmsnap_register SET state = 'I' WHERE source_table = 'CUSTOMERS'; \
        ALTER TABLE \"DB2INST1\".\"CUSTOMERS\" ADD COLUMN \"EMAIL\" varchar(80); \
        ALTER TABLE \"ASNCDC\".\"CDC_DB2INST1_CUSTOMERS\" ADD COLUMN \"EMAIL\" varchar(80); \
        UPDATE asncdc.ibmsnap_register SET state = 'A' WHERE source_table = 'CUSTOMERS'; COMMIT",
    );
    db.sql("INSERT INTO \"DB2INST1\".\"CUSTOMERS\" VALUES (2, 'b', 'b@example.org')");
    wait_events(dir.path(), 4, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let all = lines(dir.path());
    assert_eq!(all.len(), 4, "{all:?}");
    let alter = &all[2]["value"]["payload"];
    assert_eq!(alter["tableChanges"][0]["type"], "ALTER");
    let columns: Vec<&str> = alter["tableChanges"][0]["table"]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["ID", "NAME", "EMAIL"]);
    assert_eq!(
        all[1]["value"]["payload"]["after"],
        serde_json::json!({"ID": 1, "NAME": "a"})
    );
    assert_eq!(
        all[3]["value"]["payload"]["after"],
        serde_json::json!({"ID": 2, "NAME": "b", "EMAIL": "b@example.org"})
    ); // The schema history: the snapshot's structure, then the altered one.
    let history =
        std::fs::read_to_string(dir.path().join("data/db2-schema-history.jsonl")).unwrap();
    let kinds: Vec<(String, usize)> = history
        .lines()
        .map(|l| {
            let r: Json = serde_json::from_str(l).unwrap();
            let change = &r["tableChanges"][0];
            (
                change["type"].as_str().unwrap().to_owned(),
                change["table"]["columns"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(kinds, [("CREATE".to_owned(), 2), ("ALTER".to_owned(), 3)]);
}

#[test]
fn kill_9_under_writers_during_snapshot_and_stream_resumes_without_loss() {
    let db = Db2::start("kill", true);
    customers(&db);
    db.sql("INSERT INTO \"DB2INST1\".\"CUSTOMERS\" SELECT g, 'row ' || g FROM generate_series(0, 199) g");
    db.add_table("DB2INST1", "CUSTOMERS");
    let dir = tempfile::tempdir().unwrap();
    // Small pieces: an update's two rows often come in two pieces. Small batches: positions
    // inside transactions get committed, so restarts resume inside them.
    let path = base(dir.path(), source(&db).set("streaming.fetch.size", 3u32))
        .top("max_batch_size", 2u32)
        .top("max_queue_size", 8u32)
        .write(dir.path());
    // Two writers at once, on rows of their own: inserts, updates, deletes, key updates.
    let writers: Vec<_> = (0..2)
        .map(|w: i64| {
            let database = db.database.clone();
            std::thread::spawn(move || {
                let t = "\"DB2INST1\".\"CUSTOMERS\"";
                for i in 0..120i64 {
                    let (new, old) = (10_000 * (w + 1) + i, w * 100 + i % 100);
                    let sql = match i % 3 {
                        0 => format!("BEGIN; INSERT INTO {t} VALUES ({new}, 'new {i}'); UPDATE {t} SET \"NAME\" = 'changed {i}' WHERE \"ID\" = {old}; COMMIT"),
                        1 => format!("UPDATE {t} SET \"NAME\" = 'again {i}' WHERE \"ID\" = {}", new - 1),
                        _ => format!("BEGIN; DELETE FROM {t} WHERE \"ID\" = {}; UPDATE {t} SET \"ID\" = {} WHERE \"ID\" = {old}; COMMIT", new - 2, 50_000 + new),
                    };
                    sluice_test_support::pg::psql(&database, &sql);
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            })
        })
        .collect();
    // Killed once the snapshot is committed, then while catching up: down for a while under
    // the writers, killed 20 events after it starts again. (The committed positions are
    // mostly at poll ends: a restart inside a transaction is tested on its own below.)
    let mut resumed = 0;
    for round in 0..4 {
        std::thread::sleep(std::time::Duration::from_millis(300 * round));
        let mut child = start(&path, &[]);
        let have = lines(dir.path()).len();
        if round == 0 {
            // The snapshot, committed, and some of the stream.
            wait_events(dir.path(), 230, &mut child);
            std::thread::sleep(std::time::Duration::from_millis(300));
        } else {
            wait_events(dir.path(), have + 20, &mut child);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let log = sluice_test_support::pg::log_of(&child);
        resumed += usize::from(
            log.contains("Streaming from the change-data tables")
                && !log.contains("Snapshot completed"),
        );
    }
    for w in writers {
        w.join().unwrap();
    }
    assert!(
        resumed > 0,
        "no restart resumed the stream from a committed position"
    );
    let mut child = start(&path, &[]);
    let expected = table_rows(&db);
    wait_for(dir.path(), "the table's state", &mut child, |_| {
        rebuilt(dir.path()) == expected
    });
    child.kill().unwrap();
    child.wait().unwrap();
    // Every change after the last snapshot came out (some twice, after a kill), and nothing
    // else did.
    let (snapshot, streamed) = streamed_positions(dir.path());
    let changes: std::collections::BTreeSet<_> = change_positions(&db)
        .into_iter()
        .filter(|(commit, _)| *commit > snapshot)
        .collect();
    assert!(
        changes.len() > 100,
        "{} changes after the snapshot",
        changes.len()
    );
    let missing: Vec<_> = changes.difference(&streamed).collect();
    assert!(missing.is_empty(), "changes never delivered: {missing:?}");
    let invented: Vec<_> = streamed
        .iter()
        .filter(|p| p.0 > snapshot && !changes.contains(p))
        .collect();
    assert!(
        invented.is_empty(),
        "events at no change's position: {invented:?}"
    );
}

#[test]
fn missing_asn_capture_and_unregistered_tables_are_one_clear_line() {
    // A database without the ASN control tables.
    let plain = sluice_test_support::pg::fresh_db("db2_plain");
    let db = Db2 { database: plain };
    let dir = tempfile::tempdir().unwrap();
    let e = sluice_test_support::pg::run_expecting_failure(&pipeline(dir.path(), &db, &[]));
    assert!(
        e.contains("the ASN capture control tables (ASNCDC.IBMSNAP_REGISTER) are missing")
            && e.contains("ASNCDC.ADDTABLE"),
        "{e}"
    );
    drop(db);
    // ASN capture set up, no table registered.
    let db = Db2::start("unregistered", true);
    customers(&db);
    let e = sluice_test_support::pg::run_expecting_failure(&pipeline(dir.path(), &db, &[]));
    assert!(
        e.contains(
            "no table of database `TESTDB` that the configuration selects is in capture mode"
        ) && e.contains("CALL ASNCDC.ADDTABLE"),
        "{e}"
    );
    // A wrong password: the driver's refusal, the password nowhere.
    db.add_table("DB2INST1", "CUSTOMERS");
    let connection = db
        .connection_string()
        .replace("Uid=postgres", "Uid=nobody_here");
    let wrong = source(&db).set("odbc.connection.string", connection);
    let path = base(dir.path(), wrong).write(dir.path());
    let e = sluice_test_support::pg::run_expecting_failure(&path);
    assert!(
        e.contains("connecting to the data source of `odbc.connection.string`")
            && e.contains("nobody_here")
            && !e.contains("unused"),
        "{e}"
    );
}

/// `streaming.query.timespan.seconds`: a backlog of three transactions logged 100 s apart is
/// read in polls of at most 150 s of them (two polls, the first one cut short, which the debug
/// log says), and all its changes come out in order; without the option, one poll.
#[test]
fn a_backlog_is_read_in_polls_of_the_time_span() {
    let db = Db2::start("timespan", true);
    customers(&db);
    db.add_table("DB2INST1", "CUSTOMERS");
    let start = db.sql("SELECT encode(cd_new_synchpoint, 'hex') FROM asncdc.ibmsnap_register WHERE source_table = 'CUSTOMERS'");
    let t = "\"DB2INST1\".\"CUSTOMERS\"";
    for id in 1..=3 {
        db.sql(&format!("INSERT INTO {t} VALUES ({id}, 'n{id}')"));
    }
    db.sql("UPDATE asncdc.ibmsnap_uow u SET ibmsnap_logmarker = timestamp '2024-01-01 00:00:00' + k.n * interval '100 seconds' FROM (SELECT ibmsnap_commitseq, row_number() OVER (ORDER BY ibmsnap_commitseq) AS n FROM asncdc.ibmsnap_uow) k WHERE k.ibmsnap_commitseq = u.ibmsnap_commitseq");
    let run = |keys: &[(&str, Scalar)]| -> (Vec<i64>, String) {
        let dir = tempfile::tempdir().unwrap();
        store_offset(
            dir.path(),
            &serde_json::json!({"commit_lsn": printed(start.trim()), "snapshot_completed": true})
                .to_string(),
        );
        let path = pipeline(dir.path(), &db, keys);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", path.to_str().unwrap(), "--stop-when-idle", "700ms"])
            .env("SLUICE_LOG", "info,sluice_sources=debug")
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{log}");
        let ids = payloads(dir.path())
            .iter()
            .map(|p| p["after"]["ID"].as_i64().unwrap())
            .collect();
        (ids, log)
    };
    let cut = "The poll reads up to the end of its time span";
    let (ids, log) = run(&[("streaming.query.timespan.seconds", 150u32.into())]);
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(log.matches(cut).count(), 1, "{log}");
    let (ids, log) = run(&[]);
    assert_eq!(ids, [1, 2, 3]);
    assert!(!log.contains(cut), "{log}");
}

#[test]
fn the_example_pipeline_runs() {
    let db = Db2::start("example", true);
    customers(&db);
    db.sql("INSERT INTO \"DB2INST1\".\"CUSTOMERS\" VALUES (1, 'a')");
    db.add_table("DB2INST1", "CUSTOMERS");
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/db2-file.yaml");
    // The PostgreSQL driver takes the keywords it knows from the connection string built for
    // IBM's (`Database`, `Port`, `Uid`, `Pwd`) and reaches the local server by its socket.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg(&example)
        .env("SLUICE_DATA_DIR", dir.path())
        .env("SLUICE_OUT_DIR", dir.path())
        .env("DB2_ODBC_DRIVER", sluice_test_support::db2::DRIVER)
        .env("DB2_PORT", sluice_test_support::pg::port())
        .env("DB2_USER", "postgres")
        .env("DB2_DATABASE", &db.database)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = dir.path().join("db2-file/events.jsonl");
    let t0 = std::time::Instant::now();
    let has = |op: &str| {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .contains(&format!("\"op\":\"{op}\""))
    };
    while !has("r") {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "no snapshot event"
        );
        if child.try_wait().unwrap().is_some() {
            panic!(
                "sluice stopped: {}",
                sluice_test_support::pg::log_of(&child)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    db.sql("INSERT INTO \"DB2INST1\".\"CUSTOMERS\" VALUES (2, 'b')");
    while !has("c") {
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
fn a_table_altered_while_the_source_was_down_is_announced_at_the_restart() {
    let db = Db2::start("alter_down", true);
    customers(&db);
    db.add_table("DB2INST1", "CUSTOMERS");
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(dir.path(), &db, &[("include.schema.changes", true.into())]);
    let run = || {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", path.to_str().unwrap(), "--stop-when-idle", "700ms"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    run();
    // A restart with nothing changed announces nothing.
    run();
    assert_eq!(lines(dir.path()).len(), 1, "the snapshot's CREATE only");
    // Altered while down (seed 002's online procedure), then restarted.
    db.sql(
        "BEGIN; ALTER TABLE \"DB2INST1\".\"CUSTOMERS\" ADD COLUMN \"EMAIL\" varchar(80); \
        ALTER TABLE \"ASNCDC\".\"CDC_DB2INST1_CUSTOMERS\" ADD COLUMN \"EMAIL\" varchar(80); COMMIT",
    );
    db.sql("INSERT INTO \"DB2INST1\".\"CUSTOMERS\" VALUES (7, 'g', 'g@example.org')");
    run();
    let all = lines(dir.path());
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(
        all[1]["value"]["payload"]["tableChanges"][0]["type"],
        "ALTER"
    );
    assert_eq!(
        all[2]["value"]["payload"]["after"]["EMAIL"],
        "g@example.org"
    );
}

/// The snapshot announces its tables with the rows the catalog's statistics count
/// (`SYSCAT.TABLES.CARD` after `RUNSTATS`, `SYSIBM.SYSTABLES.CARDF` on z/OS), none for a table
/// `RUNSTATS` has not seen: the status's table count and estimates.
#[test]
fn the_snapshot_says_its_tables() {
    for (name, platform) in [("plan", None), ("plan_zos", Some("ZOS"))] {
        let db = Db2::start(name, true);
        customers(&db);
        db.sql("INSERT INTO \"DB2INST1\".\"CUSTOMERS\" VALUES (1001, 'Sally'), (1002, 'George'), (1003, 'Edward')");
        db.sql("CREATE TABLE \"DB2INST1\".\"ORDERS\" (\"ID\" integer PRIMARY KEY); INSERT INTO \"DB2INST1\".\"ORDERS\" VALUES (1)");
        db.sql("CALL sysproc.admin_cmd('RUNSTATS ON TABLE DB2INST1.CUSTOMERS')");
        db.add_table("DB2INST1", "CUSTOMERS");
        db.add_table("DB2INST1", "ORDERS");
        let dir = tempfile::tempdir().unwrap();
        let admin = sluice_test_support::pg::free_port();
        let mut source = source(&db);
        if let Some(platform) = platform {
            source = source.set("db2.platform", platform);
        }
        let path = base(dir.path(), source)
            .setting("admin", &[("bind", format!("127.0.0.1:{admin}").into())])
            .write(dir.path());
        let mut child = start(&path, &[]);
        wait_events(dir.path(), 4, &mut child);
        let snapshot = sluice_test_support::pg::snapshot_done(admin, "db2_test");
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(snapshot["total_tables"], 2, "{platform:?}{snapshot}");
        let estimates = &snapshot["estimated_rows"];
        assert_eq!(estimates["DB2INST1.CUSTOMERS"], 3, "{platform:?}{snapshot}");
        assert!(
            estimates["DB2INST1.ORDERS"].is_null(),
            "{platform:?}{snapshot}"
        );
    }
}
