//! Db2's column types (`SYSCAT.COLUMNS.TYPENAME`) as Debezium's Db2 connector maps them
//! (`Db2ValueConverters` on `JdbcValueConverters`): schemas under `time.precision.mode` and
//! `decimal.handling.mode`, and values from the text (or bytes) the ODBC driver returns.
//! Differences from Debezium 3.x, on purpose: CLOB, DBCLOB and BLOB carry their content
//! (Debezium's snapshot emits the driver object's name and its stream null, a known bug), and
//! `binary.handling.mode` is honoured (Debezium's Db2 connector ignores it: bytes).

use std::sync::Arc;

use sluice_engine::event::SchemaBuilder;
use sluice_engine::{Schema, SchemaType, Value};
use sluice_kit::values::{self, temporal};

/// The modes the values follow.
pub(crate) type Modes = sluice_kit::values::ValueModes;

/// A column as `SYSCAT.COLUMNS` describes it.
#[derive(Debug, Clone)]
pub(crate) struct Described {
    pub type_name: String,
    pub length: i64,
    pub scale: i64,
}

/// How a column's values are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    SmallInt,
    Integer,
    BigInt,
    Real,
    Double,
    Decimal { precision: u32, scale: u32 },
    DecFloat,
    Text,
    Binary,
    Boolean,
    Date,
    Time,
    Timestamp { precision: u32 },
    Xml,
}

impl Kind {
    /// The kind of a described column; `Err` names a type Sluice does not map.
    pub(crate) fn of(d: &Described) -> Result<Kind, String> {
        let n = |v: i64| u32::try_from(v).unwrap_or(0);
        Ok(match d.type_name.to_ascii_uppercase().as_str() {
            "SMALLINT" => Kind::SmallInt,
            "INTEGER" | "INT" => Kind::Integer,
            "BIGINT" => Kind::BigInt,
            "REAL" => Kind::Real,
            "DOUBLE" | "FLOAT" => Kind::Double,
            "DECIMAL" | "NUMERIC" => Kind::Decimal {
                precision: n(d.length),
                scale: n(d.scale),
            },
            "DECFLOAT" => Kind::DecFloat,
            "CHARACTER" | "CHAR" | "VARCHAR" | "LONG VARCHAR" | "CLOB" | "GRAPHIC"
            | "VARGRAPHIC" | "LONG VARGRAPHIC" | "DBCLOB" => Kind::Text,
            "BINARY" | "VARBINARY" | "BLOB" => Kind::Binary,
            "BOOLEAN" => Kind::Boolean,
            "DATE" => Kind::Date,
            "TIME" => Kind::Time,
            "TIMESTAMP" => Kind::Timestamp {
                precision: n(d.scale),
            },
            "XML" => Kind::Xml,
            other => return Err(format!("the Db2 type `{other}` is not mapped")),
        })
    }

    /// Whether the column holds text (for `column.truncate.to.*`).
    pub(crate) fn is_text(self) -> bool {
        matches!(self, Kind::Text | Kind::Xml)
    }

    /// The field schema of a column of this kind.
    pub(crate) fn schema(self, m: Modes, optional: bool) -> Arc<Schema> {
        let plain = |t| Schema::builder(t).optional_if(optional);
        let b: SchemaBuilder = match self {
            Kind::SmallInt => plain(SchemaType::Int16),
            Kind::Integer => plain(SchemaType::Int32),
            Kind::BigInt => plain(SchemaType::Int64),
            Kind::Real => plain(SchemaType::Float32),
            Kind::Double => plain(SchemaType::Float64),
            Kind::Decimal { precision, scale } => {
                values::decimal_column_schema(m.decimal, Some((precision, scale)), optional)
            }
            Kind::DecFloat => values::decimal_column_schema(m.decimal, None, optional),
            Kind::Text => plain(SchemaType::String),
            Kind::Binary => values::binary_schema(m.binary, optional),
            Kind::Boolean => plain(SchemaType::Boolean),
            Kind::Date => temporal::date_schema(m.time, optional),
            Kind::Time => temporal::time_schema(0, m.time, optional),
            Kind::Timestamp { precision } => {
                temporal::timestamp_schema(precision, m.time, optional)
            }
            Kind::Xml => values::named(SchemaType::String, "io.debezium.data.Xml", optional),
        };
        b.build()
    }

