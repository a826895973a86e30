//! PostgreSQL types mapped to Kafka Connect schemas and values exactly as Debezium's PostgreSQL
//! connector maps them, from the server's text output.

use std::sync::Arc;

use base64::Engine as _;
use sluice_engine::event::{decimal_schema, names};
use sluice_engine::{Schema, SchemaType, Struct, Value};

use super::config::{BinaryMode, DecimalMode, IntervalMode, PostgresConfig, TimePrecisionMode};
use super::temporal;

/// How a column's values are read.
#[derive(Debug, Clone, PartialEq)]
pub enum PgKind {
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
    /// An array of an element kind.
    Array(Box<PgKind>),
    /// A type Sluice does not know: its text, with a warning at startup.
    Unknown(String),
}

/// Catalog facts about a type, as read from `pg_type` (domains already resolved).
#[derive(Debug, Clone, Default)]
pub struct TypeInfo {
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
    pub fn of(info: &TypeInfo) -> PgKind {
        if let Some(labels) = &info.enum_labels {
            return PgKind::Enum(labels.clone());
        }
        if let Some(element) = &info.element {
            return PgKind::Array(Box::new(PgKind::of(element)));
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
            other => PgKind::Unknown(other.to_owned()),
        }
    }
}

/// The mapping options that change schemas and values.
#[derive(Debug, Clone, Copy)]
pub struct Modes {
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
}

impl Modes {
    /// The modes of a source configuration.
    pub fn of(c: &PostgresConfig) -> Self {
        Modes {
            time: c.time_precision_mode,
            decimal: c.decimal_handling_mode,
            binary: c.binary_handling_mode,
            interval: c.interval_handling_mode,
            money_digits: c.money_fraction_digits,
        }
    }
}

fn named(kind: SchemaType, name: &str, optional: bool) -> sluice_engine::event::SchemaBuilder {
    Schema::builder(kind)
        .optional_if(optional)
        .name(name)
        .version(1)
}

/// Debezium's `VariableScaleDecimal` struct schema.
fn variable_scale_decimal(optional: bool) -> Arc<Schema> {
    Schema::struct_builder()
        .optional_if(optional)
        .name("io.debezium.data.VariableScaleDecimal")
        .version(1)
        .doc("Variable scaled decimal")
        .field("scale", Schema::primitive(SchemaType::Int32, false))
        .field("value", Schema::primitive(SchemaType::Bytes, false))
        .build()
}

/// The Connect schema of a column, with its default value when it has one.
pub fn schema_of(
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
        PgKind::Numeric(ps) => match modes.decimal {
            DecimalMode::Double => plain(T::Float64),
            DecimalMode::String => plain(T::String),
            DecimalMode::Precise => match ps {
                Some((p, s)) => decimal_schema(*s, Some(*p), optional).to_builder(),
                None => variable_scale_decimal(optional).to_builder(),
            },
        },
        PgKind::Money => match modes.decimal {
            DecimalMode::Double => plain(T::Float64),
            DecimalMode::String => plain(T::String),
            DecimalMode::Precise => decimal_schema(modes.money_digits, None, optional).to_builder(),
        },
        PgKind::Text | PgKind::Unknown(_) => plain(T::String),
        PgKind::Bytea => match modes.binary {
            BinaryMode::Bytes => plain(T::Bytes),
            _ => plain(T::String),
        },
        PgKind::Date => match modes.time {
            TimePrecisionMode::Connect => {
                named(T::Int32, "org.apache.kafka.connect.data.Date", optional)
            }
            _ => named(T::Int32, names::DATE, optional),
        },
        PgKind::Time(p) => match modes.time {
            TimePrecisionMode::Connect => {
                named(T::Int32, "org.apache.kafka.connect.data.Time", optional)
            }
            TimePrecisionMode::Adaptive if *p <= 3 => named(T::Int32, names::TIME, optional),
            _ => named(T::Int64, names::MICRO_TIME, optional),
        },
        PgKind::TimeTz(_) => named(T::String, names::ZONED_TIME, optional),
        PgKind::Timestamp(p) => match modes.time {
            TimePrecisionMode::Connect => named(
                T::Int64,
                "org.apache.kafka.connect.data.Timestamp",
                optional,
            ),
            _ if *p <= 3 => named(T::Int64, names::TIMESTAMP, optional),
            _ => named(T::Int64, names::MICRO_TIMESTAMP, optional),
        },
        PgKind::TimestampTz(_) => named(T::String, names::ZONED_TIMESTAMP, optional),
        PgKind::Interval => match modes.interval {
            IntervalMode::Numeric => named(T::Int64, "io.debezium.time.MicroDuration", optional),
            IntervalMode::String => named(T::String, "io.debezium.time.Interval", optional),
        },
        PgKind::Uuid => named(T::String, names::UUID, optional),
        PgKind::Json => named(T::String, names::JSON, optional),
        PgKind::Xml => named(T::String, "io.debezium.data.Xml", optional),
        PgKind::Enum(labels) => {
            named(T::String, names::ENUM, optional).parameter("allowed", labels.join(","))
        }
        PgKind::Array(element) => Schema::builder(T::Array)
            .optional_if(optional)
            .items(schema_of(element, modes, true, None)),
    }
}

