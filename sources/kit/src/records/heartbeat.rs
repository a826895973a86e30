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

/// When heartbeats are due and what they say (`heartbeat.interval.ms`,
/// `heartbeat.action.query`), for every source: a polling source asks [`Heartbeat::due`]
/// between polls, a streaming one waits for [`Heartbeat::deadline`] beside its stream; either
/// runs the action query its own way and hands the outcome to [`Heartbeat::record`].
#[derive(Debug)]
pub struct Heartbeat {
    records: Heartbeats,
    period: std::time::Duration,
    next: tokio::time::Instant,
    query: Option<String>,
}

impl Heartbeat {
    /// The heartbeats `common` asks for (`None`: `heartbeat.interval.ms` is 0).
    pub fn new(common: &crate::config::SourceCommon) -> Option<Self> {
        let records = common.heartbeats()?;
        let period = common.heartbeat_period();
        Some(Heartbeat {
            records,
            period,
            next: tokio::time::Instant::now() + period,
            query: common.heartbeat_action_query.clone(),
        })
    }

    /// Whether a heartbeat is due now.
    pub fn due(&self) -> bool {
        tokio::time::Instant::now() >= self.next
    }

    /// When the next heartbeat is due.
    pub fn deadline(&self) -> tokio::time::Instant {
        self.next
    }

    /// `heartbeat.action.query`, to run before the record.
    pub fn action_query(&self) -> Option<&str> {
        self.query.as_deref()
    }

    /// No heartbeat now (the source is inside a transaction): the next one a period on.
    pub fn postpone(&mut self) {
        self.next = tokio::time::Instant::now() + self.period;
    }

    /// The heartbeat record at `position`, the next one due a period on; `action` is how the
    /// action query went (a failure is logged, the heartbeat goes out all the same).
    pub fn record<E: std::fmt::Display>(
        &mut self,
        action: Option<Result<(), E>>,
        position: Position,
    ) -> ChangeEvent {
        if let Some(Err(e)) = action {
            tracing::warn!(error = %e, "heartbeat.action.query failed.");
        }
        self.postpone();
        let ts_ms = sluice_engine::event::SourceTimestamps::now().millis();
        self.records.event(ts_ms, position)
    }
}

/// Waits for `heartbeat`'s deadline (forever without heartbeats), for a source's `select!`.
pub async fn due(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
