//! PostgreSQL types mapped to Kafka Connect schemas and values exactly as Debezium's PostgreSQL
//! connector maps them, from the server's text output.

use std::sync::Arc;

use sluice_engine::event::{decimal_schema, names};
use sluice_engine::{Schema, SchemaType, Struct, Value};

use super::{extra_types, temporal};
use crate::postgres::config::{
    BinaryMode, DecimalMode, HstoreMode, IntervalMode, PostgresConfig, TimePrecisionMode,
};
use sluice_kit::values::decimal::{money_text, Special};
use sluice_kit::values::temporal as kit_temporal;
use sluice_kit::values::{
    binary_schema, binary_value, decimal_column_schema, decimal_value, named, parse_float,
};

/// How a column's values are read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PgKind {
    /// boolean.
    Bool,
    /// smallint.
    Int2,
    /// integer.
    Int4,
    /// bigint.
    Int8,
    /// oid (int64 as Debezium).
    Oid,
    /// real.
    Float4,
    /// double precision.
    Float8,
    /// numeric(p, s); `None` when unconstrained.
    Numeric(Option<(u32, u32)>),
    /// money.
    Money,
    /// char, varchar, text, name, citext, inet, cidr, macaddr and other text-like types.
    Text,
    /// bytea.
    Bytea,
    /// date.
    Date,
    /// time(p).
    Time(u32),
    /// timetz(p).
    TimeTz(u32),
    /// timestamp(p).
    Timestamp(u32),
    /// timestamptz(p).
    TimestampTz(u32),
    /// interval.
    Interval,
    /// uuid.
    Uuid,
    /// json / jsonb.
    Json,
    /// xml.
    Xml,
    /// An enum with its labels.
    Enum(Vec<String>),
    /// bit(n): a boolean for bit(1), else `io.debezium.data.Bits` of length n.
    Bit(u32),
    /// bit varying(n).
    VarBit(u32),
    /// point (`io.debezium.data.geometry.Point`).
    Point,
    /// hstore (`hstore.handling.mode`).
    Hstore,
    /// ltree (`io.debezium.data.Ltree`).
    Ltree,
    /// tsvector (`io.debezium.data.Tsvector`).
    Tsvector,
    /// The built-in range types, as their text.
    Range,
    /// A type Debezium leaves out of its events (`include.unknown.datatypes: false`, its
    /// default): line, lseg, box, path, polygon, circle, tsquery, arrays of points and of
    /// these. The column is left out too, with a warning at startup.
    Omitted(String),
    /// An array of an element kind.
    Array(Box<PgKind>),
    /// A type Sluice does not know: its text, with a warning at startup.
    Unknown(String),
}

/// Catalog facts about a type, as read from `pg_type` (domains already resolved).
#[derive(Debug, Clone, Default)]
pub(crate) struct TypeInfo {
    /// `typname` of the base type.
    pub name: String,
    /// `atttypmod` (or the domain's `typtypmod`).
    pub typmod: i32,
    /// Enum labels in order, for enums.
    pub enum_labels: Option<Vec<String>>,
    /// The element type, for arrays.
    pub element: Option<Box<TypeInfo>>,
}

fn time_precision(typmod: i32) -> u32 {
    if typmod < 0 {
        6
    } else {
        typmod as u32
    }
}

