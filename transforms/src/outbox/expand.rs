//! `table.expand.json.payload`: a JSON text payload becomes a struct whose schema is inferred
//! from the JSON, as Debezium's outbox router infers it: objects are optional structs named by
//! their path from the payload's field (`payload`, `payload.customer`, `payload.lines` for the
//! elements of an array), integers int32 when they fit else int64, other numbers double; null
//! members and empty arrays are left out; the fields of an array's objects are the union of its
//! elements', in the order first seen.

use std::sync::Arc;

use serde_json::Value as Json;
use sluice_engine::{Schema, SchemaType, Struct, Value};

/// The schema and value of `json` (an object or an array) named `name`.
pub(super) fn expand(json: &Json, name: &str) -> Result<(Arc<Schema>, Value), String> {
    let schema =
        schema_of(json, name).ok_or("the JSON payload has no value whose type can be inferred")?;
    let value = value_of(json, &schema)?;
    Ok((schema, value))
}

fn optional(kind: SchemaType) -> Arc<Schema> {
    Schema::primitive(kind, true)
}

/// The inferred schema of `json` (`None` for null and empty arrays, which are left out).
fn schema_of(json: &Json, name: &str) -> Option<Arc<Schema>> {
    Some(match json {
        Json::Null => return None,
        Json::Bool(_) => optional(SchemaType::Boolean),
        Json::String(_) => optional(SchemaType::String),
        Json::Number(n) => match n.as_i64() {
            Some(i) if i32::try_from(i).is_ok() => optional(SchemaType::Int32),
            Some(_) => optional(SchemaType::Int64),
            None => optional(SchemaType::Float64),
        },
        Json::Array(items) => {
            let item = items_schema(items, name)?;
            Schema::builder(SchemaType::Array)
                .optional()
                .items(item)
                .build()
        }
        Json::Object(members) => {
            let mut builder = Schema::struct_builder().optional().name(name.to_owned());
            for (field, value) in members {
                if let Some(schema) = schema_of(value, &format!("{name}.{field}")) {
                    builder = builder.field(field.as_str(), schema);
                }
            }
            builder.build()
        }
    })
}

/// The schema of an array's elements: the union of its objects' fields, else the first
/// element's type.
fn items_schema(items: &[Json], name: &str) -> Option<Arc<Schema>> {
    if items.iter().any(Json::is_object) {
        let mut union = serde_json::Map::new();
        for item in items.iter().filter_map(Json::as_object) {
            for (field, value) in item {
                let known = union.get(field).is_some_and(|v: &Json| !v.is_null());
                if !known {
                    union.insert(field.clone(), value.clone());
                }
            }
        }
        return schema_of(&Json::Object(union), name);
    }
    items.iter().find_map(|item| schema_of(item, name))
}

/// The value of `json` under `schema`.
fn value_of(json: &Json, schema: &Arc<Schema>) -> Result<Value, String> {
    Ok(match (json, schema.kind()) {
        (Json::Null, _) => Value::Null,
        (Json::Bool(b), SchemaType::Boolean) => Value::Boolean(*b),
        (Json::String(s), SchemaType::String) => Value::String(s.as_str().into()),
        (Json::Number(n), SchemaType::Int32) => {
            let i = n.as_i64().and_then(|i| i32::try_from(i).ok());
            Value::Int32(i.ok_or_else(|| {
                format!("{n} does not fit the int32 of its array's first element")
            })?)
        }
        (Json::Number(n), SchemaType::Int64) => Value::Int64(
            n.as_i64()
                .ok_or_else(|| format!("{n} does not fit an int64"))?,
        ),
        (Json::Number(n), SchemaType::Float64) => {
            Value::Float64(n.as_f64().ok_or_else(|| format!("{n} is not a number"))?)
        }
        (Json::Array(items), SchemaType::Array) => {
            let item = schema.items().ok_or("an array schema without items")?;
            Value::Array(
                items
                    .iter()
                    .map(|i| value_of(i, item))
                    .collect::<Result<_, _>>()?,
            )
        }
        (Json::Object(members), SchemaType::Struct) => {
            let mut values = Vec::with_capacity(schema.fields().len());
            for field in schema.fields() {
                let member = members.get(field.name.as_ref()).unwrap_or(&Json::Null);
                values.push(value_of(member, &field.schema)?);
            }
            Value::Struct(
                Struct::from_values(schema.clone(), values)
                    .ok_or("a struct that does not fit its schema")?,
            )
        }
        (json, kind) => {
            return Err(format!(
                "`{json}` is not of the type {kind:?} inferred from the first element of its array"
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nulls_and_empty_arrays_are_left_out_and_integers_sized() {
        let json: Json = serde_json::from_str(
            r#"{"id":1,"big":9007199254740993,"note":null,"tags":[],"lines":[{"a":1},{"b":"x"}],"total":1.5}"#,
        )
        .unwrap();
        let (schema, value) = expand(&json, "payload").unwrap();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name.as_ref()).collect();
        assert_eq!(names, ["id", "big", "lines", "total"]);
        assert_eq!(schema.fields()[0].schema.kind(), SchemaType::Int32);
        assert_eq!(schema.fields()[1].schema.kind(), SchemaType::Int64);
        let lines = schema.fields()[2].schema.items().unwrap();
        assert_eq!(lines.name(), Some("payload.lines"));
        assert_eq!(lines.fields().len(), 2, "the union of the elements' fields");
        assert!(matches!(value, Value::Struct(_)));
    }
}
