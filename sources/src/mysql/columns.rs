//! Columns as Debezium's MySQL connector maps them: the schema of each column type and its
//! value from the text the server sends. A type not mapped yet, or a value that does not fit
//! the column's schema, is an error naming the column: never a guessed value.

use std::sync::Arc;

use mysql_async::binlog::value::BinlogValue;
use sluice_engine::{Schema, SchemaType, Value};
use sluice_kit::values::temporal::{
    date_schema, days_from_civil, format_zoned_timestamp, parse_date, parse_timestamp,
    timestamp_schema, timestamp_value,
};
use sluice_kit::values::{
    decimal_column_schema, decimal_value, named, DecimalMode, TimePrecisionMode,
};

/// What `information_schema.COLUMNS` says of a column.
#[derive(Debug, Clone)]
pub(super) struct Described {
    pub name: String,
    /// `DATA_TYPE` (`int`, `varchar`, ...).
    pub data_type: String,
    /// `COLUMN_TYPE` (`int(10) unsigned`, ...).
    pub column_type: String,
    pub nullable: bool,
    pub precision: Option<u32>,
    pub scale: Option<u32>,
    /// `DATETIME_PRECISION`.
    pub fsp: Option<u32>,
    /// `CHARACTER_SET_NAME` (text columns).
    pub charset: Option<String>,
}

/// How a column's text becomes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int16,
    Int32,
    Int64,
    /// `BIGINT UNSIGNED` as int64 (`bigint.unsigned.handling.mode: long`): a value above
    /// 2^63-1 is an error (Debezium wraps it to a negative number).
    UInt64,
    Float64,
    Decimal(Option<u32>),
    /// Text; `true`: stored in latin1 (the binlog carries the column's own bytes).
    Text(bool),
    Date,
    DateTime(u32),
    Timestamp(u32),
}

/// A captured column.
#[derive(Debug, Clone)]
pub(super) struct Column {
    pub name: String,
    kind: Kind,
    pub schema: Arc<Schema>,
}

/// Options the mapping follows.
#[derive(Debug, Clone, Copy)]
pub(super) struct Modes {
    pub decimal: DecimalMode,
    pub time: TimePrecisionMode,
}

impl Column {
    /// The column `d`; `key`: part of the primary key (never optional). `Err` names a type the
    /// source does not map yet.
    pub(super) fn new(d: &Described, key: bool, modes: Modes) -> Result<Column, String> {
        let optional = d.nullable && !key;
        let unsigned = d.column_type.contains("unsigned");
        let primitive = |t| Schema::builder(t).optional_if(optional);
        let (kind, builder) = match (d.data_type.as_str(), unsigned) {
            ("tinyint", _) | ("smallint", false) => (Kind::Int16, primitive(SchemaType::Int16)),
            ("smallint", true) | ("mediumint", _) | ("int" | "integer", false) => {
                (Kind::Int32, primitive(SchemaType::Int32))
            }
            ("int" | "integer", true) | ("bigint", false) => {
                (Kind::Int64, primitive(SchemaType::Int64))
            }
            ("bigint", true) => (Kind::UInt64, primitive(SchemaType::Int64)),
            ("double" | "real", _) => (Kind::Float64, primitive(SchemaType::Float64)),
            ("decimal" | "numeric", _) => {
                let ps = d.precision.zip(d.scale);
                (
                    Kind::Decimal(d.scale),
                    decimal_column_schema(modes.decimal, ps, optional),
                )
            }
            ("char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext", _) => {
                let latin1 = match d.charset.as_deref() {
                    None | Some("utf8" | "utf8mb3" | "utf8mb4" | "ascii") => false,
                    Some("latin1") => true,
                    Some(other) => {
                        return Err(format!(
                            "column `{}` is in character set `{other}`, which the mysql source does not decode yet (utf8mb4, utf8, ascii and latin1 it does)",
                            d.name
                        ))
                    }
                };
                (Kind::Text(latin1), primitive(SchemaType::String))
            }
            ("date", _) => (Kind::Date, date_schema(modes.time, optional)),
            ("datetime", _) => {
                let fsp = d.fsp.unwrap_or(0);
                (
                    Kind::DateTime(fsp),
                    timestamp_schema(fsp, modes.time, optional),
                )
            }
            ("timestamp", _) => (
                Kind::Timestamp(d.fsp.unwrap_or(0)),
                named(
                    SchemaType::String,
                    "io.debezium.time.ZonedTimestamp",
                    optional,
                ),
            ),
            (other, _) => {
                return Err(format!(
                "column `{}` is of type `{}`, which the mysql source does not map yet ({other})",
                d.name, d.column_type
            ))
            }
        };
        Ok(Column {
            name: d.name.clone(),
            kind,
            schema: builder.build(),
        })
    }

