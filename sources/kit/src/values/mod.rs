//! Value conversions every SQL database source shares: the mapping modes Debezium offers
//! (`time.precision.mode`, `decimal.handling.mode`, `binary.handling.mode`,
//! `interval.handling.mode`) and the Connect schemas and values they give.

pub mod decimal;
pub mod geometry;
pub mod integer;
pub mod temporal;

use std::sync::Arc;

use base64::Engine as _;
use serde::Deserialize;
use sluice_engine::event::{decimal_schema, SchemaBuilder};
use sluice_engine::{Schema, SchemaType, Struct, Value};

use decimal::{plain_text, unscaled_bytes, Special};

/// `time.precision.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TimePrecisionMode {
    /// Debezium time types whose precision follows the column (default).
    #[default]
    Adaptive,
    /// Like adaptive, but `time` is always microseconds.
    AdaptiveTimeMicroseconds,
    /// Kafka Connect's logical types (milliseconds).
    Connect,
}

/// `decimal.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DecimalMode {
    /// `org.apache.kafka.connect.data.Decimal` bytes (default).
    #[default]
    Precise,
    /// float64.
    Double,
    /// The decimal as a string.
    String,
}

/// `binary.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum BinaryMode {
    /// bytes (default).
    #[default]
    Bytes,
    /// Base64 string.
    Base64,
    /// URL-safe base64 string.
    Base64UrlSafe,
    /// Hex string.
    Hex,
}

/// `interval.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum IntervalMode {
    /// `io.debezium.time.MicroDuration` int64 (default).
    #[default]
    Numeric,
    /// `io.debezium.time.Interval` ISO-8601 string.
    String,
}

/// The modes most sources' values follow (`time.precision.mode`, `decimal.handling.mode`,
/// `binary.handling.mode`); a source with more keeps them beside these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueModes {
    pub time: TimePrecisionMode,
    pub decimal: DecimalMode,
    pub binary: BinaryMode,
}

/// A named, versioned schema (Debezium's logical types are version 1).
pub fn named(kind: SchemaType, name: &str, optional: bool) -> SchemaBuilder {
    Schema::builder(kind)
        .optional_if(optional)
        .name(name)
        .version(1)
}

/// Debezium's `VariableScaleDecimal` struct schema (a decimal column without a fixed scale).
pub fn variable_scale_decimal(optional: bool) -> Arc<Schema> {
    Schema::struct_builder()
        .optional_if(optional)
        .name("io.debezium.data.VariableScaleDecimal")
        .version(1)
        .doc("Variable scaled decimal")
        .field("scale", Schema::primitive(SchemaType::Int32, false))
        .field("value", Schema::primitive(SchemaType::Bytes, false))
        .build()
}

/// The schema of a decimal column: `(precision, scale)` when the column fixes them.
pub fn decimal_column_schema(
    mode: DecimalMode,
    precision_scale: Option<(u32, u32)>,
    optional: bool,
) -> SchemaBuilder {
    match mode {
        DecimalMode::Double => Schema::builder(SchemaType::Float64).optional_if(optional),
        DecimalMode::String => Schema::builder(SchemaType::String).optional_if(optional),
        DecimalMode::Precise => match precision_scale {
            Some((p, s)) => decimal_schema(s, Some(p), optional).to_builder(),
            None => variable_scale_decimal(optional).to_builder(),
        },
    }
}

/// A float's text, `NaN` and the infinities included.
pub fn parse_float(text: &str) -> Option<f64> {
    match Special::of(text) {
        Some(s) => Some(s.as_f64()),
        None => text.parse().ok(),
    }
}

/// A decimal text (or `NaN`, `Infinity`, `-Infinity`) as `mode` and the column's `schema` say;
/// `scale` is the column's (`None`: variable). `None` when the text is not a decimal, or it is
/// a special value a NOT NULL precise column cannot hold.
pub fn decimal_value(
    text: &str,
    scale: Option<u32>,
    mode: DecimalMode,
    schema: &Arc<Schema>,
) -> Option<Value> {
    if let Some(special) = Special::of(text) {
        return Some(match mode {
            DecimalMode::Double => Value::Float64(special.as_f64()),
            DecimalMode::String => Value::from(special.debezium_name()),
            // A Connect `Decimal` holds no NaN or infinity: Debezium emits null.
            DecimalMode::Precise if schema.is_optional() => Value::Null,
            DecimalMode::Precise => return None,
        });
    }
    match mode {
        DecimalMode::Double => parse_float(text).map(Value::Float64),
        DecimalMode::String => Some(Value::from(plain_text(text, scale))),
        DecimalMode::Precise => match scale {
            Some(s) => unscaled_bytes(text, s).map(Value::Bytes),
            None => {
                let s = text.split_once('.').map_or(0, |(_, f)| f.len() as u32);
                let bytes = unscaled_bytes(text, s)?;
                let st = Struct::from_values(
                    schema.clone(),
                    vec![Value::Int32(i32::try_from(s).ok()?), Value::Bytes(bytes)],
                )?;
                Some(Value::Struct(st))
            }
        },
    }
}

/// The schema of a binary column.
pub fn binary_schema(mode: BinaryMode, optional: bool) -> SchemaBuilder {
    match mode {
        BinaryMode::Bytes => Schema::builder(SchemaType::Bytes).optional_if(optional),
        _ => Schema::builder(SchemaType::String).optional_if(optional),
    }
}

/// Bytes as [`binary_schema`] says.
pub fn binary_value(bytes: Vec<u8>, mode: BinaryMode) -> Value {
    match mode {
        BinaryMode::Bytes => Value::Bytes(bytes),
        BinaryMode::Base64 => Value::from(base64::engine::general_purpose::STANDARD.encode(bytes)),
        BinaryMode::Base64UrlSafe => {
            Value::from(base64::engine::general_purpose::URL_SAFE.encode(bytes))
        }
        BinaryMode::Hex => {
            Value::from(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
        }
    }
}
