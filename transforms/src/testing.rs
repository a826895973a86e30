//! Sample events for unit tests: a PostgreSQL-like `dbserver1.public.customers` table.

use std::sync::Arc;

use sluice_engine::event::{source_block_builder, EnvelopeSchema, SourceTimestamps};
use sluice_engine::{ChangeEvent, Op, Position, Record, Schema, SchemaType, Struct, Value};

/// The table's schemas.
pub(crate) fn customers() -> EnvelopeSchema {
    let s = |o| Schema::primitive(SchemaType::String, o);
    let source = source_block_builder("io.debezium.connector.postgresql.Source")
        .field("schema", s(false))
        .field("table", s(false))
        .field("lsn", Schema::primitive(SchemaType::Int64, true))
        .build();
    let row = Schema::struct_builder()
        .field("id", Schema::primitive(SchemaType::Int32, false))
        .field("name", s(true))
        .field("ssn", s(true))
        .field("status", s(true))
        .build();
    let key = Schema::struct_builder()
        .field("id", Schema::primitive(SchemaType::Int32, false))
        .build();
    EnvelopeSchema::new("dbserver1.public.customers", Some(key), row, source)
}

/// A row.
pub(crate) fn row(
    s: &EnvelopeSchema,
    id: i32,
    name: Option<&str>,
    ssn: Option<&str>,
    status: &str,
) -> Struct {
    let text = |v: Option<&str>| v.map_or(Value::Null, Value::from);
    Struct::from_values(
        s.row.clone(),
        vec![Value::Int32(id), text(name), text(ssn), Value::from(status)],
    )
    .unwrap_or_else(|| Struct::new(s.row.clone()))
}

/// An event with `op`, `before` and `after`.
pub(crate) fn event(
    s: &EnvelopeSchema,
    op: Op,
    before: Option<Struct>,
    after: Option<Struct>,
) -> ChangeEvent {
    let id = after
        .as_ref()
        .or(before.as_ref())
        .and_then(|r| r.get("id").cloned())
        .unwrap_or(Value::Int32(0));
    let source = Struct::from_values(
        s.source.clone(),
        vec![
            Value::from("3.6.3.Final"),
            Value::from("postgresql"),
            Value::from("dbserver1"),
            Value::Int64(1_700_000_000_000),
            Value::from("false"),
            Value::from("inventory"),
            Value::from("public"),
            Value::from("customers"),
            Value::Int64(42),
        ],
    )
    .unwrap_or_else(|| Struct::new(s.source.clone()));
    let key_schema = s.key.clone().unwrap_or_else(|| Arc::new(Schema::default()));
    ChangeEvent {
        topic: "dbserver1.public.customers".into(),
        key: Some(Record {
            schema: key_schema.clone(),
            value: Struct::from_values(key_schema, vec![id]).map_or(Value::Null, Value::Struct),
        }),
        value: Some(s.value(op, before, after, source, None, SourceTimestamps::now())),
        headers: Vec::new(),
        position: Position::Offset(1),
    }
}

/// The tombstone that follows a delete.
pub(crate) fn tombstone(delete: &ChangeEvent) -> ChangeEvent {
    ChangeEvent {
        value: None,
        ..delete.clone()
    }
}

/// A field of `after` (or `before`).
pub(crate) fn field<'a>(event: &'a ChangeEvent, side: &str, name: &str) -> Option<&'a Value> {
    event
        .value
        .as_ref()?
        .value
        .as_struct()?
        .get(side)?
        .as_struct()?
        .get(name)
}
