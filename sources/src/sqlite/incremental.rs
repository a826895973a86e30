//! Incremental snapshots for SQLite, started by an `execute-snapshot` signal inserted into the
//! signaling table (itself in capture mode, so the signal arrives in commit order).
//!
//! It is DBLog's watermark algorithm with positions for watermarks, as the PostgreSQL source's
//! `read.only` mode: a chunk of rows (by key, after the last chunk's last key) is read in one
//! read transaction together with the change sequence `S`, so the chunk is the table's state at
//! `S`. The window is the stream's position `P` up to `S`: the changes in (`P`, `S`] are
//! emitted first, and a chunk row whose key changed in the window is dropped (the change's
//! after-image is newer than or equal to it); the remaining rows follow as `r` events. The
//! position after a chunk carries the progress, so a restart continues with the next chunk.

use std::collections::VecDeque;

use rusqlite::types::Value as SqlValue;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use sluice_engine::{ChangeEvent, Op, Value};

/// The progress of an incremental snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Tables still to read, the current one first.
    pub tables: VecDeque<String>,
    /// The current table's last key read (`None`: from its start).
    #[serde(default)]
    pub last_key: Option<Vec<Json>>,
    /// The signal's id (in notifications and logs).
    #[serde(default)]
    pub id: String,
}

/// What a signal row asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Snapshot these tables (names as given: `orders` or `main.orders`).
    Execute {
        /// The signal's id.
        id: String,
        /// Regexes or names of tables.
        collections: Vec<String>,
    },
    /// Stop the running incremental snapshot.
    Stop,
}

