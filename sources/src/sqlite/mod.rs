//! `sqlite`: change data capture for SQLite through capture mode ([`capture`]).
//!
//! The snapshot reads every captured table in one read transaction, together with the
//! sequence number of the last change (`_sluice_clock`), so snapshot and stream meet with no gap
//! and no duplicate (the `snapshot` module). The stream then polls the change tables for
//! changes after that number, merged across tables in sequence (commit) order. Positions are
//! `{"seq": N, "snapshot_completed": bool}`; change rows up to the committed position are
//! purged.

pub mod capture;
mod config;
pub mod demo;
mod heartbeat;
mod incremental;
mod lifecycle;
mod snapshot;
mod table;
pub mod types;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};
use sluice_engine::event::{BatchCut, SourceConstants, SourceTimestamps};
use sluice_engine::{
    Batch, BuildContext, ChangeEvent, ComponentError, Op, Position, Record, Schema, Source,
    SourceContext, Struct, Value,
};

pub use config::SqliteConfig;

use capture::{quote, Captured};
use incremental::Progress;
use sluice_kit::failure::{Refusal, RowError};
use sluice_kit::position::Resume;
use table::Table;

/// Where the change stream resumes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Point {
    seq: i64,
    snapshot_completed: bool,
}

/// Where a restarted source resumes: the stream's point and a running incremental snapshot.
type Offset = Resume<Point, Progress>;

/// A committed position as this source reads it, rendered back (`docs/positions.md`'s test).
#[cfg(test)]
pub(crate) fn reread(text: &str) -> Result<serde_json::Value, sluice_kit::position::PositionError> {
    sluice_kit::position::reread::<Point, Progress>(text, "sqlite")
}

/// The position after change `seq` of a completed snapshot, with a running incremental
/// snapshot's progress (rendered by the kit's tracker).
fn at(seq: i64, incremental: Option<&serde_json::value::RawValue>) -> Position {
    let point = Point {
        seq,
        snapshot_completed: true,
    };
    match incremental {
        Some(progress) => sluice_kit::position::with_progress(&point, progress),
        None => Offset {
            at: point,
            incremental: None,
        }
        .position(),
    }
}

/// A change's before and after images.
type Images = (Option<Struct>, Option<Struct>);

/// The running source.
#[derive(Clone)]
pub struct SqliteSource {
    config: SqliteConfig,
    source_schema: Arc<Schema>,
    /// `source.version`, `connector` and `name`, and `source.db` and `schema`: made once.
    constants: SourceConstants,
    source_db: Value,
    source_schema_name: Value,
    /// `skipped.operations`.
    skipped: sluice_kit::config::Skipped,
}

fn fatal(message: impl Into<String>) -> ComponentError {
    ComponentError::fatal(message)
}

fn sql_error(what: &str, e: rusqlite::Error) -> ComponentError {
    let busy = matches!(&e, rusqlite::Error::SqliteFailure(f, _) if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked));
    let message = format!("{what}: {e}");
    let error = if busy {
        ComponentError::retryable(message)
    } else {
        ComponentError::fatal(message)
    };
    error.with_source(e)
}

sluice_engine::source_block! {
    /// The `sqlite` source's `source` block (Sluice's own connector).
    struct SqliteSourceBlock {
        ts_us: Int64 | null,
        ts_ns: Int64 | null,
        schema: String,
        table: String,
        seq: Int64 | null,
    }
}

