//! `provide.transaction.metadata`: BEGIN and END records on `<prefix>.transaction` and each
//! event's `transaction` block. The data events equal Debezium's (`reference-tx.jsonl`) with
//! the block blanked, the records' schemas equal Debezium's (its PostgreSQL fixture: the
//! records are the common framework's), and the ids are checked against the server's word: the
//! BEGIN event's position in `SHOW BINLOG EVENTS` of its first event (`type: mysql`, Debezium's `file=…,pos=…`) or
//! the transaction's `@@last_gtid` (`type: mariadb`).

use super::*;

/// The key and value schemas of Debezium's BEGIN and END records.
fn debezium_record_schemas() -> (Json, Json, Json) {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/debezium/tx_stream.jsonl"
    ))
    .unwrap();
    let records: Vec<Json> = text
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).unwrap())
        .filter(|r| r["topic"] == "dbserver1.transaction")
        .collect();
    let begin = records
        .iter()
        .find(|r| r["value"]["payload"]["status"] == "BEGIN")
        .unwrap();
    let end = records
        .iter()
        .find(|r| r["value"]["payload"]["status"] == "END")
        .unwrap();
    (
        begin["key"]["schema"].clone(),
        begin["value"]["schema"].clone(),
        end["value"]["schema"].clone(),
    )
}

