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

use rusqlite::types::Value as SqlValue;
use serde_json::Value as Json;
use sluice_engine::{ChangeEvent, Op, Value};

use sluice_kit::incremental::KeyBuffer;
use sluice_kit::notification::{Notification, Notifications};
use std::time::{Duration, Instant};

use sluice_kit::signal::{from_json_line, interpret, Action, Collections, FileChannel, Signal};

/// The progress of an incremental snapshot: the kit's, with key values as JSON.
pub(super) type Progress = sluice_kit::incremental::Progress<Json>;

/// Debezium's incremental snapshot notifications (`STARTED`, `TABLE_SCAN_COMPLETED`,
/// `COMPLETED`, `ABORTED`): logged, and with the `sink` channel sent as records on
/// `notification.sink.topic.name` at the position they were made at.
pub(super) struct Notes {
    sink: Option<Notifications>,
    pending: Vec<Notification>,
    /// The snapshot's tables, as `main.<table>`, comma-separated.
    collections: String,
    /// Rows read of the current table so far.
    scanned: u64,
}

impl Notes {
    pub(super) fn new(common: &sluice_kit::config::SourceCommon) -> Self {
        Notes {
            sink: common
                .notification_sink()
                .flatten()
                .map(|topic| Notifications::new(topic, &common.topic_prefix)),
            pending: Vec::new(),
            collections: String::new(),
            scanned: 0,
        }
    }

    fn note(&mut self, id: &str, kind: &'static str, data: Vec<(&'static str, String)>) {
        tracing::info!(notification = kind, id, data = ?data, "Incremental snapshot.");
        if self.sink.is_some() {
            self.pending.push(Notification {
                id: id.to_owned(),
                kind,
                aggregate: "Incremental Snapshot",
                data,
            });
        }
    }

    /// Sends the notifications made since the last call, at `position`; `false` once the
    /// source is stopping.
    pub(super) fn flush(&mut self, out: &super::Out, position: sluice_engine::Position) -> bool {
        let Some(sink) = &self.sink else {
            return true;
        };
        if self.pending.is_empty() {
            return true;
        }
        let events = self
            .pending
            .drain(..)
            .map(|n| sink.event_now(&n, position.clone()))
            .collect();
        out.send(sluice_engine::Batch {
            events,
            position: Some(position),
        })
    }
}

/// The `file` signal channel (`signal.file`), read every `signal.poll.interval.ms`.
pub(super) struct FileSignals {
    channel: FileChannel,
    every: Duration,
    next: Instant,
}

impl FileSignals {
    /// The channel, when `signal.enabled.channels` has `file`.
    pub(super) fn new(common: &sluice_kit::config::SourceCommon) -> Option<Self> {
        let path = common.signal_file.clone()?;
        common.signal_channel("file").then(|| FileSignals {
            channel: FileChannel { path },
            every: Duration::from_millis(common.signal_poll_interval_ms.max(10)),
            next: Instant::now(),
        })
    }
}

/// The signal an insert into the signaling table carries (`id`, `type`, `data` columns).
pub(super) fn signal_of(event: &ChangeEvent) -> Option<Signal> {
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
    Some(Signal {
        id: text("id").unwrap_or_default(),
        kind: text("type")?,
        data: text("data").filter(|d| !d.trim().is_empty()),
    })
}

