//! The progress of an incremental snapshot (Debezium's DBLog-style chunked snapshot), shared by
//! every source that runs one: the tables left, where the current one stands, the signal's
//! filters. It travels in positions ([`crate::position::with_progress`]), so a restart
//! continues after the last chunk whose rows were delivered. `K` is how the source writes one
//! key column's value (PostgreSQL: its text form; SQLite: JSON).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What survives a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress<K> {
    /// The snapshot's id (the signal's).
    #[serde(default)]
    pub id: String,
    /// Tables left, by the source's table name, the current one first.
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

#[cfg(test)]
mod tests {
    use super::*;

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
