//! The stream's signal handling: signal rows and watermarks from the signaling table, the
//! kit's `file`, `http` and `kafka` channels, and the incremental snapshot they drive.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_engine::{ChangeEvent, Position, Record};

use crate::postgres::capture::incremental::Incremental;
use crate::postgres::capture::stream::Streamer;
use crate::postgres::error::PgError;
use crate::postgres::offset::PgOffset;
use crate::postgres::records::table::{Cell, TableSchema};
use sluice_kit::incremental::Abilities;
use sluice_kit::signal::{
    interpret, select_captured, Action, Received, Signal, WINDOW_CLOSE, WINDOW_OPEN,
};

/// What PostgreSQL's incremental snapshots do beyond the plain one (blocking snapshots run
/// beside the tracker).
const ABILITIES: Abilities = Abilities {
    blocking: false,
    conditions: true,
    surrogate_key: true,
};

/// Signal channels and the incremental snapshot.
#[derive(Debug)]
pub(crate) struct Signals {
    /// The signaling table's oid.
    pub oid: Option<u32>,
    /// Whether rows of the signaling table are signals (`source` channel).
    pub source_channel: bool,
    /// The incremental snapshot (needs the signaling table for its watermarks).
    pub incremental: Option<Incremental>,
    /// Database name (for `db.schema.table` collection names).
    pub db: String,
    /// A blocking snapshot asked for, run once the signal's transaction is delivered.
    pub blocking: Option<crate::postgres::capture::blocking::Blocking>,
}

/// The position `offset` with a running incremental snapshot's `progress`.
fn at(offset: PgOffset, progress: Option<&serde_json::value::RawValue>) -> Position {
    // Every event's position passes here: without a running snapshot, no extra work.
    match progress {
        Some(progress) => sluice_kit::position::with_progress(&offset, progress),
        None => offset.position(),
    }
}

