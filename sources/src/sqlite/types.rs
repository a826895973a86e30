//! SQLite declared types → Kafka Connect schemas, the way Debezium maps their SQL
//! equivalents, and SQLite values → Connect values.

use std::borrow::Cow;
use std::sync::Arc;

use rusqlite::types::ValueRef;
use sluice_engine::event::{decimal_schema, names, Schema, SchemaType, Value};

use sluice_kit::values::decimal::unscaled_bytes;
use sluice_kit::values::temporal::{parse_date, parse_time, parse_timestamp};

/// How a column's values are converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// int16 (TINYINT, SMALLINT).
    Int16,
    /// int32 (INT, MEDIUMINT).
    Int32,
    /// int64 (INTEGER, BIGINT).
    Int64,
    /// boolean (BOOLEAN).
    Boolean,
    /// double (REAL, FLOAT, DOUBLE).
    Float64,
    /// Decimal with a scale (DECIMAL(p,s), NUMERIC(p,s)).
    Decimal(u32),
    /// `io.debezium.time.Date` (DATE, as `YYYY-MM-DD`).
    Date,
    /// `io.debezium.time.Time` (TIME, as `HH:MM:SS[.fff]`).
    Time,
    /// `io.debezium.time.Timestamp` (DATETIME, TIMESTAMP, as `YYYY-MM-DD HH:MM:SS[.fff]`).
    Timestamp,
    /// string (TEXT, CHAR, VARCHAR, CLOB, JSON, ...).
    String,
    /// bytes (BLOB, or no declared type).
    Bytes,
}

/// The conversion of a declared type.
pub fn kind(decltype: &str) -> Kind {
    let t = decltype.to_ascii_uppercase();
    let base = t.split('(').next().unwrap_or("").trim();
    match base {
        "TINYINT" | "SMALLINT" | "INT2" => return Kind::Int16,
        "INT" | "MEDIUMINT" | "INT4" => return Kind::Int32,
        "BOOLEAN" | "BOOL" => return Kind::Boolean,
        "DATE" => return Kind::Date,
        "TIME" => return Kind::Time,
        "DATETIME" | "TIMESTAMP" => return Kind::Timestamp,
        "DECIMAL" | "NUMERIC" => {
            let scale = t
                .split_once('(')
                .and_then(|(_, rest)| rest.trim_end_matches(')').split(',').nth(1))
                .and_then(|s| s.trim().parse().ok());
            return match scale {
                Some(s) => Kind::Decimal(s),
                None => Kind::Float64,
            };
        }
        _ => {}
    }
    // SQLite's affinity rules for the rest.
    if t.contains("INT") {
        Kind::Int64
    } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") || t.contains("JSON") {
        Kind::String
    } else if t.contains("BLOB") || t.is_empty() {
        Kind::Bytes
    } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
        Kind::Float64
    } else {
        Kind::String
    }
}

/// The Connect schema of a column.
pub fn schema(decltype: &str, optional: bool) -> Arc<Schema> {
    let precision = decltype
        .split_once('(')
        .and_then(|(_, rest)| rest.split([',', ')']).next())
        .and_then(|p| p.trim().parse().ok());
    let named = |t: SchemaType, name: &str| {
        Schema::builder(t)
            .optional_if(optional)
            .name(name)
            .version(1)
            .build()
    };
    match kind(decltype) {
        Kind::Int16 => Schema::primitive(SchemaType::Int16, optional),
        Kind::Int32 => Schema::primitive(SchemaType::Int32, optional),
        Kind::Int64 => Schema::primitive(SchemaType::Int64, optional),
        Kind::Boolean => Schema::primitive(SchemaType::Boolean, optional),
        Kind::Float64 => Schema::primitive(SchemaType::Float64, optional),
        Kind::Decimal(scale) => decimal_schema(scale, precision, optional),
        Kind::Date => named(SchemaType::Int32, names::DATE),
        Kind::Time => named(SchemaType::Int32, names::TIME),
        Kind::Timestamp => named(SchemaType::Int64, names::TIMESTAMP),
        Kind::String if decltype.to_ascii_uppercase().starts_with("JSON") => {
            named(SchemaType::String, names::JSON)
        }
        Kind::String => Schema::primitive(SchemaType::String, optional),
        Kind::Bytes => Schema::primitive(SchemaType::Bytes, optional),
    }
}

