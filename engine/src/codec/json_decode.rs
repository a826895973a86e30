//! Reading Kafka Connect JSON back: `{"schema":..,"payload":..}` into a [`Record`], as
//! JsonConverter's `toConnectData` does (records written by Debezium or by Sluice's JSON sinks).

use std::sync::Arc;

use base64::Engine as _;
use serde_json::Value as Json;

use crate::event::{Record, Schema, SchemaType, Struct, Value};

/// Why a JsonConverter document cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum JsonDecodeError {
    /// The document is no `{"schema":..,"payload":..}` envelope.
    #[error("expected {{\"schema\":..,\"payload\":..}} (JsonConverter with schemas.enable)")]
    NotAnEnvelope,
    /// A schema's `type` is none of Kafka Connect's.
    #[error("unknown schema type {0:?}")]
    UnknownType(Option<String>),
    /// A schema lacks a part its type needs (`an array without items`).
    #[error("{0}")]
    Malformed(&'static str),
    /// A payload does not fit its schema.
    #[error("payload {payload} does not fit a {kind:?} schema")]
    DoesNotFit { payload: String, kind: SchemaType },
    /// A `bytes` payload is not base64.
    #[error("bad base64 in {payload}: {source}")]
    Base64 {
        payload: String,
        #[source]
        source: base64::DecodeError,
    },
}

/// The record of a JsonConverter envelope with its schema; `None` for JSON `null`.
pub fn decode_record(json: &Json) -> Result<Option<Record>, JsonDecodeError> {
    if json.is_null() {
        return Ok(None);
    }
    let schema = json.get("schema").ok_or(JsonDecodeError::NotAnEnvelope)?;
    let schema = decode_schema(schema)?;
    let payload = json.get("payload").unwrap_or(&Json::Null);
    let value = decode_value(&schema, payload)?;
    Ok(Some(Record { schema, value }))
}

/// A schema from its JsonConverter JSON.
pub fn decode_schema(json: &Json) -> Result<Arc<Schema>, JsonDecodeError> {
    let kind = match json.get("type").and_then(Json::as_str) {
        Some("int8") => SchemaType::Int8,
        Some("int16") => SchemaType::Int16,
        Some("int32") => SchemaType::Int32,
        Some("int64") => SchemaType::Int64,
        Some("float") => SchemaType::Float32,
        Some("double") => SchemaType::Float64,
        Some("boolean") => SchemaType::Boolean,
        Some("string") => SchemaType::String,
        Some("bytes") => SchemaType::Bytes,
        Some("array") => SchemaType::Array,
        Some("map") => SchemaType::Map,
        Some("struct") => SchemaType::Struct,
        other => return Err(JsonDecodeError::UnknownType(other.map(str::to_owned))),
    };
    let mut b = Schema::builder(kind).optional_if(
        json.get("optional")
            .and_then(Json::as_bool)
            .unwrap_or(false),
    );
    if let Some(name) = json.get("name").and_then(Json::as_str) {
        b = b.name(name);
    }
    if let Some(v) = json.get("version").and_then(Json::as_i64) {
        b = b.version(
            i32::try_from(v)
                .map_err(|_| JsonDecodeError::Malformed("schema version out of range"))?,
        );
    }
    if let Some(doc) = json.get("doc").and_then(Json::as_str) {
        b = b.doc(doc);
    }
    if let Some(params) = json.get("parameters").and_then(Json::as_object) {
        for (k, v) in params {
            b = b.parameter(k.clone(), v.as_str().unwrap_or_default());
        }
    }
    match kind {
        SchemaType::Struct => {
            for f in json
                .get("fields")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
            {
                let name = f
                    .get("field")
                    .and_then(Json::as_str)
                    .ok_or(JsonDecodeError::Malformed("a field without a name"))?;
                b = b.field(name, decode_schema(f)?);
            }
        }
        SchemaType::Array => {
            b = b
                .items(decode_schema(json.get("items").ok_or(
                    JsonDecodeError::Malformed("an array without items"),
                )?)?);
        }
        SchemaType::Map => {
            b = b
                .map_key(decode_schema(
                    json.get("keys")
                        .ok_or(JsonDecodeError::Malformed("a map without keys"))?,
                )?)
                .items(decode_schema(
                    json.get("values")
                        .ok_or(JsonDecodeError::Malformed("a map without values"))?,
                )?);
        }
        _ => {}
    }
    let partial = b.build();
    match json.get("default") {
        Some(d) if !d.is_null() => {
            let default = decode_value(&partial, d)?;
            Ok(partial.to_builder().default_value(default).build())
        }
        _ => Ok(partial),
    }
}

