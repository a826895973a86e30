//! Debezium's envelope: `before`, `after`, `source`, `transaction`, `op`, `ts_ms`/`ts_us`/`ts_ns`.

use std::sync::Arc;

use super::schema::{names, Schema, SchemaType};
use super::value::{Struct, Value};
use super::Record;

/// Debezium operation codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `c`: insert.
    Create,
    /// `u`: update.
    Update,
    /// `d`: delete.
    Delete,
    /// `r`: snapshot read.
    Read,
    /// `t`: truncate.
    Truncate,
    /// `m`: logical decoding message.
    Message,
}

impl Op {
    /// The one-letter code.
    pub fn code(self) -> &'static str {
        match self {
            Op::Create => "c",
            Op::Update => "u",
            Op::Delete => "d",
            Op::Read => "r",
            Op::Truncate => "t",
            Op::Message => "m",
        }
    }

    /// The code as a shared string (no allocation per event).
    pub fn shared_code(self) -> Arc<str> {
        static CODES: std::sync::OnceLock<[Arc<str>; 6]> = std::sync::OnceLock::new();
        let codes = CODES.get_or_init(|| ["c", "u", "d", "r", "t", "m"].map(Arc::from));
        let i = match self {
            Op::Create => 0,
            Op::Update => 1,
            Op::Delete => 2,
            Op::Read => 3,
            Op::Truncate => 4,
            Op::Message => 5,
        };
        codes[i].clone()
    }

    /// Parses a one-letter code.
    pub fn from_code(code: &str) -> Option<Op> {
        Some(match code {
            "c" => Op::Create,
            "u" => Op::Update,
            "d" => Op::Delete,
            "r" => Op::Read,
            "t" => Op::Truncate,
            "m" => Op::Message,
            _ => return None,
        })
    }
}

/// Processing timestamps of an envelope (`ts_ms`, `ts_us`, `ts_ns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceTimestamps {
    /// Nanoseconds since the epoch.
    pub nanos: i64,
}

impl SourceTimestamps {
    /// The current wall-clock time.
    pub fn now() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        SourceTimestamps { nanos }
    }
    /// Milliseconds.
    pub fn millis(self) -> i64 {
        self.nanos.div_euclid(1_000_000)
    }
    /// Microseconds.
    pub fn micros(self) -> i64 {
        self.nanos.div_euclid(1_000)
    }
}

/// The schemas of one table's events, built once and shared by all its events.
#[derive(Debug, Clone)]
pub struct EnvelopeSchema {
    /// Key schema (`<prefix>.<schema>.<table>.Key`), `None` for keyless tables.
    pub key: Option<Arc<Schema>>,
    /// Row schema (`<prefix>.<schema>.<table>.Value`), optional, used for `before` and `after`.
    pub row: Arc<Schema>,
    /// The connector's `source` block schema.
    pub source: Arc<Schema>,
    /// The envelope (`<prefix>.<schema>.<table>.Envelope`, version 2).
    pub envelope: Arc<Schema>,
}

impl EnvelopeSchema {
    /// Builds the envelope around a row schema, as Debezium does for every table.
    ///
    /// `name_prefix` is `<topic.prefix>.<schema>.<table>`; the row schema must be a struct and is
    /// made optional under the name `<name_prefix>.Value`.
    pub fn new(
        name_prefix: &str,
        key_fields: Option<Arc<Schema>>,
        row: Arc<Schema>,
        source: Arc<Schema>,
    ) -> Self {
        let row = row
            .to_builder()
            .optional()
            .name(format!("{name_prefix}.Value"))
            .build();
        let int64_opt = Schema::primitive(SchemaType::Int64, true);
        let envelope = Schema::struct_builder()
            .name(format!("{name_prefix}.Envelope"))
            .version(2)
            .field("before", row.clone())
            .field("after", row.clone())
            .field("source", source.clone())
            .field("transaction", transaction_block_schema())
            .field("op", Schema::primitive(SchemaType::String, false))
            .field("ts_ms", int64_opt.clone())
            .field("ts_us", int64_opt.clone())
            .field("ts_ns", int64_opt)
            .build();
        let key = key_fields.map(|k| k.to_builder().name(format!("{name_prefix}.Key")).build());
        EnvelopeSchema {
            key,
            row,
            source,
            envelope,
        }
    }

    /// Builds the value record of one change.
    pub fn value(
        &self,
        op: Op,
        before: Option<Struct>,
        after: Option<Struct>,
        source: Struct,
        transaction: Option<Struct>,
        ts: SourceTimestamps,
    ) -> Record {
        let values = vec![
            before.map_or(Value::Null, Value::Struct),
            after.map_or(Value::Null, Value::Struct),
            Value::Struct(source),
            transaction.map_or(Value::Null, Value::Struct),
            Value::String(op.shared_code()),
            Value::Int64(ts.millis()),
            Value::Int64(ts.micros()),
            Value::Int64(ts.nanos),
        ];
        let value =
            Struct::from_values(self.envelope.clone(), values).map_or(Value::Null, Value::Struct);
        Record {
            schema: self.envelope.clone(),
            value,
        }
    }
}

/// Debezium's `event.block` transaction schema (`id`, `total_order`, `data_collection_order`).
pub fn transaction_block_schema() -> Arc<Schema> {
    static BLOCK: std::sync::OnceLock<Arc<Schema>> = std::sync::OnceLock::new();
    BLOCK
        .get_or_init(|| {
            Schema::struct_builder()
                .optional()
                .name(names::TRANSACTION_BLOCK)
                .version(1)
                .field("id", Schema::primitive(SchemaType::String, false))
                .field("total_order", Schema::primitive(SchemaType::Int64, false))
                .field(
                    "data_collection_order",
                    Schema::primitive(SchemaType::Int64, false),
                )
                .build()
        })
        .clone()
}

/// The `snapshot` field every Debezium `source` block has: an `io.debezium.data.Enum` string
/// (`true`, `first`, `first_in_data_collection`, `last_in_data_collection`, `last`, `false`,
/// `incremental`), optional, default `false`.
pub fn snapshot_field_schema() -> Arc<Schema> {
    static FIELD: std::sync::OnceLock<Arc<Schema>> = std::sync::OnceLock::new();
    FIELD
        .get_or_init(|| {
            Schema::builder(SchemaType::String)
                .optional()
                .name(names::ENUM)
                .version(1)
                .parameter(
                    "allowed",
                    "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental",
                )
                .default_value(Value::from("false"))
                .build()
        })
        .clone()
}

/// A `source` block schema named `name` (version 1) with the fields every Debezium connector
/// starts it with: `version`, `connector`, `name`, `ts_ms`, `snapshot`, `db`. Connectors add
/// their own fields after these.
pub fn source_block_builder(name: &str) -> super::schema::SchemaBuilder {
    let string = Schema::primitive(SchemaType::String, false);
    Schema::struct_builder()
        .name(name)
        .version(1)
        .field("version", string.clone())
        .field("connector", string.clone())
        .field("name", string.clone())
        .field("ts_ms", Schema::primitive(SchemaType::Int64, false))
        .field("snapshot", snapshot_field_schema())
        .field("db", string)
}