/// Rescales a decimal text (`-12.5`, `1e3` not accepted) to `scale` digits → unscaled integer.
pub(crate) fn unscaled(text: &str, scale: u32) -> Option<i128> {
    let (neg, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Up to 18 digits fit a u64 without overflow checks: most columns' values.
    if int.len() + scale as usize <= 18 {
        let frac = frac.as_bytes();
        let mut v: u64 = 0;
        for &b in int.as_bytes() {
            v = v * 10 + u64::from(b - b'0');
        }
        for i in 0..scale as usize {
            v = v * 10 + frac.get(i).map_or(0, |b| u64::from(b - b'0'));
        }
        let v = i128::from(v);
        return Some(if neg { -v } else { v });
    }
    // The integer digits, then `scale` fraction digits (cut or padded with zeros), without
    // building a string. More digits than an i128 holds give 0, as parsing the text did.
    let mut v: i128 = 0;
    let padding = (scale as usize).saturating_sub(frac.len());
    let digits = int
        .bytes()
        .chain(frac.bytes().take(scale as usize))
        .chain(std::iter::repeat_n(b'0', padding));
    for b in digits {
        match v
            .checked_mul(10)
            .and_then(|x| x.checked_add(i128::from(b - b'0')))
        {
            Some(x) => v = x,
            None => return Some(0),
        }
    }
    Some(if neg { -v } else { v })
}

/// `$1,234.56`, `-$5.00`, `($5.00)` → the plain decimal text.
fn money_text(text: &str) -> String {
    let negative = text.starts_with('-') || text.starts_with('(');
    let digits: String = text
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    if negative {
        format!("-{digits}")
    } else {
        digits
    }
}

fn bad(kind: &PgKind, text: &str) -> String {
    format!("cannot read `{text}` as {kind:?}")
}

/// Converts the server's text output of a value.
pub fn parse_value(
    kind: &PgKind,
    modes: Modes,
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
        PgKind::Numeric(ps) => {
            decimal_value(text, ps.map(|(_, s)| s), modes, schema).ok_or_else(err)?
        }
        PgKind::Money => decimal_value(&money_text(text), Some(modes.money_digits), modes, schema)
            .ok_or_else(err)?,
        PgKind::Text
        | PgKind::Unknown(_)
        | PgKind::Uuid
        | PgKind::Json
        | PgKind::Xml
        | PgKind::Enum(_) => Value::from(text),
        PgKind::Bytea => {
            let bytes = parse_bytea(text).ok_or_else(err)?;
            match modes.binary {
                BinaryMode::Bytes => Value::Bytes(bytes),
                BinaryMode::Base64 => {
                    Value::from(base64::engine::general_purpose::STANDARD.encode(bytes))
                }
                BinaryMode::Base64UrlSafe => {
                    Value::from(base64::engine::general_purpose::URL_SAFE.encode(bytes))
                }
                BinaryMode::Hex => {
                    Value::from(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
                }
            }
        }
        PgKind::Date => Value::Int32(
            temporal::parse_date(text)
                .and_then(|d| i32::try_from(d).ok())
                .ok_or_else(err)?,
        ),
        PgKind::Time(p) => {
            let micros = if text == "24:00:00" {
                86_400_000_000
            } else {
                temporal::parse_time(text).ok_or_else(err)?
            };
            match (modes.time, p) {
                (TimePrecisionMode::Connect, _) | (TimePrecisionMode::Adaptive, 0..=3) => {
                    Value::Int32((micros / 1000) as i32)
                }
                _ => Value::Int64(micros),
            }
        }
        PgKind::TimeTz(_) => Value::from(temporal::format_zoned_time(
            temporal::parse_timetz(text).ok_or_else(err)?,
        )),
        PgKind::Timestamp(p) => {
            let micros = temporal::parse_timestamp(text).ok_or_else(err)?;
            match (modes.time, p) {
                (TimePrecisionMode::Connect, _) | (_, 0..=3) => {
                    Value::Int64(micros.div_euclid(1000))
                }
                _ => Value::Int64(micros),
            }
        }
        PgKind::TimestampTz(p) => Value::String(temporal::format_zoned_timestamp(
            temporal::parse_timestamptz(text).ok_or_else(err)?,
            *p,
        )),
        PgKind::Interval => match modes.interval {
            IntervalMode::Numeric => {
                Value::Int64(temporal::parse_interval_micros(text).ok_or_else(err)?)
            }
            IntervalMode::String => {
                Value::from(temporal::format_interval_string(text).ok_or_else(err)?)
            }
        },
        PgKind::Array(element) => {
            let item_schema = schema
                .items()
                .cloned()
                .unwrap_or_else(|| Schema::primitive(SchemaType::String, true));
            let items = parse_array(text).ok_or_else(err)?;
            Value::Array(
                items
                    .into_iter()
                    .map(|item| match item {
                        None => Ok(Value::Null),
                        Some(t) => parse_value(element, modes, &item_schema, &t),
                    })
                    .collect::<Result<_, _>>()?,
            )
        }
    })
}

