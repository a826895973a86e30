//! Kafka Connect `JsonConverter` encoding, byte-compatible with Debezium's output.
//!
//! With `schemas.enable=true` every key and value is `{"schema":<schema>,"payload":<payload>}`;
//! with `false` only the payload is written. Struct fields keep schema order, bytes (and
//! `Decimal`s) are base64, floating point numbers use Java's `Double.toString` format, strings are
//! escaped the way Jackson escapes them. Schema JSON is produced once per `Arc<Schema>` and then
//! copied (see [`Schema::json`]).

use base64::Engine as _;
use serde::Deserialize;

use crate::event::{ChangeEvent, Record, Schema, SchemaType, Value};

/// Options of the JSON encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonOptions {
    /// Wrap key and value in `{"schema":..,"payload":..}` (`schemas.enable`).
    #[serde(rename = "schemas.enable", default = "default_true")]
    pub schemas_enable: bool,
}

fn default_true() -> bool {
    true
}

impl Default for JsonOptions {
    fn default() -> Self {
        JsonOptions {
            schemas_enable: true,
        }
    }
}

/// Encodes events as JSON.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonEncoder {
    options: JsonOptions,
}

impl JsonEncoder {
    /// An encoder with the given options.
    pub fn new(options: JsonOptions) -> Self {
        JsonEncoder { options }
    }

    /// Appends the JSON of a key or value record (`null` for `None`).
    pub fn encode_record(&self, record: Option<&Record>, out: &mut Vec<u8>) {
        match record {
            None => out.extend_from_slice(b"null"),
            Some(r) if self.options.schemas_enable => {
                out.extend_from_slice(b"{\"schema\":");
                out.extend_from_slice(r.schema.json().as_bytes());
                out.extend_from_slice(b",\"payload\":");
                write_value(&r.schema, &r.value, out);
                out.push(b'}');
            }
            Some(r) => write_value(&r.schema, &r.value, out),
        }
    }

    /// Appends one JSON line `{"topic":..,"key":..,"value":..}` (plus `"headers"` when asked and
    /// present) and a newline, the layout of Debezium's reference output.
    pub fn encode_line(&self, event: &ChangeEvent, with_headers: bool, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"topic\":");
        write_string(&event.topic, out);
        out.extend_from_slice(b",\"key\":");
        self.encode_record(event.key.as_ref(), out);
        out.extend_from_slice(b",\"value\":");
        self.encode_record(event.value.as_ref(), out);
        if with_headers && !event.headers.is_empty() {
            out.extend_from_slice(b",\"headers\":{");
            for (i, h) in event.headers.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(&h.name, out);
                out.push(b':');
                write_string(&String::from_utf8_lossy(&h.value), out);
            }
            out.push(b'}');
        }
        out.extend_from_slice(b"}\n");
    }
}

/// The JsonConverter schema JSON of `schema`, with a `"field"` member when given.
pub fn schema_to_json(schema: &Schema, field: Option<&str>) -> String {
    let mut out = Vec::with_capacity(256);
    write_schema(schema, field, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

fn write_schema(schema: &Schema, field: Option<&str>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(schema.kind().connect_name().as_bytes());
    out.push(b'"');
    match schema.kind() {
        SchemaType::Struct => {
            out.extend_from_slice(b",\"fields\":[");
            for (i, f) in schema.fields().iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_schema(&f.schema, Some(&f.name), out);
            }
            out.push(b']');
        }
        SchemaType::Array => {
            if let Some(items) = schema.items() {
                out.extend_from_slice(b",\"items\":");
                write_schema(items, None, out);
            }
        }
        SchemaType::Map => {
            if let (Some(k), Some(v)) = (schema.map_key(), schema.items()) {
                out.extend_from_slice(b",\"keys\":");
                write_schema(k, None, out);
                out.extend_from_slice(b",\"values\":");
                write_schema(v, None, out);
            }
        }
        _ => {}
    }
    out.extend_from_slice(if schema.is_optional() {
        b",\"optional\":true"
    } else {
        b",\"optional\":false"
    });
    if let Some(name) = schema.name() {
        out.extend_from_slice(b",\"name\":");
        write_string(name, out);
    }
    if let Some(version) = schema.version() {
        out.extend_from_slice(b",\"version\":");
        out.extend_from_slice(itoa::Buffer::new().format(version).as_bytes());
    }
    if let Some(doc) = schema.doc() {
        out.extend_from_slice(b",\"doc\":");
        write_string(doc, out);
    }
    if let Some(params) = schema.parameters() {
        out.extend_from_slice(b",\"parameters\":{");
        for (i, (k, v)) in params.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_string(k, out);
            out.push(b':');
            write_string(v, out);
        }
        out.push(b'}');
    }
    if let Some(default) = schema.default_value() {
        out.extend_from_slice(b",\"default\":");
        write_value(schema, default, out);
    }
    if let Some(field) = field {
        out.extend_from_slice(b",\"field\":");
        write_string(field, out);
    }
    out.push(b'}');
}

