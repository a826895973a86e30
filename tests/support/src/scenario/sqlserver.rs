//! The scenarios' SQL Server backend: the **emulated** SQL Server of [`crate::sqlserver`] (no
//! SQL Server runs here), tables in `dbo` with CDC enabled, values read back with FreeTDS's
//! `tsql`, a SQL Server client independent of Sluice's.

use serde_json::Value as Json;

use super::generated::{self as g, Draw};
use super::{text, Backend, Column};
use crate::pipeline::Component;
use crate::sqlserver::{SqlServer, PASSWORD, USER};

/// One emulated server with one database.
pub struct SqlServerBackend {
    server: SqlServer,
}

impl SqlServerBackend {
    /// A server with a database named after `test`, CDC enabled on it.
    pub fn new(test: &str) -> SqlServerBackend {
        let database: String = test.chars().filter(char::is_ascii_alphanumeric).collect();
        let server = SqlServer::start(&database);
        server.sql("EXEC sys.sp_cdc_enable_db");
        SqlServerBackend { server }
    }
}

impl Backend for SqlServerBackend {
    fn name(&self) -> &str {
        "sqlserver (emulated)"
    }

    fn execute(&self, sql: &str) {
        self.server.sql(sql);
    }

    fn query(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        self.server
            .tsql(sql)
            .into_iter()
            .skip(1)
            .map(|l| {
                l.split('\t')
                    .map(|f| (f != "NULL").then(|| f.to_owned()))
                    .collect()
            })
            .collect()
    }

    fn create(&self, name: &str, columns: &[(String, String)]) {
        let defs: Vec<String> = columns
            .iter()
            .enumerate()
            .map(|(i, (c, t))| {
                if i == 0 {
                    format!("{c} {t} PRIMARY KEY")
                } else {
                    format!("{c} {t}")
                }
            })
            .collect();
        self.execute(&format!("CREATE TABLE dbo.{name} ({})", defs.join(", ")));
        self.server.sql(&format!(
            "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{name}', @role_name = NULL"
        ));
    }

    fn table(&self, name: &str) -> String {
        format!("dbo.{name}")
    }

    fn collection(&self, name: &str) -> String {
        format!("{}.dbo.{name}", self.server.database)
    }

    fn transaction(&self, statements: &[String]) -> String {
        format!(
            "BEGIN TRANSACTION; {}; COMMIT TRANSACTION",
            statements.join("; ")
        )
    }

    fn types(&self) -> (&str, &str) {
        ("int", "nvarchar(40)")
    }

    /// A `money` value beyond ±450 billion, which the TDS client decodes as a double that no
    /// longer holds its four decimals exactly (SQL Server's money goes to ±922 trillion).
    fn unrepresentable(&self) -> Option<super::failure::Unrepresentable> {
        Some(super::failure::Unrepresentable {
            sql_type: "money".into(),
            refused: "500000000000.0000".into(),
            fits: "12.5000".into(),
            settings: Vec::new(),
        })
    }

    /// `varchar(max)`: a byte a character (`nvarchar(max)` is two, which the SQL Server client
    /// reads one at a time).
    fn large_text_type(&self) -> &str {
        "varchar(max)"
    }

    fn repeated(&self, n: usize, c: char) -> String {
        format!("replace(hex(zeroblob({})), '0', N'{c}')", n / 2)
    }

    fn source(&self) -> Component {
        Component::new("sqlserver")
            .set("database.hostname", "127.0.0.1")
            .set("database.port", self.server.port)
            .set("database.user", USER)
            .set("database.password", PASSWORD)
            .set("database.names", &self.server.database)
            .set("topic.prefix", "server1")
            .set("poll.interval.ms", 20u32)
            .set("include.schema.changes", false)
    }

