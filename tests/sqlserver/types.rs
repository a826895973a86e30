//! Every SQL Server type of seed 003's type table, as Debezium's SQL Server connector maps it
//! (`SqlServerValueConverters`, `AbstractSqlServerDatatypesTest`), in each mode.

use super::*;

const TABLE: &str = "CREATE TABLE dbo.types (id int PRIMARY KEY, b bit, ti tinyint, si smallint, i int, bi bigint, \
    r real, f float, d decimal(12,3), n numeric(5,0), m money, sm smallmoney, c char(3), vc varchar(20), nc nchar(2), \
    nvc nvarchar(20), nmax nvarchar(max), x xml, vb varbinary(8), bn binary(2), g uniqueidentifier, dt date, \
    t0 time(0), t3 time(3), t6 time(6), t7 time(7), dt2_3 datetime2(3), dt2_6 datetime2(6), dt2_7 datetime2(7), \
    dto datetimeoffset(2), dtm datetime, sdt smalldatetime)";

const ROW: &str = "INSERT INTO dbo.types VALUES (1, 1, 200, -3, -100000, 9007199254740993, 1.5, 2.25, -123456789.125, \
    12345, 12.3456, -3.25, 'abc', 'varchar', N'ab', N'snow ☃', N'max text', N'<a>x</a>', 0x0102FF, 0xABCD, \
    '6F9619FF-8B86-D011-B42D-00C04FC964FF', '2024-03-04', '05:06:07', '05:06:07.123', '05:06:07.123456', \
    '05:06:07.1234567', '2024-03-04 05:06:07.123', '2024-03-04 05:06:07.123456', '2024-03-04 05:06:07.1234567', \
    '2024-03-04 05:06:07.12 +02:00', '2024-03-04 05:06:07.123', '2024-03-04 05:06:00')";

/// The snapshot event of the row and of a row of NULLs, read with `extra`.
fn read_types(extra: &str) -> (Json, Json, Json) {
    let server = SqlServer::start("typesDB");
    server.sql(TABLE);
    server.sql(ROW);
    server.sql("INSERT INTO dbo.types (id) VALUES (2)");
    server.enable_cdc(&["dbo.types"]);
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(
        dir.path(),
        &server,
        &format!("  snapshot.mode: initial_only\n{extra}"),
    );
    let child = start(&path, &[]);
    sluice_test_support::pg::finish(child);
    let all = lines(dir.path());
    assert_eq!(all.len(), 2, "{all:?}");
    let schema = all[0]["value"]["schema"].clone();
    (
        all[0]["value"]["payload"]["after"].clone(),
        all[1]["value"]["payload"]["after"].clone(),
        schema,
    )
}

/// The schema of `column` in the envelope's `after`.
fn field<'a>(schema: &'a Json, column: &str) -> &'a Json {
    let after = schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "after")
        .unwrap();
    after["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == column)
        .unwrap()
}

