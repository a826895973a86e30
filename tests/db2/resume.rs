//! Restarts from a stored position: inside a transaction, with and without transaction
//! metadata, from positions written by hand and by Sluice itself.

use super::*;

/// The (commit, intent) LSNs of `CUSTOMERS`'s change-data rows, printed, in order.
fn cd_rows(db: &Db2) -> Vec<(String, String)> {
    db.sql("SELECT encode(ibmsnap_commitseq, 'hex') || '|' || encode(ibmsnap_intentseq, 'hex') FROM \"ASNCDC\".\"CDC_DB2INST1_CUSTOMERS\" ORDER BY 1")
        .lines()
        .map(|l| {
            let (c, i) = l.split_once('|').unwrap();
            (printed(c), printed(i))
        })
        .collect()
}

#[test]
fn a_restart_inside_a_transaction_delivers_exactly_the_rest() {
    let db = Db2::start("resume", true);
    customers(&db);
    db.add_table("DB2INST1", "CUSTOMERS");
    let t = "\"DB2INST1\".\"CUSTOMERS\"";
    db.sql(&format!("BEGIN; INSERT INTO {t} VALUES (1, 'a'); INSERT INTO {t} VALUES (2, 'b'); INSERT INTO {t} VALUES (3, 'c'); COMMIT"));
    db.sql(&format!("BEGIN; UPDATE {t} SET \"NAME\" = 'A' WHERE \"ID\" = 1; INSERT INTO {t} VALUES (4, 'd'); COMMIT"));
    // The change rows: (commit, intent) of each, in order.
    let rows: Vec<(String, String)> = cd_rows(&db);
    assert_eq!(rows.len(), 6, "3 inserts, an update's two rows, an insert");
    let ids = |dir: &Path| -> Vec<(String, i64)> {
        payloads(dir)
            .iter()
            .filter(|p| !p.is_null())
            .map(|p| {
                (
                    p["op"].as_str().unwrap().to_owned(),
                    p["after"]["ID"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    let position = |(commit, change): &(String, String), serial: i64| {
        serde_json::json!({"commit_lsn": commit, "change_lsn": change, "event_serial_no": serial, "snapshot_completed": true}).to_string()
    };
    let run = |pos: String| -> Vec<(String, i64)> {
        let dir = tempfile::tempdir().unwrap();
        store_offset(dir.path(), &pos);
        let path = pipeline(dir.path(), &db, &[]);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", path.to_str().unwrap(), "--stop-when-idle", "700ms"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        ids(dir.path())
    };
    // Stored after the first insert of the first transaction: its two others, then the rest.
    let want = |v: &[(&str, i64)]| -> Vec<(String, i64)> {
        v.iter().map(|(o, i)| (o.to_string(), *i)).collect()
    };
    assert_eq!(
        run(position(&rows[0], 1)),
        want(&[("c", 2), ("c", 3), ("u", 1), ("c", 4)])
    );
    // Stored after the update (its new row's position, event number 2): the last insert.
    assert_eq!(run(position(&rows[4], 2)), want(&[("c", 4)]));
    // Stored at the end of the first transaction (commit LSN only): the second one whole.
    let end = serde_json::json!({"commit_lsn": rows[2].0, "snapshot_completed": true}).to_string();
    assert_eq!(run(end), want(&[("u", 1), ("c", 4)]));
}

/// With transaction metadata, a restart inside a transaction goes on with its counts (no
/// second BEGIN, `total_order` and the END's `event_count` over the whole transaction), and a
/// restart after a transaction's last change, before its END, ends it first: the stored
/// position carries the transaction's counts, as Sluice writes it with each data event (and
/// as Debezium's offsets keep `transaction_id` and the per-table counts).
#[test]
fn transaction_metadata_goes_on_across_a_restart_inside_a_transaction() {
    let db = Db2::start("resume_tx", true);
    customers(&db);
    db.add_table("DB2INST1", "CUSTOMERS");
    let t = "\"DB2INST1\".\"CUSTOMERS\"";
    db.sql(&format!("BEGIN; INSERT INTO {t} VALUES (1, 'a'); INSERT INTO {t} VALUES (2, 'b'); INSERT INTO {t} VALUES (3, 'c'); COMMIT"));
    db.sql(&format!("BEGIN; INSERT INTO {t} VALUES (4, 'd'); COMMIT"));
    let rows: Vec<(String, String)> = cd_rows(&db);
    assert_eq!(rows.len(), 4);
    let stored = |(commit, change): &(String, String), total: u64| {
        serde_json::json!({"commit_lsn": commit, "change_lsn": change, "event_serial_no": 1, "snapshot_completed": true,
            "transaction": {"id": commit, "ts_ms": 5, "total_order": total, "data_collection_order": [["DB2INST1.CUSTOMERS", total]]}})
        .to_string()
    };
    // (topic kind, status or op, total_order or event_count, the END's per-table count)
    let run = |pos: String| -> Vec<(String, String, i64)> {
        let dir = tempfile::tempdir().unwrap();
        store_offset(dir.path(), &pos);
        let path = pipeline(
            dir.path(),
            &db,
            &[("provide.transaction.metadata", true.into())],
        );
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", path.to_str().unwrap(), "--stop-when-idle", "700ms"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        lines(dir.path())
            .iter()
            .map(|l| {
                let p = &l["value"]["payload"];
                match p["status"].as_str() {
                    Some(status) => (
                        status.to_owned(),
                        p["id"].as_str().unwrap().to_owned(),
                        p["event_count"].as_i64().unwrap_or(-1),
                    ),
                    None => (
                        p["op"].as_str().unwrap().to_owned(),
                        p["transaction"]["id"].as_str().unwrap().to_owned(),
                        p["transaction"]["total_order"].as_i64().unwrap(),
                    ),
                }
            })
            .collect()
    };
    let (c1, c2) = (rows[0].0.clone(), rows[3].0.clone());
    let want = |v: &[(&str, &String, i64)]| -> Vec<(String, String, i64)> {
        v.iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), *c))
            .collect()
    };
    // After the first insert: the two others go on counting, one END for the three.
    assert_eq!(
        run(stored(&rows[0], 1)),
        want(&[
            ("c", &c1, 2),
            ("c", &c1, 3),
            ("END", &c1, 3),
            ("BEGIN", &c2, -1),
            ("c", &c2, 1),
            ("END", &c2, 1)
        ])
    );
    // After the last insert, before the END: the END, then the next transaction.
    assert_eq!(
        run(stored(&rows[2], 3)),
        want(&[
            ("END", &c1, 3),
            ("BEGIN", &c2, -1),
            ("c", &c2, 1),
            ("END", &c2, 1)
        ])
    );
}

/// `--stop-after-events` inside a transaction commits the position of the last event delivered
/// with the transaction's state (`docs/positions.md`'s example is one such position), and the
/// next run goes on counting from it: the rest of the transaction, no second BEGIN, one END
/// over all three changes.
#[test]
fn a_stop_inside_a_transaction_commits_its_state_and_the_next_run_goes_on() {
    let db = Db2::start("resume_stop", true);
    customers(&db);
    db.add_table("DB2INST1", "CUSTOMERS");
    let start = db.sql("SELECT encode(cd_new_synchpoint, 'hex') FROM asncdc.ibmsnap_register WHERE source_table = 'CUSTOMERS'");
    let t = "\"DB2INST1\".\"CUSTOMERS\"";
    db.sql(&format!("BEGIN; INSERT INTO {t} VALUES (1, 'a'); INSERT INTO {t} VALUES (2, 'b'); INSERT INTO {t} VALUES (3, 'c'); COMMIT"));
    let commit = cd_rows(&db)[0].0.clone();
    let dir = tempfile::tempdir().unwrap();
    store_offset(
        dir.path(),
        &serde_json::json!({"commit_lsn": printed(start.trim()), "snapshot_completed": true})
            .to_string(),
    );
    let path = pipeline(
        dir.path(),
        &db,
        &[("provide.transaction.metadata", true.into())],
    );
    let run = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("run")
            .arg(&path)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    // BEGIN and the first two inserts.
    run(&["--stop-after-events", "3"]);
    let offsets: Json = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("data/offsets.json")).unwrap(),
    )
    .unwrap();
    let text = offsets["pipelines"]["db2_test"]["position"]
        .as_str()
        .unwrap();
    eprintln!("the committed position: {text}");
    let position: Json = serde_json::from_str(text).unwrap();
    assert_eq!(
        position["transaction"],
        serde_json::json!({"id": commit, "ts_ms": position["transaction"]["ts_ms"], "total_order": 2,
            "data_collection_order": [["DB2INST1.CUSTOMERS", 2]]})
    );
    assert_eq!(position["event_serial_no"], 1);
    let first = lines(dir.path()).len();
    assert_eq!(first, 3);
    run(&["--stop-when-idle", "700ms"]);
    let rest: Vec<(String, i64)> = lines(dir.path())[first..]
        .iter()
        .map(|l| {
            let p = &l["value"]["payload"];
            match p["status"].as_str() {
                Some(status) => (status.to_owned(), p["event_count"].as_i64().unwrap_or(-1)),
                None => (
                    format!("{}{}", p["op"].as_str().unwrap(), p["after"]["ID"]),
                    p["transaction"]["total_order"].as_i64().unwrap(),
                ),
            }
        })
        .collect();
    assert_eq!(rest, [("c3".to_owned(), 3), ("END".to_owned(), 3)]);
}
