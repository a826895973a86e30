//! Values as the target takes them: a column type per Connect schema (Debezium's JDBC sink's
//! mapping, for created tables and added columns) and each value as the text the server reads
//! (PostgreSQL: bound as `$n::text::<column type>`; MySQL: converted to the column's type in
//! strict mode). A value that has no such text (a struct, a decimal too wide, a date MySQL
//! cannot hold) is an error, never a rounded or default value.

use sluice_engine::event::calendar::{civil_from_days, days_from_civil};
use sluice_engine::event::names;
use sluice_engine::{Schema, SchemaType, Value};

use super::config::Dialect;

/// A value, or a field's type, the target cannot hold as it is: a per-event failure, handled
/// by `event.processing.failure.handling.mode`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(super) enum ValueError {
    /// No column type of the target fits the field's schema.
    #[error("no {target} column type for a {kind:?} field{}", named(.name))]
    NoColumnType {
        target: &'static str,
        kind: SchemaType,
        /// The schema's name (empty: none).
        name: String,
    },
    /// A decimal's scale beyond MySQL's 30.
    #[error("a decimal of scale {0}: MySQL holds at most 30 digits after the point")]
    MySqlScale(u32),
    /// MySQL has no time with an offset.
    #[error("no MySQL column type for a ZonedTime (a time of day with an offset)")]
    MySqlZonedTime,
    /// An array's schema says nothing of its items.
    #[error("an array schema without items")]
    ArrayWithoutItems,
    /// MySQL has no array columns.
    #[error("MySQL has no array columns")]
    MySqlArray,
    /// NaN or an infinity, which MySQL's floats do not hold.
    #[error("MySQL holds no {0} float")]
    MySqlFloat(f64),
    /// A decimal of varying scale beyond `decimal(65,30)`.
    #[error("{0} does not fit decimal(65,30), the column MySQL gives a decimal of varying scale")]
    MySqlVariableDecimal(String),
    /// A date before year 1 or after 9999.
    #[error("the date {0} is outside the years MySQL holds (1 to 9999)")]
    MySqlYear(String),
    /// A time beyond MySQL's ±838:59:59.
    #[error("the time of {0} µs is beyond ±838:59:59, which MySQL's time holds")]
    MySqlTime(i64),
    /// A time of day outside a day.
    #[error("the time of {0} µs is outside a day, which PostgreSQL's time holds")]
    PostgresTime(i64),
    /// A struct or a map, which has no text.
    #[error("a {0} value has no PostgreSQL text")]
    NoPostgresText(&'static str),
    /// A `ZonedTimestamp` that does not read.
    #[error("`{0}` is not an ISO-8601 date and time with an offset")]
    ZonedTimestamp(String),
    /// A `VariableScaleDecimal` with a negative scale.
    #[error("a VariableScaleDecimal of negative scale {0}")]
    NegativeScale(i32),
    /// A `VariableScaleDecimal` without its `scale` or `value`.
    #[error("a VariableScaleDecimal without its {0}")]
    IncompleteDecimal(&'static str),
    /// A decimal of more than 16 bytes.
    #[error("a decimal of {0} bytes is wider than this sink reads (16)")]
    DecimalWidth(usize),
}

/// ` (name)`, or nothing for no name.
fn named(name: &str) -> String {
    match name.is_empty() {
        true => String::new(),
        false => format!(" ({name})"),
    }
}

/// The column type of a field on `dialect`; `key`: a primary key column (MySQL keys text and
/// bytes as `varchar(255)` and `varbinary(255)`: it indexes no `longtext`).
pub(super) fn column_type(
    schema: &Schema,
    dialect: Dialect,
    key: bool,
) -> Result<String, ValueError> {
    match dialect {
        Dialect::Postgres => pg_column_type(schema),
        Dialect::MySql => mysql_column_type(schema, key),
    }
}

/// The column type of a field (Debezium's JDBC sink mapping for MySQL): the decimals of no
/// fixed precision as `decimal(65,s)` (`decimal(65,30)` when the scale varies: a value with
/// more digits is refused, not rounded), times in microseconds, `ZonedTimestamp` as
/// `datetime(6)` in UTC.
fn mysql_column_type(schema: &Schema, key: bool) -> Result<String, ValueError> {
    let name = schema.name().unwrap_or("");
    Ok(match name {
        names::DECIMAL => {
            let scale: u32 = param(schema, "scale")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if scale > 30 {
                return Err(ValueError::MySqlScale(scale));
            }
            let p = param(schema, "connect.decimal.precision").and_then(|p| p.parse::<u32>().ok());
            format!("decimal({},{scale})", p.unwrap_or(65).min(65))
        }
        "io.debezium.data.VariableScaleDecimal" => "decimal(65,30)".into(),
        names::DATE | "org.apache.kafka.connect.data.Date" => "date".into(),
        names::TIME
        | names::MICRO_TIME
        | names::NANO_TIME
        | "org.apache.kafka.connect.data.Time" => "time(6)".into(),
        names::TIMESTAMP
        | names::MICRO_TIMESTAMP
        | names::NANO_TIMESTAMP
        | names::ZONED_TIMESTAMP
        | "org.apache.kafka.connect.data.Timestamp" => "datetime(6)".into(),
        names::ZONED_TIME => return Err(ValueError::MySqlZonedTime),
        names::JSON => "json".into(),
        names::UUID => "varchar(36)".into(),
        "io.debezium.data.Xml" => "longtext".into(),
        _ => match schema.kind() {
            SchemaType::Int8 => "tinyint".into(),
            SchemaType::Int16 => "smallint".into(),
            SchemaType::Int32 => "int".into(),
            SchemaType::Int64 => "bigint".into(),
            SchemaType::Float32 => "float".into(),
            SchemaType::Float64 => "double".into(),
            SchemaType::Boolean => "boolean".into(),
            SchemaType::String if key => "varchar(255)".into(),
            SchemaType::String => "longtext".into(),
            SchemaType::Bytes if key => "varbinary(255)".into(),
            SchemaType::Bytes => "longblob".into(),
            other => return Err(no_type("MySQL", other, name)),
        },
    })
}

fn param(schema: &Schema, k: &str) -> Option<String> {
    (schema.parameters().unwrap_or_default().iter())
        .find(|(key, _)| key == k)
        .map(|(_, v)| v.clone())
}

fn no_type(target: &'static str, kind: SchemaType, name: &str) -> ValueError {
    ValueError::NoColumnType {
        target,
        kind,
        name: name.to_owned(),
    }
}

/// The column type of a field (Debezium's JDBC sink mapping for PostgreSQL).
fn pg_column_type(schema: &Schema) -> Result<String, ValueError> {
    let name = schema.name().unwrap_or("");
    Ok(match name {
        names::DECIMAL => {
            let scale = param(schema, "scale").unwrap_or_else(|| "0".into());
            match param(schema, "connect.decimal.precision") {
                Some(p) => format!("decimal({p},{scale})"),
                None => "numeric".into(),
            }
        }
        "io.debezium.data.VariableScaleDecimal" => "numeric".into(),
        names::DATE | "org.apache.kafka.connect.data.Date" => "date".into(),
        names::TIME
        | names::MICRO_TIME
        | names::NANO_TIME
        | "org.apache.kafka.connect.data.Time" => "time(6)".into(),
        names::TIMESTAMP
        | names::MICRO_TIMESTAMP
        | names::NANO_TIMESTAMP
        | "org.apache.kafka.connect.data.Timestamp" => "timestamp(6)".into(),
        names::ZONED_TIMESTAMP => "timestamp(6) with time zone".into(),
        names::ZONED_TIME => "time(6) with time zone".into(),
        names::JSON => "json".into(),
        names::UUID => "uuid".into(),
        "io.debezium.data.Xml" => "xml".into(),
        _ => match schema.kind() {
            SchemaType::Int8 | SchemaType::Int16 => "smallint".into(),
            SchemaType::Int32 => "integer".into(),
            SchemaType::Int64 => "bigint".into(),
            SchemaType::Float32 => "float4".into(),
            SchemaType::Float64 => "double precision".into(),
            SchemaType::Boolean => "boolean".into(),
            SchemaType::String => "text".into(),
            SchemaType::Bytes => "bytea".into(),
            SchemaType::Array => {
                let items = schema.items().ok_or(ValueError::ArrayWithoutItems)?;
                format!("{}[]", pg_column_type(items)?)
            }
            other => return Err(no_type("PostgreSQL", other, name)),
        },
    })
}

/// The text of `value` under `schema` for `dialect` (`None` for null).
pub(super) fn text(
    schema: &Schema,
    value: &Value,
    dialect: Dialect,
) -> Result<Option<String>, ValueError> {
    match dialect {
        Dialect::Postgres => pg_text(schema, value),
        Dialect::MySql => mysql_text(schema, value),
    }
}

/// Whether a value of `schema` is bound as hexadecimal text (MySQL's bytes).
pub(super) fn is_hex(schema: &Schema, dialect: Dialect) -> bool {
    dialect == Dialect::MySql
        && schema.kind() == SchemaType::Bytes
        && schema.name() != Some(names::DECIMAL)
}

/// The text MySQL converts to the column's type: booleans as `1`/`0`, bytes in hexadecimal
/// (bound through `UNHEX`), `ZonedTimestamp` in UTC; what MySQL cannot hold (NaN, infinities,
/// years before 1 or after 9999, a decimal beyond `decimal(65,30)`, arrays) is an error.
fn mysql_text(schema: &Schema, value: &Value) -> Result<Option<String>, ValueError> {
    let name = schema.name().unwrap_or("");
    let text = match (name, value) {
        (_, Value::Null) => return Ok(None),
        (_, Value::Boolean(b)) => u8::from(*b).to_string(),
        (_, Value::Float32(f)) if !f.is_finite() => {
            return Err(ValueError::MySqlFloat(f64::from(*f)))
        }
        (_, Value::Float64(f)) if !f.is_finite() => return Err(ValueError::MySqlFloat(*f)),
        (names::ZONED_TIMESTAMP, Value::String(s)) => timestamp(zoned_micros(s)?),
        (names::TIME | "org.apache.kafka.connect.data.Time", Value::Int32(ms)) => {
            mysql_time(i64::from(*ms) * 1000)?
        }
        (names::MICRO_TIME, Value::Int64(us)) => mysql_time(*us)?,
        (names::NANO_TIME, Value::Int64(ns)) => mysql_time(micros_of(*ns))?,
        (names::DECIMAL, _) => pg_text(schema, value)?.unwrap_or_default(),
        (_, Value::Bytes(b)) => b.iter().map(|x| format!("{x:02x}")).collect(),
        (_, Value::Array(_)) => return Err(ValueError::MySqlArray),
        _ => pg_text(schema, value)?.unwrap_or_default(),
    };
    if name == "io.debezium.data.VariableScaleDecimal" {
        let digits = text.trim_start_matches('-');
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if int.len() > 35 || frac.len() > 30 {
            return Err(ValueError::MySqlVariableDecimal(text));
        }
    }
    let temporal = [
        names::DATE,
        names::TIMESTAMP,
        names::MICRO_TIMESTAMP,
        names::NANO_TIMESTAMP,
        names::ZONED_TIMESTAMP,
        "org.apache.kafka.connect.data.Date",
        "org.apache.kafka.connect.data.Timestamp",
    ];
    if temporal.contains(&name)
        && (text.ends_with(" BC") || text.split('-').next().is_some_and(|y| y.len() > 4))
    {
        return Err(ValueError::MySqlYear(text));
    }
    Ok(Some(text))
}

/// Microseconds since the epoch (UTC) of a `ZonedTimestamp` (`2018-07-13T12:23:45.456+11:00`,
/// `…Z`), rounded to microseconds.
fn zoned_micros(text: &str) -> Result<i64, ValueError> {
    let bad = || ValueError::ZonedTimestamp(text.to_owned());
    let (date, rest) = text.split_once('T').ok_or_else(bad)?;
    let mut ymd = date.splitn(3, '-');
    let (y, m, d) = match (ymd.next(), ymd.next(), ymd.next()) {
        (Some(y), Some(m), Some(d)) => (
            y.parse::<i64>().map_err(|_| bad())?,
            m.parse::<u32>().map_err(|_| bad())?,
            d.parse::<u32>().map_err(|_| bad())?,
        ),
        _ => return Err(bad()),
    };
    let split = rest.find(['Z', '+', '-']).ok_or_else(bad)?;
    let (clock, zone) = rest.split_at(split);
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let mut parts = hms.split(':').map(|p| p.parse::<i64>());
    let secs = match (parts.next(), parts.next(), parts.next()) {
        (Some(Ok(h)), Some(Ok(mi)), Some(Ok(s))) => h * 3600 + mi * 60 + s,
        _ => return Err(bad()),
    };
    if !frac.bytes().all(|b| b.is_ascii_digit()) || frac.len() > 9 {
        return Err(bad());
    }
    let nanos: i64 = format!("{frac:0<9}").parse().map_err(|_| bad())?;
    let offset_minutes = match zone {
        "Z" => 0,
        z => {
            let sign = if z.starts_with('-') { -1 } else { 1 };
            let (h, mi) = z[1..].split_once(':').ok_or_else(bad)?;
            sign * (h.parse::<i64>().map_err(|_| bad())? * 60
                + mi.parse::<i64>().map_err(|_| bad())?)
        }
    };
    let days = days_from_civil(y, m, d);
    Ok((days * 86_400 + secs - offset_minutes * 60) * 1_000_000 + micros_of(nanos))
}

/// Microseconds of nanoseconds, rounded to the nearest (the targets' time columns hold
/// microseconds; the first rounding is logged once, so that it is not silent).
fn micros_of(ns: i64) -> i64 {
    let (q, r) = (ns.div_euclid(1000), ns.rem_euclid(1000));
    if r != 0 {
        warn_rounded();
    }
    if r >= 500 {
        q + 1
    } else {
        q
    }
}

/// The one warning that times below the microsecond are rounded.
fn warn_rounded() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        tracing::warn!("Times with digits below the microsecond are rounded to microseconds, the precision of the target's time columns.");
    });
}

