//! Columns as Debezium's MySQL connector maps them: the schema of each column type and its
//! value from the text the server sends (the snapshot) or from a binlog row image (`binlog`).
//! A type not mapped yet, or a value that does not fit the column's schema, is an error
//! naming the column: never a guessed value.

mod binlog;
mod mariadb;

pub(super) use mariadb::Special;

use std::sync::Arc;

use serde::Deserialize;
use sluice_engine::{Schema, SchemaType, Value};
use sluice_kit::values::decimal::unscaled_bytes;
use sluice_kit::values::geometry;
use sluice_kit::values::temporal::{
    date_schema, format_zoned_timestamp_trimmed, parse_date, parse_timestamp, time_schema,
    timestamp_schema, timestamp_value,
};
use sluice_kit::values::{
    binary_schema, binary_value, decimal_column_schema, decimal_value, named, BinaryMode,
    DecimalMode, TimePrecisionMode,
};

/// `bigint.unsigned.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum BigintUnsignedMode {
    /// int64 (default); a value above 2^63-1 is an error (Debezium wraps it to a negative
    /// number).
    #[default]
    Long,
    /// `org.apache.kafka.connect.data.Decimal` with scale 0.
    Precise,
}

/// What `information_schema.COLUMNS` says of a column.
#[derive(Debug, Clone, Default)]
pub(super) struct Described {
    pub name: String,
    /// `DATA_TYPE` (`int`, `varchar`, ...).
    pub data_type: String,
    /// `COLUMN_TYPE` (`int(10) unsigned`, `enum('a','b')`, ...).
    pub column_type: String,
    pub nullable: bool,
    /// `NUMERIC_PRECISION` (the bit count of a `BIT(n)`).
    pub precision: Option<u32>,
    pub scale: Option<u32>,
    /// `DATETIME_PRECISION`.
    pub fsp: Option<u32>,
    /// `CHARACTER_SET_NAME` (text columns).
    pub charset: Option<String>,
    /// `CHARACTER_MAXIMUM_LENGTH` (the width of a `BINARY(n)`).
    pub length: Option<u64>,
}

/// How a column's value becomes an event value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// An integer of `bits` bits (8, 16, 24, 32, 64), unsigned or not, as int16/32/64.
    Int {
        bits: u32,
        unsigned: bool,
        schema: SchemaType,
    },
    /// `BIGINT UNSIGNED` as a Decimal of scale 0 (`bigint.unsigned.handling.mode: precise`).
    UnsignedDecimal,
    Float32,
    Float64,
    Decimal(Option<u32>),
    /// Text, in its character set (the binlog carries the column's own bytes; result sets
    /// come in UTF-8, the connection's character set).
    Text(Charset),
    /// `BIT(1)`.
    Bool,
    /// `BIT(n)`, n > 1: `io.debezium.data.Bits`, little-endian bytes.
    Bits(usize),
    /// Bytes; `Some(n)`: `BINARY(n)`, whose trailing zero bytes the binlog leaves out.
    Binary(Option<usize>),
    Date,
    /// `TIME(fsp)`: a signed duration (-838:59:59 to 838:59:59).
    Time(u32),
    DateTime(u32),
    Timestamp(u32),
    Year,
    /// `ENUM`: its values in definition order.
    Enum(Vec<String>),
    /// `SET`: its values in definition order.
    Set(Vec<String>),
    /// A spatial column other than `POINT`: `io.debezium.data.geometry.Geometry`.
    Geometry,
    /// `POINT`: `io.debezium.data.geometry.Point`.
    Point,
    /// MariaDB's `UUID`, `INET4`, `INET6`: the server's text.
    Special(Special),
    /// Left out by `column.include.list` / `column.exclude.list`: never read.
    Excluded,
}

/// A text column's character set, as its binlog bytes are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Charset {
    /// utf8mb4, utf8 (utf8mb3), ascii: the bytes are UTF-8.
    Utf8,
    /// MySQL's latin1 (Windows-1252 with its five unassigned bytes kept).
    Latin1,
    /// Another character set, decoded by its WHATWG encoding (strictly: bytes that are not
    /// text of it are an error, never a replacement character).
    Other(&'static encoding_rs::Encoding),
}