    fn boundary_columns(&self) -> Vec<Column> {
        // Decimals quoted (SQL Server converts them): the emulator's store is SQLite, which
        // would read a bare literal of 38 digits as a double.
        let big = format!("'{}.{}'", "9".repeat(28), "9".repeat(10));
        let neg = format!("'-{}.{}'", "9".repeat(28), "9".repeat(10));
        vec![
            Column::new("bt", "bit", &["0", "1", "NULL"]),
            Column::new("ti", "tinyint", &["0", "1", "255", "NULL"]),
            Column::new("si", "smallint", &["-32768", "-1", "0", "32767", "NULL"]),
            Column::new(
                "i",
                "int",
                &["-2147483648", "-1", "0", "2147483647", "NULL"],
            ),
            Column::new(
                "bi",
                "bigint",
                &[
                    "-9223372036854775808",
                    "-1",
                    "0",
                    "9223372036854775807",
                    "NULL",
                ],
            ),
            Column::new(
                "r",
                "real",
                &["3.4028235e38", "-3.4028235e38", "1.4e-45", "0", "NULL"],
            ),
            Column::new(
                "f",
                "float",
                &[
                    "1.7976931348623157e308",
                    "-1.7976931348623157e308",
                    "4.9e-324",
                    "-0.5",
                    "NULL",
                ],
            ),
            Column::new(
                "dc",
                "decimal(38,10)",
                &[&big, &neg, "'0'", "'0.0000000001'", "NULL"],
            ),
            Column::new(
                "m",
                "money",
                &[
                    // The TDS client decodes money as a double: exact within ±450 billion,
                    // refused past it (an error for the failure mode, never a rounded value).
                    "'449999999999.9999'",
                    "'-449999999999.9999'",
                    "'0'",
                    "'0.0001'",
                    "NULL",
                ],
            ),
            Column::new("c", "char(10)", &["''", "'a'", "'0123456789'", "NULL"]),
            Column::new(
                "vc",
                "varchar(255)",
                &["''", &format!("'{}'", "x".repeat(255)), "'ÿé'", "NULL"],
            ),
            Column::new(
                "nvc",
                "nvarchar(255)",
                &[
                    "N''",
                    &format!("N'{}'", "ñ".repeat(255)),
                    "N'😀 snow ☃'",
                    "NULL",
                ],
            ),
            Column::new(
                "nmax",
                "nvarchar(max)",
                &["N''", &format!("N'{}'", "x".repeat(50_000)), "NULL"],
            ),
            Column::new(
                "vb",
                "varbinary(16)",
                &["0x", "0x00", "0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "NULL"],
            ),
            Column::new(
                "g",
                "uniqueidentifier",
                &[
                    "'00000000-0000-0000-0000-000000000000'",
                    "'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF'",
                    "NULL",
                ],
            ),
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
                "t0",
                "time(0)",
                &["'00:00:00'", "'23:59:59'", "'12:34:56'", "NULL"],
            ),
            Column::new(
                "t7",
                "time(7)",
                &[
                    "'00:00:00.0000000'",
                    "'23:59:59.9999999'",
                    "'12:00:00.0000001'",
                    "NULL",
                ],
            ),
            Column::new(
                "d3",
                "datetime2(3)",
                &[
                    "'0001-01-01 00:00:00.000'",
                    "'9999-12-31 23:59:59.999'",
                    "'2024-02-29 12:00:00.000'",
                    "NULL",
                ],
            ),
            // NanoTimestamp: the range 64 bits of nanoseconds since 1970 hold.
            Column::new(
                "d7",
                "datetime2(7)",
                &[
                    "'1677-09-21 00:12:44.0000000'",
                    "'2262-04-11 23:47:16.8547758'",
                    "'1969-12-31 23:59:59.9999999'",
                    "NULL",
                ],
            ),
            Column::new(
                "dtm",
                "datetime",
                &[
                    "'1753-01-01 00:00:00.000'",
                    "'9999-12-31 23:59:59.997'",
                    "'2024-02-29 12:00:00.003'",
                    "NULL",
                ],
            ),
            Column::new(
                "sdt",
                "smalldatetime",
                &["'1900-01-01 00:00:00'", "'2079-06-06 23:59:00'", "NULL"],
            ),
        ]
    }

    fn generated_columns(&self, draw: &mut Draw) -> Vec<Column> {
        drawn(draw)
    }

