//! The boundary scenario's PostgreSQL backend: a fresh database on the local server
//! (`wal_level=logical`), every type at its limits, read back with `psql`.

use std::process::Command;

use serde_json::Value as Json;

use super::generated::{self as g, Draw};
use super::{create_table_sql, rows_of, text, Backend, Column};
use crate::pg;
use crate::pipeline::Component;

/// One fresh database.
pub struct Postgres {
    db: String,
}

impl Postgres {
    /// A fresh database (and slot and publication names) named after `test`.
    pub fn new(test: &str) -> Postgres {
        Postgres {
            db: pg::fresh_db(test),
        }
    }
}

fn numbers() -> Vec<Column> {
    let big = format!("{}.{}", "9".repeat(28), "9".repeat(10));
    let neg = format!("-{big}");
    vec![
        Column::new(
            "i2",
            "smallint",
            &["-32768", "-1", "0", "1", "32767", "NULL"],
        ),
        Column::new(
            "i4",
            "integer",
            &["-2147483648", "-1", "0", "1", "2147483647", "NULL"],
        ),
        Column::new(
            "i8",
            "bigint",
            &[
                "-9223372036854775808",
                "-1",
                "0",
                "1",
                "9223372036854775807",
                "NULL",
            ],
        ),
        Column::new(
            "n",
            "numeric(38,10)",
            &[&big, &neg, "0", "0.0000000001", "-1", "NULL"],
        ),
        Column::new("n0", "numeric(5,0)", &["99999", "-99999", "0", "NULL"]),
        Column::new(
            "r",
            "real",
            &[
                "3.4028235e38",
                "-3.4028235e38",
                "1.4e-45",
                "'-0'",
                "'NaN'",
                "'Infinity'",
                "'-Infinity'",
                "NULL",
            ],
        ),
        Column::new(
            "d",
            "double precision",
            &[
                "1.7976931348623157e308",
                "-1.7976931348623157e308",
                "4.9e-324",
                "'-0'",
                "'NaN'",
                "'Infinity'",
                "'-Infinity'",
                "NULL",
            ],
        ),
        Column::new("bo", "boolean", &["true", "false", "NULL"]),
        Column::new("b1", "bit(1)", &["B'0'", "B'1'", "NULL"]),
        Column::new(
            "b64",
            "bit(64)",
            &[
                &format!("B'{}'", "1".repeat(64)),
                &format!("B'1{}'", "0".repeat(63)),
                &format!("B'{}'", "0".repeat(64)),
                "NULL",
            ],
        ),
        Column::new(
            "vb",
            "bit varying(17)",
            &["B''", "B'1'", &format!("B'{}'", "1".repeat(17)), "NULL"],
        ),
    ]
}

fn temporal() -> Vec<Column> {
    let mut out = vec![Column::new(
        "dt",
        "date",
        &[
            "'4713-01-01 BC'",
            "'5874897-12-31'",
            "'2024-02-29'",
            "'1970-01-01'",
            "'0001-01-01'",
            "NULL",
        ],
    )];
    for p in [0usize, 3, 6] {
        let f = |digit: &str| {
            if p == 0 {
                String::new()
            } else {
                format!(".{}", digit.repeat(p))
            }
        };
        out.push(Column::new(
            &format!("t{p}"),
            &format!("time({p})"),
            &[
                "'00:00:00'",
                &format!("'23:59:59{}'", f("9")),
                "'24:00:00'",
                &format!("'12:00:00{}'", f("0")),
                "NULL",
            ],
        ));
        out.push(Column::new(
            &format!("ts{p}"),
            &format!("timestamp({p})"),
            &[
                "'4713-01-01 00:00:00 BC'",
                // The server's last day; with microseconds (`MicroTimestamp`), the last one
                // 64 bits of microseconds since 1970 hold (later is an error, not a value).
                &if p <= 3 {
                    format!("'294276-12-31 23:59:59{}'", f("9"))
                } else {
                    "'294247-01-10 04:00:54.775807'".to_owned()
                },
                &format!("'2024-02-29 12:00:00{}'", f("0")),
                "'1970-01-01 00:00:00'",
                &format!("'1969-12-31 23:59:59{}'", f("9")),
                "NULL",
            ],
        ));
        out.push(Column::new(
            &format!("tz{p}"),
            &format!("timestamptz({p})"),
            &[
                "'4713-01-01 00:00:00+00 BC'",
                &format!("'294276-12-31 23:59:59{}+00'", f("9")),
                &format!("'2024-02-29 12:00:00{}+05:30'", f("0")),
                "'1970-01-01 00:00:00+00'",
                "NULL",
            ],
        ));
    }
    out.push(Column::new(
        "ttz",
        "timetz",
        &[
            "'00:00:00+00'",
            "'23:59:59.999999-14'",
            "'12:00:00+05:30'",
            "'12:00:00.5+00'",
            "NULL",
        ],
    ));
    out.push(Column::new(
        "iv",
        "interval",
        &[
            "'0'",
            "'1 day'",
            "'-1 second'",
            "'1 year 2 months 3 days 04:05:06.789'",
            "'0.000001 seconds'",
            "NULL",
        ],
    ));
    out
}