impl Charset {
    /// The character set of MySQL's name `name`; `None`: not decoded.
    fn of(name: Option<&str>) -> Option<Charset> {
        use encoding_rs as e;
        Some(match name {
            None | Some("utf8" | "utf8mb3" | "utf8mb4" | "ascii") => Charset::Utf8,
            Some("latin1") => Charset::Latin1,
            Some(other) => Charset::Other(match other {
                "latin2" => e::ISO_8859_2,
                "latin7" => e::ISO_8859_13,
                "greek" => e::ISO_8859_7,
                "hebrew" => e::ISO_8859_8,
                "cp1250" => e::WINDOWS_1250,
                "cp1251" => e::WINDOWS_1251,
                "cp1256" => e::WINDOWS_1256,
                "cp1257" => e::WINDOWS_1257,
                "cp866" => e::IBM866,
                "koi8r" => e::KOI8_R,
                "koi8u" => e::KOI8_U,
                "macroman" => e::MACINTOSH,
                "cp932" => e::SHIFT_JIS,
                "eucjpms" => e::EUC_JP,
                "gbk" => e::GBK,
                "gb18030" => e::GB18030,
                "big5" => e::BIG5,
                "euckr" => e::EUC_KR,
                "utf16" | "ucs2" => e::UTF_16BE,
                "utf16le" => e::UTF_16LE,
                _ => return None,
            }),
        })
    }

    /// Text of `bytes`; `None` when they are not text of this character set.
    pub(super) fn decode(self, bytes: &[u8]) -> Option<String> {
        match self {
            Charset::Utf8 => std::str::from_utf8(bytes).ok().map(str::to_owned),
            Charset::Latin1 => Some(latin1(bytes)),
            Charset::Other(e) => e
                .decode_without_bom_handling_and_without_replacement(bytes)
                .map(|t| t.into_owned()),
        }
    }
}

/// The spatial types (`information_schema`'s `DATA_TYPE`, the DDL's type name in lower case).
pub(super) const SPATIAL: [&str; 9] = [
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
    "geomcollection",
];

/// A spatial value as the server stores it (the SRID, 4 bytes little-endian, then the
/// geometry as WKB) → Debezium's struct: the WKB and the SRID (none when 0).
fn spatial_value(kind: &Kind, schema: &Arc<Schema>, bytes: &[u8]) -> Option<Value> {
    let srid = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    let srid = (srid != 0).then(|| i32::try_from(srid).ok()).flatten();
    let wkb = bytes.get(4..)?.to_vec();
    match kind {
        Kind::Point => geometry::point_value(schema, wkb, srid),
        _ => geometry::geometry_value(schema, wkb, srid),
    }
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
    pub binary: BinaryMode,
    pub bigint: BigintUnsignedMode,
}

/// The quoted values of `enum('a','b')` / `set('a','b')` (a quote inside a value is doubled).
fn listed_values(column_type: &str) -> Option<Vec<String>> {
    let open = column_type.find('(')?;
    let close = column_type.rfind(')')?;
    let mut chars = column_type.get(open + 1..close)?.chars().peekable();
    let mut values = Vec::new();
    loop {
        if chars.next()? != '\'' {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '\'' if chars.peek() == Some(&'\'') => {
                    chars.next();
                    value.push('\'');
                }
                '\'' => break,
                c => value.push(c),
            }
        }
        values.push(value);
        match chars.next() {
            None => return Some(values),
            Some(',') => {}
            Some(_) => return None,
        }
    }
}

/// The kind and schema of an integer column.
fn integer(data_type: &str, unsigned: bool, modes: Modes, optional: bool) -> (Kind, Arc<Schema>) {
    let bits = match data_type {
        "tinyint" => 8,
        "smallint" => 16,
        "mediumint" => 24,
        "int" | "integer" => 32,
        _ => 64,
    };
    if bits == 64 && unsigned && modes.bigint == BigintUnsignedMode::Precise {
        let schema = sluice_engine::event::decimal_schema(0, Some(20), optional);
        return (Kind::UnsignedDecimal, schema);
    }
    let width = if unsigned { bits + 1 } else { bits };
    let schema = match width {
        0..=16 => SchemaType::Int16,
        17..=32 => SchemaType::Int32,
        _ => SchemaType::Int64,
    };
    let kind = Kind::Int {
        bits,
        unsigned,
        schema,
    };
    (kind, Schema::primitive(schema, optional))
}

