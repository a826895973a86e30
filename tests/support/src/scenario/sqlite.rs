//! The boundary scenario's SQLite backend: a database file in capture mode (`sluice capture
//! enable`), every declared type at its limits, read back with the `sqlite3` shell.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value as Json;

use super::generated::{self as g, Draw};
use super::{create_table_sql, rows_of, text, Backend, Column};
use crate::pg;
use crate::pipeline::Component;

/// A database file in a directory of its own.
pub struct Sqlite {
    dir: tempfile::TempDir,
}

impl Sqlite {
    pub fn new() -> Sqlite {
        Sqlite {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("boundary.db")
    }

    /// The `sqlite3` shell's tab-separated text of `sql`, NULL as `NULL`.
    fn shell(&self, sql: &str) -> String {
        // Waits for the pipeline's reads instead of failing with "database is locked".
        let sql = format!(".timeout 20000\n{sql}");
        let sql = sql.as_str();
        let out = super::piped(
            Command::new("sqlite3")
                .args([
                    "-batch",
                    "-noheader",
                    "-separator",
                    "\t",
                    "-nullvalue",
                    "NULL",
                ])
                .arg(self.db()),
            sql,
        );
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Default for Sqlite {
    fn default() -> Self {
        Sqlite::new()
    }
}

fn columns() -> Vec<Column> {
    vec![
        Column::new(
            "i",
            "INTEGER",
            &[
                "-9223372036854775808",
                "-1",
                "0",
                "1",
                "9223372036854775807",
                "NULL",
            ],
        ),
        Column::new("i2", "SMALLINT", &["-32768", "-1", "0", "32767", "NULL"]),
        Column::new(
            "i4",
            "INT",
            &["-2147483648", "-1", "0", "2147483647", "NULL"],
        ),
        Column::new("bo", "BOOLEAN", &["0", "1", "NULL"]),
        Column::new(
            "r",
            "REAL",
            &[
                "1.7976931348623157e308",
                "-1.7976931348623157e308",
                "4.9e-324",
                "2.2250738585072014e-308",
                "0.1",
                "-1.5",
                "NULL",
            ],
        ),
        Column::new(
            "dc",
            "DECIMAL(10,2)",
            &["99999999.99", "-99999999.99", "0", "0.01", "-0.01", "NULL"],
        ),
        Column::new(
            "d",
            "DATE",
            &[
                "'0001-01-01'",
                "'9999-12-31'",
                "'2024-02-29'",
                "'1970-01-01'",
                "NULL",
            ],
        ),
        Column::new(
            "t",
            "TIME",
            &["'00:00:00'", "'23:59:59.999'", "'12:00:00.000'", "NULL"],
        ),
        Column::new(
            "ts",
            "DATETIME",
            &[
                "'0001-01-01 00:00:00'",
                "'9999-12-31 23:59:59.999'",
                "'2024-02-29 12:00:00'",
                "'1969-12-31 23:59:59.999'",
                "NULL",
            ],
        ),
        Column::new(
            "tx",
            "TEXT",
            &[
                "''",
                "'éèê'",
                "'😀😀'",
                &format!("'{}'", "x".repeat(100_000)),
                "NULL",
            ],
        ),
        Column::new(
            "vc",
            "VARCHAR(20)",
            &["''", "' lead and trail '", "'a\u{0301}'", "NULL"],
        ),
        Column::new(
            "b",
            "BLOB",
            &[
                "x''",
                "x'00'",
                &format!("x'{}'", "00FF".repeat(1000)),
                "NULL",
            ],
        ),
        Column::new(
            "j",
            "JSON",
            &["'{}'", "'{\"a\":[1,{\"b\":\"ü😀\"}]}'", "NULL"],
        ),
    ]
}

/// The declared types of [`columns`] with values drawn across their ranges (dates and times
/// of milliseconds, as SQLite's date functions write them).
fn drawn(draw: &mut Draw) -> Vec<Column> {
    use proptest::prelude::*;
    let first = g::days_from_civil(1, 1, 1);
    let last = g::days_from_civil(9999, 12, 31);
    let quoted = |s: String| format!("'{s}'");
    let column = Column::drawn;
    let mut out = g::integers(
        draw,
        &[
            ("i", "INTEGER", i64::MIN.into(), i64::MAX.into()),
            ("i2", "SMALLINT", i16::MIN.into(), i16::MAX.into()),
            ("i4", "INT", i32::MIN.into(), i32::MAX.into()),
        ],
    );
    out.extend([
        column("r", "REAL", draw.column(g::double())),
        column("dc", "DECIMAL(10,2)", draw.column(g::decimal(10, 2))),
        column(
            "d",
            "DATE",
            draw.column((first..=last).prop_map(move |d| quoted(text::date(d)))),
        ),
        column(
            "t",
            "TIME",
            draw.column(
                g::micros(0, 86_399_999_999, 3).prop_map(move |m| quoted(text::time(m, 3))),
            ),
        ),
        column(
            "ts",
            "DATETIME",
            draw.column(
                g::micros(g::day_micros(first), g::day_micros(last + 1) - 1, 3)
                    .prop_map(move |m| quoted(text::timestamp(m, 3))),
            ),
        ),
        column("tx", "TEXT", draw.column(g::text(200, &[]))),
        column(
            "b",
            "BLOB",
            draw.column(g::bytes(300, false).prop_map(|h| format!("x'{h}'"))),
        ),
    ]);
    out
}

impl Backend for Sqlite {
    fn name(&self) -> &str {
        "sqlite"
    }

    fn execute(&self, sql: &str) {
        self.shell(sql);
    }

    fn query(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        rows_of(&self.shell(sql), "NULL")
    }

    fn create(&self, name: &str, columns: &[(String, String)]) {
        self.execute(&create_table_sql(name, columns, str::to_owned));
        let out = Command::new(pg::sluice())
            .args(["capture", "enable"])
            .arg(self.db())
            .arg(name)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn collection(&self, name: &str) -> String {
        format!("main.{name}")
    }

    fn types(&self) -> (&str, &str) {
        ("INTEGER", "TEXT")
    }

    /// Text in an INTEGER column (SQLite keeps what it is given).
    fn unrepresentable(&self) -> Option<super::failure::Unrepresentable> {
        Some(super::failure::Unrepresentable {
            sql_type: "INTEGER".into(),
            refused: "'abc'".into(),
            fits: "10".into(),
            settings: Vec::new(),
        })
    }

    fn large_text_type(&self) -> &str {
        "TEXT"
    }

    fn repeated(&self, n: usize, c: char) -> String {
        format!("replace(hex(zeroblob({})), '0', '{c}')", n / 2)
    }

    fn source(&self) -> Component {
        Component::new("sqlite")
            .set("database.path", self.db())
            .set("topic.prefix", "b")
            .set("poll.interval.ms", 20u32)
    }

    fn boundary_columns(&self) -> Vec<Column> {
        columns()
    }

    fn generated_columns(&self, draw: &mut Draw) -> Vec<Column> {
        drawn(draw)
    }

    fn client_expr(&self, c: &Column) -> String {
        match c.sql_type.as_str() {
            "BLOB" => format!(
                "CASE WHEN {n} IS NULL THEN NULL ELSE hex({n}) END",
                n = c.name
            ),
            // The double exactly, as mantissa and exponent: the shell, quote() and printf()
            // print 15 or 17 digits that do not always read back to it (1.623961440723317e-309
            // as 1.62396144072332e-309; the largest double as 1.7976931348623156e+308).
            "REAL" => format!(
                "CASE WHEN {n} IS NULL THEN NULL ELSE ieee754({n}) END",
                n = c.name
            ),
            // A decimal of 10 digits reads back from quote()'s 15.
            "DECIMAL(10,2)" => {
                format!(
                    "CASE WHEN {n} IS NULL THEN NULL ELSE quote({n}) END",
                    n = c.name
                )
            }
            _ => c.name.clone(),
        }
    }

    fn check(
        &self,
        column: &Column,
        value: &Json,
        schema: &Json,
        client: &str,
    ) -> Result<(), String> {
        match column.sql_type.as_str() {
            "INTEGER" | "SMALLINT" | "INT" => text::equal(client, &text::int(value)?.to_string()),
            "BOOLEAN" => text::equal(
                client,
                if value.as_bool().ok_or("not a boolean")? {
                    "1"
                } else {
                    "0"
                },
            ),
            "REAL" => {
                let exact = ieee754(client).ok_or_else(|| format!("{client:?} is no ieee754()"))?;
                text::same_float(&format!("{exact:e}"), value, 0.0)
            }
            "DECIMAL(10,2)" => text::same_float(
                client,
                &Json::from(text::decimal(value, text::scale(schema))?),
                0.0,
            ),
            "DATE" => text::equal(client, &text::date(text::int(value)?)),
            "TIME" => {
                let theirs = text::clock_nanos(client).ok_or("not a time")? / 1000;
                text::equal(&theirs.to_string(), &(text::int(value)? * 1000).to_string())
            }
            "DATETIME" => {
                let digits = client.split_once('.').map_or(0, |(_, f)| f.len());
                text::equal(client, &text::timestamp(text::int(value)? * 1000, digits))
            }
            "BLOB" => text::equal(client, &text::hex(&text::bytes(value)?)),
            _ => text::equal(client, text::string(value)?),
        }
    }
}

/// The double the shell's `ieee754(m,e)` names: `m` times two to the `e`, exactly (in steps
/// whose products are all representable).
fn ieee754(printed: &str) -> Option<f64> {
    let inner = printed.strip_prefix("ieee754(")?.strip_suffix(')')?;
    let (mantissa, exponent) = inner.split_once(',')?;
    let mut value = mantissa.trim().parse::<i64>().ok()? as f64;
    let mut exponent: i32 = exponent.trim().parse().ok()?;
    while exponent != 0 {
        let step = exponent.clamp(-1000, 1000);
        value *= 2f64.powi(step);
        exponent -= step;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ieee754_names_the_double_exactly() {
        for (printed, value) in [
            ("ieee754(9007199254740991,971)", f64::MAX),
            ("ieee754(164346727443293,-1073)", 1.623961440723317e-309),
            ("ieee754(1,-1074)", 4.9e-324),
            ("ieee754(-3,-1)", -1.5),
            ("ieee754(3602879701896397,-55)", 0.1),
            ("ieee754(0,-1075)", 0.0),
        ] {
            assert_eq!(super::ieee754(printed), Some(value), "{printed}");
        }
        assert_eq!(super::ieee754("1.5"), None);
    }
}
