//! SQL Server column types as Debezium's SQL Server connector maps them (seed 003's type
//! table and `SqlServerValueConverters`): schemas by `time.precision.mode`,
//! `decimal.handling.mode` and `binary.handling.mode`, and the values the TDS client decodes.

use std::sync::Arc;

use sluice_engine::{Schema, SchemaType, Value};
use sluice_kit::values::temporal::{date_schema, time_schema, time_value_nanos, timestamp_schema};
use sluice_kit::values::{
    binary_schema, binary_value, decimal_column_schema, decimal_value, named,
};
use tiberius::ColumnData;

/// What a column holds, as the source converts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Boolean,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    /// `decimal`/`numeric(p, s)`.
    Decimal(u32, u32),
    /// `money` (19, 4) and `smallmoney` (10, 4): the client decodes them as doubles.
    Money(u32),
    String,
    Date,
    /// `time(p)`.
    Time(u32),
    /// `datetime2(p)`, `datetime` (3), `smalldatetime` (0).
    Timestamp(u32),
    /// `datetimeoffset(p)`.
    Zoned(u32),
    Bytes,
}

/// The modes the values follow.
pub(crate) type Modes = sluice_kit::values::ValueModes;

/// A column as `INFORMATION_SCHEMA.COLUMNS` describes it.
#[derive(Debug, Clone)]
pub(crate) struct Described {
    pub data_type: String,
    pub char_len: Option<i64>,
    pub precision: Option<i64>,
    pub scale: Option<i64>,
    pub datetime_precision: Option<i64>,
}

impl Kind {
    /// The kind of a described column; `Err` names a type the source does not map.
    pub(crate) fn of(d: &Described) -> Result<Kind, String> {
        let p =
            |v: Option<i64>, default: u32| v.and_then(|v| u32::try_from(v).ok()).unwrap_or(default);
        Ok(match d.data_type.to_ascii_lowercase().as_str() {
            "bit" => Kind::Boolean,
            "tinyint" | "smallint" => Kind::Int16,
            "int" => Kind::Int32,
            "bigint" => Kind::Int64,
            "real" => Kind::Float32,
            "float" => Kind::Float64,
            "decimal" | "numeric" => Kind::Decimal(p(d.precision, 18), p(d.scale, 0)),
            "money" => Kind::Money(19),
            "smallmoney" => Kind::Money(10),
            "char" | "varchar" | "text" | "nchar" | "nvarchar" | "ntext" | "xml" | "sysname"
            | "uniqueidentifier" => Kind::String,
            "date" => Kind::Date,
            "time" => Kind::Time(p(d.datetime_precision, 7)),
            "datetime2" => Kind::Timestamp(p(d.datetime_precision, 7)),
            "datetime" => Kind::Timestamp(3),
            "smalldatetime" => Kind::Timestamp(0),
            "datetimeoffset" => Kind::Zoned(p(d.datetime_precision, 7)),
            "binary" | "varbinary" | "image" | "timestamp" | "rowversion" => Kind::Bytes,
            other => {
                return Err(format!(
                    "type `{other}` is not mapped by the sqlserver source yet"
                ))
            }
        })
    }

    /// Whether the column holds text (the column mappers apply to it).
    pub(crate) fn is_text(self) -> bool {
        self == Kind::String
    }

    /// The value schema of a column of this kind.
    pub(crate) fn schema(self, modes: Modes, optional: bool) -> Arc<Schema> {
        let primitive = |t| Schema::primitive(t, optional);
        match self {
            Kind::Boolean => primitive(SchemaType::Boolean),
            Kind::Int16 => primitive(SchemaType::Int16),
            Kind::Int32 => primitive(SchemaType::Int32),
            Kind::Int64 => primitive(SchemaType::Int64),
            Kind::Float32 => primitive(SchemaType::Float32),
            Kind::Float64 => primitive(SchemaType::Float64),
            Kind::Decimal(precision, scale) => {
                decimal_column_schema(modes.decimal, Some((precision, scale)), optional).build()
            }
            Kind::Money(precision) => {
                decimal_column_schema(modes.decimal, Some((precision, 4)), optional).build()
            }
            Kind::String => primitive(SchemaType::String),
            Kind::Date => date_schema(modes.time, optional).build(),
            Kind::Time(p) => time_schema(p, modes.time, optional).build(),
            Kind::Timestamp(p) => timestamp_schema(p, modes.time, optional).build(),
            Kind::Zoned(_) => named(
                SchemaType::String,
                sluice_engine::event::names::ZONED_TIMESTAMP,
                optional,
            )
            .build(),
            Kind::Bytes => binary_schema(modes.binary, optional).build(),
        }
    }

