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

/// The snapshot event of the row and of a row of NULLs, read with the source's `keys`.
fn read_types(keys: &[(&str, Scalar)]) -> (Json, Json, Json) {
    let server = SqlServer::start("typesDB");
    server.sql(TABLE);
    server.sql(ROW);
    server.sql("INSERT INTO dbo.types (id) VALUES (2)");
    server.enable_cdc(&["dbo.types"]);
    let dir = tempfile::tempdir().unwrap();
    let source = source(&server).set("snapshot.mode", "initial_only");
    let path = base(dir.path(), source.set_all(keys)).write(dir.path());
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
    let (row, nulls, schema) = read_types(&[]);
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
    let (row, _, schema) = read_types(&[
        ("decimal.handling.mode", "string".into()),
        ("binary.handling.mode", "hex".into()),
        ("time.precision.mode", "connect".into()),
    ]);
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
    let (row, _, _) = read_types(&[("decimal.handling.mode", "double".into())]);
    assert_eq!(row["d"], -123456789.125);
    assert_eq!(row["sm"], -3.25);
}

#[test]
fn the_snapshot_describes_each_table_in_a_schema_change_event_as_seed_003_shows() {
    let server = SqlServer::start("testDB");
    server.sql(
        "CREATE TABLE dbo.customers (id int PRIMARY KEY, first_name varchar(255) NOT NULL, \
         last_name varchar(255) NOT NULL, email varchar(255) NOT NULL, note nvarchar(max), at datetime2(3), \
         price decimal(10,2))",
    );
    server.sql("INSERT INTO dbo.customers VALUES (1001, 'Sally', 'Thomas', 'sally.thomas@acme.com', NULL, NULL, 1.5)");
    server.enable_cdc(&["dbo.customers"]);
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(
        dir.path(),
        &server,
        &[
            ("snapshot.mode", "initial_only".into()),
            ("include.schema.changes", true.into()),
        ],
    );
    sluice_test_support::pg::finish(start(&path, &[]));
    let all = lines(dir.path());
    let topics: Vec<&str> = all.iter().map(|e| e["topic"].as_str().unwrap()).collect();
    assert_eq!(topics, ["server1", "server1.testDB.dbo.customers"]);
    let change = &all[0];
    assert_eq!(
        change["key"]["payload"],
        serde_json::json!({"databaseName": "testDB"})
    );
    assert_eq!(
        change["key"]["schema"]["name"],
        "io.debezium.connector.sqlserver.SchemaChangeKey"
    );
    assert_eq!(
        change["value"]["schema"]["name"],
        "io.debezium.connector.sqlserver.SchemaChangeValue"
    );
    let p = &change["value"]["payload"];
    assert_eq!(
        (p["databaseName"].as_str(), p["schemaName"].as_str()),
        (Some("testDB"), Some("dbo"))
    );
    assert!(p["ddl"].is_null());
    let s = &p["source"];
    assert_eq!(
        (
            s["snapshot"].as_str(),
            s["schema"].as_str(),
            s["table"].as_str()
        ),
        (Some("true"), Some("dbo"), Some("customers"))
    );
    assert!(s["change_lsn"].is_null() && s["event_serial_no"].is_null());
    let t = &p["tableChanges"][0];
    assert_eq!(t["type"], "CREATE");
    assert_eq!(t["id"], "\"testDB\".\"dbo\".\"customers\"");
    assert_eq!(
        t["table"]["primaryKeyColumnNames"],
        serde_json::json!(["id"])
    );
    assert!(t["table"]["defaultCharsetName"].is_null());
    let columns = t["table"]["columns"].as_array().unwrap();
    let col = |i: usize| {
        let c = &columns[i];
        (
            c["name"].as_str().unwrap().to_owned(),
            c["jdbcType"].as_i64().unwrap(),
            c["typeName"].as_str().unwrap().to_owned(),
            c["length"].as_i64(),
            c["scale"].as_i64(),
            c["position"].as_i64().unwrap(),
            c["optional"].as_bool().unwrap(),
        )
    };
    // Seed 003's example, with `int` where its table had `int identity`.
    assert_eq!(
        col(0),
        ("id".into(), 4, "int".into(), Some(10), Some(0), 1, false)
    );
    assert_eq!(
        col(1),
        (
            "first_name".into(),
            12,
            "varchar".into(),
            Some(255),
            None,
            2,
            false
        )
    );
    assert_eq!(
        col(3),
        (
            "email".into(),
            12,
            "varchar".into(),
            Some(255),
            None,
            4,
            false
        )
    );
    assert_eq!(
        col(4),
        (
            "note".into(),
            -9,
            "nvarchar".into(),
            Some(2_147_483_647),
            None,
            5,
            true
        )
    );
    assert_eq!(
        col(5),
        (
            "at".into(),
            93,
            "datetime2".into(),
            Some(23),
            Some(3),
            6,
            true
        )
    );
    assert_eq!(
        col(6),
        (
            "price".into(),
            3,
            "decimal".into(),
            Some(10),
            Some(2),
            7,
            true
        )
    );
}
