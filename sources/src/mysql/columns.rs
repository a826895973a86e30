//! Columns as Debezium's MySQL connector maps them: the schema of each column type and its
//! value from the text the server sends. A type not mapped yet, or a value that does not fit
//! the column's schema, is an error naming the column: never a guessed value.

use std::sync::Arc;

use sluice_engine::{Schema, SchemaType, Value};
use sluice_kit::values::temporal::{
    date_schema, format_zoned_timestamp, parse_date, parse_timestamp, timestamp_schema,
    timestamp_value,
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
    Text,
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
                (Kind::Text, primitive(SchemaType::String))
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
                Value::Int64(i64::try_from(v).map_err(|_| {
                    format!(
                        "column `{}`: BIGINT UNSIGNED value {v} does not fit a signed 64-bit integer (`bigint.unsigned.handling.mode: long`; Debezium would wrap it to a negative number)",
                        self.name
                    )
                })?)
            }
            Kind::Float64 => Value::Float64(text.parse().map_err(|_| bad())?),
            Kind::Decimal(scale) => {
                decimal_value(text, scale, modes.decimal, &self.schema).ok_or_else(bad)?
            }
            Kind::Text => Value::from(text),
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
        };
        assert!(Column::new(&d, false, MODES)
            .unwrap_err()
            .contains("does not map yet"));
    }
}
