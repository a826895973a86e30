//! Transaction metadata (`provide.transaction.metadata`): BEGIN and END records on
//! `<prefix>.transaction`, and the `transaction` block of data events, as Debezium writes them.
//! A source counts each transaction's events with [`TxCounts`] and emits BEGIN before its first
//! data event and END after its commit.

use std::sync::Arc;

use sluice_engine::{ChangeEvent, Position, Record, Schema, SchemaType, Struct, Value};

/// The schemas of transaction records, built once.
#[derive(Debug)]
pub struct TxSchemas {
    topic: Arc<str>,
    key: Arc<Schema>,
    value: Arc<Schema>,
    collection: Arc<Schema>,
    block: Arc<Schema>,
}

impl TxSchemas {
    /// Schemas for `<prefix>.transaction`.
    pub fn new(prefix: &str) -> Self {
        let s = |o| Schema::primitive(SchemaType::String, o);
        let collection = Schema::struct_builder()
            .optional()
            .name("event.collection")
            .version(1)
            .field("data_collection", s(false))
            .field("event_count", Schema::primitive(SchemaType::Int64, false))
            .build();
        TxSchemas {
            topic: format!("{prefix}.transaction").into(),
            key: Schema::struct_builder()
                .name("io.debezium.connector.common.TransactionMetadataKey")
                .version(1)
                .field("id", s(false))
                .build(),
            value: Schema::struct_builder()
                .name("io.debezium.connector.common.TransactionMetadataValue")
                .version(1)
                .field("status", s(false))
                .field("id", s(false))
                .field("event_count", Schema::primitive(SchemaType::Int64, true))
                .field(
                    "data_collections",
                    Schema::builder(SchemaType::Array)
                        .optional()
                        .items(collection.clone())
                        .build(),
                )
                .field("ts_ms", Schema::primitive(SchemaType::Int64, false))
                .build(),
            collection,
            block: sluice_engine::event::transaction_block_schema(),
        }
    }

    fn record(&self, schema: &Arc<Schema>, values: Vec<Value>) -> Record {
        let value = Struct::from_values(schema.clone(), values).map_or(Value::Null, Value::Struct);
        Record {
            schema: schema.clone(),
            value,
        }
    }

    fn event(&self, id: &str, value: Vec<Value>) -> ChangeEvent {
        ChangeEvent {
            topic: self.topic.clone(),
            key: Some(self.record(&self.key, vec![Value::from(id)])),
            value: Some(self.record(&self.value, value)),
            headers: Vec::new(),
            position: Position::Offset(0),
        }
    }

    /// The BEGIN record.
    pub fn begin(&self, id: &str, ts_ms: i64) -> ChangeEvent {
        self.event(
            id,
            vec![
                Value::from("BEGIN"),
                Value::from(id),
                Value::Null,
                Value::Null,
                Value::Int64(ts_ms),
            ],
        )
    }

    /// The END record, with per-table counts in Debezium's order.
    pub fn end(
        &self,
        id: &str,
        ts_ms: i64,
        total: u64,
        collections: &[(Arc<str>, u64)],
    ) -> ChangeEvent {
        let items = java_hashmap_order(collections)
            .into_iter()
            .map(|(name, count)| {
                Struct::from_values(
                    self.collection.clone(),
                    vec![Value::String(name.clone()), Value::Int64(*count as i64)],
                )
                .map_or(Value::Null, Value::Struct)
            })
            .collect();
        self.event(
            id,
            vec![
                Value::from("END"),
                Value::from(id),
                Value::Int64(total as i64),
                Value::Array(items),
                Value::Int64(ts_ms),
            ],
        )
    }

    /// The `transaction` block of a data event.
    pub fn block(&self, id: &str, total_order: u64, collection_order: u64) -> Value {
        Struct::from_values(
            self.block.clone(),
            vec![
                Value::from(id),
                Value::Int64(total_order as i64),
                Value::Int64(collection_order as i64),
            ],
        )
        .map_or(Value::Null, Value::Struct)
    }
}

/// Java's `String.hashCode`.
fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
}

/// Entries in the iteration order of a `java.util.HashMap` they were inserted into (in the given
/// order): by bucket at the final capacity, then insertion order within a bucket. Debezium
/// collects per-table counts in such a map.
fn java_hashmap_order(entries: &[(Arc<str>, u64)]) -> Vec<&(Arc<str>, u64)> {
    let mut capacity = 16usize;
    while entries.len() as f64 > capacity as f64 * 0.75 {
        capacity *= 2;
    }
    let bucket = |s: &str| {
        let h = java_hash(s) as u32;
        ((h ^ (h >> 16)) as usize) & (capacity - 1)
    };
    let mut ordered: Vec<&(Arc<str>, u64)> = entries.iter().collect();
    // A stable sort keeps insertion order within a bucket.
    ordered.sort_by_key(|e| bucket(&e.0));
    ordered
}