#[test]
fn every_type_maps_as_debezium_maps_it() {
    let (row, nulls, schema) = read_types("");
    let expected = serde_json::json!({
        "id": 1, "b": true, "ti": 200, "si": -3, "i": -100000, "bi": 9007199254740993_i64,
        "r": 1.5, "f": 2.25, "d": "40Fm5Xs=", "n": "MDk=", "m": "AeJA", "sm": "gQw=",
        "c": "abc", "vc": "varchar", "nc": "ab", "nvc": "snow ☃", "nmax": "max text", "x": "<a>x</a>",
        "vb": "AQL/", "bn": "q80=", "g": "6F9619FF-8B86-D011-B42D-00C04FC964FF",
        "dt": 19786, "t0": 18_367_000, "t3": 18_367_123, "t6": 18_367_123_456_i64, "t7": 18_367_123_456_700_i64,
        "dt2_3": 1_709_528_767_123_i64, "dt2_6": 1_709_528_767_123_456_i64, "dt2_7": 1_709_528_767_123_456_700_i64,
        "dto": "2024-03-04T05:06:07.12+02:00", "dtm": 1_709_528_767_123_i64, "sdt": 1_709_528_760_000_i64
    });
    assert_eq!(row, expected);
    for (column, value) in nulls.as_object().unwrap() {
        if column != "id" {
            assert!(value.is_null(), "{column}: {value}");
        }
    }
    let kind = |c: &str| {
        (
            field(&schema, c)["type"].as_str().unwrap().to_owned(),
            field(&schema, c)["name"].as_str().map(str::to_owned),
        )
    };
    assert_eq!(kind("b"), ("boolean".into(), None));
    assert_eq!(kind("ti"), ("int16".into(), None));
    assert_eq!(kind("r"), ("float".into(), None));
    assert_eq!(kind("f"), ("double".into(), None));
    assert_eq!(kind("g"), ("string".into(), None));
    assert_eq!(
        kind("dt"),
        ("int32".into(), Some("io.debezium.time.Date".into()))
    );
    assert_eq!(
        kind("t3"),
        ("int32".into(), Some("io.debezium.time.Time".into()))
    );
    assert_eq!(
        kind("t6"),
        ("int64".into(), Some("io.debezium.time.MicroTime".into()))
    );
    assert_eq!(
        kind("t7"),
        ("int64".into(), Some("io.debezium.time.NanoTime".into()))
    );
    assert_eq!(
        kind("dt2_3"),
        ("int64".into(), Some("io.debezium.time.Timestamp".into()))
    );
    assert_eq!(
        kind("dt2_6"),
        (
            "int64".into(),
            Some("io.debezium.time.MicroTimestamp".into())
        )
    );
    assert_eq!(
        kind("dt2_7"),
        (
            "int64".into(),
            Some("io.debezium.time.NanoTimestamp".into())
        )
    );
    assert_eq!(
        kind("dtm"),
        ("int64".into(), Some("io.debezium.time.Timestamp".into()))
    );
    assert_eq!(
        kind("dto"),
        (
            "string".into(),
            Some("io.debezium.time.ZonedTimestamp".into())
        )
    );
    assert_eq!(kind("vb"), ("bytes".into(), None));
    let d = field(&schema, "d");
    assert_eq!(d["name"], "org.apache.kafka.connect.data.Decimal");
    assert_eq!(
        d["parameters"],
        serde_json::json!({"scale": "3", "connect.decimal.precision": "12"})
    );
    assert_eq!(
        field(&schema, "m")["parameters"],
        serde_json::json!({"scale": "4", "connect.decimal.precision": "19"})
    );
    assert_eq!(
        field(&schema, "sm")["parameters"],
        serde_json::json!({"scale": "4", "connect.decimal.precision": "10"})
    );
    assert_eq!(field(&schema, "id")["optional"], false);
    assert_eq!(field(&schema, "b")["optional"], true);
}

#[test]
fn the_modes_change_decimals_binaries_and_times() {
    let (row, _, schema) = read_types(
        "  decimal.handling.mode: string\n  binary.handling.mode: hex\n  time.precision.mode: connect\n",
    );
    assert_eq!(row["d"], "-123456789.125");
    assert_eq!(row["m"], "12.3456");
    assert_eq!(row["vb"], "0102ff");
    assert_eq!(row["t7"], 18_367_123);
    assert_eq!(row["dt2_7"], 1_709_528_767_123_i64);
    assert_eq!(
        field(&schema, "dt2_7")["name"],
        "org.apache.kafka.connect.data.Timestamp"
    );
    assert_eq!(
        field(&schema, "t7")["name"],
        "org.apache.kafka.connect.data.Time"
    );
    let (row, _, _) = read_types("  decimal.handling.mode: double\n");
    assert_eq!(row["d"], -123456789.125);
    assert_eq!(row["sm"], -3.25);
}