    fn client_expr(&self, c: &Column) -> String {
        match c.sql_type.as_str() {
            // The server's text of the value (tsql prints dates to the minute in its locale).
            t if ["date", "time", "datetime", "smalldatetime"]
                .iter()
                .any(|p| t.starts_with(p)) =>
            {
                format!("CAST({} AS nvarchar(40))", c.name)
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
        let t = column.sql_type.as_str();
        let base = t.split('(').next().unwrap_or(t);
        let scaled = |n: i64, per_second: i64| -> Result<(), String> {
            let (days, nanos) = text::stamp(client).ok_or("not a timestamp")?;
            let day = 86_400 * per_second;
            let theirs = i128::from(days) * i128::from(day)
                + i128::from(nanos / (1_000_000_000 / per_second));
            text::equal(&theirs.to_string(), &n.to_string())
        };
        match base {
            "bit" => text::equal(
                client,
                if value.as_bool().ok_or("not a boolean")? {
                    "1"
                } else {
                    "0"
                },
            ),
            "tinyint" | "smallint" | "int" | "bigint" => {
                text::equal(client, &text::int(value)?.to_string())
            }
            "real" => text::same_float32(client, value),
            "float" => text::same_float(client, value, 0.0),
            "decimal" | "money" => {
                text::same_decimal(client, &text::decimal(value, text::scale(schema))?)
            }
            "varbinary" => text::equal(
                &client.to_ascii_uppercase(),
                &text::hex(&text::bytes(value)?),
            ),
            "date" => {
                let (days, _) = text::stamp(&format!("{client} 00:00:00")).ok_or("not a date")?;
                text::equal(&days.to_string(), &text::int(value)?.to_string())
            }
            "time" => {
                let theirs = text::clock_nanos(client).ok_or("not a time")?;
                // Time (ms) to precision 3, MicroTime to 6, NanoTime past it.
                let per = match t {
                    "time(0)" => 1_000_000,
                    _ => 1,
                };
                text::equal(&(theirs / per).to_string(), &text::int(value)?.to_string())
            }
            "datetime2" if t == "datetime2(7)" => scaled(text::int(value)?, 1_000_000_000),
            "datetime2" | "datetime" | "smalldatetime" => scaled(text::int(value)?, 1000),
            _ => text::equal(client.trim_end(), text::string(value)?.trim_end()),
        }
    }
}

/// The declared types of the boundary columns with values drawn across their ranges: every
/// integer width, floats of every class, decimals and money of every width their types hold,
/// any Unicode text, any bytes, any GUID, dates from the first to the last day, times and
/// timestamps to the 100 ns tick (`datetime2(7)` within the 64 bits of nanoseconds of its
/// NanoTimestamp).
fn drawn(draw: &mut Draw) -> Vec<Column> {
    use proptest::prelude::*;
    let quoted = |s: String| format!("'{s}'");
    let column = Column::drawn;
    let first = g::days_from_civil(1, 1, 1);
    let last = g::days_from_civil(9999, 12, 31);
    let mut out = vec![column(
        "bt",
        "bit",
        draw.column((0..=1u8).prop_map(|b| b.to_string())),
    )];
    out.extend(g::integers(
        draw,
        &[
            ("ti", "tinyint", 0, 255),
            ("si", "smallint", i16::MIN.into(), i16::MAX.into()),
            ("i", "int", i32::MIN.into(), i32::MAX.into()),
            ("bi", "bigint", i64::MIN.into(), i64::MAX.into()),
        ],
    ));
    out.extend([
        column("r", "real", draw.column(g::float())),
        column("f", "float", draw.column(g::double())),
        column(
            "dc",
            "decimal(38,10)",
            draw.column(g::decimal(38, 10).prop_map(quoted)),
        ),
        // Within the ±450 billion the TDS client's double holds to the ten-thousandth.
        column(
            "m",
            "money",
            draw.column(g::decimal(15, 4).prop_map(quoted)),
        ),
        column(
            "nvc",
            "nvarchar(255)",
            draw.column(g::text(120, &[]).prop_map(|s| format!("N{s}"))),
        ),
        column(
            "vb",
            "varbinary(16)",
            draw.column(g::bytes(16, false).prop_map(|h| format!("0x{h}"))),
        ),
        column("g", "uniqueidentifier", draw.column(g::uuid(true))),
        column(
            "dt",
            "date",
            draw.column((first..=last).prop_map(move |d| quoted(text::date(d)))),
        ),
        column(
            "t7",
            "time(7)",
            draw.column((0..864_000_000_000i64).prop_map(move |t| quoted(ticks(t, false)))),
        ),
        column(
            "d3",
            "datetime2(3)",
            draw.column(
                g::micros(g::day_micros(first), g::day_micros(last + 1) - 1, 3)
                    .prop_map(move |m| quoted(text::timestamp(m, 3))),
            ),
        ),
        column(
            "d7",
            "datetime2(7)",
            draw.column(
                (i64::MIN / 100 + 1..=i64::MAX / 100).prop_map(move |t| quoted(ticks(t, true))),
            ),
        ),
    ]);
    out
}

/// Ticks of 100 ns as a time of day (`date_and_time`: a timestamp, ticks since 1970), seven
/// fraction digits.
fn ticks(ticks: i64, date_and_time: bool) -> String {
    let micros = ticks.div_euclid(10);
    let tick = ticks.rem_euclid(10);
    let printed = if date_and_time {
        text::timestamp(micros, 6)
    } else {
        text::time(micros, 6)
    };
    format!("{printed}{tick}")
}