/// Powers of ten a double holds exactly.
const EXACT_POWERS: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// A REAL's value at `scale` digits as an unscaled integer, without writing it out, when that
/// is certain to be what writing it out rounds to: `n = round(f·10^s)` with `n / 10^s == f`
/// (so `f` is the double nearest `n·10^-s`, off by at most half its ulp) and `|n| < 2^51`
/// (so that half ulp, scaled by `10^s`, is under 1/4 and rounds to `n`). `None` otherwise
/// (NaN, infinities, large values, more digits than the scale): the caller writes it out.
fn real_unscaled(f: f64, scale: u32) -> Option<i128> {
    let power = *EXACT_POWERS.get(scale as usize)?;
    let n = (f * power).round();
    (n.abs() < (1u64 << 51) as f64 && n / power == f).then_some(n as i128)
}

/// Converts a stored value; the error says what does not fit.
pub fn value(kind: Kind, v: ValueRef<'_>) -> Result<Value, String> {
    // Text as stored (borrowed, copied only when it is not UTF-8), numbers written out.
    fn text(v: ValueRef<'_>) -> Result<Cow<'_, str>, String> {
        match v {
            ValueRef::Text(t) => Ok(String::from_utf8_lossy(t)),
            ValueRef::Integer(i) => Ok(Cow::Owned(i.to_string())),
            ValueRef::Real(f) => Ok(Cow::Owned(f.to_string())),
            ValueRef::Blob(_) => Err("a BLOB".into()),
            ValueRef::Null => Err("NULL".into()),
        }
    }
    let int = |v: ValueRef<'_>| -> Result<i64, String> {
        match v {
            ValueRef::Integer(i) => Ok(i),
            ValueRef::Real(f) if f.fract() == 0.0 => Ok(f as i64),
            ValueRef::Text(t) => String::from_utf8_lossy(t)
                .trim()
                .parse()
                .map_err(|_| format!("`{}`", String::from_utf8_lossy(t))),
            other => Err(format!("{other:?}")),
        }
    };
    if matches!(v, ValueRef::Null) {
        return Ok(Value::Null);
    }
    let bad = |what: String, expected: &str| format!("{what} is not {expected}");
    Ok(match kind {
        Kind::Int16 => Value::Int16(
            i16::try_from(int(v)?).map_err(|_| bad(format!("{v:?}"), "a 16-bit integer"))?,
        ),
        Kind::Int32 => Value::Int32(
            i32::try_from(int(v)?).map_err(|_| bad(format!("{v:?}"), "a 32-bit integer"))?,
        ),
        Kind::Int64 => Value::Int64(int(v)?),
        Kind::Boolean => Value::Boolean(int(v)? != 0),
        Kind::Float64 => match v {
            ValueRef::Real(f) => Value::Float64(f),
            ValueRef::Integer(i) => Value::Float64(i as f64),
            other => Value::Float64(
                text(other)?
                    .trim()
                    .parse()
                    .map_err(|_| bad(format!("{other:?}"), "a number"))?,
            ),
        },
        Kind::Decimal(scale) => {
            if let ValueRef::Real(f) = v {
                if let Some(unscaled) = real_unscaled(f, scale) {
                    return Ok(Value::Bytes(Value::decimal_bytes(unscaled)));
                }
            }
            let t = match v {
                ValueRef::Real(f) => Cow::Owned(format!("{f:.*}", scale as usize)),
                other => text(other)?,
            };
            let bytes = unscaled_bytes(t.trim(), scale)
                .ok_or_else(|| bad(format!("`{t}`"), "a decimal number"))?;
            Value::Bytes(bytes)
        }
        Kind::Date => {
            let t = text(v)?;
            let day = t
                .get(..10)
                .and_then(parse_date)
                .ok_or_else(|| bad(format!("`{t}`"), "a date (YYYY-MM-DD)"))?;
            Value::Int32(i32::try_from(day).map_err(|_| bad(format!("`{t}`"), "a date in range"))?)
        }
        Kind::Time => {
            let t = text(v)?;
            let micros =
                parse_time(t.trim()).ok_or_else(|| bad(format!("`{t}`"), "a time (HH:MM:SS)"))?;
            Value::Int32((micros / 1000) as i32)
        }
        Kind::Timestamp => {
            let t = text(v)?;
            let normalized = t.trim().replacen('T', " ", 1);
            let normalized = normalized.trim_end_matches('Z');
            let micros = parse_timestamp(normalized)
                .or_else(|| parse_date(normalized).map(|d| d * 86_400_000_000))
                .ok_or_else(|| bad(format!("`{t}`"), "a timestamp (YYYY-MM-DD HH:MM:SS)"))?;
            Value::Int64(micros.div_euclid(1000))
        }
        Kind::String => Value::String(Arc::from(&*match v {
            ValueRef::Blob(b) => String::from_utf8_lossy(b),
            other => text(other)?,
        })),
        Kind::Bytes => match v {
            ValueRef::Blob(b) | ValueRef::Text(b) => Value::Bytes(b.to_vec()),
            other => Value::Bytes(text(other)?.into_owned().into_bytes()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_map_like_their_sql_equivalents() {
        assert_eq!(kind("INTEGER"), Kind::Int64);
        assert_eq!(kind("int"), Kind::Int32);
        assert_eq!(kind("SMALLINT"), Kind::Int16);
        assert_eq!(kind("VARCHAR(40)"), Kind::String);
        assert_eq!(kind("DECIMAL(10,2)"), Kind::Decimal(2));
        assert_eq!(kind("NUMERIC"), Kind::Float64);
        assert_eq!(kind(""), Kind::Bytes);
        assert_eq!(kind("DATETIME"), Kind::Timestamp);
        assert_eq!(
            schema("DECIMAL(10,2)", true).parameter("connect.decimal.precision"),
            Some("10")
        );
    }

    proptest::proptest! {
        #[test]
        fn decimals_keep_their_digits(units in -10_000_000_000i64..10_000_000_000, scale in 0u32..6) {
            let text = if scale == 0 {
                units.to_string()
            } else {
                let p = 10i64.pow(scale);
                format!("{}{}.{:0width$}", if units < 0 { "-" } else { "" }, (units / p).abs(), (units % p).abs(), width = scale as usize)
            };
            let v = value(Kind::Decimal(scale), ValueRef::Text(text.as_bytes()));
            proptest::prop_assert_eq!(v, Ok(Value::Bytes(Value::decimal_bytes(i128::from(units)))));
        }

        #[test]
        fn a_real_unscaled_directly_is_the_real_written_out(f in proptest::num::f64::ANY, units in -1_000_000_000_000i64..1_000_000_000_000, scale in 0u32..16) {
            let written = |f: f64| sluice_kit::values::decimal::unscaled(&format!("{f:.*}", scale as usize), scale);
            for f in [f, units as f64 / EXACT_POWERS[scale as usize], units as f64 * 0.5] {
                if let Some(n) = real_unscaled(f, scale) {
                    proptest::prop_assert_eq!(Some(n), written(f), "{} at scale {}", f, scale);
                }
            }
        }

        #[test]
        fn dates_and_timestamps_count_from_the_epoch(days in -700_000i64..700_000, ms in 0i64..86_400_000) {
            let (y, m, d) = sluice_kit::values::temporal::civil_from_days(days);
            let date = format!("{y:04}-{m:02}-{d:02}");
            proptest::prop_assert_eq!(value(Kind::Date, ValueRef::Text(date.as_bytes())), Ok(Value::Int32(days as i32)));
            let ts = format!("{date} {:02}:{:02}:{:02}.{:03}", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
            proptest::prop_assert_eq!(value(Kind::Timestamp, ValueRef::Text(ts.as_bytes())), Ok(Value::Int64(days * 86_400_000 + ms)));
        }

        #[test]
        fn any_stored_value_converts_or_errs_without_panicking(i in proptest::num::i64::ANY, f in proptest::num::f64::ANY, t in ".{0,12}") {
            for kind in [Kind::Int16, Kind::Int32, Kind::Int64, Kind::Boolean, Kind::Float64, Kind::Decimal(2), Kind::Date, Kind::Time, Kind::Timestamp, Kind::String, Kind::Bytes] {
                let _ = value(kind, ValueRef::Integer(i));
                let _ = value(kind, ValueRef::Real(f));
                let _ = value(kind, ValueRef::Text(t.as_bytes()));
                let _ = value(kind, ValueRef::Blob(t.as_bytes()));
            }
        }
    }

    #[test]
    fn values_convert_or_say_what_does_not_fit() {
        assert_eq!(
            value(Kind::Decimal(2), ValueRef::Real(12.5)),
            Ok(Value::Bytes(Value::decimal_bytes(1250)))
        );
        assert_eq!(
            value(Kind::Decimal(2), ValueRef::Integer(3)),
            Ok(Value::Bytes(Value::decimal_bytes(300)))
        );
        assert_eq!(
            value(Kind::Date, ValueRef::Text(b"1970-01-02")),
            Ok(Value::Int32(1))
        );
        assert_eq!(
            value(Kind::Timestamp, ValueRef::Text(b"1970-01-01 00:00:01.5")),
            Ok(Value::Int64(1500))
        );
        assert_eq!(
            value(Kind::Boolean, ValueRef::Integer(1)),
            Ok(Value::Boolean(true))
        );
        assert!(value(Kind::Date, ValueRef::Text(b"soon"))
            .unwrap_err()
            .contains("not a date"));
        assert_eq!(value(Kind::Int64, ValueRef::Null), Ok(Value::Null));
    }
}
