//! Values as PostgreSQL takes them: a column type per Connect schema (Debezium's JDBC sink's
//! mapping, for created tables and added columns) and each value as the text PostgreSQL's input
//! functions read, bound as `$n::text::<column type>`. A value that has no such text (a struct,
//! a decimal too wide) is an error, never a rounded or default value.

use sluice_engine::event::names;
use sluice_engine::{Schema, SchemaType, Value};

/// The column type of a field (Debezium's JDBC sink mapping for PostgreSQL).
pub(super) fn column_type(schema: &Schema) -> Result<String, String> {
    let name = schema.name().unwrap_or("");
    let param = |k: &str| {
        schema
            .parameters()
            .unwrap_or_default()
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    Ok(match name {
        names::DECIMAL => {
            let scale = param("scale").unwrap_or_else(|| "0".into());
            match param("connect.decimal.precision") {
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
                let items = schema.items().ok_or("an array schema without items")?;
                format!("{}[]", column_type(items)?)
            }
            other => {
                return Err(format!(
                    "no PostgreSQL column type for a {other:?} field{}",
                    if name.is_empty() {
                        String::new()
                    } else {
                        format!(" ({name})")
                    }
                ))
            }
        },
    })
}

/// The text of `value` under `schema` (`None` for null).
pub(super) fn text(schema: &Schema, value: &Value) -> Result<Option<String>, String> {
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
                    u32::try_from(*n).map_err(|_| format!("a negative scale {n}"))?
                }
                _ => return Err("a VariableScaleDecimal without its scale".into()),
            };
            match s.get("value") {
                Some(Value::Bytes(b)) => decimal(b, scale)?,
                _ => return Err("a VariableScaleDecimal without its value".into()),
            }
        }
        (names::DATE | "org.apache.kafka.connect.data.Date", Value::Int32(days)) => {
            date(i64::from(*days))
        }
        (names::TIME | "org.apache.kafka.connect.data.Time", Value::Int32(ms)) => {
            time(i64::from(*ms) * 1000)
        }
        (names::MICRO_TIME, Value::Int64(us)) => time(*us),
        (names::NANO_TIME, Value::Int64(ns)) => time(ns.div_euclid(1000)),
        (names::TIMESTAMP | "org.apache.kafka.connect.data.Timestamp", Value::Int64(ms)) => {
            timestamp(*ms * 1000)
        }
        (names::MICRO_TIMESTAMP, Value::Int64(us)) => timestamp(*us),
        (names::NANO_TIMESTAMP, Value::Int64(ns)) => timestamp(ns.div_euclid(1000)),
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
            let item = schema.items().ok_or("an array schema without items")?;
            let mut parts = Vec::with_capacity(items.len());
            for v in items {
                parts.push(match text(item, v)? {
                    None => "NULL".to_owned(),
                    Some(t) => format!("\"{}\"", t.replace('\\', "\\\\").replace('"', "\\\"")),
                });
            }
            format!("{{{}}}", parts.join(","))
        }
        (_, other) => {
            return Err(format!(
                "a {:?} value has no PostgreSQL text",
                kind_of(other)
            ))
        }
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
fn decimal(bytes: &[u8], scale: u32) -> Result<String, String> {
    if bytes.len() > 16 {
        return Err(format!(
            "a decimal of {} bytes is wider than this sink reads (16)",
            bytes.len()
        ));
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
    let (y, m, d) = civil(days);
    if y <= 0 {
        format!("{:04}-{m:02}-{d:02} BC", 1 - y)
    } else {
        format!("{y:04}-{m:02}-{d:02}")
    }
}

/// Microseconds since midnight as `HH:MM:SS.ffffff`.
fn time(us: i64) -> String {
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
    format!("{date_part} {}{era}", time(us.rem_euclid(86_400_000_000)))
}

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
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
        assert_eq!(time(45_296_000_001), "12:34:56.000001");
        assert_eq!(timestamp(-1), "1969-12-31 23:59:59.999999");
        assert_eq!(float(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(float(0.1), "0.1");
    }
}
