//! Incremental snapshots for SQLite, started by an `execute-snapshot` signal inserted into the
//! signaling table (itself in capture mode, so the signal arrives in commit order), the `file`
//! channel or the admin endpoint.
//!
//! It is DBLog's watermark algorithm with positions for watermarks, as the PostgreSQL source's
//! `read.only` mode: a chunk of rows (by key, after the last chunk's last key, up to the
//! table's maximum key when its scan started) is read in one read transaction together with
//! the change sequence `S`, so the chunk is the table's state at `S`. The window is the
//! stream's position `P` up to `S`: the changes in (`P`, `S`] are emitted first, and a chunk
//! row whose key changed in the window is dropped (the change's after-image is newer than or
//! equal to it); the remaining rows follow as `r` events. The kit's tracker keeps the progress
//! (it travels in the position after the chunk, so a restart continues with the next chunk),
//! carries out the signals and makes Debezium's notifications.

use rusqlite::types::Value as SqlValue;
use serde_json::Value as Json;
use sluice_engine::{ChangeEvent, Op, Value};

use sluice_kit::incremental::{next_window, Abilities, ChunkSource, Read, Step};
use sluice_kit::signal::{Received, Signal};

/// The progress of an incremental snapshot: the kit's, with key values as JSON.
pub(super) type Progress = sluice_kit::incremental::Progress<Json>;

/// The kit's incremental snapshot tracker, with key values as JSON.
pub(super) type Tracker = sluice_kit::incremental::Tracker<Json>;

/// What SQLite's incremental snapshots do beyond the plain one: nothing yet (blocking
/// snapshots, `additional-conditions` and surrogate keys are refused with a reason).
const ABILITIES: Abilities = Abilities {
    blocking: false,
    conditions: false,
    surrogate_key: false,
};

/// The tracker for a source resuming `resumed`: notifications name tables `main.<table>`.
pub(super) fn tracker(
    common: &sluice_kit::config::SourceCommon,
    resumed: Option<Progress>,
) -> Tracker {
    Tracker::new(resumed, common.notifications()).qualified("main")
}