/// Appends the payload JSON of `value` under `schema`.
pub fn write_value(schema: &Schema, value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Int8(v) => out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes()),
        Value::Int16(v) => out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes()),
        Value::Int32(v) => out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes()),
        Value::Int64(v) => out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes()),
        Value::Float32(v) => write_java_float(f64::from(*v), Some(*v), out),
        Value::Float64(v) => write_java_float(*v, None, out),
        Value::String(s) => write_string(s, out),
        Value::Bytes(b) => {
            out.push(b'"');
            let start = out.len();
            out.resize(start + base64::encoded_len(b.len(), true).unwrap_or(0), 0);
            let written = base64::engine::general_purpose::STANDARD
                .encode_slice(b, &mut out[start..])
                .unwrap_or(0);
            out.truncate(start + written);
            out.push(b'"');
        }
        Value::Array(items) => {
            out.push(b'[');
            let item_schema = schema.items();
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                match item_schema {
                    Some(s) => write_value(s, item, out),
                    None => write_value(schema, item, out),
                }
            }
            out.push(b']');
        }
        Value::Map(entries) => write_map(schema, entries, out),
        Value::Struct(st) => {
            if let Some(json) = st.shared_json(|| {
                let mut own = Vec::with_capacity(256);
                write_struct(st, &mut own);
                own
            }) {
                out.extend_from_slice(json);
                return;
            }
            write_struct(st, out);
        }
    }
}

fn write_struct(st: &crate::event::Struct, out: &mut Vec<u8>) {
    out.push(b'{');
    let schema = st.schema();
    for ((key, field), v) in schema
        .json_field_keys()
        .iter()
        .zip(schema.fields())
        .zip(st.values())
    {
        out.extend_from_slice(key);
        write_value(&field.schema, v, out);
    }
    out.push(b'}');
}

fn write_map(schema: &Schema, entries: &[(Value, Value)], out: &mut Vec<u8>) {
    let (key_schema, value_schema) = (schema.map_key(), schema.items());
    let string_keys = key_schema.is_none_or(|k| k.kind() == SchemaType::String)
        && entries.iter().all(|(k, _)| k.as_str().is_some());
    let write_v = |v: &Value, out: &mut Vec<u8>| match value_schema {
        Some(s) => write_value(s, v, out),
        None => write_value(schema, v, out),
    };
    if string_keys {
        out.push(b'{');
        for (i, (k, v)) in entries.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_string(k.as_str().unwrap_or_default(), out);
            out.push(b':');
            write_v(v, out);
        }
        out.push(b'}');
    } else {
        // Connect writes maps with non-string keys as an array of [key, value] pairs.
        out.push(b'[');
        for (i, (k, v)) in entries.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'[');
            match key_schema {
                Some(s) => write_value(s, k, out),
                None => write_value(schema, k, out),
            }
            out.push(b',');
            write_v(v, out);
            out.push(b']');
        }
        out.push(b']');
    }
}

/// Appends a JSON string escaped as Jackson does: `"`, `\`, and control characters; short forms
/// for `\b \t \n \f \r`, `\u00XX` (upper-case hex) for the rest; characters outside the Basic
/// Multilingual Plane as an escaped UTF-16 surrogate pair (`\uD83D\uDE00`); everything else raw.
pub fn write_string(s: &str, out: &mut Vec<u8>) {
    /// 0: copy as is; 1: four-byte UTF-8 lead (escape as a surrogate pair); 2: `\u00XX`;
    /// other: the letter of a two-character escape.
    const ESCAPES: [u8; 256] = {
        let mut t = [0u8; 256];
        let mut i = 0;
        while i < 0x20 {
            t[i] = 2;
            i += 1;
        }
        t[0x08] = b'b';
        t[0x09] = b't';
        t[0x0a] = b'n';
        t[0x0c] = b'f';
        t[0x0d] = b'r';
        t[b'"' as usize] = b'"';
        t[b'\\' as usize] = b'\\';
        let mut lead = 0xf0;
        while lead < 0x100 {
            t[lead] = 1;
            lead += 1;
        }
        t
    };
    out.reserve(s.len() + 2);
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Eight bytes at a time while none of them needs escaping (most strings never do).
        if let Some(word) = word_at(bytes, i) {
            if !word_needs_escape(word) {
                i += 8;
                continue;
            }
        }
        let class = ESCAPES[usize::from(bytes[i])];
        if class == 0 {
            i += 1;
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        match class {
            1 => {
                let c = s[i..].chars().next().unwrap_or('\u{fffd}');
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write_unicode_escape(*unit, out);
                }
                i += c.len_utf8();
            }
            2 => {
                write_unicode_escape(u16::from(bytes[i]), out);
                i += 1;
            }
            letter => {
                out.extend_from_slice(&[b'\\', letter]);
                i += 1;
            }
        }
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The eight bytes at `i` as a little-endian word, when there are eight.
#[inline]
fn word_at(bytes: &[u8], i: usize) -> Option<u64> {
    let chunk: [u8; 8] = bytes.get(i..i + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(chunk))
}

/// Whether any byte of `w` is one [`write_string`] escapes: below 0x20, `"`, `\`, or the lead
/// byte of a four-byte UTF-8 sequence (0xF0 and up). Exact (no false negatives, no false
/// positives) for the question "any such byte"; the byte loop then finds which.
#[inline]
fn word_needs_escape(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGHS;
    let quote = has_zero(w ^ (ONES * u64::from(b'"')));
    let backslash = has_zero(w ^ (ONES * u64::from(b'\\')));
    let four_byte_lead = w & (w << 1) & (w << 2) & (w << 3) & HIGHS;
    (control | quote | backslash | four_byte_lead) != 0
}

fn write_unicode_escape(unit: u16, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[usize::from((unit >> shift) & 0xf)]);
    }
}