/// The text PostgreSQL's input functions read (`None` for null).
fn pg_text(schema: &Schema, value: &Value) -> Result<Option<String>, ValueError> {
    let name = schema.name().unwrap_or("");
    Ok(Some(match (name, value) {
        (_, Value::Null) => return Ok(None),
        (names::DECIMAL, Value::Bytes(b)) => {
            let scale = schema
                .parameters()
                .unwrap_or_default()
                .iter()
                .find(|(k, _)| k == "scale")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0u32);
            decimal(b, scale)?
        }
        ("io.debezium.data.VariableScaleDecimal", Value::Struct(s)) => {
            let scale = match s.get("scale") {
                Some(Value::Int32(n)) => {
                    u32::try_from(*n).map_err(|_| ValueError::NegativeScale(*n))?
                }
                _ => return Err(ValueError::IncompleteDecimal("scale")),
            };
            match s.get("value") {
                Some(Value::Bytes(b)) => decimal(b, scale)?,
                _ => return Err(ValueError::IncompleteDecimal("value")),
            }
        }
        (names::DATE | "org.apache.kafka.connect.data.Date", Value::Int32(days)) => {
            date(i64::from(*days))
        }
        (names::TIME | "org.apache.kafka.connect.data.Time", Value::Int32(ms)) => {
            time(i64::from(*ms) * 1000)?
        }
        (names::MICRO_TIME, Value::Int64(us)) => time(*us)?,
        (names::NANO_TIME, Value::Int64(ns)) => time(micros_of(*ns))?,
        (names::TIMESTAMP | "org.apache.kafka.connect.data.Timestamp", Value::Int64(ms)) => {
            timestamp(*ms * 1000)
        }
        (names::MICRO_TIMESTAMP, Value::Int64(us)) => timestamp(*us),
        (names::NANO_TIMESTAMP, Value::Int64(ns)) => timestamp(micros_of(*ns)),
        (_, Value::Boolean(b)) => b.to_string(),
        (_, Value::Int8(n)) => n.to_string(),
        (_, Value::Int16(n)) => n.to_string(),
        (_, Value::Int32(n)) => n.to_string(),
        (_, Value::Int64(n)) => n.to_string(),
        (_, Value::Float32(f)) => float(f64::from(*f)),
        (_, Value::Float64(f)) => float(*f),
        (_, Value::String(s)) => s.to_string(),
        (_, Value::Bytes(b)) => format!(
            "\\x{}",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        ),
        (_, Value::Array(items)) => {
            let item = schema.items().ok_or(ValueError::ArrayWithoutItems)?;
            let mut parts = Vec::with_capacity(items.len());
            for v in items {
                parts.push(match pg_text(item, v)? {
                    None => "NULL".to_owned(),
                    Some(t) => format!("\"{}\"", t.replace('\\', "\\\\").replace('"', "\\\"")),
                });
            }
            format!("{{{}}}", parts.join(","))
        }
        (_, other) => return Err(ValueError::NoPostgresText(kind_of(other))),
    }))
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Struct(_) => "struct",
        Value::Map(_) => "map",
        _ => "value",
    }
}

