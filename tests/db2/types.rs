//! Db2's types as Debezium's Db2 connector maps them (`Db2ValueConverters`), in the snapshot
//! and in the stream, under the default modes and under `connect`, `string` and `hex`.

use super::*;

const TABLE: &str = "CREATE SCHEMA \"DB2INST1\"; CREATE TABLE \"DB2INST1\".\"TYPES\" (\
\"ID\" integer PRIMARY KEY, \"S\" smallint, \"B\" bigint, \"R\" real, \"D\" double precision, \
\"DEC\" decimal(10,2), \"DF\" decfloat, \"C\" char(5), \"V\" varchar(20), \"CL\" clob, \
\"G\" graphic, \"VG\" vargraphic, \"DBC\" dbclob, \"BL\" blob, \"VB\" varbinary, \"BO\" boolean, \
\"DT\" date, \"T\" time, \"TS3\" timestamp(3), \"TS\" timestamp, \"X\" xml)";

const ROW: &str = "1, -7, 9007199254740993, 1.5, 2.25, 12.50, 2.50, 'ab', 'text', 'a long text', \
'g', 'vg', 'dbclob', '\\x0102ff', '\\x00', true, '2024-01-02', '03:04:05', \
'2024-01-02 03:04:05.123', '2024-01-02 03:04:05.123456', '<a>1</a>'";

/// The `after` of the first event on the TYPES topic, and its schema's fields by name.
fn first_row(dir: &Path) -> (Json, std::collections::BTreeMap<String, Json>) {
    let line = lines(dir)
        .into_iter()
        .find(|l| l["topic"] == "db2server.DB2INST1.TYPES")
        .unwrap();
    let after_schema = line["value"]["schema"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "after")
        .unwrap()
        .clone();
    let fields = after_schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["field"].as_str().unwrap().to_owned(), f.clone()))
        .collect();
    (line["value"]["payload"]["after"].clone(), fields)
}

#[test]
fn every_type_in_snapshot_and_stream_as_debezium_maps_it() {
    let db = Db2::start("types", true);
    db.sql(TABLE);
    db.sql(&format!(
        "INSERT INTO \"DB2INST1\".\"TYPES\" VALUES ({ROW})"
    ));
    db.add_table("DB2INST1", "TYPES");
    let dir = tempfile::tempdir().unwrap();
    let mut child = start(&pipeline(dir.path(), &db, &[]), &[]);
    wait_events(dir.path(), 1, &mut child);
    db.sql(&format!(
        "INSERT INTO \"DB2INST1\".\"TYPES\" VALUES ({})",
        ROW.replacen('1', "2", 1)
    ));
    wait_events(dir.path(), 2, &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    let want = serde_json::json!({
        "ID": 1, "S": -7, "B": 9007199254740993i64, "R": 1.5, "D": 2.25,
        "DEC": "BOI=", "DF": {"scale": 1, "value": "GQ=="},
        "C": "ab   ", "V": "text", "CL": "a long text",
        "G": "g               ", "VG": "vg", "DBC": "dbclob",
        "BL": "AQL/", "VB": "AA==", "BO": true,
        "DT": 19724, "T": 11_045_000, "TS3": 1_704_164_645_123i64, "TS": 1_704_164_645_123_456i64,
        "X": "<a>1</a>"
    });
    let (snapshot, fields) = first_row(dir.path());
    assert_eq!(snapshot, want);
    let stream = &lines(dir.path())[1]["value"]["payload"];
    assert_eq!(stream["op"], "c");
    let mut streamed = stream["after"].clone();
    streamed["ID"] = 1.into();
    assert_eq!(streamed, want, "the stream reads what the snapshot reads");
    let name = |f: &str| fields[f]["name"].as_str().map(str::to_owned);
    let kind = |f: &str| fields[f]["type"].as_str().unwrap().to_owned();
    assert_eq!(
        (kind("S"), kind("B"), kind("R"), kind("D")),
        (
            "int16".into(),
            "int64".into(),
            "float".into(),
            "double".into()
        )
    );
    assert_eq!(
        name("DEC").as_deref(),
        Some("org.apache.kafka.connect.data.Decimal")
    );
    assert_eq!(
        fields["DEC"]["parameters"],
        serde_json::json!({"scale": "2", "connect.decimal.precision": "10"})
    );
    assert_eq!(
        name("DF").as_deref(),
        Some("io.debezium.data.VariableScaleDecimal")
    );
    assert_eq!((kind("BL"), kind("BO")), ("bytes".into(), "boolean".into()));
    assert_eq!(name("DT").as_deref(), Some("io.debezium.time.Date"));
    assert_eq!(name("T").as_deref(), Some("io.debezium.time.Time"));
    assert_eq!(name("TS3").as_deref(), Some("io.debezium.time.Timestamp"));
    assert_eq!(
        name("TS").as_deref(),
        Some("io.debezium.time.MicroTimestamp")
    );
    assert_eq!(name("X").as_deref(), Some("io.debezium.data.Xml"));
    assert_eq!(fields["ID"]["optional"], false);
    assert_eq!(fields["V"]["optional"], true);
}

#[test]
fn connect_time_string_decimals_and_hex_bytes() {
    let db = Db2::start("types_modes", true);
    db.sql(TABLE);
    db.sql(&format!(
        "INSERT INTO \"DB2INST1\".\"TYPES\" VALUES ({ROW})"
    ));
    db.sql("INSERT INTO \"DB2INST1\".\"TYPES\" (\"ID\", \"DF\") VALUES (2, 1.5E+3)");
    db.add_table("DB2INST1", "TYPES");
    let dir = tempfile::tempdir().unwrap();
    let keys = [
        ("time.precision.mode", "connect".into()),
        ("decimal.handling.mode", "string".into()),
        ("binary.handling.mode", "hex".into()),
    ];
    let mut child = start(&pipeline(dir.path(), &db, &keys), &[]);
    wait_events(dir.path(), 2, &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    let (after, fields) = first_row(dir.path());
    assert_eq!(
        (&after["DEC"], &after["DF"], &after["BL"]),
        (
            &Json::from("12.50"),
            &Json::from("2.5"),
            &Json::from("0102ff")
        )
    );
    assert_eq!(
        (&after["T"], &after["TS"], &after["TS3"]),
        (
            &Json::from(11_045_000),
            &Json::from(1_704_164_645_123i64),
            &Json::from(1_704_164_645_123i64)
        )
    );
    assert_eq!(
        fields["TS"]["name"],
        "org.apache.kafka.connect.data.Timestamp"
    );
    assert_eq!(fields["T"]["name"], "org.apache.kafka.connect.data.Time");
    assert_eq!(fields["DT"]["name"], "org.apache.kafka.connect.data.Date");
    let second = &lines(dir.path())[1]["value"]["payload"]["after"];
    assert_eq!(second["DF"], "1500");
    assert_eq!(second["S"], Json::Null);
}