/// Runs the fixture's `tx.sql` against a fresh `inventory_tx…` database captured by a pipeline
/// of `flavour` with transaction metadata on; returns the database, the streamed lines and the
/// `@@last_gtid` of the two transactions.
fn run_tx_fixture(test: &str, flavour: &str) -> (String, Vec<Json>, [String; 2]) {
    let server = mariadb::server();
    let db = mariadb::database(test);
    // The tables as Debezium's third run found them: `basic` altered by changes.sql.
    let alter = std::fs::read_to_string(format!("{FIXTURES}/changes.sql"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("ALTER TABLE basic "))
        .unwrap()
        .to_owned();
    mariadb::sql(
        &db,
        &format!("{};{};{alter}", setup_of("basic"), setup_of("types")),
    );
    // Streamed only, as Debezium's fixture was (`snapshot.mode: no_data`).
    let rows = 0;
    let dir = tempfile::tempdir().unwrap();
    let source = source_of(flavour, dir.path(), server.port).set_all(&[
        ("database.include.list", db.as_str().into()),
        ("provide.transaction.metadata", true.into()),
        ("snapshot.mode", "no_data".into()),
    ]);
    let path = base(dir.path(), source).write(dir.path());
    let mut child = sluice_test_support::pg::start(&path, &[]);
    let t0 = std::time::Instant::now();
    while !sluice_test_support::pg::log_so_far(&child).contains("Binlog stream started") {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "no binlog stream"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let gtid = |sql: &str| {
        mariadb::sql(&db, &format!("{sql}; SELECT @@last_gtid"))
            .trim()
            .to_owned()
    };
    let first = gtid("INSERT INTO basic (id, name) VALUES (100, 'tx one')");
    let second = gtid(
        "BEGIN; INSERT INTO basic (id, name) VALUES (101, 'tx two a'); \
         UPDATE basic SET name = 'tx two b' WHERE id = 101; INSERT INTO types (id) VALUES (100); COMMIT",
    );
    // BEGIN, c, END; BEGIN, c, u, c, END.
    sluice_test_support::pg::wait_lines(dir.path(), rows + 8, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let lines = sluice_test_support::pg::lines(dir.path());
    assert_eq!(lines.len(), rows + 8, "{lines:?}");
    // The data events, transaction blocks blanked, equal Debezium's (whose MySQL connector on
    // MariaDB writes none: its binlog client gets MariaDB's GTID events, which it does not read).
    let block = regex::Regex::new(
        r#""transaction":\{"id":"[^"]*","total_order":\d+,"data_collection_order":\d+\}"#,
    )
    .unwrap();
    let ours: String = ours(dir.path(), &db, rows)
        .lines()
        .filter(|l| !l.contains("\"topic\":\"dbserver1.transaction\""))
        .map(|l| format!("{}\n", block.replace_all(l, "\"transaction\":null")))
        .collect();
    let theirs: String = std::fs::read_to_string(format!("{FIXTURES}/reference-tx.jsonl"))
        .unwrap()
        .lines()
        .map(|l| format!("{}\n", blank(l)))
        .collect();
    let ours = if flavour == "mariadb" {
        ours.replace("connector.mariadb.Source", "connector.mysql.Source")
            .replace("\"connector\":\"mariadb\"", "\"connector\":\"mysql\"")
    } else {
        ours
    };
    let gtid_null = regex::Regex::new(r#""gtid":"[^"]*""#).unwrap();
    assert_same_events(
        &gtid_null.replace_all(&ours, "\"gtid\":null"),
        &theirs,
        "mysql stream with transaction metadata",
    );
    (db, lines[rows..].to_vec(), [first, second])
}

/// Checks the BEGIN, data and END lines of the two transactions, whose ids are `ids`.
fn check_records(db: &str, lines: &[Json], ids: &[String; 2]) {
    let (key_schema, begin_schema, end_schema) = debezium_record_schemas();
    let status = |l: &Json| l["value"]["payload"]["status"].as_str().map(str::to_owned);
    let shape: Vec<Option<String>> = lines.iter().map(status).collect();
    let b = || Some("BEGIN".to_owned());
    let e = || Some("END".to_owned());
    assert_eq!(shape, [b(), None, e(), b(), None, None, None, e()]);
    // (record, transaction, a data event of it)
    for (record, id, data) in [(0, 0, 1), (2, 0, 1), (3, 1, 4), (7, 1, 6)] {
        let r = &lines[record];
        assert_eq!(r["topic"], "dbserver1.transaction");
        assert_eq!(r["key"]["schema"], key_schema);
        assert_eq!(r["key"]["payload"]["id"], ids[id].as_str());
        assert_eq!(r["value"]["payload"]["id"], ids[id].as_str());
        let schema = if record == 0 || record == 3 {
            &begin_schema
        } else {
            &end_schema
        };
        assert_eq!(&r["value"]["schema"], schema);
        // BEGIN and END carry the time of their binlog events, to the second, as the data
        // events' `source` does (a busy server may write the commit a second after the rows).
        let ts = r["value"]["payload"]["ts_ms"].as_i64().unwrap();
        let data_ts = lines[data]["value"]["payload"]["source"]["ts_ms"]
            .as_i64()
            .unwrap();
        assert_eq!(ts % 1000, 0, "{r}");
        assert!((ts - data_ts).abs() <= 2000, "{ts} and {data_ts}");
    }
    let collection = |t: &str| format!("{db}.{t}");
    let ends: Vec<(&Json, &Json)> = [2, 7]
        .iter()
        .map(|&i| {
            let p = &lines[i]["value"]["payload"];
            (&p["event_count"], &p["data_collections"])
        })
        .collect();
    assert_eq!(ends[0].0, 1);
    assert_eq!(
        ends[0].1,
        &serde_json::json!([{"data_collection": collection("basic"), "event_count": 1}])
    );
    assert_eq!(ends[1].0, 3);
    let mut counts: Vec<(String, i64)> = ends[1]
        .1
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
    counts.sort();
    assert_eq!(counts, [(collection("basic"), 2), (collection("types"), 1)]);
    let blocks: Vec<(String, i64, i64)> = [1, 4, 5, 6]
        .iter()
        .map(|&i| {
            let t = &lines[i]["value"]["payload"]["transaction"];
            (
                t["id"].as_str().unwrap().to_owned(),
                t["total_order"].as_i64().unwrap(),
                t["data_collection_order"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        blocks,
        [
            (ids[0].clone(), 1, 1),
            (ids[1].clone(), 1, 1),
            (ids[1].clone(), 2, 2),
            (ids[1].clone(), 3, 1)
        ]
    );
}

/// Debezium's MySQL connector names a transaction without a MySQL GTID by the binlog file and
/// position of its first event: in MariaDB's binlog its GTID event (a replica without MariaDB's
/// GTID capability gets a BEGIN in its place), found in the server's `SHOW BINLOG EVENTS`
/// before each transaction's first rows event.
#[test]
fn transaction_metadata_of_type_mysql_names_each_transaction_by_its_begin_event() {
    let (db, lines, _) = run_tx_fixture("inventory_tx_mysql", "mysql");
    let begin_before = |data: &Json| {
        let source = &data["value"]["payload"]["source"];
        let file = source["file"].as_str().unwrap();
        let pos = source["pos"].as_u64().unwrap();
        let begin = mariadb::sql("", &format!("SHOW BINLOG EVENTS IN '{file}'"))
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                let at: u64 = f[1].parse().unwrap();
                (f[2] == "Gtid" && at < pos).then_some(at)
            })
            .max()
            .unwrap();
        format!("file={file},pos={begin}")
    };
    let ids = [begin_before(&lines[1]), begin_before(&lines[4])];
    check_records(&db, &lines, &ids);
}

/// Debezium's MariaDB connector names a transaction by its MariaDB GTID.
#[test]
fn transaction_metadata_of_type_mariadb_names_each_transaction_by_its_gtid() {
    let (db, lines, gtids) = run_tx_fixture("inventory_tx_mariadb", "mariadb");
    check_records(&db, &lines, &gtids);
}
