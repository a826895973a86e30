//! `db2.platform: ZOS`: Db2 for z/OS's catalog (`SYSIBM.SYSTABLES`, `SYSIBM.SYSCOLUMNS` with
//! its eight-character type names) and Debezium's z/OS change query (an update's rows paired
//! by row numbers; a single-row update 'U', registered with `CHG_UPD_TO_DEL_INS = 'N'`, as an
//! update without a before image), against the emulation's z/OS catalog views.

use super::*;

#[test]
fn the_zos_catalog_and_change_query_give_the_luw_events() {
    let db = Db2::start("zos", true);
    db.sql("CREATE SCHEMA \"DB2INST1\"; CREATE TABLE \"DB2INST1\".\"ITEMS\" (\"ID\" integer PRIMARY KEY, \"NAME\" varchar(20), \"PRICE\" decimal(10,2), \"R\" real, \"D\" double precision, \"AT\" timestamp(3)); CREATE TABLE \"DB2INST1\".\"SINGLE\" (\"ID\" integer PRIMARY KEY, \"NAME\" varchar(20))");
    db.sql("INSERT INTO \"DB2INST1\".\"ITEMS\" VALUES (1, 'one', 1.50, 0.5, 2.25, '2024-01-02 03:04:05.123')");
    db.add_table("DB2INST1", "ITEMS");
    db.add_table("DB2INST1", "SINGLE");
    // SINGLE's updates are captured as one 'U' row (its after image).
    db.sql(
        "UPDATE asncdc.ibmsnap_register SET chg_upd_to_del_ins = 'N' WHERE source_table = 'SINGLE'",
    );
    let dir = tempfile::tempdir().unwrap();
    let zos = [("db2.platform", "ZOS".into())];
    let mut child = start(&pipeline(dir.path(), &db, &zos), &[]);
    wait_events(dir.path(), 1, &mut child);
    let items = "\"DB2INST1\".\"ITEMS\"";
    let single = "\"DB2INST1\".\"SINGLE\"";
    db.sql(&format!("BEGIN; INSERT INTO {items} (\"ID\", \"NAME\") VALUES (2, 'two'); UPDATE {items} SET \"NAME\" = 'uno' WHERE \"ID\" = 1; INSERT INTO {single} VALUES (7, 'a'); UPDATE {single} SET \"NAME\" = 'b' WHERE \"ID\" = 7; COMMIT"));
    db.sql(&format!("DELETE FROM {items} WHERE \"ID\" = 2"));
    // A read, 2 creates, 2 updates, a delete and its tombstone.
    wait_events(dir.path(), 7, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let all = lines(dir.path());
    let seen: Vec<(String, String, String)> = all
        .iter()
        .map(|l| {
            let p = &l["value"]["payload"];
            let row = if p["after"].is_null() {
                &p["before"]
            } else {
                &p["after"]
            };
            (
                l["topic"]
                    .as_str()
                    .unwrap()
                    .rsplit('.')
                    .next()
                    .unwrap()
                    .to_owned(),
                p["op"].as_str().unwrap_or("tombstone").to_owned(),
                row["NAME"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let want = |v: &[(&str, &str, &str)]| -> Vec<(String, String, String)> {
        v.iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect()
    };
    assert_eq!(
        seen,
        want(&[
            ("ITEMS", "r", "one"),
            ("ITEMS", "c", "two"),
            ("ITEMS", "u", "uno"),
            ("SINGLE", "c", "a"),
            ("SINGLE", "u", "b"),
            ("ITEMS", "d", "two"),
            ("ITEMS", "tombstone", ""),
        ])
    );
    let payload = |i: usize| &all[i]["value"]["payload"];
    assert_eq!(
        payload(2)["before"]["NAME"],
        "one",
        "the paired update has its before image"
    );
    assert!(payload(4)["before"].is_null(), "a 'U' row has none");
    // The types read from SYSIBM.SYSCOLUMNS: FLOAT of length 4 and 8, TIMESTMP(3), DECIMAL.
    let fields: std::collections::BTreeMap<String, Json> = all[0]["value"]["schema"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "after")
        .unwrap()["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["field"].as_str().unwrap().to_owned(), f.clone()))
        .collect();
    assert_eq!(fields["R"]["type"], "float");
    assert_eq!(fields["D"]["type"], "double");
    assert_eq!(fields["AT"]["name"], "io.debezium.time.Timestamp");
    assert_eq!(
        fields["PRICE"]["name"],
        "org.apache.kafka.connect.data.Decimal"
    );
    assert_eq!(payload(0)["after"]["R"], 0.5);
}