impl PgKind {
    /// The kind of a catalog type.
    pub(crate) fn of(info: &TypeInfo) -> PgKind {
        if let Some(labels) = &info.enum_labels {
            return PgKind::Enum(labels.clone());
        }
        if let Some(element) = &info.element {
            return match PgKind::of(element) {
                PgKind::Point | PgKind::Omitted(_) => {
                    PgKind::Omitted(format!("{}[]", element.name))
                }
                kind => PgKind::Array(Box::new(kind)),
            };
        }
        match info.name.as_str() {
            "bool" => PgKind::Bool,
            "int2" => PgKind::Int2,
            "int4" => PgKind::Int4,
            "int8" => PgKind::Int8,
            "oid" => PgKind::Oid,
            "float4" => PgKind::Float4,
            "float8" => PgKind::Float8,
            "numeric" => PgKind::Numeric((info.typmod >= 4).then(|| {
                let t = (info.typmod - 4) as u32;
                ((t >> 16) & 0xffff, t & 0xffff)
            })),
            "money" => PgKind::Money,
            "bytea" => PgKind::Bytea,
            "date" => PgKind::Date,
            "time" => PgKind::Time(time_precision(info.typmod)),
            "timetz" => PgKind::TimeTz(time_precision(info.typmod)),
            "timestamp" => PgKind::Timestamp(time_precision(info.typmod)),
            "timestamptz" => PgKind::TimestampTz(time_precision(info.typmod)),
            "interval" => PgKind::Interval,
            "uuid" => PgKind::Uuid,
            "json" | "jsonb" => PgKind::Json,
            "xml" => PgKind::Xml,
            "text" | "varchar" | "bpchar" | "char" | "name" | "citext" | "inet" | "cidr"
            | "macaddr" | "macaddr8" => PgKind::Text,
            "bit" => PgKind::Bit(u32::try_from(info.typmod).unwrap_or(1)),
            // Without a length, Debezium says `2147483647`.
            "varbit" => PgKind::VarBit(u32::try_from(info.typmod).unwrap_or(i32::MAX as u32)),
            "point" => PgKind::Point,
            "hstore" => PgKind::Hstore,
            "ltree" => PgKind::Ltree,
            "tsvector" => PgKind::Tsvector,
            "int4range" | "int8range" | "numrange" | "tsrange" | "tstzrange" | "daterange" => {
                PgKind::Range
            }
            "line" | "lseg" | "box" | "path" | "polygon" | "circle" | "tsquery" => {
                PgKind::Omitted(info.name.clone())
            }
            other => PgKind::Unknown(other.to_owned()),
        }
    }
}

/// The mapping options that change schemas and values.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Modes {
    /// `time.precision.mode`.
    pub time: TimePrecisionMode,
    /// `decimal.handling.mode`.
    pub decimal: DecimalMode,
    /// `binary.handling.mode`.
    pub binary: BinaryMode,
    /// `interval.handling.mode`.
    pub interval: IntervalMode,
    /// `money.fraction.digits`.
    pub money_digits: u32,
    /// `hstore.handling.mode`.
    pub hstore: HstoreMode,
}

/// Whether a value comes from a snapshot (COPY) or the stream (pgoutput): Debezium reads the
/// two through different code (JDBC, its own text decoder), and a few values come out
/// differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadPath {
    /// An initial, blocking or incremental snapshot row.
    Snapshot,
    /// A streamed change.
    Stream,
}

impl Modes {
    /// The modes of a source configuration.
    pub(crate) fn of(c: &PostgresConfig) -> Self {
        Modes {
            time: c.time_precision_mode,
            decimal: c.decimal_handling_mode,
            binary: c.binary_handling_mode,
            interval: c.interval_handling_mode,
            money_digits: c.money_fraction_digits,
            hstore: c.hstore_handling_mode,
        }
    }
}

/// `io.debezium.data.Bits` of `length` bits.
fn bits_schema(length: u32, optional: bool) -> sluice_engine::event::SchemaBuilder {
    named(SchemaType::Bytes, "io.debezium.data.Bits", optional)
        .parameter("length", length.to_string())
}

/// The Connect schema of a column, with its default value when it has one.
pub(crate) fn schema_of(
    kind: &PgKind,
    modes: Modes,
    optional: bool,
    default: Option<Value>,
) -> Arc<Schema> {
    let b = builder_of(kind, modes, optional);
    match default {
        Some(d) => b.default_value(d).build(),
        None => b.build(),
    }
}

