//! The scenarios' Db2 backend: the **emulated** ASN capture on a fresh PostgreSQL database
//! ([`crate::db2`]; no Db2 server runs here), tables in schema `DB2INST1` with upper-case
//! names as Db2 folds them, put in capture mode with `ASNCDC.ADDTABLE`, Sluice reading through
//! the PostgreSQL ODBC driver; values read back with `psql`, a client independent of that path.

use serde_json::Value as Json;

use super::generated::{self as g, Draw};
use super::postgres::{pg_date, pg_time, pg_timestamp, psql};
use super::{create_table_sql, rows_of, text, Backend, Column};
use crate::db2::Db2;
use crate::pipeline::Component;

/// One emulated Db2 database, capture started.
pub struct Db2Backend {
    db: Db2,
    /// Rows the ODBC driver reads in a block.
    fetch: usize,
}

impl Db2Backend {
    /// A fresh database named after `test`, its schema `DB2INST1` made.
    pub fn new(test: &str) -> Db2Backend {
        let db = Db2::start(test, true);
        db.sql("CREATE SCHEMA \"DB2INST1\"");
        Db2Backend { db, fetch: 100 }
    }

    /// [`Self::new`] with the driver reading blocks of one row
    /// ([`Db2::connection_string_fetching`]): for rows of megabytes.
    pub fn for_large_rows(test: &str) -> Db2Backend {
        Db2Backend {
            fetch: 1,
            ..Db2Backend::new(test)
        }
    }

    fn database(&self) -> &str {
        &self.db.database
    }
}

impl Backend for Db2Backend {
    fn name(&self) -> &str {
        "db2 (emulated)"
    }

    fn execute(&self, sql: &str) {
        psql(self.database(), sql);
    }

    fn query(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        rows_of(&psql(self.database(), sql), "\\N")
    }

    fn create(&self, name: &str, columns: &[(String, String)]) {
        self.execute(&create_table_sql(&self.table(name), columns, |c| {
            self.column(c)
        }));
        self.db.add_table("DB2INST1", &name.to_ascii_uppercase());
    }

    fn table(&self, name: &str) -> String {
        format!("\"DB2INST1\".\"{}\"", name.to_ascii_uppercase())
    }

    fn column(&self, name: &str) -> String {
        format!("\"{}\"", name.to_ascii_uppercase())
    }

    fn field(&self, name: &str) -> String {
        name.to_ascii_uppercase()
    }

    fn collection(&self, name: &str) -> String {
        format!("DB2INST1.{}", name.to_ascii_uppercase())
    }

    fn types(&self) -> (&str, &str) {
        ("integer", "varchar(40)")
    }

    /// A DATE of `infinity`: no Db2 holds one, but the emulator's store (PostgreSQL) does, and
    /// its ODBC text is no date the source can read. Exercises the source's handling of an
    /// unreadable value, not a value a real Db2 sends.
    fn unrepresentable(&self) -> Option<super::failure::Unrepresentable> {
        Some(super::failure::Unrepresentable {
            sql_type: "date".into(),
            refused: "'infinity'".into(),
            fits: "'2024-02-29'".into(),
            settings: Vec::new(),
        })
    }

    fn large_text_type(&self) -> &str {
        "clob"
    }

    fn source(&self) -> Component {
        Component::new("db2")
            .set(
                "odbc.connection.string",
                self.db.connection_string_fetching(self.fetch),
            )
            .set("database.password", "unused")
            .set("database.dbname", "TESTDB")
            .set("topic.prefix", "db2server")
            .set("poll.interval.ms", 20u32)
            .set("include.schema.changes", false)
    }