impl SqliteSource {
    /// A source for `config`.
    pub fn new(config: SqliteConfig, _ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        let skipped = config.common.skipped().map_err(fatal)?;
        let db_name = config
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "main".into());
        let source_schema = SqliteSourceBlock::schema("io.sluice.connector.sqlite.Source");
        let constants = SourceConstants::new(crate::VERSION, "sqlite", &config.common.topic_prefix);
        Ok(SqliteSource {
            config,
            source_db: Value::from(db_name.as_str()),
            source_schema,
            constants,
            source_schema_name: Value::from("main"),
            skipped,
        })
    }

    fn open(&self) -> Result<Connection, ComponentError> {
        let path = &self.config.path;
        if !path.exists() {
            return Err(fatal(format!(
                "the SQLite database {} does not exist: check `database.path`",
                path.display()
            )));
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| sql_error(&format!("cannot open {}", path.display()), e))?;
        conn.busy_timeout(Duration::from_secs(10))
            .map_err(|e| sql_error("busy_timeout", e))?;
        Ok(conn)
    }

    /// The captured tables this source reads, checked against their current shape.
    fn tables(&self, conn: &Connection) -> Result<Vec<Table>, ComponentError> {
        let path = self.config.path.display();
        let captured: Vec<Captured> = capture::captured(conn)
            .map_err(|e| {
                ComponentError::from_classified(
                    format!("{path}: cannot read the capture tables: {e}"),
                    e,
                )
            })?
            .into_iter()
            .filter(|c| self.config.selects(&c.table))
            .collect();
        if captured.is_empty() {
            return Err(fatal(format!(
                "no selected table of {path} is in capture mode: run `sluice capture enable {path} TABLE...`"
            )));
        }
        let mut tables = Vec::new();
        for c in captured {
            let (now, _) = capture::describe(conn, &c.table)
                .map_err(|e| sql_error("reading the table's columns", e))?
                .ok_or_else(|| fatal(format!("table `{}` is in capture mode but no longer exists: run `sluice capture disable {path} {}`", c.table, c.table)))?;
            if now != c.columns {
                return Err(fatal(format!(
                    "table `{}` changed since capture was enabled (columns now: {}): run `sluice capture enable {path} {}` again to capture its new shape",
                    c.table,
                    now.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
                    c.table
                )));
            }
            tables.push(table::build(&c, &self.config.common, &self.source_schema)?);
        }
        Ok(tables)
    }

    fn event(
        &self,
        table: &Table,
        op: Op,
        before: Option<Struct>,
        after: Option<Struct>,
        change: Option<(i64, i64)>,
        snapshot: &str,
    ) -> ChangeEvent {
        let ts = SourceTimestamps::now();
        // `source.ts_ms` is when the change was made (the trigger's clock), as a database's
        // commit time in Debezium; the envelope's is when Sluice read it.
        let made = change.map_or(ts, |(_, ms)| SourceTimestamps {
            nanos: ms.saturating_mul(1_000_000),
        });
        let seq = change.map(|(seq, _)| seq);
        let source = SqliteSourceBlock {
            head: (self.constants).head(self.source_db.clone(), made.millis(), snapshot),
            ts_us: Value::Int64(made.micros()),
            ts_ns: Value::Int64(made.nanos),
            schema: self.source_schema_name.clone(),
            table: table.source_table.clone(),
            seq: seq.map_or(Value::Null, Value::Int64),
        }
        .into_struct(&self.source_schema);
        let row = before.as_ref().or(after.as_ref());
        let key = table.envelope.key.as_ref().and_then(|schema| {
            let values = table
                .event_key
                .iter()
                .map(|i| row.map_or(Value::Null, |r| r.values()[*i].clone()))
                .collect();
            Struct::from_values(schema.clone(), values).map(|s| Record {
                schema: schema.clone(),
                value: Value::Struct(s),
            })
        });
        let value = table.envelope.value(op, before, after, source, None, ts);
        ChangeEvent {
            topic: table.topic.clone(),
            key,
            value: Some(value),
            headers: Vec::new(),
            position: Position::Offset(0),
        }
    }

    /// A row image from `columns` starting at `first` of a result row. `Ok(None)`: a value in
    /// it cannot be represented and `event.processing.failure.handling.mode` skips the change.
    fn image(
        &self,
        table: &Table,
        row: &rusqlite::Row<'_>,
        first: usize,
    ) -> Result<Option<Option<Struct>>, ComponentError> {
        let mut values = Vec::with_capacity(table.columns.len());
        let mut all_null = true;
        for (i, (name, kind)) in table.columns.iter().enumerate() {
            let v = row
                .get_ref(first + i)
                .map_err(|e| sql_error("reading a row", e))?;
            let v = match types::value(*kind, v) {
                Ok(v) => table.mapped(i, v),
                Err(reason) => {
                    return self
                        .unrepresentable(table, row, first, name, &reason)
                        .map(|()| None)
                }
            };
            all_null &= v.is_null();
            values.push(v);
        }
        Ok(Some(
            Struct::from_values(table.envelope.row.clone(), values).filter(|_| !all_null),
        ))
    }

    /// The before and after images of a change row (`None`: left out, see [`Self::image`]).
    fn images(
        &self,
        table: &Table,
        row: &rusqlite::Row<'_>,
        op: Op,
    ) -> Result<Option<Images>, ComponentError> {
        let width = table.columns.len();
        let before = match op {
            Op::Create => None,
            _ => match self.image(table, row, 3)? {
                Some(image) => image,
                None => return Ok(None),
            },
        };
        let after = match op {
            Op::Delete => None,
            _ => match self.image(table, row, 3 + width)? {
                Some(image) => image,
                None => return Ok(None),
            },
        };
        Ok(Some((before, after)))
    }

    /// What to do about a stored value that does not fit its column.
    const FIX: &'static str = "fix the stored value or declare the column with a type that fits it, then re-run `sluice capture enable`";

    /// A stored value that does not fit its column's type: an error, or (`warn`, `skip`) the
    /// change is left out; `warn` logs the table, column and key.
    fn unrepresentable(
        &self,
        table: &Table,
        row: &rusqlite::Row<'_>,
        first: usize,
        column: &str,
        reason: &str,
    ) -> Result<(), ComponentError> {
        // `{id: 2, name: "x"}`, as every source writes a key.
        let key = || {
            use rusqlite::types::ValueRef;
            use sluice_kit::failure::KeyValue;
            sluice_kit::failure::key_text((table.event_key.iter()).map(|&i| {
                let value = row.get_ref(first + i).ok().map(|value| match value {
                    ValueRef::Null => KeyValue::Bare("null".to_owned()),
                    ValueRef::Integer(n) => KeyValue::Bare(n.to_string()),
                    ValueRef::Real(f) => KeyValue::Bare(f.to_string()),
                    ValueRef::Text(t) => KeyValue::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => {
                        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
                        KeyValue::Bare(format!("x'{hex}'"))
                    }
                });
                (table.columns[i].0.as_str(), value)
            }))
        };
        let refused = RowError::column(column, reason);
        let refusal = Refusal {
            fix: Some(Self::FIX),
            ..Refusal::of(&table.name, &refused)
        };
        (self.config.common)
            .refuse(refusal, key)
            .map_err(|e| ComponentError::from_classified(e.to_string(), e))
    }

    /// Changes after `after`, merged across tables in sequence order; the new position.
    fn poll(
        &self,
        conn: &mut Connection,
        tables: &[Table],
        after: i64,
        upto: i64,
        limit: &BatchCut,
        progress: Option<&serde_json::value::RawValue>,
    ) -> Result<(Vec<ChangeEvent>, i64), ComponentError> {
        let tx = conn.transaction().map_err(|e| sql_error("BEGIN", e))?;
        // A skipped operation (`skipped.operations`) keeps its place (None), so that the
        // position still moves past it.
        let mut changes: BTreeMap<i64, Option<ChangeEvent>> = BTreeMap::new();
        let mut tombstones: BTreeMap<i64, ChangeEvent> = BTreeMap::new();
        // A table that filled a batch (by rows or bytes) may have more: only changes up to its
        // last one are certainly complete.
        let mut bound = i64::MAX;
        for table in tables {
            let cols: Vec<String> = table
                .columns
                .iter()
                .map(|(n, _)| quote(&format!("_b_{n}")))
                .chain(table.columns.iter().map(|(n, _)| quote(&format!("_a_{n}"))))
                .collect();
            let sql = format!(
                "select seq, op, ts, {} from {} where seq > ?1 and seq <= ?3 order by seq limit ?2",
                cols.join(", "),
                quote(&capture::change_table(&table.name))
            );
            let mut stmt = tx
                .prepare(&sql)
                .map_err(|e| sql_error("change table query", e))?;
            let mut result = stmt
                .query(rusqlite::params![after, limit.max_events() as i64, upto])
                .map_err(|e| sql_error("change table query", e))?;
            let mut cut = limit.clone();
            let mut full = false;
            let mut last = after;
            let mut read = 0usize;
            while let Some(row) = result
                .next()
                .map_err(|e| sql_error("change table read", e))?
            {
                read += 1;
                let seq: i64 = row.get(0).map_err(|e| sql_error("change table read", e))?;
                let op: String = row.get(1).map_err(|e| sql_error("change table read", e))?;
                let made: i64 = row.get(2).map_err(|e| sql_error("change table read", e))?;
                let op = match op.as_str() {
                    "c" => Op::Create,
                    "u" => Op::Update,
                    _ => Op::Delete,
                };
                // A change left out (`skipped.operations`, or a value the failure handling
                // mode skips) keeps its place, so that the position moves past it.
                let images = if self.skipped.skips(op) {
                    None
                } else {
                    self.images(table, row, op)?
                };
                let Some((before, after_image)) = images else {
                    changes.insert(seq, None);
                    last = seq;
                    continue;
                };
                let mut event =
                    self.event(table, op, before, after_image, Some((seq, made)), "false");
                event.position = at(seq, progress);
                if op == Op::Delete && self.config.common.tombstones_on_delete {
                    tombstones.insert(seq, sluice_kit::records::tombstone(&event));
                }
                full = cut.add(&event);
                changes.insert(seq, Some(event));
                last = seq;
                if full {
                    break;
                }
            }
            // The query's row limit reached (by events or by changes left out): the table
            // may have more.
            if full || read >= limit.max_events() {
                bound = bound.min(last);
            }
        }
        drop(tx);
        let mut events = Vec::with_capacity(changes.len() + tombstones.len());
        let mut position = after;
        for (seq, event) in changes {
            if seq > bound {
                break;
            }
            events.extend(event);
            if let Some(t) = tombstones.remove(&seq) {
                events.push(t);
            }
            position = seq;
        }
        Ok((events, position))
    }

    fn purge(&self, conn: &Connection, tables: &[Table], upto: i64) {
        for table in tables {
            // Acknowledged rows older than the retention go; with a retention, the rest go on a
            // later commit.
            let sql = format!(
                "delete from {} where seq <= ?1 and ts <= {} - ?2",
                quote(&capture::change_table(&table.name)),
                capture::NOW_MS
            );
            let retention =
                i64::try_from(self.config.purge_retention.0.as_millis()).unwrap_or(i64::MAX);
            if let Err(e) = conn.execute(&sql, [upto, retention]) {
                tracing::warn!(table = %table.name, error = %e, "Purging acknowledged changes failed; retried after the next commit.");
            }
        }
    }
}