impl Column {
    /// The column in a snapshot's select list: a `FLOAT` read as `DOUBLE`, since MariaDB's
    /// text protocol prints a float with 6 significant digits (`-1.08254e-10` for
    /// `-1.08253594e-10`), another value than the binlog's; as a double it is exact, and
    /// parsed as a float again it is the stored value.
    pub(super) fn select_expr(&self) -> String {
        let name = super::quote(&self.name);
        match self.kind {
            Kind::Float32 => format!("CAST({name} AS DOUBLE) AS {name}"),
            _ => name,
        }
    }

    /// Whether its values are bytes (not text in a character set): a key value of it is
    /// written back as a hex literal.
    pub(super) fn is_binary(&self) -> bool {
        matches!(self.kind, Kind::Binary(_) | Kind::Bits(_))
    }

    /// A column the events leave out (its type need not be mapped).
    pub(super) fn excluded(name: &str) -> Column {
        Column {
            name: name.to_owned(),
            kind: Kind::Excluded,
            schema: Schema::primitive(SchemaType::String, true),
        }
    }

    /// Whether it holds text (column masks apply to text columns).
    pub(super) fn is_text(&self) -> bool {
        matches!(self.kind, Kind::Text(_))
    }

    /// The column `d`; `key`: part of the primary key (never optional). `Err` names a type the
    /// source does not map yet.
    pub(super) fn new(d: &Described, key: bool, modes: Modes) -> Result<Column, String> {
        let optional = d.nullable && !key;
        let unsigned = d.column_type.contains("unsigned");
        let primitive = |t| Schema::builder(t).optional_if(optional).build();
        let unmapped = || {
            format!(
                "column `{}` is of type `{}`, which the mysql source does not map yet",
                d.name, d.column_type
            )
        };
        let (kind, schema) = match d.data_type.as_str() {
            t @ ("tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint") => {
                integer(t, unsigned, modes, optional)
            }
            "float" => (Kind::Float32, primitive(SchemaType::Float32)),
            "double" | "real" => (Kind::Float64, primitive(SchemaType::Float64)),
            "decimal" | "numeric" => {
                let ps = d.precision.zip(d.scale);
                let schema = decimal_column_schema(modes.decimal, ps, optional).build();
                (Kind::Decimal(d.scale), schema)
            }
            "char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext" => {
                let charset = Charset::of(d.charset.as_deref()).ok_or_else(|| {
                    format!(
                        "column `{}` is in character set `{}`, which the mysql source does not decode yet ({})",
                        d.name,
                        d.charset.as_deref().unwrap_or_default(),
                        CHARSETS
                    )
                })?;
                (Kind::Text(charset), primitive(SchemaType::String))
            }
            "bit" => match d.precision.unwrap_or(1) {
                1 => (Kind::Bool, primitive(SchemaType::Boolean)),
                n => {
                    let schema = named(SchemaType::Bytes, "io.debezium.data.Bits", optional)
                        .parameter("length", n.to_string())
                        .build();
                    (Kind::Bits(n.div_ceil(8) as usize), schema)
                }
            },
            "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => {
                let pad = (d.data_type == "binary")
                    .then(|| d.length.and_then(|n| usize::try_from(n).ok()))
                    .flatten();
                let schema = binary_schema(modes.binary, optional).build();
                (Kind::Binary(pad), schema)
            }
            "date" => (Kind::Date, date_schema(modes.time, optional).build()),
            "time" => {
                let fsp = d.fsp.unwrap_or(0);
                (
                    Kind::Time(fsp),
                    time_schema(fsp, modes.time, optional).build(),
                )
            }
            "datetime" => {
                let fsp = d.fsp.unwrap_or(0);
                let schema = timestamp_schema(fsp, modes.time, optional).build();
                (Kind::DateTime(fsp), schema)
            }
            "timestamp" => {
                let schema = named(
                    SchemaType::String,
                    "io.debezium.time.ZonedTimestamp",
                    optional,
                )
                .build();
                (Kind::Timestamp(d.fsp.unwrap_or(0)), schema)
            }
            "year" => {
                let schema = named(SchemaType::Int32, "io.debezium.time.Year", optional).build();
                (Kind::Year, schema)
            }
            t @ ("enum" | "set") => {
                let values = listed_values(&d.column_type).ok_or_else(unmapped)?;
                let (kind, name) = if t == "enum" {
                    (Kind::Enum(values.clone()), "io.debezium.data.Enum")
                } else {
                    (Kind::Set(values.clone()), "io.debezium.data.EnumSet")
                };
                let schema = named(SchemaType::String, name, optional)
                    .parameter("allowed", values.join(","))
                    .build();
                (kind, schema)
            }
            "point" => (Kind::Point, geometry::point_schema(optional)),
            t if Special::of(t).is_some() => {
                let special = Special::of(t).ok_or_else(unmapped)?;
                (Kind::Special(special), special.schema(optional))
            }
            t if SPATIAL.contains(&t) => (Kind::Geometry, geometry::geometry_schema(optional)),
            _ => return Err(unmapped()),
        };
        Ok(Column {
            name: d.name.clone(),
            kind,
            schema,
        })
    }

    /// The column with Debezium's `default` in its schema: the DDL's default text (as the
    /// schema model keeps it) converted as a value of the column; none for `NULL`, an
    /// expression, or text that is not a value of the column (logged).
    pub(super) fn with_default(mut self, text: Option<&str>, modes: Modes) -> Column {
        let Some(text) = text else {
            return self;
        };
        let value = match self.kind {
            Kind::Excluded => return self,
            // A bit default is its binary digits (`b'1010'`).
            Kind::Bool | Kind::Bits(_) => match u64::from_str_radix(text, 2) {
                Ok(n) => {
                    let bytes = n.to_be_bytes();
                    let start = bytes
                        .iter()
                        .position(|&b| b != 0)
                        .unwrap_or(bytes.len() - 1);
                    self.value(Some(&bytes[start..]), modes)
                }
                Err(_) => Err(format!("`{text}` is not a bit value")),
            },
            _ => self.value(Some(text.as_bytes()), modes),
        };
        match value {
            Ok(Value::Null) => self,
            Ok(v) => {
                self.schema = self.schema.to_builder().default_value(v).build();
                self
            }
            Err(e) => {
                tracing::warn!(column = %self.name, "The default `{text}` is left out of the schema: {e}.");
                self
            }
        }
    }

    /// The value of the column's text in a result set (`None`: SQL NULL); `Err` says why it
    /// does not fit.
    pub(super) fn value(&self, text: Option<&[u8]>, modes: Modes) -> Result<Value, String> {
        let Some(bytes) = text else {
            return Ok(Value::Null);
        };
        // Binary columns come as their bytes.
        match self.kind {
            Kind::Bool => return Ok(Value::Boolean(bytes.iter().any(|&b| b != 0))),
            Kind::Bits(n) => return Ok(Value::Bytes(bits(bytes, n))),
            Kind::Binary(_) => return Ok(binary_value(bytes.to_vec(), modes.binary)),
            Kind::Geometry | Kind::Point => {
                return spatial_value(&self.kind, &self.schema, bytes).ok_or_else(|| {
                    format!(
                        "{} bytes are not a spatial value (an SRID and a {}geometry as WKB)",
                        bytes.len(),
                        if self.kind == Kind::Point {
                            "point "
                        } else {
                            ""
                        }
                    )
                })
            }
            _ => {}
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|_| "the server sent text that is not UTF-8".to_owned())?;
        let bad = || format!("`{text}` is not a valid value of its type");
        if matches!(
            self.kind,
            Kind::Date | Kind::DateTime(_) | Kind::Timestamp(_)
        ) && is_zero_date(text)
        {
            return self.zero_date();
        }
        Ok(match &self.kind {
            Kind::Int { .. } => self.int(text.parse().map_err(|_| bad())?)?,
            Kind::UnsignedDecimal => Value::Bytes(unscaled_bytes(text, 0).ok_or_else(bad)?),
            Kind::Float32 => Value::Float32(text.parse().map_err(|_| bad())?),
            Kind::Float64 => Value::Float64(text.parse().map_err(|_| bad())?),
            Kind::Decimal(scale) => {
                decimal_value(text, *scale, modes.decimal, &self.schema).ok_or_else(bad)?
            }
            Kind::Text(_) | Kind::Enum(_) | Kind::Set(_) | Kind::Special(_) => Value::from(text),
            Kind::Excluded => Value::Null,
            Kind::Date => Value::Int32(
                parse_date(text)
                    .and_then(|d| i32::try_from(d).ok())
                    .ok_or_else(bad)?,
            ),
            Kind::Time(_) => self.time(parse_duration(text).ok_or_else(bad)?, modes)?,
            Kind::DateTime(fsp) => {
                timestamp_value(parse_timestamp(text).ok_or_else(bad)?, *fsp, modes.time)
            }
            // The session's time zone is UTC. Read as text (snapshots), Debezium's connector
            // gets a `java.sql.Timestamp` and writes the fraction trimmed, none on a whole
            // second; from the binlog it gets the column's width (`binlog_temporal`).
            Kind::Timestamp(_) => Value::String(format_zoned_timestamp_trimmed(
                parse_timestamp(text).ok_or_else(bad)?,
            )),
            Kind::Year => Value::Int32(text.parse().map_err(|_| bad())?),
            // Read from their bytes above.
            Kind::Bool | Kind::Bits(_) | Kind::Binary(_) | Kind::Geometry | Kind::Point => {
                return Err(bad())
            }
        })
    }

    /// An integer as the column's schema holds it (`Err` when out of its range).
    fn int(&self, v: i128) -> Result<Value, String> {
        let Kind::Int {
            bits,
            unsigned,
            schema,
        } = self.kind
        else {
            return Err("not an integer column".to_owned());
        };
        let out_of_range = || {
            if unsigned && bits == 64 {
                format!(
                    "BIGINT UNSIGNED value {v} does not fit a signed 64-bit integer (`bigint.unsigned.handling.mode: long`; Debezium would wrap it to a negative number): set `bigint.unsigned.handling.mode: precise`")
            } else {
                format!("{v} is out of the column's range")
            }
        };
        Ok(match schema {
            SchemaType::Int16 => Value::Int16(i16::try_from(v).map_err(|_| out_of_range())?),
            SchemaType::Int32 => Value::Int32(i32::try_from(v).map_err(|_| out_of_range())?),
            _ => Value::Int64(i64::try_from(v).map_err(|_| out_of_range())?),
        })
    }

    /// A zero date (`0000-00-00`, or a month or day of 0, which MariaDB accepts by default):
    /// null, as Debezium's, where the column is optional; an error where it is NOT NULL
    /// (Debezium writes the epoch there, a date that was never stored).
    fn zero_date(&self) -> Result<Value, String> {
        if self.schema.is_optional() {
            Ok(Value::Null)
        } else {
            Err("it is NOT NULL and holds a zero date, which its type cannot represent (Debezium would write the epoch instead)".to_owned())
        }
    }

    /// A `TIME` of `micros` (signed): microseconds, or Connect's milliseconds where they fit
    /// a time of day's int32.
    fn time(&self, micros: i64, modes: Modes) -> Result<Value, String> {
        if modes.time != TimePrecisionMode::Connect {
            return Ok(Value::Int64(micros));
        }
        i32::try_from(micros.div_euclid(1000))
            .map(Value::Int32)
            .map_err(|_| {
                format!(
                    "the TIME {micros} µs does not fit Connect's Time (int32 milliseconds); use `time.precision.mode: adaptive_time_microseconds`")
            })
    }
}