    /// A decoded cell as this kind's value (`schema` is the column's); `Err` says why the
    /// value cannot be represented.
    pub(crate) fn value(
        self,
        data: &ColumnData<'_>,
        modes: Modes,
        schema: &Arc<Schema>,
    ) -> Result<Value, String> {
        let unexpected = || format!("a {self:?} column sent {data:?}");
        Ok(match (self, data) {
            (_, d) if is_null(d) => Value::Null,
            (Kind::Boolean, ColumnData::Bit(Some(b))) => Value::Boolean(*b),
            (Kind::Int16, ColumnData::U8(Some(v))) => Value::Int16(i16::from(*v)),
            (Kind::Int16, ColumnData::I16(Some(v))) => Value::Int16(*v),
            (Kind::Int32, ColumnData::I32(Some(v))) => Value::Int32(*v),
            (Kind::Int64, ColumnData::I64(Some(v))) => Value::Int64(*v),
            // A change table keeps a column's type from when its capture instance was made: a
            // column widened since sends the narrower number, which the wider type holds.
            (Kind::Int32, ColumnData::U8(Some(v))) => Value::Int32(i32::from(*v)),
            (Kind::Int32, ColumnData::I16(Some(v))) => Value::Int32(i32::from(*v)),
            (Kind::Int64, ColumnData::U8(Some(v))) => Value::Int64(i64::from(*v)),
            (Kind::Int64, ColumnData::I16(Some(v))) => Value::Int64(i64::from(*v)),
            (Kind::Int64, ColumnData::I32(Some(v))) => Value::Int64(i64::from(*v)),
            (Kind::Float64, ColumnData::F32(Some(v))) => Value::Float64(f64::from(*v)),
            (Kind::Float32, ColumnData::F32(Some(v))) => Value::Float32(*v),
            (Kind::Float64, ColumnData::F64(Some(v))) => Value::Float64(*v),
            (Kind::Decimal(_, scale), ColumnData::Numeric(Some(n))) => {
                let text = numeric_text(n.value(), n.scale());
                decimal_value(&text, Some(scale), modes.decimal, schema)
                    .ok_or_else(|| format!("{text} does not fit the column's decimal schema"))?
            }
            (Kind::Money(_), ColumnData::F64(Some(v))) => {
                let text = money_text(*v)?;
                decimal_value(&text, Some(4), modes.decimal, schema)
                    .ok_or_else(|| format!("{text} does not fit the money schema"))?
            }
            (Kind::String, ColumnData::String(Some(s))) => Value::from(s.as_ref()),
            (Kind::String, ColumnData::Guid(Some(g))) => {
                Value::from(g.to_string().to_ascii_uppercase())
            }
            (Kind::String, ColumnData::Xml(Some(x))) => Value::from(x.as_ref().to_string()),
            (Kind::Bytes, ColumnData::Binary(Some(b))) => binary_value(b.to_vec(), modes.binary),
            (Kind::Date, ColumnData::Date(Some(d))) => Value::Int32(
                i32::try_from(i64::from(d.days()) - EPOCH_DAYS).map_err(|_| unexpected())?,
            ),
            (Kind::Time(p), ColumnData::Time(Some(t))) => {
                time_value_nanos(time_nanos(t.increments(), t.scale()), p, modes.time)
            }
            (Kind::Timestamp(p), ColumnData::DateTime2(Some(dt))) => {
                let (days, nanos) = datetime2_parts(dt);
                timestamp(days, nanos, p, modes)?
            }
            (Kind::Timestamp(p), ColumnData::DateTime(Some(dt))) => {
                let (days, nanos) = datetime_parts(dt);
                timestamp(days, nanos, p, modes)?
            }
            (Kind::Timestamp(p), ColumnData::SmallDateTime(Some(dt))) => {
                let days = i64::from(dt.days()) + DAYS_1900;
                let minutes = i64::from(dt.seconds_fragments());
                timestamp(days, minutes * 60_000_000_000, p, modes)?
            }
            (Kind::Zoned(_), ColumnData::DateTimeOffset(Some(dto))) => {
                let (days, nanos, offset) = local_parts(dto).ok_or_else(unexpected)?;
                Value::from(zoned_text(days, nanos, offset))
            }
            _ => return Err(unexpected()),
        })
    }
}