/// Per-transaction bookkeeping.
#[derive(Debug, Default)]
pub struct TxCounts {
    /// Whether BEGIN was emitted (it is, lazily, with the first data event).
    pub begun: bool,
    /// Data events so far.
    pub total: u64,
    /// Data events per table (`schema.table`), in first-seen order.
    pub per_table: Vec<(Arc<str>, u64)>,
}

impl TxCounts {
    /// Counts one data event of `table`; returns (total order, data collection order).
    pub fn count(&mut self, table: &str) -> (u64, u64) {
        self.total += 1;
        let n = match self.per_table.iter_mut().find(|(t, _)| &**t == table) {
            Some(entry) => {
                entry.1 += 1;
                entry.1
            }
            None => {
                self.per_table.push((table.into(), 1));
                1
            }
        };
        (self.total, n)
    }
}

/// A transaction a restart may land in, as the position of each of its data events carries it
/// (Debezium's offsets keep `transaction_id` and the per-table counts alike): its id, its
/// time, and its counts so far; the stream that resumes inside it goes on counting, with no
/// second BEGIN.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TxState {
    pub id: String,
    pub ts_ms: i64,
    pub total_order: u64,
    /// Data events per table, in first-seen order.
    pub data_collection_order: Vec<(String, u64)>,
}

impl TxState {
    /// The state of transaction `id` at `ts_ms` with `counts`.
    pub fn of(id: String, ts_ms: i64, counts: &TxCounts) -> Self {
        TxState {
            id,
            ts_ms,
            total_order: counts.total,
            data_collection_order: (counts.per_table.iter())
                .map(|(t, n)| (t.to_string(), *n))
                .collect(),
        }
    }

    /// The counts it holds.
    pub fn counts(&self) -> TxCounts {
        TxCounts {
            begun: true,
            total: self.total_order,
            per_table: (self.data_collection_order.iter())
                .map(|(t, n)| (Arc::from(t.as_str()), *n))
                .collect(),
        }
    }

    /// `position` (a JSON object) without its `transaction` member.
    pub fn strip(position: &Position) -> Position {
        with_members(position, |fields| fields.remove("transaction").map(|_| ()))
    }

    /// `position` (a JSON object) with this state as its `transaction` member (replacing one
    /// it had), the other members as they were.
    pub fn in_position(&self, position: &Position) -> Position {
        with_members(position, |fields| {
            let state = serde_json::to_value(self).ok()?;
            fields.insert("transaction".to_owned(), state);
            Some(())
        })
    }
}

/// `position` (a JSON object) with its members changed by `change`; `position` as it was when
/// it is no object or `change` changed nothing (`None`).
fn with_members(
    position: &Position,
    change: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>) -> Option<()>,
) -> Position {
    let Position::Opaque(text) = position else {
        return position.clone();
    };
    let Ok(mut fields) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
    else {
        return position.clone();
    };
    match change(&mut fields) {
        Some(()) => Position::Opaque(serde_json::Value::Object(fields).to_string().into()),
        None => position.clone(),
    }
}

/// Sets the `transaction` field of a data event's envelope.
pub fn set_block(event: &mut ChangeEvent, block: Value) {
    if let Some(envelope) = event.value.as_mut().and_then(|v| v.value.as_struct_mut()) {
        envelope.set("transaction", block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_state_rides_in_a_position_and_back() {
        let mut counts = TxCounts::default();
        counts.count("dbo.a");
        counts.count("dbo.b");
        counts.count("dbo.a");
        let state = TxState::of("00000027:00000758:0003".into(), 7, &counts);
        let at = Position::Opaque(r#"{"commit_lsn":"x","snapshot_completed":true}"#.into());
        let Position::Opaque(text) = state.in_position(&at) else {
            panic!("an opaque position")
        };
        #[derive(serde::Deserialize)]
        struct Back {
            commit_lsn: String,
            transaction: TxState,
        }
        let back: Back = serde_json::from_str(&text).unwrap();
        assert_eq!((back.commit_lsn.as_str(), &back.transaction), ("x", &state));
        let again = back.transaction.counts();
        assert_eq!((again.total, again.per_table), (3, counts.per_table));
        let empty = state.in_position(&Position::Opaque("{}".into()));
        assert!(empty.to_string().starts_with(r#"{"transaction":{"id":"#));
        assert_eq!(TxState::strip(&empty).to_string(), "{}");
        assert_eq!(TxState::strip(&at), at, "nothing to strip");
    }

    #[test]
    fn java_hash_codes() {
        assert_eq!(java_hash(""), 0);
        assert_eq!(java_hash("a"), 97);
        assert_eq!(
            java_hash("public.tx_a"),
            "public.tx_a"
                .bytes()
                .fold(0i32, |h, b| h.wrapping_mul(31).wrapping_add(i32::from(b)))
        );
    }

    #[test]
    fn collections_follow_hashmap_order_like_debezium() {
        let entries: Vec<(Arc<str>, u64)> =
            vec![("public.tx_a".into(), 2), ("public.tx_b".into(), 1)];
        let order: Vec<&str> = java_hashmap_order(&entries).iter().map(|e| &*e.0).collect();
        assert_eq!(order, vec!["public.tx_b", "public.tx_a"]);
    }
}