/// Appends a number as Java's `Double.toString` / `Float.toString` print it (Jackson's output):
/// plain notation for magnitudes in [1e-3, 1e7), else `d.dddE±n`; `"NaN"`/`"Infinity"` quoted.
fn write_java_float(v: f64, single: Option<f32>, out: &mut Vec<u8>) {
    if v.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
        return;
    }
    if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 {
            b"\"Infinity\""
        } else {
            b"\"-Infinity\""
        });
        return;
    }
    let mut buf = ryu::Buffer::new();
    let shortest = match single {
        Some(f) => buf.format_finite(f),
        None => buf.format_finite(v),
    };
    let (negative, digits, exp) = decompose(shortest);
    if negative {
        out.push(b'-');
    }
    if digits == "0" {
        out.extend_from_slice(b"0.0");
        return;
    }
    // value = 0.d1d2d3... * 10^exp  (exp = position of the decimal point)
    let abs = v.abs();
    if (1e-3..1e7).contains(&abs) {
        let d = digits.as_bytes();
        if exp <= 0 {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', exp.unsigned_abs() as usize));
            out.extend_from_slice(d);
        } else {
            let point = exp as usize;
            if d.len() <= point {
                out.extend_from_slice(d);
                out.extend(std::iter::repeat_n(b'0', point - d.len()));
                out.extend_from_slice(b".0");
            } else {
                out.extend_from_slice(&d[..point]);
                out.push(b'.');
                out.extend_from_slice(&d[point..]);
            }
        }
    } else if digits.len() == 1 {
        // Java writes at least two significant digits, the two closest to the value: for a
        // value the one digit does not state exactly (Float.MIN_VALUE, 1.4E-45, whose
        // shortest form is 1e-45), `1.4`, not `1.0`, read back as another double.
        let two = match single {
            Some(f) => format!("{:.1e}", f.abs()),
            None => format!("{:.1e}", abs),
        };
        let (mantissa, exponent) = two.split_once('e').unwrap_or((two.as_str(), "0"));
        out.extend_from_slice(mantissa.as_bytes());
        out.push(b'E');
        out.extend_from_slice(exponent.as_bytes());
    } else {
        let d = digits.as_bytes();
        out.push(d[0]);
        out.push(b'.');
        out.extend_from_slice(&d[1..]);
        out.push(b'E');
        out.extend_from_slice(itoa::Buffer::new().format(exp - 1).as_bytes());
    }
}