    fn boundary_columns(&self) -> Vec<Column> {
        let big = format!("{}.{}", "9".repeat(21), "9".repeat(10));
        let neg = format!("-{big}");
        vec![
            Column::new("i2", "smallint", &["-32768", "-1", "0", "32767", "NULL"]),
            Column::new(
                "i4",
                "integer",
                &["-2147483648", "-1", "0", "2147483647", "NULL"],
            ),
            Column::new(
                "i8",
                "bigint",
                &["-9223372036854775808", "0", "9223372036854775807", "NULL"],
            ),
            Column::new(
                "r",
                "real",
                &["3.4028235e38", "-3.4028235e38", "1.4e-45", "0", "NULL"],
            ),
            Column::new(
                "d",
                "double precision",
                &["1.7976931348623157e308", "4.9e-324", "-0.5", "NULL"],
            ),
            Column::new(
                "dc",
                "decimal(31,10)",
                &[&big, &neg, "0", "0.0000000001", "NULL"],
            ),
            Column::new(
                "df",
                "decfloat",
                &[
                    "12.50",
                    "-0.001",
                    "0",
                    "123456789012345678901234567890",
                    "NULL",
                ],
            ),
            Column::new("c", "char(10)", &["''", "'a'", "'éèê😀'", "NULL"]),
            Column::new(
                "vc",
                "varchar(255)",
                &[
                    "''",
                    &format!("'{}'", "ñ".repeat(255)),
                    &format!("'{}'", "😀".repeat(100)),
                    "NULL",
                ],
            ),
            Column::new(
                "cl",
                "clob",
                &["''", &format!("'{}'", "x".repeat(50_000)), "NULL"],
            ),
            Column::new(
                "bl",
                "blob",
                &[
                    "'\\x'",
                    "'\\x00'",
                    &format!("'\\x{}'", "00ff".repeat(1000)),
                    "NULL",
                ],
            ),
            Column::new("vb", "varbinary", &["'\\xffff'", "'\\x'", "NULL"]),
            Column::new("bo", "boolean", &["true", "false", "NULL"]),
            Column::new(
                "dt",
                "date",
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
                "time",
                &["'00:00:00'", "'23:59:59'", "'12:34:56'", "NULL"],
            ),
            Column::new(
                "ts0",
                "timestamp(0)",
                &[
                    "'0001-01-01 00:00:00'",
                    "'9999-12-31 23:59:59'",
                    "'1969-12-31 23:59:59'",
                    "NULL",
                ],
            ),
            Column::new(
                "ts3",
                "timestamp(3)",
                &[
                    "'0001-01-01 00:00:00'",
                    "'9999-12-31 23:59:59.999'",
                    "'2024-02-29 12:00:00.000'",
                    "NULL",
                ],
            ),
            Column::new(
                "ts6",
                "timestamp",
                &[
                    "'0001-01-01 00:00:00'",
                    "'9999-12-31 23:59:59.999999'",
                    "'1969-12-31 23:59:59.999999'",
                    "NULL",
                ],
            ),
            Column::new("x", "xml", &["'<a/>'", "'<a b=\"ü\">😀</a>'", "NULL"]),
        ]
    }

    fn generated_columns(&self, draw: &mut Draw) -> Vec<Column> {
        drawn(draw)
    }

    fn client_expr(&self, c: &Column) -> String {
        let name = self.column(&c.name);
        match c.sql_type.as_str() {
            "blob" | "varbinary" => format!("encode({name}, 'hex')"),
            // Text as its UTF-8 bytes: psql's output leaves out noncharacters (U+nFFFE) that
            // the server stores and Sluice reads (found by the generated scenario).
            t if t.starts_with("varchar") || t == "clob" => {
                format!("encode(convert_to({name}, 'UTF8'), 'hex')")
            }
            _ => name,
        }
    }