fn builder_of(kind: &PgKind, modes: Modes, optional: bool) -> sluice_engine::event::SchemaBuilder {
    use SchemaType as T;
    let plain = |t| Schema::builder(t).optional_if(optional);
    match kind {
        PgKind::Bool => plain(T::Boolean),
        PgKind::Int2 => plain(T::Int16),
        PgKind::Int4 => plain(T::Int32),
        PgKind::Int8 | PgKind::Oid => plain(T::Int64),
        PgKind::Float4 => plain(T::Float32),
        PgKind::Float8 => plain(T::Float64),
        PgKind::Numeric(ps) => decimal_column_schema(modes.decimal, *ps, optional),
        PgKind::Money => match modes.decimal {
            DecimalMode::Double => plain(T::Float64),
            DecimalMode::String => plain(T::String),
            DecimalMode::Precise => decimal_schema(modes.money_digits, None, optional).to_builder(),
        },
        PgKind::Text | PgKind::Range | PgKind::Unknown(_) | PgKind::Omitted(_) => plain(T::String),
        PgKind::Bit(1) => plain(T::Boolean),
        PgKind::Bit(n) | PgKind::VarBit(n) => bits_schema(*n, optional),
        PgKind::Point => sluice_kit::values::geometry::point_schema(optional).to_builder(),
        PgKind::Hstore => match modes.hstore {
            HstoreMode::Json => named(T::String, names::JSON, optional),
            HstoreMode::Map => Schema::builder(T::Map)
                .optional_if(optional)
                .map_key(Schema::primitive(T::String, false))
                .items(Schema::primitive(T::String, true)),
        },
        PgKind::Ltree => named(T::String, "io.debezium.data.Ltree", optional),
        PgKind::Tsvector => named(T::String, "io.debezium.data.Tsvector", optional),
        PgKind::Bytea => binary_schema(modes.binary, optional),
        PgKind::Date => kit_temporal::date_schema(modes.time, optional),
        PgKind::Time(p) => kit_temporal::time_schema(*p, modes.time, optional),
        PgKind::TimeTz(_) => named(T::String, names::ZONED_TIME, optional),
        PgKind::Timestamp(p) => kit_temporal::timestamp_schema(*p, modes.time, optional),
        PgKind::TimestampTz(_) => named(T::String, names::ZONED_TIMESTAMP, optional),
        PgKind::Interval => kit_temporal::interval_schema(modes.interval, optional),
        PgKind::Uuid => named(T::String, names::UUID, optional),
        PgKind::Json => named(T::String, names::JSON, optional),
        PgKind::Xml => named(T::String, "io.debezium.data.Xml", optional),
        PgKind::Enum(labels) => {
            named(T::String, names::ENUM, optional).parameter("allowed", labels.join(","))
        }
        // Debezium 3.6.3 describes a bit array as one bit string (and emits no value for it).
        PgKind::Array(element) if matches!(**element, PgKind::Bit(_) | PgKind::VarBit(_)) => {
            match **element {
                PgKind::Bit(n) | PgKind::VarBit(n) => bits_schema(n, optional),
                _ => plain(T::Bytes),
            }
        }
        PgKind::Array(element) => Schema::builder(T::Array)
            .optional_if(optional)
            .items(schema_of(element, modes, true, None)),
    }
}

fn bad(kind: &PgKind, text: &str) -> String {
    format!("cannot read `{text}` as {kind:?}")
}