fn parse_float(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        t => t.parse().ok(),
    }
}

fn decimal_value(
    text: &str,
    scale: Option<u32>,
    modes: Modes,
    schema: &Arc<Schema>,
) -> Option<Value> {
    match modes.decimal {
        DecimalMode::Double => parse_float(text).map(Value::Float64),
        DecimalMode::String => Some(Value::from(text)),
        DecimalMode::Precise => match scale {
            Some(s) => unscaled(text, s).map(|u| Value::Bytes(Value::decimal_bytes(u))),
            None => {
                let s = text.split_once('.').map_or(0, |(_, f)| f.len() as u32);
                let u = unscaled(text, s)?;
                let st = Struct::from_values(
                    schema.clone(),
                    vec![
                        Value::Int32(s as i32),
                        Value::Bytes(Value::decimal_bytes(u)),
                    ],
                )?;
                Some(Value::Struct(st))
            }
        },
    }
}

/// `\x0102` (hex output) or the legacy escape format → bytes.
fn parse_bytea(text: &str) -> Option<Vec<u8>> {
    if let Some(hex) = text.strip_prefix("\\x") {
        if hex.len() % 2 != 0 {
            return None;
        }
        return (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
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
                let oct = std::str::from_utf8(b.get(i + 1..i + 4)?).ok()?;
                out.push(u8::from_str_radix(oct, 8).ok()?);
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
pub fn parse_array(text: &str) -> Option<Vec<Option<String>>> {
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
pub fn fallback_value(schema: &Schema) -> Value {
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
pub fn default_value(kind: &PgKind, modes: Modes, expr: &str) -> Option<Value> {
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
        return parse_value(kind, modes, &schema, epoch).ok();
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
        _ => parse_value(kind, modes, &schema, &literal).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn modes() -> Modes {
        Modes {
            time: TimePrecisionMode::Adaptive,
            decimal: DecimalMode::Precise,
            binary: BinaryMode::Bytes,
            interval: IntervalMode::Numeric,
            money_digits: 2,
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
            parse_value(&kind, modes(), &schema, "1234.56"),
            Ok(Value::Bytes(vec![0x01, 0xe2, 0x40]))
        );
        assert_eq!(
            parse_value(&kind, modes(), &schema, "-0.5"),
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
            prop_assert_eq!(parse_value(&PgKind::Int8, modes(), &schema, &v.to_string()), Ok(Value::Int64(v)));
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
