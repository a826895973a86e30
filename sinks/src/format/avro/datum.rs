//! Avro binary encoding of values under the schemas [`super::schema`] derives: the datum that
//! follows the 5-byte Confluent header.

use sluice_engine::event::{Schema, SchemaType, Value};

/// A value that does not fit its schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct DatumError(String);

/// Appends the Avro binary encoding of `value` under the Avro form of `schema`.
pub fn encode(schema: &Schema, value: &Value, out: &mut Vec<u8>) -> Result<(), DatumError> {
    if schema.is_optional() {
        // ["null", T], or [T, "null"] when the schema has a default.
        let null_first = schema.default_value().is_none_or(Value::is_null);
        if value.is_null() {
            long(if null_first { 0 } else { 1 }, out);
            return Ok(());
        }
        long(if null_first { 1 } else { 0 }, out);
    } else if value.is_null() {
        return match schema.default_value() {
            Some(d) if !d.is_null() => base(schema, d, out),
            _ => Err(DatumError(format!(
                "null for a required {} field{}",
                schema.kind().connect_name(),
                schema.name().map(|n| format!(" ({n})")).unwrap_or_default()
            ))),
        };
    }
    base(schema, value, out)
}

fn mismatch(schema: &Schema, value: &Value) -> DatumError {
    DatumError(format!(
        "a {value:?} value does not fit a {} schema",
        schema.kind().connect_name()
    ))
}

fn base(schema: &Schema, value: &Value, out: &mut Vec<u8>) -> Result<(), DatumError> {
    match (schema.kind(), value) {
        (SchemaType::Boolean, Value::Boolean(b)) => out.push(u8::from(*b)),
        (SchemaType::Int8, Value::Int8(v)) => long(i64::from(*v), out),
        (SchemaType::Int16, Value::Int16(v)) => long(i64::from(*v), out),
        (SchemaType::Int32, Value::Int32(v)) => long(i64::from(*v), out),
        (SchemaType::Int64, Value::Int64(v)) => long(*v, out),
        (SchemaType::Float32, Value::Float32(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (SchemaType::Float64, Value::Float64(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (SchemaType::String, Value::String(s)) => bytes(s.as_bytes(), out),
        (SchemaType::Bytes, Value::Bytes(b)) => bytes(b, out),
        (SchemaType::Array, Value::Array(items)) => {
            let item_schema = schema.items().ok_or_else(|| mismatch(schema, value))?;
            if !items.is_empty() {
                long(items.len() as i64, out);
                for item in items {
                    encode(item_schema, item, out)?;
                }
            }
            long(0, out);
        }
        (SchemaType::Map, Value::Map(entries)) => {
            let (Some(keys), Some(values)) = (schema.map_key(), schema.items()) else {
                return Err(mismatch(schema, value));
            };
            // Required string keys: an Avro map; otherwise an array of {key, value} records.
            let string_keys = keys.kind() == SchemaType::String && !keys.is_optional();
            if !entries.is_empty() {
                long(entries.len() as i64, out);
                for (k, v) in entries {
                    if string_keys {
                        let Value::String(k) = k else {
                            return Err(mismatch(keys, k));
                        };
                        bytes(k.as_bytes(), out);
                    } else {
                        encode(keys, k, out)?;
                    }
                    encode(values, v, out)?;
                }
            }
            long(0, out);
        }
        (SchemaType::Struct, Value::Struct(st)) => {
            for (field, v) in schema.fields().iter().zip(st.values()) {
                encode(&field.schema, v, out)
                    .map_err(|e| DatumError(format!("field `{}`: {}", field.name, e.0)))?;
            }
        }
        _ => return Err(mismatch(schema, value)),
    }
    Ok(())
}

/// Zig-zag variable-length `long` (also `int`).
pub fn long(v: i64, out: &mut Vec<u8>) {
    let mut n = ((v << 1) ^ (v >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn bytes(b: &[u8], out: &mut Vec<u8>) {
    long(b.len() as i64, out);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longs_are_zigzag_varints() {
        for (v, expected) in [
            (0i64, vec![0u8]),
            (-1, vec![1]),
            (1, vec![2]),
            (-64, vec![0x7f]),
            (64, vec![0x80, 0x01]),
            (
                i64::MAX,
                vec![0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ] {
            let mut out = Vec::new();
            long(v, &mut out);
            assert_eq!(out, expected, "{v}");
        }
    }
}