    /// The value of a non-NULL cell.
    pub(crate) fn value(
        self,
        cell: &[u8],
        m: Modes,
        schema: &Arc<Schema>,
    ) -> Result<Value, String> {
        if self == Kind::Binary {
            return Ok(values::binary_value(cell.to_vec(), m.binary));
        }
        let text = std::str::from_utf8(cell)
            .map_err(|_| "the driver sent text that is not UTF-8".to_owned())?;
        let t = text.trim();
        let bad = || format!("`{text}` is not a {self:?} value");
        Ok(match self {
            Kind::SmallInt => Value::Int16(t.parse().map_err(|_| bad())?),
            Kind::Integer => Value::Int32(t.parse().map_err(|_| bad())?),
            Kind::BigInt => Value::Int64(t.parse().map_err(|_| bad())?),
            Kind::Real => Value::Float32(t.parse().map_err(|_| bad())?),
            Kind::Double => Value::Float64(values::parse_float(t).ok_or_else(bad)?),
            Kind::Decimal { scale, .. } => {
                values::decimal_value(t, Some(scale), m.decimal, schema).ok_or_else(bad)?
            }
            Kind::DecFloat => {
                let plain = decfloat_plain(t).ok_or_else(bad)?;
                values::decimal_value(&plain, None, m.decimal, schema).ok_or_else(bad)?
            }
            Kind::Text | Kind::Xml => Value::from(text),
            Kind::Boolean => Value::Boolean(match t.to_ascii_lowercase().as_str() {
                "1" | "t" | "true" | "y" => true,
                "0" | "f" | "false" | "n" => false,
                _ => return Err(bad()),
            }),
            Kind::Date => {
                let days = temporal::parse_date(t).ok_or_else(bad)?;
                Value::Int32(i32::try_from(days).map_err(|_| bad())?)
            }
            Kind::Time => {
                let micros = temporal::parse_time(&t.replace('.', ":")).ok_or_else(bad)?;
                temporal::time_value(micros, 0, m.time)
            }
            // Days and the time of day: Db2's years 1 to 9999 fit milliseconds and
            // microseconds; nanoseconds hold 1677–2262 only (outside, an error).
            Kind::Timestamp { precision } => {
                let (days, nanos) = timestamp_parts(t).ok_or_else(bad)?;
                temporal::timestamp_value_day_nanos(days, nanos, precision, m.time)
                    .ok_or_else(bad)?
            }
            Kind::Binary => return Err(bad()),
        })
    }
}

/// Nanoseconds since the epoch as the timestamp text Db2 reads (`2024-01-02 03:04:05.123456`,
/// to the microsecond).
pub(crate) fn timestamp_text(nanos: i64) -> String {
    use sluice_engine::event::calendar::{clock_text, date_text};
    let days = nanos.div_euclid(86_400_000_000_000);
    let in_day = nanos.rem_euclid(86_400_000_000_000);
    format!("{} {}", date_text(days), clock_text(in_day, 6))
}

/// A timestamp's text (`YYYY-MM-DD HH:MM:SS[.f…]`, or Db2's `YYYY-MM-DD-HH.MM.SS[.f…]`) as
/// days since the epoch and nanoseconds of the day (fractions past nine digits cut, as
/// Debezium's nanoseconds are).
pub(crate) fn timestamp_parts(text: &str) -> Option<(i64, i64)> {
    let (date, time) = match text.split_once(' ') {
        Some(parts) => parts,
        None => (text.get(..10)?, text.get(11..)?),
    };
    let days = temporal::parse_date(date)?;
    let (hms, fraction) = match time.split_once('.') {
        Some((h, f)) if h.len() == 8 => (h, f),
        // Db2's form: the seconds end at the third dot.
        _ => match time.rsplit_once('.') {
            Some((h, f)) if h.len() == 8 && time.matches('.').count() == 3 => (h, f),
            _ => (time, ""),
        },
    };
    let mut parts = hms.split([':', '.']);
    let h: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let s: i64 = parts.next()?.parse().ok()?;
    if parts.next().is_some()
        || h > 24
        || m > 59
        || s > 60
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let digits: String = fraction
        .chars()
        .chain(std::iter::repeat('0'))
        .take(9)
        .collect();
    let nanos: i64 = digits.parse().ok()?;
    Some((days, (h * 3600 + m * 60 + s) * 1_000_000_000 + nanos))
}

/// [`timestamp_parts`] as nanoseconds since the epoch (1677–2262).
pub(crate) fn timestamp_nanos(text: &str) -> Option<i64> {
    let (days, nanos) = timestamp_parts(text)?;
    days.checked_mul(86_400_000_000_000)?.checked_add(nanos)
}