/// A float as PostgreSQL reads it (its spellings of the infinities).
fn float(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else {
        format!("{f:?}")
    }
}

/// A decimal from its unscaled two's complement big-endian bytes.
fn decimal(bytes: &[u8], scale: u32) -> Result<String, ValueError> {
    if bytes.len() > 16 {
        return Err(ValueError::DecimalWidth(bytes.len()));
    }
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut unscaled: i128 = if negative { -1 } else { 0 };
    for b in bytes {
        unscaled = (unscaled << 8) | i128::from(*b);
    }
    let digits = unscaled.unsigned_abs().to_string();
    let scale = scale as usize;
    let sign = if unscaled < 0 { "-" } else { "" };
    Ok(if scale == 0 {
        format!("{sign}{digits}")
    } else if digits.len() > scale {
        let (int, frac) = digits.split_at(digits.len() - scale);
        format!("{sign}{int}.{frac}")
    } else {
        format!("{sign}0.{}{digits}", "0".repeat(scale - digits.len()))
    })
}

/// Days since 1970-01-01 as `YYYY-MM-DD`.
fn date(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    if y <= 0 {
        format!("{:04}-{m:02}-{d:02} BC", 1 - y)
    } else {
        format!("{y:04}-{m:02}-{d:02}")
    }
}

