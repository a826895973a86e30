//! What every source's incremental snapshot (Debezium's DBLog-style chunked snapshot) shares:
//!
//! - [`Progress`]: the tables left, where the current one stands, the signal's filters. It
//!   travels in positions ([`crate::position::with_progress`]), so a restart continues after
//!   the last chunk whose rows were delivered. `K` is how the source writes one key column's
//!   value (PostgreSQL: its text form; SQLite: JSON).
//! - [`KeyBuffer`]: a chunk's rows in its window, by key: a change the stream delivers inside
//!   the window drops the row of its key (the change is newer), and what is left when the window
//!   closes is emitted as `op: r`.
//! - [`Tracker`]: the progress read ahead and delivered, the signals carried out, the
//!   notifications; [`Progress::after_chunk`]: one chunk's bookkeeping.
//! - [`Window`]: the window of a chunk read at a position of the log, closing once the stream
//!   passed it (the position-watermark mode, as Debezium's read-only snapshots), and
//!   [`ChunkSource`], what a source implements for that mode: [`next_window`] runs one chunk
//!   step on it (MySQL and SQLite).
//! - [`Windows`]: the windows bounded by watermark rows in the signaling table (Debezium's
//!   default mode), several chunks in flight, closing in log order (PostgreSQL, whose chunk
//!   reader writes the watermarks and whose stream routes the watermark rows here).

mod chunk;
mod source;
mod tracker;
mod watermarks;
mod window;

pub use chunk::{key_text, ChunkEnd, KeyText};
pub use source::{next_window, now, ChunkSource, Read, Step};
pub use tracker::{Abilities, Emitted, Outcome, Tracker};
pub use watermarks::{Held, OpenChunk, Watermark, Windows};
pub use window::Window;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use sluice_engine::codec::{JsonEncoder, JsonOptions};
use sluice_engine::{ChangeEvent, Record};

/// What survives a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress<K> {
    /// The snapshot's id (the signal's).
    #[serde(default)]
    pub id: String,
    /// Tables left, by the source's table name, the current one first.
    #[serde(default)]
    pub tables: Vec<String>,
    /// The current table's last key read, per key column (`None`: from its start).
    #[serde(default = "none")]
    pub last_key: Option<Vec<K>>,
    /// The current table's maximum key when its scan started (`None`: not known yet).
    #[serde(default = "none")]
    pub max_key: Option<Vec<K>>,
    /// Extra WHERE conditions by table (`additional-conditions`).
    #[serde(default)]
    pub conditions: BTreeMap<String, String>,
    /// Column used as the key instead of the primary key (`surrogate-key`).
    #[serde(default)]
    pub surrogate_key: Option<String>,
    /// Chunks read so far.
    #[serde(default)]
    pub chunks: u64,
    /// A blocking snapshot asked for and not done yet (the change-table sources carry it in
    /// their positions, so a restart runs it; `tables` is then empty when no incremental
    /// snapshot runs beside it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking: Option<Box<crate::signal::BlockingRequest>>,
}

fn none<T>() -> Option<T> {
    None
}

impl<K> Progress<K> {
    /// A snapshot of `tables` asked for by the signal `id`.
    pub fn new(
        id: &str,
        tables: Vec<String>,
        conditions: BTreeMap<String, String>,
        surrogate_key: Option<String>,
    ) -> Self {
        Progress {
            id: id.to_owned(),
            tables,
            last_key: None,
            max_key: None,
            conditions,
            surrogate_key,
            chunks: 0,
            blocking: None,
        }
    }

    /// Adds the tables not queued yet, and their conditions, to the running snapshot.
    pub fn add(&mut self, tables: &[String], conditions: &BTreeMap<String, String>) {
        for t in tables {
            if !self.tables.contains(t) {
                self.tables.push(t.clone());
            }
        }
        self.conditions
            .extend(conditions.iter().map(|(k, v)| (k.clone(), v.clone())));
    }

    /// The table being read.
    pub fn current(&self) -> Option<&str> {
        self.tables.first().map(String::as_str)
    }

    /// The current table is done: the next one starts from its beginning.
    pub fn table_done(&mut self) {
        if !self.tables.is_empty() {
            self.tables.remove(0);
        }
        self.last_key = None;
        self.max_key = None;
    }

    /// Drops the tables `stop` selects (`stop-snapshot` with `data-collections`); a current
    /// table dropped makes the next one start from its beginning. Returns whether tables are
    /// left.
    pub fn stop(&mut self, stop: impl Fn(&str) -> bool) -> bool {
        let current = self.tables.first().cloned();
        self.tables.retain(|t| !stop(t));
        if self.tables.first() != current.as_ref() {
            self.last_key = None;
            self.max_key = None;
        }
        !self.tables.is_empty()
    }
}

/// A key's identity in a [`KeyBuffer`]: the key's JSON without schema (the same for a
/// snapshot row and a streamed change of that row).
pub fn key_bytes(key: Option<&Record>) -> Vec<u8> {
    let mut out = Vec::new();
    JsonEncoder::new(JsonOptions {
        schemas_enable: false,
    })
    .encode_record(key, &mut out);
    out
}