    fn check(
        &self,
        column: &Column,
        value: &Json,
        schema: &Json,
        client: &str,
    ) -> Result<(), String> {
        let t = column.sql_type.as_str();
        match t {
            "smallint" | "integer" | "bigint" => {
                text::equal(client, &text::int(value)?.to_string())
            }
            "real" => text::same_float32(client, value),
            "double precision" => text::same_float(client, value, 0.0),
            "decimal(31,10)" => text::equal(client, &text::decimal(value, text::scale(schema))?),
            // io.debezium.data.VariableScaleDecimal: its scale and unscaled bytes, trailing
            // zeros stripped as Debezium's connector does (`12.50` is `12.5`): the same number.
            "decfloat" => {
                let scale = value["scale"]
                    .as_u64()
                    .and_then(|s| u32::try_from(s).ok())
                    .ok_or("no scale")?;
                text::same_decimal(client, &text::decimal(&value["value"], scale)?)
            }
            "blob" | "varbinary" => text::equal(
                &client.to_ascii_uppercase(),
                &text::hex(&text::bytes(value)?),
            ),
            "boolean" => text::equal(
                client,
                if value.as_bool().ok_or("not a boolean")? {
                    "t"
                } else {
                    "f"
                },
            ),
            t if t.starts_with("varchar") || t == "clob" => text::equal(
                &client.to_ascii_uppercase(),
                &text::hex(text::string(value)?.as_bytes()),
            ),
            "date" => text::equal(client, &pg_date(text::int(value)?)),
            // io.debezium.time.Time: milliseconds of the day.
            "time" => text::equal(client, &pg_time(text::int(value)? * 1000)),
            "timestamp(0)" | "timestamp(3)" => {
                text::equal(client, &pg_timestamp(text::int(value)?, 1000))
            }
            "timestamp" => text::equal(client, &pg_timestamp(text::int(value)?, 1_000_000)),
            _ => text::equal(client, text::string(value)?),
        }
    }
}

/// The declared types of the boundary columns with values drawn across their ranges: every
/// integer width, floats of every class, decimals of every width their types hold, any Unicode
/// text, any bytes, dates from the first to the last day, times to the second (Db2's `TIME`)
/// and timestamps to the millisecond and the microsecond.
fn drawn(draw: &mut Draw) -> Vec<Column> {
    use proptest::prelude::*;
    let quoted = |s: String| format!("'{s}'");
    let column = Column::drawn;
    let first = g::day_micros(g::days_from_civil(1, 1, 1));
    let last = g::day_micros(g::days_from_civil(9999, 12, 31) + 1) - 1;
    let mut out = g::integers(
        draw,
        &[
            ("i2", "smallint", i16::MIN.into(), i16::MAX.into()),
            ("i4", "integer", i32::MIN.into(), i32::MAX.into()),
            ("i8", "bigint", i64::MIN.into(), i64::MAX.into()),
        ],
    );
    out.extend([
        column("r", "real", draw.column(g::float())),
        column("d", "double precision", draw.column(g::double())),
        column("dc", "decimal(31,10)", draw.column(g::decimal(31, 10))),
        column("df", "decfloat", draw.column(g::decimal(34, 12))),
        column("vc", "varchar(255)", draw.column(g::text(255, &[]))),
        column(
            "vb",
            "varbinary",
            draw.column(g::bytes(64, false).prop_map(|h| format!("'\\x{h}'"))),
        ),
        column(
            "bo",
            "boolean",
            draw.column(any::<bool>().prop_map(|b| b.to_string())),
        ),
        column(
            "dt",
            "date",
            draw.column(
                g::micros(first, last, 0)
                    .prop_map(move |m| quoted(text::date(m.div_euclid(86_400_000_000)))),
            ),
        ),
        column(
            "t",
            "time",
            draw.column(
                g::micros(0, 86_399_999_999, 0).prop_map(move |m| quoted(text::time(m, 0))),
            ),
        ),
        column(
            "ts3",
            "timestamp(3)",
            draw.column(g::micros(first, last, 3).prop_map(move |m| quoted(text::timestamp(m, 3)))),
        ),
        column(
            "ts6",
            "timestamp",
            draw.column(g::micros(first, last, 6).prop_map(move |m| quoted(text::timestamp(m, 6)))),
        ),
    ]);
    out
}
