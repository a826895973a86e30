//! The boundary scenario's MySQL/MariaDB backend: the private MariaDB with the binlog on
//! ([`crate::mariadb`]), every type at its limits, read back with the `mariadb` client.

use serde_json::Value as Json;

use super::generated::{self as g, Draw};
use super::{create_table_sql, rows_of, text, Backend, Column};
use crate::mariadb;
use crate::pipeline::Component;

/// One database of the shared private MariaDB.
pub struct Mysql {
    db: String,
}

impl Mysql {
    /// A fresh database named after `test`.
    pub fn new(test: &str) -> Mysql {
        Mysql {
            db: mariadb::database(test),
        }
    }
}

/// `n` times `unit`.
fn times(unit: &str, n: usize) -> String {
    unit.repeat(n)
}

fn integers() -> Vec<Column> {
    let mut out = Vec::new();
    for (name, bits) in [
        ("tinyint", 8u32),
        ("smallint", 16),
        ("mediumint", 24),
        ("int", 32),
        ("bigint", 64),
    ] {
        let min = -(1i128 << (bits - 1));
        let max = (1i128 << (bits - 1)) - 1;
        let (min, max, umax) = (
            min.to_string(),
            max.to_string(),
            ((1u128 << bits) - 1).to_string(),
        );
        let (minus, plus) = (
            (-1i128 << (bits - 2)).to_string(),
            (1i128 << (bits - 2)).to_string(),
        );
        out.push(Column::new(
            &format!("s_{name}"),
            name,
            &[&min, "-1", "0", "1", &max, "NULL", &minus, &plus],
        ));
        out.push(Column::new(
            &format!("u_{name}"),
            &format!("{name} unsigned"),
            &["0", "1", &umax, "NULL", &max, &plus],
        ));
    }
    out
}

fn numbers() -> Vec<Column> {
    let nines_65_30 = format!("{}.{}", times("9", 35), times("9", 30));
    let neg_65_30 = format!("-{nines_65_30}");
    let tiny_65_30 = format!("0.{}1", times("0", 29));
    vec![
        Column::new(
            "d65",
            "decimal(65,30)",
            &[&nines_65_30, &neg_65_30, "0", &tiny_65_30, "-1", "NULL"],
        ),
        Column::new(
            "d10",
            "decimal(10,0)",
            &["9999999999", "-9999999999", "0", "1", "NULL"],
        ),
        Column::new(
            "d52",
            "decimal(5,2)",
            &["999.99", "-999.99", "0.00", "-0.01", "0.01", "NULL"],
        ),
        Column::new(
            "f",
            "float",
            &[
                "3.40282e38",
                "-3.40282e38",
                "1.17549e-38",
                "0",
                "-1.5",
                "NULL",
                "1",
            ],
        ),
        Column::new(
            "dbl",
            "double",
            &[
                "1.7976931348623157e308",
                "-1.7976931348623157e308",
                "2.2250738585072014e-308",
                "4.9e-324",
                "0",
                "-0e0",
                "NULL",
                "0.1",
            ],
        ),
        Column::new("b1", "bit(1)", &["b'0'", "b'1'", "NULL"]),
        Column::new(
            "b8",
            "bit(8)",
            &["b'0'", "b'11111111'", "b'10000000'", "NULL"],
        ),
        Column::new(
            "b17",
            "bit(17)",
            &[
                "b'0'",
                "b'11111111111111111'",
                "b'10000000000000001'",
                "NULL",
            ],
        ),
        Column::new(
            "b64",
            "bit(64)",
            &[
                "b'0'",
                &format!("b'{}'", times("1", 64)),
                &format!("b'1{}'", times("0", 63)),
                "NULL",
            ],
        ),
    ]
}