/// Whether a date or date-time text has a zero year-month-day, month or day.
fn is_zero_date(text: &str) -> bool {
    let mut parts = text.get(..10).unwrap_or(text).split('-');
    let (_, m, d) = (parts.next(), parts.next(), parts.next());
    m == Some("00") || d == Some("00")
}

/// A `BIT(n)`'s big-endian bytes as Debezium's `Bits`: little-endian, `n` bytes.
fn bits(big_endian: &[u8], n: usize) -> Vec<u8> {
    let mut out: Vec<u8> = big_endian.iter().rev().copied().collect();
    out.resize(n, 0);
    out
}

/// `[-]H+:MM:SS[.ffffff]` → signed microseconds.
fn parse_duration(text: &str) -> Option<i64> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let mut parts = body.splitn(3, ':');
    let h: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let sec = parts.next()?;
    let (s, frac) = sec.split_once('.').unwrap_or((sec, ""));
    let s: i64 = s.parse().ok()?;
    if !(0..60).contains(&m) || !(0..60).contains(&s) || frac.len() > 6 {
        return None;
    }
    let micros: i64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<6}").parse().ok()?
    };
    let total = ((h * 60 + m) * 60 + s) * 1_000_000 + micros;
    Some(if negative { -total } else { total })
}

/// The character sets the mysql source decodes, as an error lists them.
const CHARSETS: &str = "utf8mb4, utf8, ascii, latin1, latin2, latin7, greek, hebrew, cp1250, cp1251, cp1256, cp1257, cp866, koi8r, koi8u, macroman, cp932, eucjpms, gbk, gb18030, big5, euckr, utf16, utf16le and ucs2 it does";

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