    /// The value of the column's `text` (`None`: SQL NULL); `Err` says why it does not fit.
    pub(super) fn value(&self, text: Option<&[u8]>, modes: Modes) -> Result<Value, String> {
        let Some(bytes) = text else {
            return Ok(Value::Null);
        };
        let text = std::str::from_utf8(bytes).map_err(|_| {
            format!(
                "column `{}`: the server sent text that is not UTF-8",
                self.name
            )
        })?;
        let bad = || {
            format!(
                "column `{}`: `{text}` is not a valid value of its type",
                self.name
            )
        };
        Ok(match self.kind {
            Kind::Int16 => Value::Int16(text.parse().map_err(|_| bad())?),
            Kind::Int32 => Value::Int32(text.parse().map_err(|_| bad())?),
            Kind::Int64 => Value::Int64(text.parse().map_err(|_| bad())?),
            Kind::UInt64 => {
                let v: u64 = text.parse().map_err(|_| bad())?;
                Value::Int64(i64::try_from(v).map_err(|_| self.unsigned_overflow(v))?)
            }
            Kind::Float64 => Value::Float64(text.parse().map_err(|_| bad())?),
            Kind::Decimal(scale) => {
                decimal_value(text, scale, modes.decimal, &self.schema).ok_or_else(bad)?
            }
            Kind::Text(_) => Value::from(text),
            Kind::Date => Value::Int32(
                parse_date(text)
                    .and_then(|d| i32::try_from(d).ok())
                    .ok_or_else(bad)?,
            ),
            Kind::DateTime(fsp) => {
                timestamp_value(parse_timestamp(text).ok_or_else(bad)?, fsp, modes.time)
            }
            // The session's time zone is UTC.
            Kind::Timestamp(fsp) => Value::String(format_zoned_timestamp(
                parse_timestamp(text).ok_or_else(bad)?,
                fsp,
            )),
        })
    }

    /// The value of the column in a binlog row image (`None`: SQL NULL); `Err` says why it
    /// does not fit. Text comes in the column's character set: UTF-8 is decoded, another one
    /// is an error for now (the TABLE_MAP charsets are not read yet).
    pub(super) fn binlog_value(
        &self,
        v: Option<&BinlogValue<'_>>,
        modes: Modes,
    ) -> Result<Value, String> {
        use mysql_async::Value as V;
        let Some(v) = v else {
            return Ok(Value::Null);
        };
        let BinlogValue::Value(v) = v else {
            return Err(format!(
                "column `{}`: a JSON value where {:?} was expected",
                self.name, self.kind
            ));
        };
        if *v == V::NULL {
            return Ok(Value::Null);
        }
        let bad = || {
            format!(
                "column `{}`: the binlog value {v:?} does not fit its type",
                self.name
            )
        };
        let int = || match v {
            V::Int(i) => Some(i128::from(*i)),
            V::UInt(u) => Some(i128::from(*u)),
            _ => None,
        };
        Ok(match self.kind {
            Kind::Int16 => Value::Int16(int().and_then(|i| i16::try_from(i).ok()).ok_or_else(bad)?),
            Kind::Int32 => Value::Int32(int().and_then(|i| i32::try_from(i).ok()).ok_or_else(bad)?),
            Kind::Int64 => Value::Int64(int().and_then(|i| i64::try_from(i).ok()).ok_or_else(bad)?),
            Kind::UInt64 => {
                let i = int().ok_or_else(bad)?;
                Value::Int64(i64::try_from(i).map_err(|_| self.unsigned_overflow(i))?)
            }
            Kind::Float64 => match v {
                V::Double(f) => Value::Float64(*f),
                V::Float(f) => Value::Float64(f64::from(*f)),
                _ => return Err(bad()),
            },
            Kind::Text(true) => match v {
                V::Bytes(b) => Value::from(latin1(b)),
                _ => return Err(bad()),
            },
            Kind::Decimal(_) | Kind::Text(false) => match v {
                V::Bytes(b) => return self.value(Some(b), modes),
                _ => return Err(bad()),
            },
            Kind::Date => match v {
                V::Date(y, m, d, ..) => Value::Int32(
                    i32::try_from(days_from_civil(i64::from(*y), u32::from(*m), u32::from(*d)))
                        .map_err(|_| bad())?,
                ),
                _ => return Err(bad()),
            },
            Kind::DateTime(fsp) => match v {
                V::Date(y, mo, d, h, mi, s, us) => {
                    let days = days_from_civil(i64::from(*y), u32::from(*mo), u32::from(*d));
                    let micros = days * 86_400_000_000
                        + (i64::from(*h) * 3600 + i64::from(*mi) * 60 + i64::from(*s)) * 1_000_000
                        + i64::from(*us);
                    timestamp_value(micros, fsp, modes.time)
                }
                _ => return Err(bad()),
            },
            // `seconds[.micros]` since the epoch.
            Kind::Timestamp(fsp) => match v {
                V::Bytes(b) => {
                    let text = std::str::from_utf8(b).map_err(|_| bad())?;
                    let (s, us) = text.split_once('.').unwrap_or((text, "0"));
                    let s: i64 = s.parse().map_err(|_| bad())?;
                    let us: i64 = format!("{us:0<6}").parse().map_err(|_| bad())?;
                    Value::String(format_zoned_timestamp(s * 1_000_000 + us, fsp))
                }
                _ => return Err(bad()),
            },
        })
    }