/// A DECFLOAT's text (`1.5E+3`, `-0.00120`) as plain decimal text with trailing zeros cut
/// and no negative scale (Debezium's `stripTrailingZeros`, scale at least 0); `NaN` and the
/// infinities pass through.
pub(crate) fn decfloat_plain(text: &str) -> Option<String> {
    if values::decimal::Special::of(text).is_some() {
        return Some(text.to_owned());
    }
    let (mantissa, exp) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.trim_start_matches('+').parse::<i64>().ok()?),
        None => (text, 0),
    };
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa.strip_prefix('+').unwrap_or(mantissa)),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let digits = format!("{int}{frac}");
    // value = digits × 10^(exp − len(frac))
    let scale = i64::try_from(frac.len()).ok()? - exp;
    if scale.abs() > 6200 {
        return None;
    }
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some("0".into());
    }
    let (mut digits, mut scale) = (digits.to_owned(), scale);
    while scale > 0 && digits.ends_with('0') {
        digits.pop();
        scale -= 1;
    }
    let body = if scale <= 0 {
        format!("{digits}{}", "0".repeat(usize::try_from(-scale).ok()?))
    } else {
        let s = usize::try_from(scale).ok()?;
        if digits.len() > s {
            format!(
                "{}.{}",
                &digits[..digits.len() - s],
                &digits[digits.len() - s..]
            )
        } else {
            format!("0.{}{digits}", "0".repeat(s - digits.len()))
        }
    };
    Some(if negative { format!("-{body}") } else { body })
}

/// A column of a schema change event's table (`java.sql.Types` codes as Db2's JDBC driver
/// reports them).
pub(crate) fn column_def(
    name: &str,
    d: &Described,
    position: usize,
    optional: bool,
) -> sluice_kit::history::ColumnDef {
    let ty = d.type_name.to_ascii_uppercase();
    let (jdbc, length, scale): (i32, i64, Option<i32>) = match ty.as_str() {
        "SMALLINT" => (5, 5, Some(0)),
        "INTEGER" => (4, 10, Some(0)),
        "BIGINT" => (-5, 19, Some(0)),
        "REAL" => (7, 24, None),
        "DOUBLE" => (8, 53, None),
        "DECIMAL" => (3, d.length, i32::try_from(d.scale).ok()),
        "DECFLOAT" => (1111, if d.length == 8 { 16 } else { 34 }, None),
        "CHARACTER" | "GRAPHIC" => (1, d.length, None),
        "VARCHAR" | "VARGRAPHIC" => (12, d.length, None),
        "CLOB" | "DBCLOB" => (2005, d.length, None),
        "BINARY" => (-2, d.length, None),
        "VARBINARY" => (-3, d.length, None),
        "BLOB" => (2004, d.length, None),
        "BOOLEAN" => (16, 1, None),
        "DATE" => (91, 10, None),
        "TIME" => (92, 8, Some(0)),
        "TIMESTAMP" => (
            93,
            19 + if d.scale > 0 { d.scale + 1 } else { 0 },
            i32::try_from(d.scale).ok(),
        ),
        "XML" => (2009, 0, None),
        _ => (1111, d.length, None),
    };
    sluice_kit::history::ColumnDef {
        name: name.to_owned(),
        jdbc_type: jdbc,
        native_type: None,
        type_name: ty.clone(),
        type_expression: Some(ty),
        charset_name: None,
        length: i32::try_from(length).ok().filter(|l| *l > 0),
        scale,
        position: i32::try_from(position).unwrap_or(i32::MAX),
        optional,
        auto_incremented: false,
        generated: false,
        comment: None,
        has_default_value: false,
        default_value_expression: None,
        enum_values: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decfloats_become_plain_decimals_without_trailing_zeros() {
        for (text, want) in [
            ("1.5E+3", "1500"),
            ("-0.00120", "-0.0012"),
            ("2.50", "2.5"),
            ("12E-2", "0.12"),
            ("0", "0"),
            ("0.000", "0"),
            ("100", "100"),
            ("NaN", "NaN"),
        ] {
            assert_eq!(decfloat_plain(text).as_deref(), Some(want), "{text}");
        }
        assert_eq!(decfloat_plain("1.2.3"), None);
        assert_eq!(decfloat_plain("E5"), None);
    }

    #[test]
    fn timestamps_read_in_both_forms_to_the_nanosecond() {
        let at = timestamp_nanos("2024-01-02-03.04.05.123456").unwrap();
        assert_eq!(timestamp_text(at), "2024-01-02 03:04:05.123456");
        assert_eq!(
            timestamp_text(at + 120_000_000_000),
            "2024-01-02 03:06:05.123456"
        );
        let base = 1_529_507_596_000_000_000i64;
        assert_eq!(timestamp_nanos("2018-06-20 15:13:16"), Some(base));
        assert_eq!(
            timestamp_nanos("2018-06-20 15:13:16.945104"),
            Some(base + 945_104_000)
        );
        assert_eq!(
            timestamp_nanos("2018-06-20-15.13.16.945104"),
            Some(base + 945_104_000)
        );
        assert_eq!(
            timestamp_nanos("2018-06-20 15:13:16.123456789012"),
            Some(base + 123_456_789)
        );
        assert_eq!(timestamp_nanos("2018-06-20 25:13:16"), None);
        assert_eq!(timestamp_nanos("2018-06-20"), None);
    }
}