/// Converts the server's text output of a value read through `path`.
pub(crate) fn parse_value(
    kind: &PgKind,
    modes: Modes,
    path: ReadPath,
    schema: &Arc<Schema>,
    text: &str,
) -> Result<Value, String> {
    let err = || bad(kind, text);
    Ok(match kind {
        PgKind::Bool => Value::Boolean(matches!(text, "t" | "true")),
        PgKind::Int2 => Value::Int16(text.parse().map_err(|_| err())?),
        PgKind::Int4 => Value::Int32(text.parse().map_err(|_| err())?),
        PgKind::Int8 | PgKind::Oid => Value::Int64(text.parse().map_err(|_| err())?),
        PgKind::Float4 => Value::Float32(parse_float(text).ok_or_else(err)? as f32),
        PgKind::Float8 => Value::Float64(parse_float(text).ok_or_else(err)?),
        PgKind::Numeric(_)
            if modes.decimal == DecimalMode::Precise
                && !schema.is_optional()
                && Special::of(text).is_some() =>
        {
            return Err(format!(
                "`{text}` has no Connect Decimal form, and Debezium's null is not allowed in a NOT NULL column (`decimal.handling.mode: double` or `string` can carry it)"
            ))
        }
        PgKind::Numeric(ps) => {
            decimal_value(text, ps.map(|(_, s)| s), modes.decimal, schema).ok_or_else(err)?
        }
        PgKind::Money => decimal_value(&money_text(text), Some(modes.money_digits), modes.decimal, schema)
            .ok_or_else(err)?,
        PgKind::Text
        | PgKind::Unknown(_)
        | PgKind::Omitted(_)
        | PgKind::Range
        | PgKind::Ltree
        | PgKind::Tsvector
        | PgKind::Uuid
        | PgKind::Json
        | PgKind::Xml
        | PgKind::Enum(_) => Value::from(text),
        PgKind::Bytea => binary_value(parse_bytea(text).ok_or_else(err)?, modes.binary),
        PgKind::Date
        | PgKind::Time(_)
        | PgKind::TimeTz(_)
        | PgKind::Timestamp(_)
        | PgKind::TimestampTz(_)
        | PgKind::Interval => temporal::value(kind, modes, path, text).ok_or_else(err)?,
        PgKind::Bit(1) => Value::Boolean(text == "1"),
        PgKind::Bit(_) | PgKind::VarBit(_) => {
            Value::Bytes(extra_types::bits(text).ok_or_else(err)?)
        }
        PgKind::Point => {
            let (x, y) = extra_types::point(text).ok_or_else(err)?;
            let values = vec![
                Value::Float64(x),
                Value::Float64(y),
                Value::Bytes(sluice_kit::values::geometry::point_wkb(x, y)),
                Value::Null,
            ];
            Value::Struct(Struct::from_values(schema.clone(), values).ok_or_else(err)?)
        }
        PgKind::Hstore => {
            let pairs = extra_types::java_hash_map_order(extra_types::hstore(text).ok_or_else(err)?);
            match modes.hstore {
                HstoreMode::Json => Value::from(extra_types::hstore_json(&pairs)),
                HstoreMode::Map => extra_types::hstore_map(pairs),
            }
        }
        PgKind::Array(element) => array_value(element, modes, schema, text).ok_or_else(err)?,
    })
}

fn array_value(element: &PgKind, modes: Modes, schema: &Arc<Schema>, text: &str) -> Option<Value> {
    // Debezium 3.6.3 emits no value for bit arrays (see `builder_of`).
    if matches!(element, PgKind::Bit(_) | PgKind::VarBit(_)) {
        return Some(Value::Null);
    }
    let item_schema = schema
        .items()
        .cloned()
        .unwrap_or_else(|| Schema::primitive(SchemaType::String, true));
    let items = parse_array(text)?;
    // A numeric array holding NaN or an infinity is one pgjdbc cannot read: Debezium emits
    // null for it, in every decimal mode.
    if matches!(element, PgKind::Numeric(_))
        && items.iter().flatten().any(|t| Special::of(t).is_some())
    {
        return Some(Value::Null);
    }
    let values = items
        .into_iter()
        .map(|item| match item {
            None => Some(Value::Null),
            // Array elements are read by JDBC on both paths.
            Some(t) => parse_value(element, modes, ReadPath::Snapshot, &item_schema, &t).ok(),
        })
        .collect::<Option<_>>()?;
    Some(Value::Array(values))
}