/// A key value as JSON (for the position).
pub(super) fn to_json(v: &SqlValue) -> Json {
    match v {
        SqlValue::Null => Json::Null,
        SqlValue::Integer(i) => Json::from(*i),
        SqlValue::Real(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        SqlValue::Text(t) => Json::from(t.as_str()),
        SqlValue::Blob(b) => Json::Array(b.iter().map(|x| Json::from(*x)).collect()),
    }
}

/// A key value back from the position.
pub(super) fn from_json(j: &Json) -> SqlValue {
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

/// The key columns of `table`, quoted.
fn key_columns(table: &super::Table) -> Vec<String> {
    table
        .key
        .iter()
        .map(|i| super::quote(&table.columns[*i].0))
        .collect()
}

/// The chunk query of `table` ([`query_of`]).
fn chunk_query(table: &super::Table, after_key: bool, limit: usize) -> String {
    query_of(
        &super::quote(&table.name),
        &table.select_list(),
        &key_columns(table),
        after_key,
        limit,
    )
}

/// The chunk query: `limit` rows in key order up to the maximum key (bound as `?1..?n`), after
/// the last key read when there is one (bound as `?n+1..`).
fn query_of(table: &str, select: &str, keys: &[String], after_key: bool, limit: usize) -> String {
    let n = keys.len();
    let binds = |from: usize| {
        (from..from + n)
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let keys = keys.join(", ");
    let after = if after_key {
        format!(" and ({keys}) > ({})", binds(n + 1))
    } else {
        String::new()
    };
    format!(
        "select {select} from {table} where ({keys}) <= ({}){after} order by {keys} limit {limit}",
        binds(1),
    )
}

/// The table's maximum key (`None`: the table is empty).
fn max_key(
    tx: &rusqlite::Transaction<'_>,
    table: &super::Table,
) -> rusqlite::Result<Option<Vec<Json>>> {
    let keys = key_columns(table);
    let sql = format!(
        "select {} from {} order by {} limit 1",
        keys.join(", "),
        super::quote(&table.name),
        keys.iter()
            .map(|k| format!("{k} desc"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut stmt = tx.prepare(&sql)?;
    let mut rows = stmt.query([])?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    (0..keys.len())
        .map(|i| row.get::<_, SqlValue>(i).map(|v| to_json(&v)))
        .collect::<Result<_, _>>()
        .map(Some)
}

/// A chunk as read: its rows (`None`: left out by the failure handling mode, still counted)
/// with their keys, and the change sequence it is the state at.
/// The source's side of the kit's position-watermark chunks: a chunk is read in one read
/// transaction with the change sequence.
struct Chunks<'a> {
    source: &'a super::SqliteSource,
    conn: &'a mut rusqlite::Connection,
}

impl ChunkSource for Chunks<'_> {
    type Key = Json;
    type At = i64;
    type Table = super::Table;
    type Error = sluice_engine::ComponentError;

    fn topic(table: &super::Table) -> std::sync::Arc<str> {
        table.topic.clone()
    }

    async fn read(
        &mut self,
        table: &super::Table,
        p: &Progress,
        limit: usize,
    ) -> Result<Read<Json, i64>, sluice_engine::ComponentError> {
        self.source.read_chunk(self.conn, table, p, limit)
    }
}

impl super::SqliteSource {
    /// Acts on signal rows among `events` (inserts into the signaling table).
    pub(super) fn on_signals(
        &self,
        events: &[ChangeEvent],
        tables: &[super::Table],
        inc: &mut Tracker,
    ) {
        let Some(signal_table) = self.config.signal_table() else {
            return;
        };
        if !self.config.common.signal_channel("source") {
            return;
        }
        for event in events {
            if event.source_field("table").and_then(Value::as_str) != Some(signal_table.as_str()) {
                continue;
            }
            if let Some(signal) = sluice_kit::signal::from_insert(event) {
                self.act_on(&signal, tables, inc);
            }
        }
    }

    /// Carries out one signal, whichever channel brought it (the kit's tracker; a refusal is
    /// logged and notified). Chunks are read one at a time, none ahead: nothing to drop.
    fn act_on(&self, signal: &Signal, tables: &[super::Table], inc: &mut Tracker) {
        let signal_table = self.config.signal_table();
        let names: Vec<String> = tables
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| Some(n) != signal_table.as_ref())
            .collect();
        // Blocking snapshots are refused (ABILITIES): none is ever asked for.
        let mut blocking = None;
        inc.handle(signal, &names, "main", ABILITIES, &mut blocking);
    }

    /// The signals the `file`, `http` and `kafka` channels brought (read by the source's task,
    /// handed to the reader thread).
    pub(super) fn on_channel_signals(
        &self,
        received: &crossbeam_channel::Receiver<Vec<Received>>,
        tables: &[super::Table],
        inc: &mut Tracker,
    ) {
        for r in received.try_iter().flatten() {
            if let Some(signal) = r.signal() {
                self.act_on(&signal, tables, inc);
            }
        }
    }

    /// Sends the notifications waiting, at the stream's position `seq`; `false` once the
    /// source is stopping.
    pub(super) fn flush_notes(inc: &mut Tracker, seq: i64, out: &super::Out) -> bool {
        let events = inc.around(Vec::new(), |p| super::at(seq, p));
        let Some(position) = events.last().map(|e| e.position.clone()) else {
            return true;
        };
        out.send(sluice_engine::Batch {
            events,
            position: Some(position),
        })
    }

    /// Reads one chunk of `table` from `p` in one read transaction with the change sequence.
    fn read_chunk(
        &self,
        conn: &mut rusqlite::Connection,
        table: &super::Table,
        p: &Progress,
        limit: usize,
    ) -> Result<Read<Json, i64>, sluice_engine::ComponentError> {
        use super::sql_error;
        let tx = conn.transaction().map_err(|e| sql_error("BEGIN", e))?;
        let upto =
            super::capture::clock(&tx).map_err(|e| sql_error("reading the change sequence", e))?;
        let max = match &p.max_key {
            Some(max) => max.clone(),
            None => match max_key(&tx, table).map_err(|e| sql_error("maximum key query", e))? {
                Some(max) => max,
                None => return Ok(Read::Empty),
            },
        };
        let sql = chunk_query(table, p.last_key.is_some(), limit);
        let params: Vec<SqlValue> = max
            .iter()
            .chain(p.last_key.iter().flatten())
            .map(from_json)
            .collect();
        let mut stmt = tx.prepare(&sql).map_err(|e| sql_error("chunk query", e))?;
        let mut result = stmt
            .query(rusqlite::params_from_iter(params.iter()))
            .map_err(|e| sql_error("chunk query", e))?;
        let mut rows = Vec::new();
        while let Some(row) = result.next().map_err(|e| sql_error("chunk read", e))? {
            // A row left out by the failure handling mode still counts for the chunk.
            let after_image = self.image(table, row, 0)?;
            let key: Vec<Json> = table
                .key
                .iter()
                .map(|i| row.get::<_, SqlValue>(*i).map(|v| to_json(&v)))
                .collect::<Result<_, _>>()
                .map_err(|e| sql_error("chunk read", e))?;
            let event = after_image
                .map(|image| self.event(table, Op::Read, None, image, None, "incremental"));
            rows.push((event, key));
        }
        Ok(Read::Rows {
            at: upto,
            max_key: max,
            rows,
        })
    }

    /// Reads one chunk and merges it with the stream (see the module's documentation).
    /// `false`: the source is stopping.
    pub(super) fn chunk(
        &self,
        conn: &mut rusqlite::Connection,
        tables: &[super::Table],
        seq: &mut i64,
        inc: &mut Tracker,
        out: &super::Out,
    ) -> Result<bool, sluice_engine::ComponentError> {
        if !inc.wants_chunk() {
            return Ok(true);
        }
        let mut chunks = Chunks {
            source: self,
            conn: &mut *conn,
        };
        let find = |name: &str| tables.iter().find(|t| t.name == name);
        let limit = self.config.common.incremental_chunk_size;
        // SQLite reads synchronously: the step needs no waiting.
        let step = sluice_kit::incremental::now(next_window(&mut chunks, inc, find, limit))
            .ok_or_else(|| super::fatal("the incremental snapshot's chunk step waited"))??;
        let Step::Window(window) = step else {
            return Ok(Self::flush_notes(inc, *seq, out));
        };
        let mut window = *window;
        // The window (the kit's, closing at the chunk's change sequence): changes up to it go
        // first; they supersede the chunk's rows of their keys. Their positions carry the
        // progress delivered before.
        let upto = *window.at();
        while !window.passed_by(seq) {
            let (events, position) =
                self.poll(conn, tables, *seq, upto, &out.cut, inc.delivered_json())?;
            if events.is_empty() && position == *seq {
                break;
            }
            for e in &events {
                window.evict_by(e);
            }
            *seq = position;
            let batch = sluice_engine::Batch {
                events,
                position: Some(super::at(*seq, inc.delivered_json())),
            };
            if !out.send(batch) {
                return Ok(false);
            }
        }
        *seq = upto.max(*seq);
        // The progress after the chunk; its rows with the notifications around them.
        let rows = window.close(inc);
        let events = inc.around(rows, |p| super::at(*seq, p));
        Ok(out.send(sluice_engine::Batch {
            events,
            position: Some(super::at(*seq, inc.delivered_json())),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_in_order_up_to_the_maximum() {
        let keys = [r#""a""#.to_owned(), r#""b""#.to_owned()];
        let q = |after| query_of(r#""t""#, r#""a", "b", "v""#, &keys, after, 50);
        assert_eq!(
            q(false),
            r#"select "a", "b", "v" from "t" where ("a", "b") <= (?1, ?2) order by "a", "b" limit 50"#
        );
        assert_eq!(
            q(true),
            r#"select "a", "b", "v" from "t" where ("a", "b") <= (?1, ?2) and ("a", "b") > (?3, ?4) order by "a", "b" limit 50"#
        );
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