fn strings() -> Vec<Column> {
    vec![
        Column::new(
            "c",
            "char(10)",
            &["''", "'a'", "'éèê😀'", "'0123456789'", "NULL"],
        ),
        Column::new(
            "vc",
            "varchar(255)",
            &[
                "''",
                &format!("'{}'", "ñ".repeat(255)),
                &format!("'{}'", "😀".repeat(255)),
                "' lead and trail '",
                "NULL",
            ],
        ),
        Column::new(
            "tx",
            "text",
            &[
                "''",
                &format!("'{}'", "x".repeat(100_000)),
                "'a\u{0301} combined'",
                "NULL",
            ],
        ),
        Column::new(
            "by",
            "bytea",
            &[
                "'\\x'",
                "'\\x00'",
                &format!("'\\x{}'", "00ff".repeat(1000)),
                "NULL",
            ],
        ),
        Column::new(
            "u",
            "uuid",
            &[
                "'00000000-0000-0000-0000-000000000000'",
                "'ffffffff-ffff-ffff-ffff-ffffffffffff'",
                "NULL",
            ],
        ),
        Column::new(
            "js",
            "json",
            &[
                "'{}'",
                "'[]'",
                "'{\"a\": [1, {\"b\": \"ü😀\"}], \"n\": null}'",
                "'\"x\"'",
                "NULL",
            ],
        ),
        Column::new(
            "jb",
            "jsonb",
            &[
                "'{}'",
                "'[[[[[[1]]]]]]'",
                "'{\"a\": [1, {\"b\": \"ü😀\"}], \"n\": null}'",
                "'1e400'",
                "NULL",
            ],
        ),
        Column::new("x", "xml", &["'<a/>'", "'<a b=\"ü\">😀</a>'", "NULL"]),
        Column::new("e", "boundary_mood", &["'first'", "'ü'", "'last'", "NULL"]),
        Column::new(
            "ia",
            "integer[]",
            &["'{}'", "'{1,NULL,-2147483648}'", "'{2147483647}'", "NULL"],
        ),
        Column::new("ta", "text[]", &["'{}'", "'{\"\",\"ü😀\"}'", "NULL"]),
        Column::new(
            "ip",
            "inet",
            &[
                "'0.0.0.0'",
                "'255.255.255.255/32'",
                "'::1'",
                "'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128'",
                "NULL",
            ],
        ),
        Column::new(
            "mc",
            "macaddr",
            &["'00:00:00:00:00:00'", "'ff:ff:ff:ff:ff:ff'", "NULL"],
        ),
    ]
}

impl Postgres {
    /// `psql`'s unaligned, tab-separated text of `sql`, NULL as `\N`.
    fn psql(&self, sql: &str) -> String {
        psql(&self.db, sql)
    }
}