/// A time of day (microseconds since midnight) as PostgreSQL's `time` holds it: from
/// `00:00:00` to `24:00:00`; any other duration is an error, not wrapped into a day.
fn time(us: i64) -> Result<String, ValueError> {
    if !(0..=86_400_000_000).contains(&us) {
        return Err(ValueError::PostgresTime(us));
    }
    if us == 86_400_000_000 {
        return Ok("24:00:00".into());
    }
    Ok(clock(us))
}

/// A time (microseconds, negative or beyond a day) as MySQL's `time` holds it, to ±838:59:59.
fn mysql_time(us: i64) -> Result<String, ValueError> {
    let sign = if us < 0 { "-" } else { "" };
    let abs = us.unsigned_abs();
    let hours = abs / 3_600_000_000;
    if abs > 838 * 3_600_000_000 + 59 * 60_000_000 + 59_999_999 {
        return Err(ValueError::MySqlTime(us));
    }
    Ok(format!(
        "{sign}{hours:02}:{:02}:{:02}.{:06}",
        abs / 60_000_000 % 60,
        abs / 1_000_000 % 60,
        abs % 1_000_000
    ))
}

/// Microseconds into a day as `HH:MM:SS.ffffff`.
fn clock(us: i64) -> String {
    let us = us.rem_euclid(86_400_000_000);
    format!(
        "{:02}:{:02}:{:02}.{:06}",
        us / 3_600_000_000,
        us / 60_000_000 % 60,
        us / 1_000_000 % 60,
        us % 1_000_000
    )
}