/// A chunk's rows, evicted by key: DBLog's buffer. The index by key is built the first time a
/// change falls into the window (most chunks never need it).
#[derive(Debug, Default)]
pub struct KeyBuffer {
    rows: Vec<Option<ChangeEvent>>,
    index: Option<HashMap<Vec<u8>, usize>>,
}

impl KeyBuffer {
    /// The rows a chunk query returned, in key order.
    pub fn new(rows: Vec<ChangeEvent>) -> Self {
        KeyBuffer {
            rows: rows.into_iter().map(Some).collect(),
            index: None,
        }
    }

    /// Drops the row whose key is `key` ([`key_bytes`]), if the chunk has it.
    pub fn evict(&mut self, key: &[u8]) {
        let rows = &self.rows;
        let index = self.index.get_or_insert_with(|| {
            rows.iter()
                .enumerate()
                .filter_map(|(i, row)| Some((key_bytes(row.as_ref()?.key.as_ref()), i)))
                .collect()
        });
        if let Some(i) = index.remove(key) {
            self.rows[i] = None;
        }
    }

    /// Drops the row of `change`'s key (a change of the chunk's table).
    pub fn evict_by(&mut self, change: &ChangeEvent) {
        self.evict(&key_bytes(change.key.as_ref()));
    }

    /// The rows left, in key order.
    pub fn into_rows(self) -> Vec<ChangeEvent> {
        self.rows.into_iter().flatten().collect()
    }
}

/// A key-only change of `topic` with key `{"id": id}` (tests).
#[cfg(test)]
pub(crate) fn keyed_row(topic: &str, id: i64) -> ChangeEvent {
    use sluice_engine::{Position, Schema, SchemaType, Struct, Value};
    let schema = Schema::struct_builder()
        .field("id", Schema::primitive(SchemaType::Int64, false))
        .build();
    let key = Struct::from_values(schema.clone(), vec![Value::Int64(id)]).map(|s| Record {
        schema,
        value: Value::Struct(s),
    });
    ChangeEvent {
        topic: topic.into(),
        key,
        value: None,
        headers: Vec::new(),
        position: Position::Offset(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64) -> ChangeEvent {
        keyed_row("p.t", id)
    }

    #[test]
    fn a_change_in_the_window_drops_its_keys_row() {
        let mut buffer = KeyBuffer::new((1..=4).map(row).collect());
        buffer.evict_by(&row(2));
        buffer.evict(&key_bytes(row(4).key.as_ref()));
        buffer.evict_by(&row(9)); // not in the chunk
        buffer.evict_by(&row(2)); // twice
        let left: Vec<Vec<u8>> = buffer
            .into_rows()
            .iter()
            .map(|e| key_bytes(e.key.as_ref()))
            .collect();
        assert_eq!(
            left,
            [
                key_bytes(row(1).key.as_ref()),
                key_bytes(row(3).key.as_ref())
            ]
        );
        assert_eq!(key_bytes(row(1).key.as_ref()), b"{\"id\":1}");
    }

    #[test]
    fn tables_queue_stop_and_finish() {
        let mut p: Progress<i64> =
            Progress::new("s1", vec!["a".into(), "b".into()], BTreeMap::new(), None);
        p.last_key = Some(vec![7]);
        p.add(
            &["b".into(), "c".into()],
            &BTreeMap::from([("c".into(), "x > 1".into())]),
        );
        assert_eq!(p.tables, ["a", "b", "c"]);
        assert!(p.stop(|t| t == "b"));
        assert_eq!(p.last_key, Some(vec![7]), "the current table goes on");
        assert!(p.stop(|t| t == "a"));
        assert_eq!((p.current(), p.last_key.clone()), (Some("c"), None));
        p.table_done();
        assert_eq!(p.current(), None);
        assert!(!p.stop(|_| false));
    }

    #[test]
    fn positions_written_before_the_kit_still_read() -> Result<(), serde_json::Error> {
        // The SQLite source's progress had only these three fields.
        let old: Progress<serde_json::Value> =
            serde_json::from_str(r#"{"tables":["t"],"last_key":[5],"id":"sig"}"#)?;
        assert_eq!(old.last_key, Some(vec![serde_json::json!(5)]));
        assert_eq!((old.chunks, old.max_key), (0, None));
        // PostgreSQL's: text per key column, nulls kept.
        let pg: Progress<Option<String>> = serde_json::from_str(
            r#"{"id":"s","tables":["public.t"],"last_key":["4",null],"max_key":["9",null],"conditions":{},"surrogate_key":null,"chunks":3}"#,
        )?;
        assert_eq!(pg.last_key, Some(vec![Some("4".to_owned()), None]));
        assert_eq!(
            serde_json::to_string(&pg)?,
            r#"{"id":"s","tables":["public.t"],"last_key":["4",null],"max_key":["9",null],"conditions":{},"surrogate_key":null,"chunks":3}"#,
            "the same document"
        );
        Ok(())
    }
}