/// A payload under `schema`.
pub fn decode_value(schema: &Arc<Schema>, json: &Json) -> Result<Value, JsonDecodeError> {
    if json.is_null() {
        return Ok(Value::Null);
    }
    let bad = || JsonDecodeError::DoesNotFit {
        payload: json.to_string(),
        kind: schema.kind(),
    };
    let int = || json.as_i64().ok_or_else(bad);
    Ok(match schema.kind() {
        SchemaType::Int8 => Value::Int8(i8::try_from(int()?).map_err(|_| bad())?),
        SchemaType::Int16 => Value::Int16(i16::try_from(int()?).map_err(|_| bad())?),
        SchemaType::Int32 => Value::Int32(i32::try_from(int()?).map_err(|_| bad())?),
        SchemaType::Int64 => Value::Int64(int()?),
        SchemaType::Float32 => Value::Float32(json.as_f64().ok_or_else(bad)? as f32),
        SchemaType::Float64 => Value::Float64(json.as_f64().ok_or_else(bad)?),
        SchemaType::Boolean => Value::Boolean(json.as_bool().ok_or_else(bad)?),
        SchemaType::String => Value::String(json.as_str().ok_or_else(bad)?.into()),
        SchemaType::Bytes => Value::Bytes(
            base64::engine::general_purpose::STANDARD
                .decode(json.as_str().ok_or_else(bad)?)
                .map_err(|source| JsonDecodeError::Base64 {
                    payload: json.to_string(),
                    source,
                })?,
        ),
        SchemaType::Array => {
            let items = schema
                .items()
                .ok_or(JsonDecodeError::Malformed("an array schema without items"))?;
            let list = json.as_array().ok_or_else(bad)?;
            Value::Array(
                list.iter()
                    .map(|v| decode_value(items, v))
                    .collect::<Result<_, _>>()?,
            )
        }
        SchemaType::Map => {
            let keys = schema
                .map_key()
                .ok_or(JsonDecodeError::Malformed("a map schema without keys"))?;
            let values = schema
                .items()
                .ok_or(JsonDecodeError::Malformed("a map schema without values"))?;
            let entries = match json {
                Json::Object(o) => o
                    .iter()
                    .map(|(k, v)| Ok((Value::String(k.as_str().into()), decode_value(values, v)?)))
                    .collect::<Result<Vec<_>, JsonDecodeError>>()?,
                Json::Array(pairs) => pairs
                    .iter()
                    .map(|p| match p.as_array().map(Vec::as_slice) {
                        Some([k, v]) => Ok((decode_value(keys, k)?, decode_value(values, v)?)),
                        _ => Err(bad()),
                    })
                    .collect::<Result<Vec<_>, JsonDecodeError>>()?,
                _ => return Err(bad()),
            };
            Value::Map(entries)
        }
        SchemaType::Struct => {
            let object = json.as_object().ok_or_else(bad)?;
            let values = schema
                .fields()
                .iter()
                .map(|f| decode_value(&f.schema, object.get(&*f.name).unwrap_or(&Json::Null)))
                .collect::<Result<Vec<_>, _>>()?;
            Value::Struct(Struct::from_values(schema.clone(), values).ok_or_else(bad)?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{JsonEncoder, JsonOptions};

    #[test]
    fn debeziums_records_read_back_encode_to_the_same_bytes() {
        let fixture = include_str!("../../../tests/fixtures/debezium/types_a.jsonl");
        let encoder = JsonEncoder::new(JsonOptions::default());
        for line in fixture.lines() {
            let json: Json = serde_json::from_str(line).unwrap_or_default();
            for part in ["key", "value"] {
                let record = decode_record(&json[part]).unwrap_or_else(|e| panic!("{e}"));
                let mut out = Vec::new();
                encoder.encode_record(record.as_ref(), &mut out);
                let back: Json = serde_json::from_slice(&out).unwrap_or_default();
                assert_eq!(back, json[part]);
            }
        }
    }
}