fn temporal() -> Vec<Column> {
    let mut out = vec![
        Column::new("y", "year", &["1901", "2155", "0000", "2000", "NULL"]),
        Column::new(
            "dt",
            "date",
            &[
                "'1000-01-01'",
                "'9999-12-31'",
                "'2024-02-29'",
                "'1970-01-01'",
                "NULL",
            ],
        ),
    ];
    for fsp in [0usize, 1, 3, 6] {
        let f = |digit: &str| {
            if fsp == 0 {
                String::new()
            } else {
                format!(".{}", times(digit, fsp))
            }
        };
        out.push(Column::new(
            &format!("t{fsp}"),
            &format!("time({fsp})"),
            &[
                &format!(
                    "'-838:59:59{}'",
                    if fsp == 0 {
                        String::new()
                    } else {
                        format!(".{}", times("0", fsp))
                    }
                ),
                &format!("'838:59:59{}'", f("0")),
                "'00:00:00'",
                &format!("'12:34:56{}'", f("5")),
                "'-00:00:01'",
                "NULL",
                // Negative with a fraction: stored with the fraction's bits reversed.
                &format!("'-12:34:56{}'", f("5")),
                &format!("'-00:00:00{}'", f("1")),
            ],
        ));
        out.push(Column::new(
            &format!("dtm{fsp}"),
            &format!("datetime({fsp})"),
            &[
                "'1000-01-01 00:00:00'",
                &format!("'9999-12-31 23:59:59{}'", f("9")),
                &format!("'2024-02-29 12:00:00{}'", f("0")),
                "'1970-01-01 00:00:00'",
                &format!("'1969-12-31 23:59:59{}'", f("9")),
                "NULL",
            ],
        ));
        out.push(Column::new(
            &format!("ts{fsp}"),
            &format!("timestamp({fsp}) NULL"),
            &[
                "'1970-01-01 00:00:01'",
                &format!("'2038-01-19 03:14:07{}'", f("9")),
                &format!("'2024-02-29 00:00:00{}'", f("0")),
                &format!("'2000-01-01 00:00:00{}'", f("1")),
                "NULL",
            ],
        ));
    }
    out
}

