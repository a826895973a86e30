//! Debezium's heartbeat records (`heartbeat.interval.ms`): on
//! `<topic.heartbeat.prefix>.<topic.prefix>`, keyed by the server name, carrying the position so
//! that a quiet source still commits its progress.

use std::sync::Arc;

use sluice_engine::{ChangeEvent, Position, Record, Schema, SchemaType, Struct, Value};

/// Debezium's heartbeat records.
#[derive(Debug)]
pub struct Heartbeats {
    topic: Arc<str>,
    key: Record,
    value: Arc<Schema>,
}

impl Heartbeats {
    /// Heartbeats on `<prefix>.<server>` keyed by the server name.
    pub fn new(topic_prefix: &str, server: &str) -> Self {
        let key_schema = Schema::struct_builder()
            .name("io.debezium.connector.common.ServerNameKey")
            .version(1)
            .field("serverName", Schema::primitive(SchemaType::String, false))
            .build();
        let key = Record {
            value: Struct::from_values(key_schema.clone(), vec![Value::from(server)])
                .map_or(Value::Null, Value::Struct),
            schema: key_schema,
        };
        Heartbeats {
            topic: format!("{topic_prefix}.{server}").into(),
            key,
            value: Schema::struct_builder()
                .name("io.debezium.connector.common.Heartbeat")
                .version(1)
                .field("ts_ms", Schema::primitive(SchemaType::Int64, false))
                .build(),
        }
    }

    /// A heartbeat record at `position`.
    pub fn event(&self, ts_ms: i64, position: Position) -> ChangeEvent {
        ChangeEvent {
            topic: self.topic.clone(),
            key: Some(self.key.clone()),
            value: Some(Record {
                value: Struct::from_values(self.value.clone(), vec![Value::Int64(ts_ms)])
                    .map_or(Value::Null, Value::Struct),
                schema: self.value.clone(),
            }),
            headers: Vec::new(),
            position,
        }
    }
}