/// Microseconds since the epoch as `YYYY-MM-DD HH:MM:SS.ffffff`.
fn timestamp(us: i64) -> String {
    let days = us.div_euclid(86_400_000_000);
    let day = date(days);
    let (date_part, era) = match day.strip_suffix(" BC") {
        Some(d) => (d.to_owned(), " BC"),
        None => (day, ""),
    };
    format!("{date_part} {}{era}", clock(us))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_dates_and_times_are_postgresqls_text() {
        assert_eq!(decimal(&[0x04, 0xD2], 2).unwrap(), "12.34");
        assert_eq!(decimal(&[0xFB, 0x2E], 2).unwrap(), "-12.34");
        assert_eq!(decimal(&[0x05], 3).unwrap(), "0.005");
        assert_eq!(decimal(&[0x00], 0).unwrap(), "0");
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(11016), "2000-02-29");
        assert_eq!(date(-719_163), "0001-12-31 BC");
        assert_eq!(date(-719_528), "0001-01-01 BC");
        assert_eq!(time(45_296_000_001).unwrap(), "12:34:56.000001");
        assert!(time(-1).is_err() && time(90_000_000_000).is_err());
        assert_eq!(mysql_time(-3_600_000_000).unwrap(), "-01:00:00.000000");
        assert_eq!(mysql_time(90_000_000_000).unwrap(), "25:00:00.000000");
        assert!(mysql_time(839 * 3_600_000_000).is_err());
        assert_eq!(timestamp(-1), "1969-12-31 23:59:59.999999");
        assert_eq!(float(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(float(0.1), "0.1");
        assert_eq!(
            (micros_of(1_001), micros_of(1_500), micros_of(-2_000)),
            (1, 2, -2)
        );
    }

    #[test]
    fn mysql_text_is_what_strict_mysql_converts_without_loss() {
        use sluice_engine::SchemaType;
        let plain = |k| Schema::primitive(k, true);
        let my = |schema: &Schema, v: Value| mysql_text(schema, &v);
        assert_eq!(
            my(&plain(SchemaType::Boolean), Value::Boolean(true)),
            Ok(Some("1".into()))
        );
        assert_eq!(
            my(&plain(SchemaType::Bytes), Value::Bytes(vec![0, 0xfe])),
            Ok(Some("00fe".into()))
        );
        assert!(my(&plain(SchemaType::Float64), Value::Float64(f64::NAN)).is_err());
        assert_eq!(my(&plain(SchemaType::Int64), Value::Null), Ok(None));
        let zoned = Schema::builder(SchemaType::String)
            .name(names::ZONED_TIMESTAMP)
            .build();
        for (given, utc) in [
            (
                "2018-07-13T12:23:45.456+11:00",
                "2018-07-13 01:23:45.456000",
            ),
            ("2024-01-01T00:30:00Z", "2024-01-01 00:30:00.000000"),
            (
                "2024-01-01T23:30:00.1234560-01:30",
                "2024-01-02 01:00:00.123456",
            ),
        ] {
            assert_eq!(
                my(&zoned, Value::from(given)),
                Ok(Some(utc.into())),
                "{given}"
            );
        }
        assert_eq!(
            my(&zoned, Value::from("2024-01-01T00:00:00.1234567Z")),
            Ok(Some("2024-01-01 00:00:00.123457".into()))
        );
        assert!(my(&zoned, Value::from("yesterday")).is_err());
        let date = Schema::builder(SchemaType::Int32).name(names::DATE).build();
        assert!(
            my(&date, Value::Int32(-719_528)).is_err(),
            "a year before 1"
        );
        assert_eq!(my(&date, Value::Int32(0)), Ok(Some("1970-01-01".into())));
    }
}