    fn unsigned_overflow(&self, v: impl std::fmt::Display) -> String {
        format!(
            "column `{}`: BIGINT UNSIGNED value {v} does not fit a signed 64-bit integer (`bigint.unsigned.handling.mode: long`; Debezium would wrap it to a negative number)",
            self.name
        )
    }
}

/// MySQL's `latin1` (Windows-1252; its five unassigned bytes keep their code points, as
/// MySQL converts them) as UTF-8.
fn latin1(bytes: &[u8]) -> String {
    const HIGH: [char; 32] = [
        '\u{20ac}', '\u{81}', '\u{201a}', '\u{192}', '\u{201e}', '\u{2026}', '\u{2020}',
        '\u{2021}', '\u{2c6}', '\u{2030}', '\u{160}', '\u{2039}', '\u{152}', '\u{8d}', '\u{17d}',
        '\u{8f}', '\u{90}', '\u{2018}', '\u{2019}', '\u{201c}', '\u{201d}', '\u{2022}', '\u{2013}',
        '\u{2014}', '\u{2dc}', '\u{2122}', '\u{161}', '\u{203a}', '\u{153}', '\u{9d}', '\u{17e}',
        '\u{178}',
    ];
    bytes
        .iter()
        .map(|&b| match b {
            0x80..=0x9f => HIGH[usize::from(b - 0x80)],
            _ => char::from(b),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(data_type: &str, column_type: &str, fsp: Option<u32>) -> Column {
        let d = Described {
            name: "c".into(),
            data_type: data_type.into(),
            column_type: column_type.into(),
            nullable: true,
            precision: Some(10),
            scale: Some(2),
            fsp,
            charset: None,
        };
        Column::new(&d, false, MODES).unwrap_or_else(|e| panic!("{e}"))
    }

    const MODES: Modes = Modes {
        decimal: DecimalMode::Precise,
        time: TimePrecisionMode::AdaptiveTimeMicroseconds,
    };

    #[test]
    fn values_follow_the_column_type() {
        let v = |c: &Column, t: &str| c.value(Some(t.as_bytes()), MODES);
        assert_eq!(
            v(&col("int", "int(10) unsigned", None), "4294967295"),
            Ok(Value::Int64(4294967295))
        );
        assert_eq!(
            v(
                &col("datetime", "datetime(3)", Some(3)),
                "1970-01-01 00:00:01.500"
            ),
            Ok(Value::Int64(1500))
        );
        assert_eq!(
            v(
                &col("datetime", "datetime(6)", Some(6)),
                "1970-01-01 00:00:01.5"
            ),
            Ok(Value::Int64(1_500_000))
        );
        assert_eq!(
            v(&col("date", "date", None), "1970-01-02"),
            Ok(Value::Int32(1))
        );
        assert_eq!(
            v(&col("decimal", "decimal(10,2)", None), "12.50"),
            Ok(Value::Bytes(vec![0x04, 0xe2]))
        );
        let big = col("bigint", "bigint(20) unsigned", None);
        assert!(v(&big, "18446744073709551615")
            .unwrap_err()
            .contains("does not fit"));
        assert!(v(&col("int", "int(11)", None), "x").is_err());
        assert_eq!(big.value(None, MODES), Ok(Value::Null));
        let d = Described {
            name: "g".into(),
            data_type: "geometry".into(),
            column_type: "geometry".into(),
            nullable: true,
            precision: None,
            scale: None,
            fsp: None,
            charset: None,
        };
        assert_eq!(latin1(b"caf\xe9 \x80"), "café €");
        assert!(Column::new(&d, false, MODES)
            .unwrap_err()
            .contains("does not map yet"));
    }
}
