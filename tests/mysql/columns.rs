//! The column options every source shares, on the mysql source: `column.exclude.list`,
//! `column.mask.*`, `column.truncate.*`, `message.key.columns`, `skipped.operations`, in the
//! snapshot and the stream.

use sluice_kit::mapping::{HashAlgorithm, HashVersion, Hasher};
use sluice_test_support::mariadb;
use sluice_test_support::pg::{self as run};

use super::streaming_pipeline;

#[test]
fn columns_are_left_out_masked_hashed_truncated_and_keyed_as_configured() {
    let server = mariadb::server();
    let db = mariadb::database("mysql_columns");
    mariadb::sql(
        &db,
        "CREATE TABLE people (id INT PRIMARY KEY, code VARCHAR(8) NOT NULL, name VARCHAR(20), \
         email VARCHAR(16), bio TEXT, secret POINT, vb VARBINARY(4), tail VARCHAR(4), y YEAR, \
         u INT UNSIGNED, d DATE); \
         INSERT INTO people VALUES (1, 'c1', 'alice', 'a@example.com', 'a long biography', NULL, \
         x'0102', 'ab', 2024, 4294967295, '0000-00-00')",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = streaming_pipeline(
        dir.path(),
        server.port,
        &[
            ("database.include.list", db.as_str().into()),
            ("column.exclude.list", format!("{db}.people.secret").into()),
            (
                "column.mask.with.4.chars",
                format!("{db}.people.name").into(),
            ),
            (
                "column.mask.hash.SHA-256.with.salt.pepper",
                format!("{db}.people.email").into(),
            ),
            (
                "column.truncate.to.6.chars",
                format!("{db}.people.bio").into(),
            ),
            ("message.key.columns", format!("{db}.people:code").into()),
            ("skipped.operations", "u,t".into()),
        ],
    );
    let mut child = run::start(&path, &[]);
    run::wait_lines(dir.path(), 1, &mut child);
    mariadb::sql(
        &db,
        "INSERT INTO people VALUES (2, 'c2', 'bob', 'b@example.com', 'short', POINT(1, 2), \
         x'0102', 'ab', 2024, 4294967295, '0000-00-00')",
    );
    run::wait_lines(dir.path(), 2, &mut child);
    // Updates are skipped; a TRUNCATE gives no event (as Debezium's default `t`) and the
    // stream goes on.
    mariadb::sql(
        &db,
        "UPDATE people SET name = 'carol' WHERE id = 1; TRUNCATE TABLE people; \
         INSERT INTO people VALUES (3, 'c3', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    );
    run::wait_lines(dir.path(), 3, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    run::stop(&child);
    run::finish(child);
    let lines = run::lines(dir.path());
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[2]["value"]["payload"]["op"], "c");
    assert_eq!(lines[2]["key"]["payload"]["code"], "c3");
    let hasher = Hasher::new(HashAlgorithm::Sha256, HashVersion::V1, "pepper");
    for (line, (code, email, bio)) in lines.iter().zip([
        ("c1", "a@example.com", "a long"),
        ("c2", "b@example.com", "short"),
    ]) {
        let after = &line["value"]["payload"]["after"];
        // The POINT column is left out (its type is not mapped: excluding it is the way out).
        assert!(after.get("secret").is_none(), "{after}");
        assert_eq!(after["name"], "****", "{after}");
        assert_eq!(after["email"], *hasher.hash_cut(email, 16), "{after}");
        assert_eq!(after["bio"], bio, "{after}");
        // The columns after the spatial one keep their character sets and signedness (the
        // binlog lists the spatial column's character set; YEAR takes a signedness bit), and
        // a zero date is null, as Debezium maps it in an optional column.
        assert_eq!(after["vb"], "AQI=", "{after}");
        assert_eq!(after["tail"], "ab", "{after}");
        assert_eq!(after["y"], 2024, "{after}");
        assert_eq!(after["u"], 4_294_967_295_u64, "{after}");
        assert!(after["d"].is_null(), "{after}");
        assert_eq!(line["key"]["payload"], serde_json::json!({ "code": code }));
        let fields = line["value"]["schema"]["fields"][1]["fields"]
            .as_array()
            .unwrap();
        let param = |name: &str, key: &str| {
            fields.iter().find(|f| f["field"] == name).unwrap()["parameters"][key].clone()
        };
        assert_eq!(param("name", "masked"), "true");
        assert_eq!(param("email", "masked"), "true");
        assert_eq!(param("bio", "truncateLength"), "6");
    }
}