/// The command of an insert into the signaling table, if it is one Sluice acts on.
pub fn command(event: &ChangeEvent) -> Option<Result<Command, String>> {
    if event.op() != Some(Op::Create) {
        return None;
    }
    let after = event
        .value
        .as_ref()?
        .value
        .as_struct()?
        .get("after")?
        .as_struct()?;
    let text = |name: &str| match after.get(name) {
        Some(Value::String(s)) => Some(s.to_string()),
        Some(Value::Bytes(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    };
    let id = text("id").unwrap_or_default();
    let kind = text("type")?;
    let data: Json = match text("data") {
        Some(d) if !d.trim().is_empty() => match serde_json::from_str(&d) {
            Ok(j) => j,
            Err(e) => return Some(Err(format!("signal `{id}`: `data` is not JSON: {e}"))),
        },
        _ => Json::Null,
    };
    match kind.as_str() {
        "execute-snapshot" => {
            if let Some(t) = data.get("type").and_then(Json::as_str) {
                if !t.eq_ignore_ascii_case("incremental") {
                    return Some(Err(format!(
                        "signal `{id}`: only incremental snapshots are supported by the sqlite source, not `{t}`"
                    )));
                }
            }
            let collections = data
                .get("data-collections")
                .and_then(Json::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Json::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            Some(Ok(Command::Execute { id, collections }))
        }
        "stop-snapshot" => Some(Ok(Command::Stop)),
        _ => None,
    }
}

/// The captured tables a signal's collections select (names or anchored regexes on `table` or
/// `main.table`), in the order of `tables`.
pub fn select(collections: &[String], tables: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for c in collections {
        let re = regex::Regex::new(&format!("^(?:{c})$"))
            .map_err(|e| format!("data collection `{c}` is not a valid regex: {e}"))?;
        for t in tables {
            if (re.is_match(t) || re.is_match(&format!("main.{t}"))) && !out.contains(t) {
                out.push(t.clone());
            }
        }
    }
    Ok(out)
}

/// A key value as JSON (for the position).
pub fn to_json(v: &SqlValue) -> Json {
    match v {
        SqlValue::Null => Json::Null,
        SqlValue::Integer(i) => Json::from(*i),
        SqlValue::Real(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        SqlValue::Text(t) => Json::from(t.as_str()),
        SqlValue::Blob(b) => Json::Array(b.iter().map(|x| Json::from(*x)).collect()),
    }
}

/// A key value back from the position.
pub fn from_json(j: &Json) -> SqlValue {
    match j {
        Json::Null => SqlValue::Null,
        Json::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Json::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64().unwrap_or(0.0)),
        },
        Json::String(s) => SqlValue::Text(s.clone()),
        Json::Array(a) => SqlValue::Blob(
            a.iter()
                .filter_map(|x| x.as_u64().map(|b| b as u8))
                .collect(),
        ),
        Json::Object(_) => SqlValue::Text(j.to_string()),
    }
}

impl super::SqliteSource {
    /// Acts on signal rows among `events` (inserts into the signaling table).
    pub(super) fn on_signals(
        &self,
        events: &[ChangeEvent],
        tables: &[super::Table],
        progress: &mut Option<Progress>,
    ) {
        let Some(signal_table) = self.config.signal_table() else {
            return;
        };
        for event in events {
            if event.source_field("table").and_then(Value::as_str) != Some(signal_table) {
                continue;
            }
            match command(event) {
                None => {}
                Some(Err(reason)) => tracing::warn!(reason, "Signal refused."),
                Some(Ok(Command::Stop)) if progress.take().is_some() => {
                    tracing::info!("Incremental snapshot stopped by a signal.");
                }
                Some(Ok(Command::Stop)) => {}
                Some(Ok(Command::Execute { id, collections })) => {
                    let names: Vec<String> = tables
                        .iter()
                        .map(|t| t.name.clone())
                        .filter(|n| n != signal_table)
                        .collect();
                    match select(&collections, &names) {
                        Ok(selected) if !selected.is_empty() => {
                            tracing::info!(signal = %id, tables = %selected.join(","), "Incremental snapshot requested.");
                            let p = progress.get_or_insert_with(|| Progress {
                                tables: VecDeque::new(),
                                last_key: None,
                                id: id.clone(),
                            });
                            for t in selected {
                                if !p.tables.contains(&t) {
                                    p.tables.push_back(t);
                                }
                            }
                        }
                        Ok(_) => {
                            tracing::warn!(signal = %id, ?collections, "The signal selects no captured table; nothing to snapshot.")
                        }
                        Err(reason) => tracing::warn!(signal = %id, reason, "Signal refused."),
                    }
                }
            }
        }
    }

    /// Reads one chunk and merges it with the stream (see the module's documentation).
    /// `false`: the source is stopping.
    pub(super) fn chunk(
        &self,
        conn: &mut rusqlite::Connection,
        tables: &[super::Table],
        seq: &mut i64,
        progress: &mut Option<Progress>,
        out: &super::Out,
    ) -> Result<bool, sluice_engine::ComponentError> {
        use super::{quote, sql_error, Offset};
        let Some(p) = progress.as_mut() else {
            return Ok(true);
        };
        let Some(name) = p.tables.front().cloned() else {
            *progress = None;
            return Ok(true);
        };
        let Some(table) = tables.iter().find(|t| t.name == name) else {
            tracing::warn!(table = %name, "A table to snapshot is no longer captured; skipped.");
            p.tables.pop_front();
            p.last_key = None;
            return Ok(true);
        };
        let limit = self.config.chunk_size;
        let key_names: Vec<String> = table
            .key
            .iter()
            .map(|i| quote(&table.columns[*i].0))
            .collect();
        let cols = table
            .columns
            .iter()
            .map(|(n, _)| quote(n))
            .collect::<Vec<_>>()
            .join(", ");
        let after = match &p.last_key {
            Some(_) => format!(
                " where ({}) > ({})",
                key_names.join(", "),
                (1..=key_names.len())
                    .map(|i| format!("?{i}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => String::new(),
        };
        let sql = format!(
            "select {cols} from {}{after} order by {} limit {limit}",
            quote(&table.name),
            key_names.join(", ")
        );
        let params: Vec<SqlValue> = p.last_key.iter().flatten().map(from_json).collect();
        // The chunk and the sequence in one read transaction: the chunk is the state at `upto`.
        let (upto, rows) = {
            let tx = conn.transaction().map_err(|e| sql_error("BEGIN", e))?;
            let upto = super::capture::clock(&tx)
                .map_err(|e| sql_error("reading the change sequence", e))?;
            let mut stmt = tx.prepare(&sql).map_err(|e| sql_error("chunk query", e))?;
            let mut result = stmt
                .query(rusqlite::params_from_iter(params.iter()))
                .map_err(|e| sql_error("chunk query", e))?;
            let mut rows = Vec::new();
            while let Some(row) = result.next().map_err(|e| sql_error("chunk read", e))? {
                let after_image = Self::image(table, row, 0)?;
                let key: Vec<Json> = table
                    .key
                    .iter()
                    .map(|i| row.get::<_, SqlValue>(*i).map(|v| to_json(&v)))
                    .collect::<Result<_, _>>()
                    .map_err(|e| sql_error("chunk read", e))?;
                let event = self.event(table, Op::Read, None, after_image, None, "incremental");
                rows.push((event, key));
            }
            (upto, rows)
        };
        // The window: changes up to `upto` go first; they supersede the chunk's rows of their keys.
        let mut touched = std::collections::HashSet::new();
        let before_chunk = progress.clone();
        while *seq < upto {
            let (events, position) =
                self.poll(conn, tables, *seq, upto, &out.cut, &before_chunk)?;
            if events.is_empty() {
                break;
            }
            for e in events.iter().filter(|e| e.topic == table.topic) {
                if let Some(k) = &e.key {
                    touched.insert(format!("{:?}", k.value));
                }
            }
            *seq = position;
            let batch = sluice_engine::Batch {
                events,
                position: Some(Offset::at(*seq, &before_chunk)),
            };
            if !out.send(batch) {
                return Ok(false);
            }
        }
        *seq = upto.max(*seq);
        // Progress after the chunk.
        if let Some(p) = progress.as_mut() {
            if rows.len() < limit {
                tracing::info!(table = %name, "Incremental snapshot of the table completed.");
                p.tables.pop_front();
                p.last_key = None;
            } else {
                p.last_key = rows.last().map(|(_, k)| k.clone());
            }
            if p.tables.is_empty() {
                tracing::info!(signal = %p.id, "Incremental snapshot completed.");
                *progress = None;
            }
        }
        let position = Offset::at(*seq, progress);
        let events: Vec<ChangeEvent> = rows
            .into_iter()
            .filter(|(e, _)| {
                !e.key
                    .as_ref()
                    .is_some_and(|k| touched.contains(&format!("{:?}", k.value)))
            })
            .map(|(mut e, _)| {
                e.position = position.clone();
                e
            })
            .collect();
        Ok(out.send(sluice_engine::Batch {
            events,
            position: Some(position),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collections_select_captured_tables_by_name_or_regex() {
        let tables = vec![
            "customers".to_owned(),
            "orders".to_owned(),
            "debezium_signal".to_owned(),
        ];
        assert_eq!(
            select(&["main.orders".into()], &tables),
            Ok(vec!["orders".to_owned()])
        );
        assert_eq!(
            select(&["c.*".into(), "orders".into()], &tables),
            Ok(vec!["customers".to_owned(), "orders".to_owned()])
        );
        assert!(select(&["(".into()], &tables).is_err());
    }

    proptest::proptest! {
        #[test]
        fn keys_survive_the_position(i in proptest::num::i64::ANY, t in ".{0,16}", b in proptest::collection::vec(0u8..=255, 0..8)) {
            for v in [SqlValue::Integer(i), SqlValue::Text(t.clone()), SqlValue::Blob(b.clone()), SqlValue::Null] {
                let back: Json = serde_json::from_str(&to_json(&v).to_string()).unwrap_or_default();
                proptest::prop_assert_eq!(from_json(&back), v);
            }
        }
    }
}