/// `\x0102` (hex output) or the legacy escape format → bytes.
fn parse_bytea(text: &str) -> Option<Vec<u8>> {
    if let Some(hex) = text.strip_prefix("\\x") {
        if hex.len() % 2 != 0 {
            return None;
        }
        let nibble = |c: u8| (c as char).to_digit(16);
        return hex
            .as_bytes()
            .chunks(2)
            .map(|pair| Some((nibble(pair[0])? << 4 | nibble(pair[1])?) as u8))
            .collect();
    }
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            if b.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                i += 2;
            } else {
                let oct = b.get(i + 1..i + 4)?;
                let value = oct.iter().try_fold(0u32, |v, &c| {
                    (b'0'..=b'7')
                        .contains(&c)
                        .then(|| v * 8 + u32::from(c - b'0'))
                })?;
                out.push(u8::try_from(value).ok()?);
                i += 4;
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// A one-dimensional array literal `{a,"b c",NULL}` → its items (`None` for NULL).
pub(crate) fn parse_array(text: &str) -> Option<Vec<Option<String>>> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    let mut items = Vec::new();
    if inner.is_empty() {
        return Some(items);
    }
    let mut chars = inner.chars().peekable();
    loop {
        let mut item = String::new();
        let quoted = chars.peek() == Some(&'"');
        if quoted {
            chars.next();
            loop {
                match chars.next()? {
                    '\\' => item.push(chars.next()?),
                    '"' => break,
                    c => item.push(c),
                }
            }
            items.push(Some(item));
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                item.push(c);
                chars.next();
            }
            items.push(if item == "NULL" { None } else { Some(item) });
        }
        match chars.next() {
            Some(',') => continue,
            None => return Some(items),
            Some(_) => return None,
        }
    }
}

/// The value a non-optional field takes when the server sent no value (a key-only old row):
/// the schema default, else the type's zero value, as Debezium fills such fields.
pub(crate) fn fallback_value(schema: &Schema) -> Value {
    if let Some(d) = schema.default_value() {
        return d.clone();
    }
    match schema.kind() {
        SchemaType::Boolean => Value::Boolean(false),
        SchemaType::Int8 => Value::Int8(0),
        SchemaType::Int16 => Value::Int16(0),
        SchemaType::Int32 => Value::Int32(0),
        SchemaType::Int64 => Value::Int64(0),
        SchemaType::Float32 => Value::Float32(0.0),
        SchemaType::Float64 => Value::Float64(0.0),
        SchemaType::String => Value::from(""),
        SchemaType::Bytes => Value::Bytes(vec![0]),
        SchemaType::Array => Value::Array(Vec::new()),
        SchemaType::Map => Value::Map(Vec::new()),
        SchemaType::Struct => Value::Null,
    }
}