/// Splits ryu output into sign, significant digits (no leading/trailing zeros) and the decimal
/// exponent `e` such that value = 0.DIGITS × 10^e.
fn decompose(s: &str) -> (bool, String, i32) {
    let (negative, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (mantissa, exp_part) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i32>().unwrap_or(0)),
        None => (s, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = format!("{int_part}{frac_part}");
    let leading = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_start_matches('0').trim_end_matches('0');
    if digits.is_empty() {
        return (negative, "0".to_owned(), 0);
    }
    let point = int_part.len() as i32 - leading as i32 + exp_part;
    (negative, digits.to_owned(), point)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn java(v: f64) -> String {
        let mut out = Vec::new();
        write_java_float(v, None, &mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn doubles_print_like_java() {
        assert_eq!(java(0.0), "0.0");
        assert_eq!(java(1.0), "1.0");
        assert_eq!(java(-2.5), "-2.5");
        assert_eq!(java(123.456), "123.456");
        assert_eq!(java(0.001), "0.001");
        assert_eq!(java(0.0001), "1.0E-4");
        assert_eq!(java(1234567.0), "1234567.0");
        assert_eq!(java(12345678.0), "1.2345678E7");
        assert_eq!(java(1e21), "1.0E21");
        assert_eq!(java(-1.5e-10), "-1.5E-10");
        assert_eq!(java(f64::NAN), "\"NaN\"");
        assert_eq!(java(f64::NEG_INFINITY), "\"-Infinity\"");
        assert_eq!(java(100.0), "100.0");
    }

    #[test]
    fn floats_use_their_own_shortest_form() {
        let mut out = Vec::new();
        write_java_float(f64::from(0.1f32), Some(0.1f32), &mut out);
        assert_eq!(out, b"0.1");
    }

    #[test]
    fn one_digit_values_get_javas_two_closest_digits() {
        // Java 17's Double.toString(Double.MIN_VALUE) and Float.toString(Float.MIN_VALUE):
        // the shortest forms (5e-324, 1e-45) read back as other doubles.
        assert_eq!(java(f64::from_bits(1)), "4.9E-324");
        assert_eq!(java(-f64::from_bits(1)), "-4.9E-324");
        let mut out = Vec::new();
        let min = f32::from_bits(1);
        write_java_float(f64::from(min), Some(min), &mut out);
        assert_eq!(out, b"1.4E-45");
        assert_eq!(java(2e-300), "2.0E-300");
    }

    #[test]
    fn strings_escape_like_jackson() {
        let mut out = Vec::new();
        write_string("a\"b\\c\n\t\u{1}\u{1f}é😀/", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap_or_default(),
            "\"a\\\"b\\\\c\\n\\t\\u0001\\u001Fé\\uD83D\\uDE00/\""
        );
    }

    /// Jackson's escaping, one character at a time: the oracle for the word-at-a-time scan.
    fn escaped_char_by_char(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\u{c}' => out.push_str("\\f"),
                '\r' => out.push_str("\\r"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
                c if (c as u32) > 0xffff => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    #[test]
    fn shared_structs_encode_like_owned_ones_and_follow_renames() {
        use crate::event::{Schema, Struct};
        let field = |name: &str| {
            Schema::struct_builder()
                .field(name, Schema::primitive(SchemaType::String, true))
                .field("n", Schema::primitive(SchemaType::Int64, false))
                .build()
        };
        let owned = Struct::from_values(field("a"), vec![Value::from("x\"y"), Value::Int64(7)])
            .unwrap_or_else(|| panic!("arity"));
        let shared = owned.clone().into_shared();
        let encode = |st: &Struct| {
            let mut out = Vec::new();
            write_value(st.schema(), &Value::Struct(st.clone()), &mut out);
            String::from_utf8(out).unwrap_or_default()
        };
        assert_eq!(encode(&owned), r#"{"a":"x\"y","n":7}"#);
        assert_eq!(encode(&shared), encode(&owned));
        assert_eq!(encode(&shared), encode(&owned), "from the cache");
        let mut renamed = shared.clone();
        assert!(renamed.set_schema(field("b")));
        assert_eq!(encode(&renamed), r#"{"b":"x\"y","n":7}"#);
        assert_eq!(encode(&shared), encode(&owned));
    }

    proptest::proptest! {
        #[test]
        fn word_scan_escapes_like_the_char_loop(
            chars in proptest::collection::vec(
                proptest::prop_oneof![
                    4 => proptest::char::range('a', 'z'),
                    1 => proptest::char::range('\u{0}', '\u{7f}'),
                    1 => proptest::char::range('\u{80}', '\u{10ffff}'),
                ],
                0..40,
            )
        ) {
            let s: String = chars.into_iter().collect();
            let mut out = Vec::new();
            write_string(&s, &mut out);
            proptest::prop_assert_eq!(String::from_utf8(out).unwrap_or_default(), escaped_char_by_char(&s));
        }

        #[test]
        fn word_test_agrees_with_the_byte_table(bytes in proptest::array::uniform8(proptest::num::u8::ANY)) {
            let any = bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\' || b >= 0xf0);
            proptest::prop_assert_eq!(word_needs_escape(u64::from_le_bytes(bytes)), any);
        }

        #[test]
        fn encoded_strings_parse_back(s in ".*") {
            let mut out = Vec::new();
            write_string(&s, &mut out);
            let back: String = serde_json::from_slice(&out).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            proptest::prop_assert_eq!(back, s);
        }

        #[test]
        fn encoded_doubles_parse_back(v in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO) {
            let text = java(v);
            let back: f64 = text.parse().map_err(|e: std::num::ParseFloatError| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            proptest::prop_assert_eq!(back, v);
        }
    }
}