/// `psql`'s unaligned, tab-separated text of `sql` in database `db`, NULL as `\\N`, in UTC.
pub(super) fn psql(db: &str, sql: &str) -> String {
    // The statements on standard input: a long one does not fit an argument.
    let out = super::piped(
        Command::new("psql")
            .args(["-X", "-q", "-A", "-t", "-F", "\t", "-P", "null=\\N"])
            .args(["-v", "ON_ERROR_STOP=1", "-U", "postgres", "-h", &pg::host()])
            .args(["-p", &pg::port(), "-d", db, "-f", "-"])
            .env("PGTZ", "UTC")
            .env(
                "PGOPTIONS",
                "-c intervalstyle=iso_8601 -c extra_float_digits=3",
            ),
        sql,
    );
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A year written the way PostgreSQL does (`BC` for years before 1).
pub(super) fn pg_date(days: i64) -> String {
    let (y, m, d) = text::civil(days);
    if y <= 0 {
        format!("{:04}-{m:02}-{d:02} BC", 1 - y)
    } else {
        format!("{y:04}-{m:02}-{d:02}")
    }
}

/// Columns of every type the pgoutput and COPY readers decode, values drawn across each
/// type's range.
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
    let number = |n: i128| n.to_string();
    for (name, sql_type, bits) in [
        ("i2", "smallint", 16),
        ("i4", "integer", 32),
        ("i8", "bigint", 64),
    ] {
        let range = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
        push(
            name,
            sql_type,
            draw.column(g::integer(range.0, range.1).prop_map(number)),
        );
    }
    for (name, precision, scale) in [("n38", 38, 10), ("n5", 5, 0), ("n12", 12, 12)] {
        let values = draw.column(g::decimal(precision, scale));
        push(name, &format!("numeric({precision},{scale})"), values);
    }
    push("r", "real", draw.column(g::float_any()));
    push("d", "double precision", draw.column(g::double_any()));
    push(
        "bo",
        "boolean",
        draw.column(any::<bool>().prop_map(|b| b.to_string())),
    );
    let bits = |n: std::ops::RangeInclusive<usize>| {
        proptest::collection::vec(any::<bool>(), n).prop_map(|b| {
            let digits: String = b.into_iter().map(|on| if on { '1' } else { '0' }).collect();
            format!("B'{digits}'")
        })
    };
    push("b64", "bit(64)", draw.column(bits(64..=64)));
    push("vb", "bit varying(17)", draw.column(bits(0..=17)));
    // 4713-01-01 BC (year -4712) to the last day of 5874897.
    let days = (
        g::days_from_civil(-4712, 1, 1),
        g::days_from_civil(5_874_897, 12, 31),
    );
    let date = (days.0..=days.1).prop_map(|d| format!("'{}'", pg_date(d)));
    push("dt", "date", draw.column(date));
    for p in 0..=6usize {
        let time = g::micros(0, 86_400_000_000, p).prop_map(|m| format!("'{}'", pg_time(m)));
        push(&format!("t{p}"), &format!("time({p})"), draw.column(time));
        let zone = move |stamp: String| match stamp.strip_suffix(" BC") {
            Some(s) => format!("'{s}+00 BC'"),
            None => format!("'{stamp}+00'"),
        };
        push(
            &format!("ts{p}"),
            &format!("timestamp({p})"),
            draw.column(stamps(p).prop_map(|s| format!("'{s}'"))),
        );
        push(
            &format!("tz{p}"),
            &format!("timestamptz({p})"),
            draw.column(stamps(p).prop_map(zone)),
        );
    }
    let timetz =
        (g::micros(0, 86_399_999_999, 6), -14 * 60..=14 * 60i64).prop_map(|(m, offset)| {
            let sign = if offset < 0 { '-' } else { '+' };
            let o = offset.unsigned_abs();
            format!("'{}{sign}{:02}:{:02}'", pg_time(m), o / 60, o % 60)
        });
    push("ttz", "timetz", draw.column(timetz));
    // A row stays under PostgreSQL's TOAST threshold (about 2 KB): an unchanged TOASTed
    // value is not in an update's stream (Debezium's unavailable-value placeholder, tested
    // apart), which would hide what this compares.
    push("vc", "varchar(255)", draw.column(g::text(60, &[])));
    push("tx", "text", draw.column(g::text(200, &[])));
    push(
        "by",
        "bytea",
        draw.column(g::bytes(400, false).prop_map(|h| format!("'\\x{h}'"))),
    );
    push("u", "uuid", draw.column(g::uuid(false)));
    out
}

/// Timestamps of `p` fraction digits from 4713-01-01 BC on, as PostgreSQL prints them: to the
/// server's last day where the value is milliseconds (`p` ≤ 3), to the last microsecond 64
/// bits hold after 1970 otherwise (`MicroTimestamp`).
fn stamps(p: usize) -> proptest::strategy::BoxedStrategy<String> {
    use proptest::prelude::*;
    let first = g::days_from_civil(-4712, 1, 1) * 86_400_000;
    if p <= 3 {
        let last = (g::days_from_civil(294_276, 12, 31) + 1) * 86_400_000 - 1;
        let unit = 10i64.pow(u32::try_from(3 - p).unwrap_or(0));
        (first..=last)
            .prop_map(move |ms| pg_timestamp(ms - ms.rem_euclid(unit), 1000))
            .boxed()
    } else {
        g::micros(first * 1000, i64::MAX, p)
            .prop_map(|us| pg_timestamp(us, 1_000_000))
            .boxed()
    }
}

