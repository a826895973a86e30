//! The change-event model: Kafka Connect records shaped as Debezium envelopes.
//!
//! A [`ChangeEvent`] is what flows from sources through transforms to sinks: a topic, a key
//! record, a value record (`None` for a tombstone), headers, and the source [`Position`] from
//! which a restarted source resumes *after* this event. Schemas are `Arc`-shared per table.

pub mod calendar;
mod cut;
mod envelope;
mod schema;
mod shared_text;
mod source_block;
mod value;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use cut::BatchCut;
pub use envelope::{
    snapshot_field_schema, source_block_builder, transaction_block_schema, EnvelopeSchema, Op,
    SourceTimestamps,
};
pub use schema::{decimal_schema, names, Field, Schema, SchemaBuilder, SchemaType};
pub use shared_text::{push_u64, shared_text};
pub use source_block::{snapshot_marker, SourceConstants, SourceHead};
pub use value::{Struct, Value};

/// A source position: where a restarted source resumes, after the event that carries it.
///
/// Positions are produced by sources and are opaque to the engine, which only stores the
/// position of the newest event that every sink has acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Position {
    /// A monotonically increasing sequence number (datagen, change tables).
    Offset(u64),
    /// A source-defined encoding (for example a JSON document with an LSN and a transaction id).
    Opaque(Arc<str>),
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Position::Offset(n) => write!(f, "{n}"),
            Position::Opaque(s) => f.write_str(s),
        }
    }
}

/// A schema and a value conforming to it: the key or the value half of a record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The schema.
    pub schema: Arc<Schema>,
    /// The value.
    pub value: Value,
}

/// A record header (Kafka header semantics: a name and raw bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// Header name.
    pub name: Arc<str>,
    /// Header value.
    pub value: Vec<u8>,
}

/// One change event.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeEvent {
    /// Destination topic (Debezium naming: `<prefix>.<schema>.<table>`), changed by routing.
    pub topic: Arc<str>,
    /// The key; `None` when the table has no key.
    pub key: Option<Record>,
    /// The value; `None` for a tombstone.
    pub value: Option<Record>,
    /// Extra headers.
    pub headers: Vec<Header>,
    /// Where the source resumes after this event.
    pub position: Position,
}

impl ChangeEvent {
    /// True when the value is null (Kafka tombstone).
    pub fn is_tombstone(&self) -> bool {
        self.value.is_none()
    }

    /// The envelope's `op`, when the value is a Debezium envelope.
    pub fn op(&self) -> Option<Op> {
        let value = self.value.as_ref()?.value.as_struct()?;
        // Debezium's envelope has `op` after `before`, `after` and `source` (and `transaction`):
        // looked for there first, the name compared once, on the path of every event.
        let fields = value.schema().fields();
        let at = [3, 4]
            .into_iter()
            .find(|&i| fields.get(i).is_some_and(|f| &*f.name == "op"))
            .or_else(|| value.schema().field_index("op"))?;
        Op::from_code(value.values().get(at)?.as_str()?)
    }

    /// A field of the envelope's `source` block.
    pub fn source_field(&self, name: &str) -> Option<&Value> {
        let value = self.value.as_ref()?.value.as_struct()?;
        value.get("source")?.as_struct()?.get(name)
    }

    /// An approximation of the memory held by this event, used for byte-bounded queues.
    pub fn estimated_size(&self) -> usize {
        let record = |r: &Option<Record>| r.as_ref().map_or(0, |r| r.value.estimated_size());
        std::mem::size_of::<ChangeEvent>()
            + self.topic.len()
            + record(&self.key)
            + record(&self.value)
            + self
                .headers
                .iter()
                .map(|h| h.name.len() + h.value.len() + 32)
                .sum::<usize>()
    }
}

/// Events emitted together by a source, with the position that covers all of them.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    /// The events, in source order.
    pub events: Vec<ChangeEvent>,
    /// Position after the whole batch. When `None`, the last event's position is used; a batch
    /// with no events and a position (a heartbeat) only advances the position.
    pub position: Option<Position>,
}

impl Batch {
    /// A batch of events.
    pub fn new(events: Vec<ChangeEvent>) -> Self {
        Batch {
            events,
            position: None,
        }
    }

    /// An empty batch that only moves the position forward.
    pub fn heartbeat(position: Position) -> Self {
        Batch {
            events: Vec::new(),
            position: Some(position),
        }
    }

    /// The position covering the whole batch.
    pub fn resume_position(&self) -> Option<&Position> {
        self.position
            .as_ref()
            .or_else(|| self.events.last().map(|e| &e.position))
    }
}