/// Carries out a signal on the incremental snapshot's progress; `Err` says why it cannot be.
/// `tables` are the captured tables a signal may select.
pub(super) fn act(
    signal: &Signal,
    tables: &[String],
    progress: &mut Option<Progress>,
) -> Result<(), String> {
    let unsupported = |what: &str| Err(format!("{what} are not supported by the sqlite source"));
    match interpret(signal)? {
        None => {
            tracing::info!(id = %signal.id, r#type = %signal.kind, "Signal with nothing to do.")
        }
        Some(Action::Execute { blocking: true, .. }) => {
            return unsupported("blocking snapshots (use `type: incremental`)")
        }
        Some(Action::Execute { conditions, .. }) if !conditions.is_empty() => {
            return unsupported("`additional-conditions`")
        }
        Some(Action::Execute {
            surrogate_key: Some(_),
            ..
        }) => return unsupported("surrogate keys"),
        Some(Action::Execute { collections, .. }) => {
            let selected = Collections::new(&collections, "main").select(tables);
            if selected.is_empty() {
                return Err(format!("no captured table matches {collections:?}"));
            }
            tracing::info!(signal = %signal.id, tables = %selected.join(","), "Incremental snapshot requested.");
            match progress {
                Some(p) => p.add(&selected, &Default::default()),
                None => {
                    *progress = Some(Progress::new(
                        &signal.id,
                        selected,
                        Default::default(),
                        None,
                    ))
                }
            }
        }
        Some(Action::Stop(None)) => {
            if progress.take().is_some() {
                tracing::info!("Incremental snapshot stopped by a signal.");
            }
        }
        Some(Action::Stop(Some(collections))) => {
            let stop = Collections::new(&collections, "main");
            if let Some(p) = progress.as_mut() {
                let left = p.stop(|t| stop.matches(t));
                tracing::info!(tables = ?collections, "Incremental snapshot of tables stopped by a signal.");
                if !left {
                    *progress = None;
                }
            }
        }
        Some(Action::Pause | Action::Resume) => {
            return unsupported("pausing and resuming incremental snapshots")
        }
        Some(Action::Log(message)) => tracing::info!(id = %signal.id, %message, "Log signal."),
    }
    Ok(())
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

/// The chunk query: `limit` rows in key order, after the last key read when there is one
/// (bound as `?1..`).
fn chunk_query(table: &super::Table, after_key: bool, limit: usize) -> String {
    use super::quote;
    let key_names: Vec<String> = table
        .key
        .iter()
        .map(|i| quote(&table.columns[*i].0))
        .collect();
    let cols = table.select_list();
    let after = if after_key {
        format!(
            " where ({}) > ({})",
            key_names.join(", "),
            (1..=key_names.len())
                .map(|i| format!("?{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        String::new()
    };
    format!(
        "select {cols} from {}{after} order by {} limit {limit}",
        quote(&table.name),
        key_names.join(", ")
    )
}

/// The progress after a chunk of `read` rows of `name` (`limit` asked for, `last_key` the
/// last one read): the table is done when the chunk came short, the snapshot when no table is
/// left; the notifications say so.
fn advance(
    progress: &mut Option<Progress>,
    name: &str,
    read: usize,
    limit: usize,
    last_key: Option<Vec<Json>>,
    notes: &mut Notes,
) {
    if let Some(p) = progress.as_mut() {
        notes.scanned += read as u64;
        if read < limit {
            tracing::info!(table = %name, "Incremental snapshot of the table completed.");
            p.table_done();
            let data = vec![
                ("scanned_collection", format!("main.{name}")),
                (
                    "total_rows_scanned",
                    std::mem::take(&mut notes.scanned).to_string(),
                ),
                ("status", "SUCCEEDED".to_owned()),
                ("data_collections", notes.collections.clone()),
            ];
            notes.note(&p.id, "TABLE_SCAN_COMPLETED", data);
        } else {
            p.last_key = last_key;
        }
        if p.tables.is_empty() {
            tracing::info!(signal = %p.id, "Incremental snapshot completed.");
            notes.note(&p.id, "COMPLETED", Vec::new());
            *progress = None;
        }
    }
}

impl super::SqliteSource {
    /// Acts on signal rows among `events` (inserts into the signaling table).
    pub(super) fn on_signals(
        &self,
        events: &[ChangeEvent],
        tables: &[super::Table],
        progress: &mut Option<Progress>,
        notes: &mut Notes,
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
            if let Some(signal) = signal_of(event) {
                self.act_on(&signal, tables, progress, notes);
            }
        }
    }

    /// Carries out one signal, whichever channel brought it; a refusal is logged.
    fn act_on(
        &self,
        signal: &Signal,
        tables: &[super::Table],
        progress: &mut Option<Progress>,
        notes: &mut Notes,
    ) {
        let signal_table = self.config.signal_table();
        let names: Vec<String> = tables
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| Some(n) != signal_table.as_ref())
            .collect();
        let before = progress.clone();
        if let Err(reason) = act(signal, &names, progress) {
            tracing::warn!(id = %signal.id, r#type = %signal.kind, %reason, "Signal refused.");
            return;
        }
        let listed = |p: &Option<Progress>| {
            p.as_ref().map_or_else(String::new, |p| {
                p.tables
                    .iter()
                    .map(|t| format!("main.{t}"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
        };
        match signal.kind.as_str() {
            "execute-snapshot" => {
                if before.is_none() {
                    notes.collections = listed(progress);
                } else {
                    for t in listed(progress).split(',') {
                        if !notes.collections.split(',').any(|c| c == t) {
                            notes.collections = format!("{},{t}", notes.collections);
                        }
                    }
                }
                let id = progress
                    .as_ref()
                    .map_or(signal.id.clone(), |p| p.id.clone());
                let data = vec![("data_collections", notes.collections.clone())];
                notes.note(&id, "STARTED", data);
            }
            "stop-snapshot" => {
                if let Some(p) = &before {
                    let data = vec![("data_collections", listed(progress))];
                    notes.note(&p.id, "ABORTED", data);
                }
            }
            _ => {}
        }
    }

    /// Takes the signals the admin endpoint queued (`http` channel).
    pub(super) fn on_http_signals(
        &self,
        http: Option<&sluice_engine::runtime::admin::SignalQueue>,
        tables: &[super::Table],
        progress: &mut Option<Progress>,
        notes: &mut Notes,
    ) {
        let Some(queue) = http else {
            return;
        };
        let mut lines = Vec::new();
        {
            let mut rx = queue.blocking_lock();
            while let Ok(line) = rx.try_recv() {
                lines.push(line);
            }
        }
        for line in lines {
            match from_json_line(&line) {
                Ok(signal) => self.act_on(&signal, tables, progress, notes),
                Err(reason) => tracing::warn!(%reason, line = %line, "Signal refused."),
            }
        }
    }

    /// Reads the `file` channel when it is due (every `signal.poll.interval.ms`).
    pub(super) fn on_file_signals(
        &self,
        file: &mut Option<FileSignals>,
        tables: &[super::Table],
        progress: &mut Option<Progress>,
        notes: &mut Notes,
    ) {
        let Some(f) = file.as_mut() else {
            return;
        };
        if Instant::now() < f.next {
            return;
        }
        f.next = Instant::now() + f.every;
        for line in f.channel.take() {
            match from_json_line(&line) {
                Ok(signal) => self.act_on(&signal, tables, progress, notes),
                Err(reason) => {
                    tracing::warn!(%reason, line = %line, "Signal refused.")
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
        notes: &mut Notes,
    ) -> Result<bool, sluice_engine::ComponentError> {
        use super::{at, sql_error};
        let Some(p) = progress.as_mut() else {
            return Ok(true);
        };
        let Some(name) = p.current().map(str::to_owned) else {
            *progress = None;
            return Ok(true);
        };
        let Some(table) = tables.iter().find(|t| t.name == name) else {
            tracing::warn!(table = %name, "A table to snapshot is no longer captured; skipped.");
            p.table_done();
            return Ok(true);
        };
        let limit = self.config.common.incremental_chunk_size;
        let sql = chunk_query(table, p.last_key.is_some(), limit);
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
            (upto, rows)
        };
        // The window: changes up to `upto` go first; they supersede the chunk's rows of their
        // keys (the kit's DBLog buffer).
        let last_key = rows.last().map(|(_, k)| k.clone());
        let read = rows.len();
        let mut buffer = KeyBuffer::new(rows.into_iter().filter_map(|(e, _)| e).collect());
        let before_chunk = progress.clone();
        while *seq < upto {
            let (events, position) =
                self.poll(conn, tables, *seq, upto, &out.cut, &before_chunk)?;
            if events.is_empty() && position == *seq {
                break;
            }
            for e in events.iter().filter(|e| e.topic == table.topic) {
                buffer.evict_by(e);
            }
            *seq = position;
            let batch = sluice_engine::Batch {
                events,
                position: Some(at(*seq, &before_chunk)),
            };
            if !out.send(batch) {
                return Ok(false);
            }
        }
        *seq = upto.max(*seq);
        // Progress after the chunk.
        advance(progress, &name, read, limit, last_key, notes);
        let position = at(*seq, progress);
        let events: Vec<ChangeEvent> = buffer
            .into_rows()
            .into_iter()
            .map(|mut e| {
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

    fn signal(kind: &str, data: &str) -> Signal {
        Signal {
            id: "s-1".into(),
            kind: kind.into(),
            data: Some(data.into()),
        }
    }

    #[test]
    fn signals_drive_the_progress_or_say_why_not() {
        let tables = vec!["customers".to_owned(), "orders".to_owned()];
        let mut progress = None;
        let execute = signal(
            "execute-snapshot",
            r#"{"data-collections": ["main.orders", "c.*"]}"#,
        );
        assert_eq!(act(&execute, &tables, &mut progress), Ok(()));
        let p = progress.clone().unwrap_or_else(|| panic!("no progress"));
        assert_eq!(p.tables, ["orders", "customers"]);
        let stop_one = signal(
            "stop-snapshot",
            r#"{"data-collections": ["orders"], "type": "incremental"}"#,
        );
        assert_eq!(act(&stop_one, &tables, &mut progress), Ok(()));
        assert_eq!(
            progress.as_ref().map(|p| p.tables.clone()),
            Some(["customers".to_owned()].into())
        );
        let stop = signal("stop-snapshot", r#"{"type": "incremental"}"#);
        assert_eq!(act(&stop, &tables, &mut progress), Ok(()));
        assert_eq!(progress, None);
        for (kind, data, reason) in [
            (
                "execute-snapshot",
                r#"{"data-collections": ["x"]}"#,
                "no captured table",
            ),
            (
                "execute-snapshot",
                r#"{"data-collections": ["orders"], "type": "blocking"}"#,
                "blocking",
            ),
            (
                "execute-snapshot",
                r#"{"data-collections": ["("]}"#,
                "not a valid regex",
            ),
            ("pause-snapshot", "{}", "not supported"),
            ("reboot", "{}", "unknown signal type"),
        ] {
            let e = act(&signal(kind, data), &tables, &mut progress).unwrap_err();
            assert!(e.contains(reason), "{kind} {data}: {e}");
        }
        assert_eq!(progress, None);
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