/// A column's structure as Debezium's SQL Server connector describes it in schema change
/// events (seed 003): the JDBC type mssql-jdbc reports, the type name, the column size (the
/// precision of numbers and times, the length of strings) and the scale.
pub(crate) fn column_def(
    name: &str,
    d: &Described,
    position: usize,
    optional: bool,
) -> sluice_kit::history::ColumnDef {
    let ty = d.data_type.to_ascii_lowercase();
    let fraction = d.datetime_precision.and_then(|p| i32::try_from(p).ok());
    let (jdbc, length, scale): (i32, Option<i64>, Option<i32>) = match ty.as_str() {
        "bit" => (-7, Some(1), None),
        "tinyint" => (-6, Some(3), Some(0)),
        "smallint" => (5, Some(5), Some(0)),
        "int" => (4, Some(10), Some(0)),
        "bigint" => (-5, Some(19), Some(0)),
        "real" => (7, Some(24), None),
        "float" => (8, Some(53), None),
        "decimal" | "money" | "smallmoney" => {
            (3, d.precision, d.scale.and_then(|s| i32::try_from(s).ok()))
        }
        "numeric" => (2, d.precision, d.scale.and_then(|s| i32::try_from(s).ok())),
        "char" => (1, d.char_len, None),
        "varchar" => (12, d.char_len, None),
        "text" => (-1, d.char_len, None),
        "nchar" => (-15, d.char_len, None),
        "nvarchar" => (-9, d.char_len, None),
        "ntext" | "xml" => (-16, d.char_len, None),
        "uniqueidentifier" => (1, Some(36), None),
        "date" => (91, Some(10), None),
        "time" => (
            92,
            Some(8 + fraction.map_or(8, |f| if f > 0 { i64::from(f) + 1 } else { 0 })),
            fraction,
        ),
        "datetime" => (93, Some(23), Some(3)),
        "smalldatetime" => (93, Some(16), Some(0)),
        "datetime2" => (
            93,
            Some(19 + fraction.map_or(8, |f| if f > 0 { i64::from(f) + 1 } else { 0 })),
            fraction,
        ),
        "datetimeoffset" => (
            -155,
            Some(26 + fraction.map_or(8, |f| if f > 0 { i64::from(f) + 1 } else { 0 })),
            fraction,
        ),
        "binary" | "timestamp" | "rowversion" => (-2, d.char_len, None),
        "varbinary" => (-3, d.char_len, None),
        "image" => (-4, d.char_len, None),
        _ => (1111, d.char_len, None),
    };
    // `max` columns: mssql-jdbc reports their size as 2^31-1.
    let length = length.map(|l| if l < 0 { i64::from(i32::MAX) } else { l });
    sluice_kit::history::ColumnDef {
        name: name.to_owned(),
        jdbc_type: jdbc,
        native_type: None,
        type_name: ty.clone(),
        type_expression: Some(ty),
        charset_name: None,
        length: length.and_then(|l| i32::try_from(l).ok()),
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

fn is_null(d: &ColumnData<'_>) -> bool {
    match d {
        ColumnData::U8(v) => v.is_none(),
        ColumnData::I16(v) => v.is_none(),
        ColumnData::I32(v) => v.is_none(),
        ColumnData::I64(v) => v.is_none(),
        ColumnData::F32(v) => v.is_none(),
        ColumnData::F64(v) => v.is_none(),
        ColumnData::Bit(v) => v.is_none(),
        ColumnData::String(v) => v.is_none(),
        ColumnData::Guid(v) => v.is_none(),
        ColumnData::Binary(v) => v.is_none(),
        ColumnData::Numeric(v) => v.is_none(),
        ColumnData::Xml(v) => v.is_none(),
        ColumnData::DateTime(v) => v.is_none(),
        ColumnData::SmallDateTime(v) => v.is_none(),
        ColumnData::Time(v) => v.is_none(),
        ColumnData::Date(v) => v.is_none(),
        ColumnData::DateTime2(v) => v.is_none(),
        ColumnData::DateTimeOffset(v) => v.is_none(),
    }
}

/// Days from 0001-01-01 to 1970-01-01.
const EPOCH_DAYS: i64 = 719_162;
/// Days from 1970-01-01 to 1900-01-01.
const DAYS_1900: i64 = -25_567;

fn time_nanos(increments: u64, scale: u8) -> i64 {
    let unit = 10i64.pow(9u32.saturating_sub(u32::from(scale)));
    i64::try_from(increments)
        .unwrap_or(i64::MAX)
        .saturating_mul(unit)
}

const NANOS_PER_DAY: i64 = 86_400_000_000_000;

/// A `datetime2` (or a `datetimeoffset`'s UTC part): days since the epoch, nanoseconds into
/// the day.
fn datetime2_parts(dt: &tiberius::time::DateTime2) -> (i64, i64) {
    (
        i64::from(dt.date().days()) - EPOCH_DAYS,
        time_nanos(dt.time().increments(), dt.time().scale()),
    )
}

/// A `datetime` (days since 1900-01-01 and 1/300 s, read to the millisecond as the JDBC
/// driver rounds it): days since the epoch, nanoseconds into the day.
fn datetime_parts(dt: &tiberius::time::DateTime) -> (i64, i64) {
    let millis = (i64::from(dt.seconds_fragments()) * 10 + 1) / 3;
    (i64::from(dt.days()) + DAYS_1900, millis * 1_000_000)
}

/// Milliseconds since the epoch (UTC) of a date and time cell (a change's commit time);
/// `None` for any other cell.
pub(crate) fn epoch_millis(data: &ColumnData<'_>) -> Option<i64> {
    let (days, nanos) = match data {
        ColumnData::DateTime(Some(dt)) => datetime_parts(dt),
        ColumnData::DateTime2(Some(dt)) => datetime2_parts(dt),
        ColumnData::DateTimeOffset(Some(dto)) => datetime2_parts(&dto.datetime2()),
        _ => return None,
    };
    Some(days * 86_400_000 + nanos / 1_000_000)
}

/// A timestamp (days since the epoch and nanoseconds into the day) as `p` and the time
/// mode say: in microseconds or milliseconds for precisions up to 6 (any year of SQL Server's
/// range fits), in nanoseconds for 7 (1677–2262 only: int64 nanoseconds hold no more; a value
/// outside is an error, not a wrapped number).
fn timestamp(days: i64, nanos: i64, p: u32, modes: Modes) -> Result<Value, String> {
    sluice_kit::values::temporal::timestamp_value_day_nanos(days, nanos, p, modes.time)
        .ok_or_else(|| {
            "a datetime2(7) outside 1677–2262, which Debezium's NanoTimestamp (int64 nanoseconds) cannot hold".to_string()
        })
}

/// A key column's value as the text an incremental snapshot keeps of it and writes back into
/// its chunk queries: numbers as SQL Server prints them, `uniqueidentifier`s in upper case,
/// bytes in hexadecimal, dates and times in forms SQL Server reads whatever the session's
/// language and `DATEFORMAT` (`datetime` and `smalldatetime` with a `T`); `None` for NULL and
/// for cells no chunk is read by (floats).
pub(crate) fn key_text(data: &ColumnData<'_>) -> Option<String> {
    Some(match data {
        ColumnData::Bit(Some(b)) => u8::from(*b).to_string(),
        ColumnData::U8(Some(v)) => v.to_string(),
        ColumnData::I16(Some(v)) => v.to_string(),
        ColumnData::I32(Some(v)) => v.to_string(),
        ColumnData::I64(Some(v)) => v.to_string(),
        ColumnData::Numeric(Some(n)) => numeric_text(n.value(), n.scale()),
        ColumnData::F64(Some(v)) => money_text(*v).ok()?,
        ColumnData::String(Some(v)) => v.to_string(),
        ColumnData::Guid(Some(v)) => v.to_string().to_uppercase(),
        ColumnData::Binary(Some(b)) => b.iter().map(|x| format!("{x:02x}")).collect(),
        ColumnData::Date(Some(d)) => day_text(i64::from(d.days()) - EPOCH_DAYS),
        ColumnData::Time(Some(t)) => clock_text(time_nanos(t.increments(), t.scale()), t.scale()),
        ColumnData::DateTime2(Some(dt)) => {
            let (days, nanos) = datetime2_parts(dt);
            let scale = dt.time().scale();
            format!("{} {}", day_text(days), clock_text(nanos, scale))
        }
        ColumnData::DateTime(Some(dt)) => {
            let (days, nanos) = datetime_parts(dt);
            format!("{}T{}", day_text(days), clock_text(nanos, 3))
        }
        ColumnData::SmallDateTime(Some(dt)) => {
            let days = i64::from(dt.days()) + DAYS_1900;
            let nanos = i64::from(dt.seconds_fragments()) * 60_000_000_000;
            format!("{}T{}", day_text(days), clock_text(nanos, 0))
        }
        ColumnData::DateTimeOffset(Some(dto)) => {
            let (days, nanos, offset) = local_parts(dto)?;
            let scale = dto.datetime2().time().scale();
            let sign = if offset < 0 { '-' } else { '+' };
            let o = offset.abs();
            format!(
                "{} {} {sign}{:02}:{:02}",
                day_text(days),
                clock_text(nanos, scale),
                o / 60,
                o % 60
            )
        }
        _ => return None,
    })
}

/// A `datetimeoffset` as its local time (sent in UTC with the offset beside it: UTC + offset):
/// days since the epoch, nanoseconds into the day, the offset in minutes.
fn local_parts(dto: &tiberius::time::DateTimeOffset) -> Option<(i64, i64, i64)> {
    let (days, nanos) = datetime2_parts(&dto.datetime2());
    let offset = i64::from(dto.offset());
    let utc = i128::from(days) * i128::from(NANOS_PER_DAY) + i128::from(nanos);
    let local = utc + i128::from(offset) * 60_000_000_000;
    let days = i64::try_from(local.div_euclid(i128::from(NANOS_PER_DAY))).ok()?;
    let nanos = i64::try_from(local.rem_euclid(i128::from(NANOS_PER_DAY))).ok()?;
    Some((days, nanos, offset))
}

fn day_text(days: i64) -> String {
    sluice_engine::event::calendar::date_text(days)
}

fn clock_text(nanos: i64, scale: u8) -> String {
    sluice_engine::event::calendar::clock_text(nanos, u32::from(scale))
}

/// `value` scaled down by `scale` decimal places, as text.
fn numeric_text(value: i128, scale: u8) -> String {
    let digits = value.unsigned_abs().to_string();
    let scale = usize::from(scale);
    let sign = if value < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

/// A money value decoded as a double, as the exact four-decimal text it came from. Doubles
/// hold every money value exactly up to 2^52 ten-thousandths (about 450 billion); a larger one
/// is refused rather than rounded.
fn money_text(v: f64) -> Result<String, String> {
    const EXACT: f64 = 450_359_962_737.0;
    if !v.is_finite() || v.abs() >= EXACT {
        return Err(format!(
            "the money value {v} is beyond what the TDS client decodes exactly (±450 billion)"
        ));
    }
    Ok(format!("{v:.4}"))
}

/// Debezium's `ZonedTimestamp` text of a local time (days since the epoch and nanoseconds
/// into the day, in the value's own offset) and its offset in minutes:
/// `2018-07-13T12:23:45.456+11:00`, the fraction without trailing zeros, `Z` for a zero offset
/// (Java's ISO_OFFSET_DATE_TIME).
fn zoned_text(days: i64, nanos: i64, offset_minutes: i64) -> String {
    let (y, m, d) = sluice_kit::values::temporal::civil_from_days(days);
    let secs = nanos / 1_000_000_000;
    let frac = nanos % 1_000_000_000;
    let mut out = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    if frac != 0 {
        let digits = format!("{frac:09}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    if offset_minutes == 0 {
        out.push('Z');
    } else {
        let sign = if offset_minutes < 0 { '-' } else { '+' };
        let o = offset_minutes.abs();
        out.push_str(&format!("{sign}{:02}:{:02}", o / 60, o % 60));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_kit::values::{BinaryMode, DecimalMode, TimePrecisionMode};

    #[test]
    fn key_values_as_text_sql_server_reads_back() {
        use tiberius::time::{Date, DateTime, DateTime2, DateTimeOffset, SmallDateTime, Time};
        // 2024-01-02 is day 738_886 since 0001-01-01, 45_291 since 1900-01-01.
        let date = Date::new(738_886);
        let time = Time::new(110_451_234_567, 7);
        let cases: Vec<(ColumnData<'_>, &str)> = vec![
            (ColumnData::Bit(Some(true)), "1"),
            (ColumnData::I64(Some(-7)), "-7"),
            (
                ColumnData::Numeric(Some(tiberius::numeric::Numeric::new_with_scale(-1250, 2))),
                "-12.50",
            ),
            (ColumnData::Binary(Some(vec![0, 0xAB].into())), "00ab"),
            (ColumnData::Date(Some(date)), "2024-01-02"),
            (ColumnData::Time(Some(time)), "03:04:05.1234567"),
            (ColumnData::Time(Some(Time::new(11_045, 0))), "03:04:05"),
            (
                ColumnData::DateTime2(Some(DateTime2::new(date, Time::new(11_045_123, 3)))),
                "2024-01-02 03:04:05.123",
            ),
            // 3:04:05 and 1/300 s: the JDBC driver's .003.
            (
                ColumnData::DateTime(Some(DateTime::new(45_291, 11_045 * 300 + 1))),
                "2024-01-02T03:04:05.003",
            ),
            (
                ColumnData::SmallDateTime(Some(SmallDateTime::new(45_291, 184))),
                "2024-01-02T03:04:00",
            ),
            // Sent in UTC (02:04:05) with its offset (+01:00): the local time.
            (
                ColumnData::DateTimeOffset(Some(DateTimeOffset::new(
                    DateTime2::new(date, Time::new(7_445, 0)),
                    60,
                ))),
                "2024-01-02 03:04:05 +01:00",
            ),
            (ColumnData::F32(Some(1.5)), ""),
            (ColumnData::I32(None), ""),
        ];
        for (cell, want) in cases {
            let got = key_text(&cell).unwrap_or_default();
            assert_eq!(got, want, "{cell:?}");
        }
    }

    #[test]
    fn numerics_money_and_zoned_text() {
        assert_eq!(numeric_text(-123_456_789_125, 3), "-123456789.125");
        assert_eq!(numeric_text(5, 2), "0.05");
        assert_eq!(money_text(12.3456).unwrap(), "12.3456");
        assert_eq!(money_text(-922_337_203.580_7).unwrap(), "-922337203.5807");
        assert!(money_text(922_337_203_685_477.0).is_err());
        assert_eq!(zoned_text(0, 0, 0), "1970-01-01T00:00:00Z");
        let nanos = 44_625_i64 * 1_000_000_000 + 456_000_000;
        assert_eq!(
            zoned_text(17_725, nanos, 660),
            "2018-07-13T12:23:45.456+11:00"
        );
        assert_eq!(zoned_text(2_932_896, 0, -300), "9999-12-31T00:00:00-05:00");
        let modes = Modes {
            time: TimePrecisionMode::Adaptive,
            decimal: DecimalMode::Precise,
            binary: BinaryMode::Bytes,
        };
        // 9999-12-31 23:59:59.997, a common end of time: milliseconds, no overflow.
        let end = timestamp(2_932_896, 86_399_997_000_000, 3, modes).unwrap();
        assert_eq!(end, Value::Int64(253_402_300_799_997));
        assert!(timestamp(2_932_896, 0, 7, modes).is_err());
    }
}