fn strings() -> Vec<Column> {
    let long_utf8 = format!("'{}'", times("ñ", 255));
    let long_4byte = format!("'{}'", times("😀", 255));
    let blob = format!("X'{}'", times("00FF", 1000));
    let set_all = format!(
        "'{}'",
        (1..=64)
            .map(|i| format!("m{i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let set_members: String = (1..=64)
        .map(|i| format!("'m{i}'"))
        .collect::<Vec<_>>()
        .join(",");
    vec![
        Column::new(
            "c",
            "char(10) character set utf8mb4",
            &["''", "'a'", "'éèê😀'", "'0123456789'", "NULL"],
        ),
        Column::new(
            "vc",
            "varchar(255) character set utf8mb4",
            &["''", &long_utf8, &long_4byte, "' lead and trail '", "NULL"],
        ),
        Column::new(
            "l1",
            "varchar(10) character set latin1",
            &["''", "'Ÿçé'", "'plain'", "NULL"],
        ),
        Column::new(
            "tx",
            "text character set utf8mb4",
            &["''", "'a\u{0301} combined'", "'😀'", "NULL"],
        ),
        Column::new(
            "bn",
            "binary(4)",
            &["X'00000000'", "X'FFFFFFFF'", "X'01'", "''", "NULL"],
        ),
        Column::new(
            "vb",
            "varbinary(16)",
            &["''", "X'00'", "X'FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF'", "NULL"],
        ),
        Column::new("bl", "blob", &["''", &blob, "X'00'", "NULL"]),
        Column::new(
            "e",
            "enum('first','ü','last')",
            &["'first'", "'last'", "'ü'", "NULL"],
        ),
        Column::new(
            "st",
            &format!("set({set_members})"),
            &["''", "'m1'", &set_all, "'m64'", "NULL"],
        ),
        Column::new(
            "j",
            "json",
            &[
                "'{}'",
                "'[]'",
                "'{\"a\": [1, {\"b\": \"ü😀\"}], \"n\": null}'",
                "'[[[[[[1]]]]]]'",
                "'\"x\"'",
                "NULL",
            ],
        ),
        Column::new(
            "g",
            "geometry",
            &[
                "ST_GeomFromText('POINT(0 0)')",
                "ST_GeomFromText('LINESTRING(-180 -90, 180 90)')",
                "ST_GeomFromText('POINT(1.5 -2.25)', 4326)",
                "NULL",
            ],
        ),
    ]
}

/// Columns of every type the binlog decoder reads, values drawn across each type's range
/// (the `mariadb` client prints `\\` for a backslash in batch mode: none drawn).
fn drawn(draw: &mut Draw) -> Vec<Column> {
    use proptest::prelude::*;
    let mut out = Vec::new();
    let mut push = |name: &str, sql_type: &str, values: Vec<String>| {
        out.push(Column {
            name: name.to_owned(),
            sql_type: sql_type.to_owned(),
            values,
        });
    };
    for (name, sql_type, bits) in [
        ("i1", "tinyint", 8),
        ("i2", "smallint", 16),
        ("i3", "mediumint", 24),
        ("i4", "int", 32),
        ("i8", "bigint", 64),
    ] {
        let signed = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
        let number = |n: i128| n.to_string();
        push(
            name,
            sql_type,
            draw.column(g::integer(signed.0, signed.1).prop_map(number)),
        );
        let unsigned = format!("{sql_type} unsigned");
        let values = draw.column(g::integer(0, (1i128 << bits) - 1).prop_map(number));
        push(&format!("u{name}"), &unsigned, values);
    }
    for (name, precision, scale) in [("d65", 65, 30), ("d10", 10, 0), ("d12", 12, 12)] {
        let values = draw.column(g::decimal(precision, scale));
        push(name, &format!("decimal({precision},{scale})"), values);
    }
    push("f", "float", draw.column(g::float()));
    push("dbl", "double", draw.column(g::double()));
    push(
        "b1",
        "bit(1)",
        draw.column((0..=1u8).prop_map(|b| b.to_string())),
    );
    for bits in [7u32, 33, 64] {
        let values = any::<u64>().prop_map(move |v| (v >> (64 - bits)).to_string());
        push(
            &format!("b{bits}"),
            &format!("bit({bits})"),
            draw.column(values),
        );
    }
    let year = prop_oneof![Just(0), 1901..=2155i64].prop_map(|y| format!("{y:04}"));
    push("y", "year", draw.column(year));
    let days = (
        g::days_from_civil(1000, 1, 1),
        g::days_from_civil(9999, 12, 31),
    );
    let date = (days.0..=days.1).prop_map(|d| format!("'{}'", text::date(d)));
    push("dt", "date", draw.column(date));
    for fsp in 0..=6usize {
        let max = 3_020_399_000_000; // 838:59:59
        let time = g::micros(-max, max, fsp).prop_map(move |m| format!("'{}'", text::time(m, fsp)));
        push(
            &format!("t{fsp}"),
            &format!("time({fsp})"),
            draw.column(time),
        );
        let last = g::day_micros(days.1 + 1) - 1;
        let stamp = move |m: i64| format!("'{}'", text::timestamp(m, fsp));
        let datetime = g::micros(g::day_micros(days.0), last, fsp).prop_map(stamp);
        push(
            &format!("dtm{fsp}"),
            &format!("datetime({fsp})"),
            draw.column(datetime),
        );
        let ts = g::micros(1_000_000, 2_147_483_647_999_999, fsp).prop_map(stamp);
        push(
            &format!("ts{fsp}"),
            &format!("timestamp({fsp}) NULL"),
            draw.column(ts),
        );
    }
    let utf8mb4 = "character set utf8mb4";
    push(
        "vc",
        &format!("varchar(255) {utf8mb4}"),
        draw.column(g::text(255, &['\\'])),
    );
    push(
        "tx",
        &format!("text {utf8mb4}"),
        draw.column(g::text(2000, &['\\'])),
    );
    let latin1 = proptest::collection::vec(prop_oneof![0x20u8..=0x7e, 0xa0u8..=0xff], 0..=10)
        .prop_map(|b| {
            b.into_iter()
                .map(char::from)
                .filter(|c| *c != '\\')
                .collect::<String>()
        })
        .prop_map(|s| format!("'{}'", s.replace('\'', "''")));
    push(
        "l1",
        "varchar(10) character set latin1",
        draw.column(latin1),
    );
    let hex = |h: String| format!("X'{h}'");
    push(
        "bn",
        "binary(8)",
        draw.column(g::bytes(8, true).prop_map(hex)),
    );
    push(
        "vb",
        "varbinary(64)",
        draw.column(g::bytes(64, false).prop_map(hex)),
    );
    push(
        "bl",
        "blob",
        draw.column(g::bytes(3000, false).prop_map(hex)),
    );
    let members = ["first", "ü", "😀", "last"];
    let member = proptest::sample::select(members.to_vec()).prop_map(|m| format!("'{m}'"));
    push("e", "enum('first','ü','😀','last')", draw.column(member));
    let set = any::<u64>().prop_map(|bits| {
        let on: Vec<String> = (0..64)
            .filter(|i| bits >> i & 1 == 1)
            .map(|i| format!("m{}", i + 1))
            .collect();
        format!("'{}'", on.join(","))
    });
    let all: Vec<String> = (1..=64).map(|i| format!("'m{i}'")).collect();
    push("st", &format!("set({})", all.join(",")), draw.column(set));
    out
}

/// The fraction digits of a type like `time(3)`.
fn fsp(sql_type: &str) -> usize {
    sql_type
        .split_once('(')
        .and_then(|(_, r)| r.split(')').next())
        .and_then(|d| d.parse().ok())
        .unwrap_or(0)
}

impl Backend for Mysql {
    fn name(&self) -> &str {
        "mysql (MariaDB)"
    }

    fn execute(&self, sql: &str) {
        mariadb::sql(
            &self.db,
            &format!("SET NAMES utf8mb4; SET time_zone = '+00:00'; {sql}"),
        );
    }

    fn query(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        let out = mariadb::sql(
            &self.db,
            &format!("SET NAMES utf8mb4; SET time_zone = '+00:00'; {sql}"),
        );
        rows_of(&out, "NULL")
    }

    fn create(&self, name: &str, columns: &[(String, String)]) {
        let sql = create_table_sql(name, columns, str::to_owned);
        self.execute(&format!("{sql} DEFAULT CHARSET=utf8mb4"));
    }

    fn collection(&self, name: &str) -> String {
        format!("{}.{name}", self.db)
    }

    fn types(&self) -> (&str, &str) {
        ("INT", "VARCHAR(40)")
    }

    fn large_text_type(&self) -> &str {
        "LONGTEXT"
    }

    /// `BIGINT UNSIGNED` 2^64-1 under `bigint.unsigned.handling.mode: long` (the default; the
    /// backend reads `precise`): a signed 64-bit integer cannot hold it (Debezium would wrap
    /// it to -1).
    fn unrepresentable(&self) -> Option<super::failure::Unrepresentable> {
        Some(super::failure::Unrepresentable {
            sql_type: "BIGINT UNSIGNED".into(),
            refused: "18446744073709551615".into(),
            fits: "5".into(),
            settings: vec![("bigint.unsigned.handling.mode", "long".into())],
        })
    }

    fn source(&self) -> Component {
        use std::hash::{Hash, Hasher};
        // A replica id of the pipeline's own: the tests of a process stream in parallel.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.db.hash(&mut h);
        Component::new("mysql")
            .set("database.hostname", "127.0.0.1")
            .set("database.port", mariadb::server().port)
            .set("database.user", "root")
            .set(
                "database.server.id",
                (2_000_000 + h.finish() % 1_000_000) as i64,
            )
            .set("topic.prefix", "b")
            .set("include.schema.changes", false)
            .set("database.include.list", &self.db)
            .set("bigint.unsigned.handling.mode", "precise")
    }

    fn boundary_columns(&self) -> Vec<Column> {
        let mut out = integers();
        out.extend(numbers());
        out.extend(temporal());
        out.extend(strings());
        out
    }

    fn generated_columns(&self, draw: &mut Draw) -> Vec<Column> {
        drawn(draw)
    }

    fn client_expr(&self, c: &Column) -> String {
        let t = c.sql_type.to_ascii_lowercase();
        if t.starts_with("bit") {
            format!("CAST({} AS UNSIGNED)", c.name)
        } else if t.starts_with("binary") || t.starts_with("varbinary") || t.starts_with("blob") {
            format!("HEX({})", c.name)
        } else if t.starts_with("geometry") {
            format!("CONCAT(ST_SRID({n}), ':', HEX(ST_AsWKB({n})))", n = c.name)
        } else if t == "float" {
            // The client prints a float with 6 digits, too few to name it: as a double, exact.
            format!("CAST({} AS DOUBLE)", c.name)
        } else {
            c.name.clone()
        }
    }

    fn check(
        &self,
        column: &Column,
        value: &Json,
        schema: &Json,
        client: &str,
    ) -> Result<(), String> {
        let t = column.sql_type.to_ascii_lowercase();
        if t.starts_with("bigint unsigned") {
            return text::equal(client, &text::decimal(value, text::scale(schema))?);
        }
        if t.starts_with("bit(1)") {
            return text::equal(
                client,
                if value == &Json::Bool(true) {
                    "1"
                } else if value == &Json::Bool(false) {
                    "0"
                } else {
                    "?"
                },
            );
        }
        if t.starts_with("bit") {
            let bytes = text::bytes(value)?;
            // io.debezium.data.Bits: little-endian bytes.
            let n = bytes
                .iter()
                .rev()
                .fold(0u128, |n, b| n << 8 | u128::from(*b));
            return text::equal(client, &n.to_string());
        }
        let first = t.split(['(', ' ']).next().unwrap_or_default();
        match first {
            "tinyint" | "smallint" | "mediumint" | "int" | "bigint" => {
                text::equal(client, &text::int(value)?.to_string())
            }
            "decimal" => text::equal(client, &text::decimal(value, text::scale(schema))?),
            "float" => text::same_float32(client, value),
            "double" => text::same_float(client, value, 0.0),
            "year" => text::equal(client, &format!("{:04}", text::int(value)?)),
            "date" => text::equal(client, &text::date(text::int(value)?)),
            "time" => text::equal(client, &text::time(text::int(value)?, fsp(&t))),
            "datetime" => {
                let n = text::int(value)?;
                let micros = if fsp(&t) <= 3 { n * 1000 } else { n };
                text::equal(client, &text::timestamp(micros, fsp(&t)))
            }
            "timestamp" => {
                let ours = value.as_str().ok_or("not a string")?;
                let mut printed = client.replacen(' ', "T", 1);
                printed.push('Z');
                text::equal(&text::trim_fraction(&printed), &text::trim_fraction(ours))
            }
            "binary" | "varbinary" | "blob" => {
                text::equal(client, &text::hex(&text::bytes(value)?))
            }
            "geometry" => {
                let wkb = text::hex(&text::bytes(&value["wkb"])?);
                let srid = value["srid"].as_i64().unwrap_or(0);
                text::equal(client, &format!("{srid}:{wkb}"))
            }
            _ => text::equal(client, text::string(value)?),
        }
    }
}