/// Where the reader thread sends its batches (bounded: a full queue stops the reader).
struct Out {
    tx: tokio::sync::mpsc::Sender<Batch>,
    /// Where batches are cut (by rows and by bytes).
    cut: BatchCut,
    stop: Arc<AtomicBool>,
    /// The snapshot's tables and their rows, announced before they are read.
    plan: sluice_engine::component::SnapshotPlan,
    /// The committed position (a first snapshot waits for its own, asking for it at once).
    committed: tokio::sync::watch::Receiver<Option<Position>>,
    commit_soon: Arc<tokio::sync::Notify>,
}

impl Out {
    /// `false` once the source is stopping.
    fn send(&self, batch: Batch) -> bool {
        !self.stop.load(Ordering::Relaxed) && self.tx.blocking_send(batch).is_ok()
    }
}

impl SqliteSource {
    /// The stream after `seq` until the source stops, on the reader thread: the changes in
    /// sequence order, the signals, the incremental snapshot's chunks (going on from
    /// `progress`, the committed one), heartbeats and purges.
    fn stream_from(
        &self,
        reader: &mut lifecycle::Reader,
        mut seq: i64,
        progress: Option<Progress>,
        work: &lifecycle::Work<'_>,
    ) -> Result<(), ComponentError> {
        let lifecycle::Work {
            out,
            signals,
            purge,
        } = *work;
        let lifecycle::Reader { conn, tables } = reader;
        let idle = Duration::from_millis(self.config.poll_interval_ms);
        let mut inc = incremental::tracker(&self.config.common, progress);
        // The stream's starting point is committed even before the first change, so a restart
        // (after a crash too) streams from here instead of from whatever is current then.
        if !out.send(Batch::heartbeat(at(seq, inc.delivered_json()))) {
            return Ok(());
        }
        let mut beat = sluice_kit::records::heartbeat::Heartbeat::new(&self.config.common);
        loop {
            if out.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            if let Some(upto) = purge.lock().ok().and_then(|mut p| p.take()) {
                self.purge(conn, tables, upto);
            }
            let (events, position) =
                self.poll(conn, tables, seq, i64::MAX, &out.cut, inc.delivered_json())?;
            self.on_signals(&events, tables, &mut inc);
            self.on_channel_signals(signals, tables, &mut inc);
            // Only skipped changes (`skipped.operations`): an empty batch still moves the
            // position past them.
            let nothing_new = events.is_empty() && position == seq;
            if !nothing_new {
                seq = position;
                let batch = Batch {
                    events,
                    position: Some(at(seq, inc.delivered_json())),
                };
                if !out.send(batch) {
                    return Ok(());
                }
            }
            if !Self::flush_notes(&mut inc, seq, out) {
                return Ok(());
            }
            if inc.wants_chunk() {
                if !self.chunk(conn, tables, &mut seq, &mut inc, out)? {
                    return Ok(());
                }
                continue;
            }
            if let Some(beat) = beat.as_mut() {
                if !heartbeat::tick(beat, conn, at(seq, inc.delivered_json()), out) {
                    return Ok(());
                }
            }
            if nothing_new {
                // Short sleeps, so a stop is noticed quickly.
                let until = std::time::Instant::now() + idle;
                while std::time::Instant::now() < until && !out.stop.load(Ordering::Relaxed) {
                    std::thread::sleep(idle.min(Duration::from_millis(20)));
                }
            }
        }
    }
}

#[async_trait]
impl Source for SqliteSource {
    async fn run(&mut self, ctx: &mut SourceContext) -> Result<(), ComponentError> {
        sluice_kit::lifecycle::drive(self, ctx).await
    }
}