/// The default modes, for tests.
#[cfg(test)]
pub(super) fn tests_modes() -> Modes {
    tests::MODES
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn described(data_type: &str, column_type: &str) -> Described {
        Described {
            name: "c".into(),
            data_type: data_type.into(),
            column_type: column_type.into(),
            nullable: true,
            precision: Some(10),
            scale: Some(2),
            ..Described::default()
        }
    }

    fn col(data_type: &str, column_type: &str, fsp: Option<u32>) -> Column {
        let d = Described {
            fsp,
            ..described(data_type, column_type)
        };
        Column::new(&d, false, MODES).unwrap_or_else(|e| panic!("{e}"))
    }

    pub(super) const MODES: Modes = Modes {
        decimal: DecimalMode::Precise,
        time: TimePrecisionMode::AdaptiveTimeMicroseconds,
        binary: BinaryMode::Bytes,
        bigint: BigintUnsignedMode::Long,
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
            .contains("bigint.unsigned.handling.mode: precise"));
        assert!(v(&col("int", "int(11)", None), "x").is_err());
        assert_eq!(big.value(None, MODES), Ok(Value::Null));
        assert_eq!(latin1(b"caf\xe9 \x80"), "café €");
        assert!(Column::new(&described("json", "json"), false, MODES)
            .unwrap_err()
            .contains("does not map yet"));
    }

    #[test]
    fn times_bits_years_and_lists() {
        let v = |c: &Column, t: &[u8]| c.value(Some(t), MODES);
        let t = col("time", "time", Some(0));
        assert_eq!(v(&t, b"-838:59:59"), Ok(Value::Int64(-3_020_399_000_000)));
        assert_eq!(v(&t, b"-00:00:01.5"), Ok(Value::Int64(-1_500_000)));
        assert_eq!(v(&t, b"100:00:00"), Ok(Value::Int64(360_000_000_000)));
        assert!(v(&t, b"10:61:00").is_err());
        let connect = Modes {
            time: TimePrecisionMode::Connect,
            ..MODES
        };
        assert!(t
            .value(Some(b"838:59:59"), connect)
            .unwrap_err()
            .contains("adaptive_time_microseconds"));
        assert_eq!(t.value(Some(b"00:00:01"), connect), Ok(Value::Int32(1000)));
        let b12 = Column::new(
            &Described {
                precision: Some(12),
                ..described("bit", "bit(12)")
            },
            false,
            MODES,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v(&b12, &[0x0a, 0xaa]), Ok(Value::Bytes(vec![0xaa, 0x0a])));
        let b1 = Column::new(
            &Described {
                precision: Some(1),
                ..described("bit", "bit(1)")
            },
            false,
            MODES,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v(&b1, &[1]), Ok(Value::Boolean(true)));
        assert_eq!(
            v(&col("year", "year(4)", None), b"2024"),
            Ok(Value::Int32(2024))
        );
        assert_eq!(
            listed_values("enum('a','it''s','')"),
            Some(vec!["a".into(), "it's".into(), String::new()])
        );
        assert_eq!(listed_values("set('x')"), Some(vec!["x".into()]));
        let date = col("date", "date", None);
        assert_eq!(v(&date, b"0000-00-00"), Ok(Value::Null));
        assert_eq!(v(&date, b"2020-00-15"), Ok(Value::Null));
        let required = Column::new(&described("datetime", "datetime"), true, MODES)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(v(&required, b"0000-00-00 00:00:00")
            .unwrap_err()
            .contains("zero date"));
        let unknown = Column::new(&described("vector", "vector(3)"), false, MODES).unwrap_err();
        assert!(unknown.contains("vector"), "{unknown}");
        assert_eq!(listed_values("enum('a'"), None);
        let e = col("enum", "enum('small','medium')", None);
        assert_eq!(e.schema.parameter("allowed"), Some("small,medium"));
    }
}