fn text(cells: &[Cell<'_>], i: usize) -> Option<String> {
    match cells.get(i) {
        Some(Cell::Text(t)) => Some((*t).to_owned()),
        _ => None,
    }
}

impl Streamer<'_> {
    /// Read-only incremental snapshots: the stream has delivered every transaction up to
    /// `reached` (outside any transaction), so windows ending there close; their rows go out
    /// at `last_done` and the next chunks are read. Returns `false` when the pipeline stops.
    pub(crate) async fn read_only_reached(
        &mut self,
        reached: u64,
        last_done: u64,
        ctx: &mut sluice_engine::SourceContext,
    ) -> Result<bool, PgError> {
        loop {
            let rows = match self.signals.as_mut().and_then(|s| s.incremental.as_mut()) {
                Some(inc) if inc.read_only() => inc.close_reached(reached)?,
                _ => None,
            };
            let Some(rows) = rows else {
                return Ok(true);
            };
            self.next_chunk().await?;
            // Even with every row evicted, the position moves past the chunk.
            if !self.emit_with_notes(rows, last_done, true, ctx).await {
                return Ok(false);
            }
        }
    }

    /// A closed chunk's rows with the waiting notifications around them (those before the
    /// rows, the rows, those after), all at `offset` with the delivered progress; empty when
    /// there is nothing, without making the position.
    pub(crate) fn with_notes(
        &mut self,
        rows: Vec<ChangeEvent>,
        offset: PgOffset,
    ) -> Vec<ChangeEvent> {
        match self.signals.as_mut().and_then(|s| s.incremental.as_mut()) {
            Some(inc) => inc.tracker.around(rows, |progress| at(offset, progress)),
            None => rows,
        }
    }

    /// Outside a transaction: emits `rows` and the waiting notifications at `last_done`
    /// (`always`: the position even when there is nothing else). `false`: the pipeline stops.
    async fn emit_with_notes(
        &mut self,
        rows: Vec<ChangeEvent>,
        last_done: u64,
        always: bool,
        ctx: &mut sluice_engine::SourceContext,
    ) -> bool {
        let done = PgOffset {
            lsn: last_done,
            tx: None,
            snapshot_completed: true,
        };
        let events = self.with_notes(rows, done);
        let position = match events.last() {
            Some(e) => e.position.clone(),
            None if always => self.pos(done),
            None => return true,
        };
        let batch = sluice_engine::Batch {
            events,
            position: Some(position),
        };
        ctx.emit(batch).await.is_ok()
    }

    /// The captured tables by `schema.table`.
    pub(crate) fn captured_by_name(&self) -> HashMap<String, Arc<TableSchema>> {
        self.tables
            .values()
            .flatten()
            .map(|t| (format!("{}.{}", t.schema_name, t.table), t.clone()))
            .collect()
    }

    /// Whether `oid` is the signaling table.
    pub(crate) fn is_signal_table(&self, oid: u32) -> bool {
        self.signals.as_ref().and_then(|s| s.oid) == Some(oid)
    }

    /// A position carrying the incremental snapshot's progress while one runs.
    pub(crate) fn pos(&self, offset: PgOffset) -> Position {
        let progress = self
            .signals
            .as_ref()
            .and_then(|s| s.incremental.as_ref())
            .and_then(Incremental::progress_json);
        at(offset, progress)
    }

    /// A streamed change: it supersedes an incremental snapshot row of the same key.
    pub(crate) fn evict(&mut self, oid: u32, key: &Option<Record>) {
        if let Some(inc) = self.signals.as_mut().and_then(|s| s.incremental.as_mut()) {
            inc.evict(oid, key);
        }
    }

    /// A row change of the signaling table: a signal (insert, `source` channel) or a
    /// watermark. Returns the rows of a chunk whose window closed.
    pub(crate) async fn on_signal_row(
        &mut self,
        cells: &[Cell<'_>],
        deleted: bool,
    ) -> Result<Vec<ChangeEvent>, PgError> {
        let (id, kind, data) = (text(cells, 0), text(cells, 1), text(cells, 2));
        tracing::debug!(id = ?id, kind = ?kind, deleted, "Signaling table row.");
        let Some(signals) = self.signals.as_mut() else {
            return Ok(Vec::new());
        };
        let id = id.unwrap_or_default();
        let kind = kind.unwrap_or_default();
        if deleted || kind == WINDOW_OPEN || kind == WINDOW_CLOSE {
            let rows = match signals.incremental.as_mut() {
                Some(inc) => inc.on_watermark(&id, &kind, deleted).await?,
                None => None,
            };
            if let Some(rows) = rows {
                self.next_chunk().await?;
                return Ok(rows);
            }
            return Ok(Vec::new());
        }
        if signals.source_channel {
            self.on_signal(&Signal { id, kind, data }).await?;
        }
        Ok(Vec::new())
    }

    /// A signal of the `file`, `http` or `kafka` channel, between transactions: carried out
    /// (a malformed one is logged), then its notifications go out and a blocking snapshot it
    /// asked for runs. `false`: stopping.
    pub(crate) async fn on_channel_signal(
        &mut self,
        received: &Received,
        ctx: &mut sluice_engine::SourceContext,
        last_done: u64,
    ) -> Result<bool, PgError> {
        if let Some(signal) = received.signal() {
            self.on_signal(&signal).await?;
        }
        if !self
            .emit_with_notes(Vec::new(), last_done, false, ctx)
            .await
        {
            return Ok(false);
        }
        self.blocking_snapshot(ctx, last_done, last_done).await?;
        Ok(!ctx.is_stopping())
    }

    /// Refuses a signal that cannot be carried out: one warning with the reason, and an
    /// `ABORTED` notification naming it (when an incremental snapshot can send one). The
    /// stream goes on.
    fn refuse(&mut self, signal: &Signal, reason: String) {
        match self.signals.as_mut().and_then(|s| s.incremental.as_mut()) {
            Some(inc) => inc.tracker.refuse(signal, reason),
            None => {
                tracing::warn!(id = %signal.id, r#type = %signal.kind, %reason, "Signal refused.")
            }
        }
    }

    /// Acts on one signal; a malformed one is refused. Blocking snapshots are run here; the
    /// rest is the kit's tracker's.
    pub(crate) async fn on_signal(&mut self, signal: &Signal) -> Result<(), PgError> {
        let action = match interpret(signal) {
            Ok(Some(a)) => a,
            Ok(None) => {
                tracing::info!(id = %signal.id, r#type = %signal.kind, "Signal with nothing to do.");
                return Ok(());
            }
            Err(e) => {
                self.refuse(signal, e);
                return Ok(());
            }
        };
        let mut captured: Vec<String> = self
            .tables
            .values()
            .flatten()
            .map(|t| format!("{}.{}", t.schema_name, t.table))
            .collect();
        captured.sort();
        let Some(db) = self.signals.as_ref().map(|s| s.db.clone()) else {
            return Ok(());
        };
        let mut action = action;
        // Conditions are keyed by `schema.table` (a `db.` prefix dropped), and checked once
        // before any snapshot, blocking or incremental, may run them.
        if let Action::Execute { conditions, .. } = &mut action {
            let db_prefix = format!("{db}.");
            *conditions = std::mem::take(conditions)
                .into_iter()
                .map(|(k, v)| {
                    (
                        k.strip_prefix(&db_prefix).map(str::to_owned).unwrap_or(k),
                        v,
                    )
                })
                .collect();
            if let Err(reason) = check_conditions(self.client, conditions).await {
                self.refuse(signal, reason);
                return Ok(());
            }
        }
        if let Action::Execute {
            blocking: true,
            collections,
            conditions,
            ..
        } = &action
        {
            let tables = match select_captured(collections, &captured, &db) {
                Ok(t) => t,
                Err(reason) => {
                    self.refuse(signal, reason);
                    return Ok(());
                }
            };
            if let Some(signals) = self.signals.as_mut() {
                let conditions = conditions.clone();
                crate::postgres::capture::blocking::Blocking::add(
                    &mut signals.blocking,
                    &signal.id,
                    tables,
                    conditions,
                );
            }
            return Ok(());
        }
        let Some(inc) = self.signals.as_mut().and_then(|s| s.incremental.as_mut()) else {
            self.refuse(signal, "incremental snapshots need `signal.data.collection` (the watermarks are written there)".into());
            return Ok(());
        };
        // Blocking snapshots are run above (ABILITIES): none comes back from the tracker.
        let mut blocking = None;
        let restart =
            inc.tracker
                .carry_out(signal, action, (&captured, &db), ABILITIES, &mut blocking);
        if restart {
            inc.halt();
        }
        self.next_chunk().await
    }

    /// Starts the incremental snapshot's chunk reader when one should run.
    pub(crate) async fn next_chunk(&mut self) -> Result<(), PgError> {
        let ready = self
            .signals
            .as_ref()
            .and_then(|s| s.incremental.as_ref())
            .is_some_and(Incremental::ready);
        if !ready {
            return Ok(());
        }
        let by_name = self.captured_by_name();
        let info = self.info;
        if let Some(inc) = self.signals.as_mut().and_then(|s| s.incremental.as_mut()) {
            inc.start_reader(info, by_name)?;
        }
        Ok(())
    }

    /// The chunk reader sent something: take it in; between transactions, close what can
    /// close and send the notifications waiting. `false`: the pipeline stops.
    pub(crate) async fn on_reader(
        &mut self,
        ctx: &mut sluice_engine::SourceContext,
        last_done: u64,
        between_transactions: bool,
    ) -> Result<bool, PgError> {
        if let Some(inc) = self.signals.as_mut().and_then(|s| s.incremental.as_mut()) {
            inc.drain()?;
        }
        if !between_transactions {
            return Ok(true);
        }
        if !self.read_only_reached(last_done, last_done, ctx).await? {
            return Ok(false);
        }
        self.next_chunk().await?;
        Ok(self
            .emit_with_notes(Vec::new(), last_done, false, ctx)
            .await)
    }
}

/// Checks a signal's `additional-conditions` before any snapshot query runs them: each filter
/// is planned (not run) against its table in a read-only transaction with a timeout, and one
/// statement only (the extended protocol refuses `;`-separated commands). `Err` names the
/// filter and the server's reason.
async fn check_conditions(
    client: &tokio_postgres::Client,
    conditions: &std::collections::BTreeMap<String, String>,
) -> Result<(), String> {
    for (table, filter) in conditions {
        let qualified = table
            .split('.')
            .map(crate::postgres::server::catalog::quote_ident)
            .collect::<Vec<_>>()
            .join(".");
        let begin = format!(
            "BEGIN READ ONLY; SET LOCAL statement_timeout = {}",
            crate::postgres::capture::incremental::FILTER_TIMEOUT_MS
        );
        client
            .batch_execute(&begin)
            .await
            .map_err(|e| format!("cannot check the additional conditions: {e}"))?;
        let planned = client
            .query(
                &format!("EXPLAIN SELECT 1 FROM {qualified} WHERE ({filter})"),
                &[],
            )
            .await;
        let _ = client.batch_execute("ROLLBACK").await;
        if let Err(e) = planned {
            let detail = e
                .as_db_error()
                .map_or_else(|| e.to_string(), |d| d.message().to_owned());
            return Err(format!(
                "the additional condition `{filter}` for {table} is not a valid filter: {detail}"
            ));
        }
    }
    Ok(())
}