/// The default of a column from its default expression, as Debezium derives it: constants are
/// parsed; `nextval(..)` gives 0 and `now()`-like functions the epoch; other expressions none.
pub(crate) fn default_value(kind: &PgKind, modes: Modes, expr: &str) -> Option<Value> {
    let e = expr.trim();
    let lower = e.to_ascii_lowercase();
    let schema = schema_of(kind, modes, true, None);
    if lower.starts_with("nextval(") {
        return Some(fallback_value(&schema));
    }
    let now_like = [
        "now()",
        "current_timestamp",
        "transaction_timestamp()",
        "statement_timestamp()",
        "clock_timestamp()",
        "localtimestamp",
        "current_date",
        "current_time",
        "localtime",
    ];
    if now_like.iter().any(|n| lower.starts_with(n)) {
        let epoch = match kind {
            PgKind::Date => "1970-01-01",
            PgKind::Time(_) => "00:00:00",
            PgKind::TimeTz(_) => "00:00:00+00",
            PgKind::Timestamp(_) => "1970-01-01 00:00:00",
            PgKind::TimestampTz(_) => "1970-01-01 00:00:00+00",
            _ => return None,
        };
        return parse_value(kind, modes, ReadPath::Snapshot, &schema, epoch).ok();
    }
    // 'literal'::type, or a bare constant.
    let literal = if let Some(rest) = e.strip_prefix('\'') {
        let end = rest
            .find("'::")
            .or_else(|| rest.strip_suffix('\'').map(str::len))?;
        rest[..end].replace("''", "'")
    } else {
        let bare = e.split("::").next()?.trim_matches(|c| c == '(' || c == ')');
        let constant = bare.parse::<f64>().is_ok() || matches!(bare, "true" | "false");
        if !constant {
            return None;
        }
        bare.to_owned()
    };
    match kind {
        PgKind::Bool => match literal.as_str() {
            "true" | "t" => Some(Value::Boolean(true)),
            "false" | "f" => Some(Value::Boolean(false)),
            _ => None,
        },
        _ => parse_value(kind, modes, ReadPath::Snapshot, &schema, &literal).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sluice_kit::values::decimal::unscaled;

    fn modes() -> Modes {
        Modes {
            time: TimePrecisionMode::Adaptive,
            decimal: DecimalMode::Precise,
            binary: BinaryMode::Bytes,
            interval: IntervalMode::Numeric,
            money_digits: 2,
            hstore: HstoreMode::Json,
        }
    }

    #[test]
    fn arrays_parse_with_quotes_and_nulls() {
        assert_eq!(
            parse_array(r#"{1,"a b","q\"x",NULL}"#),
            Some(vec![
                Some("1".into()),
                Some("a b".into()),
                Some("q\"x".into()),
                None
            ])
        );
        assert_eq!(parse_array("{}"), Some(vec![]));
    }

    #[test]
    fn decimals_rescale_to_the_column_scale() {
        let kind = PgKind::Numeric(Some((12, 2)));
        let schema = schema_of(&kind, modes(), true, None);
        assert_eq!(
            parse_value(&kind, modes(), ReadPath::Stream, &schema, "1234.56"),
            Ok(Value::Bytes(vec![0x01, 0xe2, 0x40]))
        );
        assert_eq!(
            parse_value(&kind, modes(), ReadPath::Stream, &schema, "-0.5"),
            Ok(Value::Bytes(vec![0xce]))
        );
    }

    #[test]
    fn defaults_follow_debezium() {
        let m = modes();
        assert_eq!(
            default_value(&PgKind::Int4, m, "nextval('t_id_seq'::regclass)"),
            Some(Value::Int32(0))
        );
        assert_eq!(
            default_value(&PgKind::TimestampTz(6), m, "now()"),
            Some(Value::String("1970-01-01T00:00:00.000000Z".into()))
        );
        assert_eq!(
            default_value(&PgKind::Text, m, "'abc''d'::character varying"),
            Some(Value::String("abc'd".into()))
        );
        assert_eq!(
            default_value(&PgKind::Int4, m, "42"),
            Some(Value::Int32(42))
        );
        assert_eq!(
            default_value(&PgKind::Bool, m, "true"),
            Some(Value::Boolean(true))
        );
        assert_eq!(default_value(&PgKind::Uuid, m, "gen_random_uuid()"), None);
        assert_eq!(
            default_value(&PgKind::Text, m, "NULL::character varying"),
            None
        );
    }

    proptest! {
        #[test]
        fn integer_text_round_trips(v in any::<i64>()) {
            let schema = schema_of(&PgKind::Int8, modes(), false, None);
            prop_assert_eq!(parse_value(&PgKind::Int8, modes(), ReadPath::Stream, &schema, &v.to_string()), Ok(Value::Int64(v)));
        }

        #[test]
        fn decimal_text_round_trips(units in -10_000_000_000i64..10_000_000_000, scale in 0u32..6) {
            let text = if scale == 0 { units.to_string() } else {
                let s = format!("{:0>width$}", units.unsigned_abs(), width = scale as usize + 1);
                let (i, f) = s.split_at(s.len() - scale as usize);
                format!("{}{i}.{f}", if units < 0 { "-" } else { "" })
            };
            prop_assert_eq!(unscaled(&text, scale), Some(i128::from(units)));
        }

        #[test]
        fn decimal_scaling_matches_the_text_route(int in "[0-9]{1,20}", frac in "[0-9]{0,12}", scale in 0u32..10, neg: bool) {
            let text = format!("{}{int}{}{frac}", if neg { "-" } else { "" }, if frac.is_empty() { "" } else { "." });
            let mut f: String = frac.chars().take(scale as usize).collect();
            while f.len() < scale as usize {
                f.push('0');
            }
            let v: i128 = format!("{int}{f}").trim_start_matches('0').parse().unwrap_or(0);
            prop_assert_eq!(unscaled(&text, scale), Some(if neg { -v } else { v }));
        }
    }
}
