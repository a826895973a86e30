//! The filter transform's condition language: parsed, then evaluated against an event.
#![no_main]
use sluice_engine::{ChangeEvent, Position, Record, Schema, SchemaType, Struct, Value};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(expr) = sluice_transforms::filter::parse(text) else {
        return;
    };
    let after = Schema::builder(SchemaType::Struct)
        .field("id", Schema::primitive(SchemaType::Int32, false))
        .field("name", Schema::primitive(SchemaType::String, true))
        .optional()
        .build();
    let envelope = Schema::builder(SchemaType::Struct)
        .field("after", after.clone())
        .field("op", Schema::primitive(SchemaType::String, false))
        .build();
    let Some(row) = Struct::from_values(after, vec![Value::Int32(7), Value::from("seven")]) else {
        return;
    };
    let Some(value) =
        Struct::from_values(envelope.clone(), vec![Value::Struct(row), Value::from("c")])
    else {
        return;
    };
    let event = ChangeEvent {
        topic: "t".into(),
        key: None,
        value: Some(Record {
            schema: envelope,
            value: Value::Struct(value),
        }),
        headers: Vec::new(),
        position: Position::Offset(0),
    };
    let _ = expr.eval(&event);
});