/// PostgreSQL's timestamp text of `n` units of `1/per_second` s since the epoch: the
/// fraction without trailing zeros, `BC` last.
pub(super) fn pg_timestamp(n: i64, per_second: i64) -> String {
    let day = 86_400 * per_second;
    let days = n.div_euclid(day);
    let of_day = n.rem_euclid(day) * (1_000_000 / per_second);
    let date = pg_date(days);
    let (date, bc) = match date.strip_suffix(" BC") {
        Some(d) => (d.to_owned(), " BC"),
        None => (date, ""),
    };
    format!("{date} {}{bc}", pg_time(of_day))
}

/// PostgreSQL's time text: `HH:MM:SS` and the fraction without trailing zeros.
pub(super) fn pg_time(micros: i64) -> String {
    let t = text::time(micros, 6);
    let t = t.trim_end_matches('0');
    t.trim_end_matches('.').to_owned()
}

/// `HH:MM:SS[.f]±HH[:MM]` in UTC, as Debezium's `ZonedTime` writes it (`…Z`).
fn timetz_in_utc(printed: &str) -> Result<String, String> {
    let at = printed.rfind(['+', '-']).ok_or("no offset")?;
    let (time, offset) = printed.split_at(at);
    let sign = if offset.starts_with('-') { -1 } else { 1 };
    let parts: Vec<i64> = offset[1..]
        .split(':')
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    let offset_secs =
        sign * (parts[0] * 3600 + parts.get(1).unwrap_or(&0) * 60 + parts.get(2).unwrap_or(&0));
    let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
    let f: Vec<i64> = hms.split(':').map(|p| p.parse().unwrap_or(0)).collect();
    let secs = (f[0] * 3600 + f[1] * 60 + f[2] - offset_secs).rem_euclid(86_400);
    let fraction = fraction.trim_end_matches('0');
    let fraction = if fraction.is_empty() {
        String::new()
    } else {
        format!(".{fraction}")
    };
    Ok(format!(
        "{:02}:{:02}:{:02}{fraction}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    ))
}

/// Microseconds of an ISO-8601 interval as PostgreSQL prints it (`intervalstyle=iso_8601`),
/// months at Debezium's 30.4375 days (`MicroDuration`).
fn interval_micros(printed: &str) -> Result<i64, String> {
    if printed == "PT0S" {
        return Ok(0);
    }
    let body = printed.strip_prefix('P').ok_or("not ISO-8601")?;
    let (date, time) = body.split_once('T').unwrap_or((body, ""));
    let mut micros = 0f64;
    let mut number = String::new();
    for (part, in_time) in [(date, false), (time, true)] {
        for c in part.chars() {
            if c.is_ascii_digit() || c == '.' || c == '-' {
                number.push(c);
                continue;
            }
            let n: f64 = number
                .parse()
                .map_err(|_| format!("{number:?} in {printed}"))?;
            number.clear();
            micros += n * match (c, in_time) {
                ('Y', false) => 365.25 * 86_400e6,
                ('M', false) => 30.4375 * 86_400e6,
                ('W', false) => 7.0 * 86_400e6,
                ('D', false) => 86_400e6,
                ('H', true) => 3_600e6,
                ('M', true) => 60e6,
                ('S', true) => 1e6,
                _ => return Err(format!("{c} in {printed}")),
            };
        }
    }
    Ok(micros.round() as i64)
}

impl Backend for Postgres {
    fn name(&self) -> &str {
        "postgres"
    }

    fn execute(&self, sql: &str) {
        self.psql(sql);
    }

    fn query(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        rows_of(&self.psql(sql), "\\N")
    }

    fn create(&self, name: &str, columns: &[(String, String)]) {
        let sql = create_table_sql(name, columns, str::to_owned);
        // Whole before images: the scenarios compare every column of an update's `before`.
        self.execute(&format!("{sql}; ALTER TABLE {name} REPLICA IDENTITY FULL"));
    }

    fn collection(&self, name: &str) -> String {
        format!("public.{name}")
    }

    fn types(&self) -> (&str, &str) {
        ("integer", "varchar(40)")
    }

    fn large_text_type(&self) -> &str {
        "text"
    }

    /// `NaN` in a `NOT NULL` numeric: Connect's `Decimal` has no form for it, and Debezium's
    /// null is not allowed there.
    fn unrepresentable(&self) -> Option<super::failure::Unrepresentable> {
        Some(super::failure::Unrepresentable {
            sql_type: "numeric(10,2) NOT NULL".into(),
            refused: "'NaN'".into(),
            fits: "1.5".into(),
            settings: Vec::new(),
        })
    }

    fn source(&self) -> Component {
        pg::source(&self.db)
    }

    fn boundary_columns(&self) -> Vec<Column> {
        let mut out = numbers();
        out.extend(temporal());
        out.extend(strings());
        out
    }

    fn generated_columns(&self, draw: &mut Draw) -> Vec<Column> {
        drawn(draw)
    }

    fn prepare_boundary(&self) {
        self.execute("CREATE TYPE boundary_mood AS ENUM ('first', 'ü', 'last')");
    }

    fn client_expr(&self, c: &Column) -> String {
        match c.sql_type.as_str() {
            "bytea" => format!("encode({}, 'hex')", c.name),
            // Text as its UTF-8 bytes: psql's output leaves out noncharacters (U+nFFFE) that
            // the server stores and Sluice reads.
            t if t == "text" || t.starts_with("varchar") => {
                format!("encode(convert_to({}, 'UTF8'), 'hex')", c.name)
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
        match base {
            "smallint" | "integer" | "bigint" => {
                text::equal(client, &text::int(value)?.to_string())
            }
            "numeric" => text::equal(client, &text::decimal(value, text::scale(schema))?),
            "real" => text::same_float32(client, value),
            "double precision" => text::same_float(client, value, 0.0),
            "boolean" | "bit" if t == "boolean" || t == "bit(1)" => {
                let b = value.as_bool().ok_or("not a boolean")?;
                text::equal(
                    client,
                    match (t, b) {
                        ("boolean", true) => "t",
                        ("boolean", false) => "f",
                        (_, true) => "1",
                        (_, false) => "0",
                    },
                )
            }
            "bit" | "bit varying" => {
                let bytes = text::bytes(value)?;
                let bits: String = bytes.iter().rev().map(|b| format!("{b:08b}")).collect();
                let width = client.len();
                // Debezium's Bits (Java's BitSet bytes) leave out high zero bytes: padded back.
                let bits = format!("{bits:0>width$}");
                text::equal(client, &bits[bits.len() - width..])
            }
            "date" => text::equal(client, &pg_date(text::int(value)?)),
            "time" => {
                let n = text::int(value)?;
                // Debezium's adaptive mode: milliseconds to 3 digits, microseconds above.
                let micros = if text::precision(t).unwrap_or(6) <= 3 {
                    n * 1000
                } else {
                    n
                };
                text::equal(client, &pg_time(micros))
            }
            "timestamp" => {
                let per_second = if text::precision(t).unwrap_or(6) <= 3 {
                    1000
                } else {
                    1_000_000
                };
                text::equal(client, &pg_timestamp(text::int(value)?, per_second))
            }
            "timestamptz" => {
                // psql in UTC: `2024-02-29 06:30:00+00`, `… BC` last.
                let (stamp, bc) = match client.strip_suffix(" BC") {
                    Some(s) => (s, true),
                    None => (client, false),
                };
                let stamp = stamp.strip_suffix("+00").ok_or("not in UTC")?;
                let (date, time) = stamp.split_once(' ').ok_or("no time")?;
                let date = if bc {
                    let (y, rest) = date.split_once('-').ok_or("no year")?;
                    let y: i64 = y.parse().map_err(|_| "year")?;
                    // 1 BC is ISO's year 0, which Java prints without a sign.
                    match y - 1 {
                        0 => format!("0000-{rest}"),
                        year => format!("-{year:04}-{rest}"),
                    }
                } else {
                    date.to_owned()
                };
                // Java's ISO form: a sign before a year of more than four digits.
                let sign = if date.split('-').next().is_some_and(|y| y.len() > 4) {
                    "+"
                } else {
                    ""
                };
                let printed = text::trim_fraction(&format!("{sign}{date}T{time}Z"));
                text::equal(&printed, &text::trim_fraction(text::string(value)?))
            }
            "timetz" => text::equal(
                &timetz_in_utc(client)?,
                &text::trim_fraction(text::string(value)?),
            ),
            "interval" => text::equal(
                &interval_micros(client)?.to_string(),
                &text::int(value)?.to_string(),
            ),
            "bytea" => text::equal(
                &client.to_ascii_uppercase(),
                &text::hex(&text::bytes(value)?),
            ),
            "integer[]" | "text[]" => {
                let items: Vec<String> = value
                    .as_array()
                    .ok_or("not an array")?
                    .iter()
                    .map(|v| match v {
                        Json::Null => "NULL".to_owned(),
                        Json::String(s) if s.is_empty() || s.contains([',', ' ', '"']) => {
                            format!("\"{s}\"")
                        }
                        Json::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect();
                text::equal(client, &format!("{{{}}}", items.join(",")))
            }
            "text" | "varchar" => text::equal(
                &client.to_ascii_uppercase(),
                &text::hex(text::string(value)?.as_bytes()),
            ),
            _ => text::equal(client, text::string(value)?),
        }
    }
}
