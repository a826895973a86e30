//! Debezium's notification records (`notification.enabled.channels: sink`): key
//! `io.debezium.connector.common.NotificationKey {id}`, value
//! `io.debezium.connector.common.Notification {id, type, aggregate_type, additional_data,
//! timestamp}`, on the topic `notification.sink.topic.name`.

use std::sync::Arc;

use sluice_engine::event::{ChangeEvent, Position, Record, Schema, SchemaType, Struct, Value};

/// One notification: what a source reports about a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// The snapshot's id (the signal's id).
    pub id: String,
    /// `STARTED`, `IN_PROGRESS`, `TABLE_SCAN_COMPLETED`, `COMPLETED`, `ABORTED`, `PAUSED`,
    /// `RESUMED`, ...
    pub kind: &'static str,
    /// `Incremental Snapshot`, `Initial Snapshot`, ...
    pub aggregate: &'static str,
    /// `additional_data` entries after `connector_name`.
    pub data: Vec<(&'static str, String)>,
}

impl Notification {
    /// An `Initial Snapshot` notification, with a fresh id as Debezium gives those.
    pub fn initial_snapshot(kind: &'static str, data: Vec<(&'static str, String)>) -> Self {
        Notification {
            id: fresh_id(),
            kind,
            aggregate: "Initial Snapshot",
            data,
        }
    }
}

/// Builds notification records for one connector.
#[derive(Debug, Clone)]
pub struct Notifications {
    topic: Arc<str>,
    connector: Arc<str>,
    key: Arc<Schema>,
    value: Arc<Schema>,
}

impl Notifications {
    /// Records on `topic`; `connector` is the `connector_name` entry (Debezium's
    /// `topic.prefix`).
    pub fn new(topic: &str, connector: &str) -> Self {
        let string = || Schema::primitive(SchemaType::String, false);
        Notifications {
            topic: topic.into(),
            connector: connector.into(),
            key: Schema::struct_builder()
                .name("io.debezium.connector.common.NotificationKey")
                .version(1)
                .field("id", string())
                .build(),
            value: Schema::struct_builder()
                .name("io.debezium.connector.common.Notification")
                .version(1)
                .field("id", string())
                .field("type", string())
                .field("aggregate_type", string())
                .field(
                    "additional_data",
                    Schema::builder(SchemaType::Map)
                        .optional()
                        .map_key(string())
                        .items(string())
                        .build(),
                )
                .field("timestamp", Schema::primitive(SchemaType::Int64, false))
                .build(),
        }
    }

    /// The record of `n` stamped now, carrying `position`.
    pub fn event_now(&self, n: &Notification, position: Position) -> ChangeEvent {
        let ts_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        self.event(n, ts_ms, position)
    }

    /// The record of `n` at `ts_ms`, carrying `position`.
    pub fn event(&self, n: &Notification, ts_ms: i64, position: Position) -> ChangeEvent {
        let id = Value::from(n.id.as_str());
        let mut data = Vec::with_capacity(n.data.len() + 1);
        data.push((
            Value::from("connector_name"),
            Value::String(self.connector.clone()),
        ));
        data.extend(
            n.data
                .iter()
                .map(|(k, v)| (Value::from(*k), Value::from(v.as_str()))),
        );
        let record = |schema: &Arc<Schema>, values| Record {
            value: Struct::from_values(schema.clone(), values).map_or(Value::Null, Value::Struct),
            schema: schema.clone(),
        };
        ChangeEvent {
            topic: self.topic.clone(),
            key: Some(record(&self.key, vec![id.clone()])),
            value: Some(record(
                &self.value,
                vec![
                    id,
                    Value::from(n.kind),
                    Value::from(n.aggregate),
                    Value::Map(data),
                    Value::Int64(ts_ms),
                ],
            )),
            headers: Vec::new(),
            position,
        }
    }
}

/// A fresh id in UUID form (version 4 layout) for notifications that have no signal id, as
/// Debezium's initial snapshot notifications: hashed from a per-process random key, the clock
/// and a counter, so ids do not repeat.
pub fn fresh_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static KEY: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let key = KEY.get_or_init(std::collections::hash_map::RandomState::new);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let half = |salt: u64| {
        let mut h = key.build_hasher();
        h.write_u64(salt);
        h.write_u64(nanos);
        h.write_u64(n);
        h.finish()
    };
    let (a, b) = (half(1), half(2));
    let a = (a & !0xf000) | 0x4000; // version 4
    let b = (b & !(0b11 << 62)) | (0b10 << 62); // RFC 4122 variant
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::codec::{JsonEncoder, JsonOptions};

    #[test]
    fn fresh_ids_look_like_uuids_and_differ() {
        let (a, b) = (fresh_id(), fresh_id());
        assert_ne!(a, b);
        let shape = regex_lite_shape(&a);
        assert!(shape, "{a}");
    }

    fn regex_lite_shape(id: &str) -> bool {
        let parts: Vec<&str> = id.split('-').collect();
        parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
            && parts
                .iter()
                .all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
            && parts[2].starts_with('4')
    }

    /// Byte for byte what Debezium 3.6.3's sink channel wrote for the same notification
    /// (`tests/fixtures/debezium/notifications.jsonl`), with the map entries in Sluice's order.
    #[test]
    fn the_record_has_debeziums_shape() {
        let n = Notifications::new("dbz-notifications", "dbserver1");
        let event = n.event(
            &Notification {
                id: "ad-hoc-1".into(),
                kind: "STARTED",
                aggregate: "Incremental Snapshot",
                data: vec![("data_collections", "public.items".into())],
            },
            1796027369328,
            Position::Offset(0),
        );
        let mut out = Vec::new();
        JsonEncoder::new(JsonOptions {
            schemas_enable: true,
        })
        .encode_line(&event, false, &mut out);
        let ours: serde_json::Value = serde_json::from_slice(&out).unwrap_or_default();
        let fixture = include_str!("../../../tests/fixtures/debezium/notifications.jsonl");
        let theirs: serde_json::Value = fixture
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["value"]["payload"]["type"] == "STARTED")
            .unwrap_or_default();
        assert_eq!(ours, theirs);
    }
}
