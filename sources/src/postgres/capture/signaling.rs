//! Signals and the incremental snapshot they drive, as PostgreSQL reads them: rows of the
//! signaling table (signals of the `source` channel, and the incremental snapshot's
//! watermarks), and signals of the kit's `file`, `http` and `kafka` channels. [`Signals`] holds
//! what the stream needs for them and carries them out; the stream (`stream.rs`) routes to it
//! and emits what comes back, and runs the blocking snapshots it asks for (`blocking.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use sluice_engine::{ChangeEvent, Position, Record};

use crate::postgres::capture::incremental::Incremental;
use crate::postgres::error::PgError;
use crate::postgres::offset::PgOffset;
use crate::postgres::records::table::{Cell, TableSchema};
use crate::postgres::server::catalog::ConnInfo;
use sluice_kit::incremental::Abilities;
use sluice_kit::signal::{
    interpret, select_captured, Action, BlockingRequest, Signal, SignalRefused, WINDOW_CLOSE,
    WINDOW_OPEN,
};

/// What PostgreSQL's incremental snapshots do beyond the plain one (blocking snapshots run
/// beside the tracker).
const ABILITIES: Abilities = Abilities {
    blocking: false,
    conditions: true,
    surrogate_key: true,
};

/// Tables by relation oid (`None`: not captured), as the stream knows them.
pub(crate) type TablesByOid = HashMap<u32, Option<Arc<TableSchema>>>;

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
    pub blocking: Option<BlockingRequest>,
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

/// The captured tables by `schema.table`.
pub(crate) fn captured_by_name(tables: &TablesByOid) -> HashMap<String, Arc<TableSchema>> {
    tables
        .values()
        .flatten()
        .map(|t| (format!("{}.{}", t.schema_name, t.table), t.clone()))
        .collect()
}

impl Signals {
    /// Whether `oid` is the signaling table.
    pub(crate) fn is_table(&self, oid: u32) -> bool {
        self.oid == Some(oid)
    }

    /// A position carrying the incremental snapshot's progress while one runs.
    pub(crate) fn pos(&self, offset: PgOffset) -> Position {
        at(
            offset,
            self.incremental
                .as_ref()
                .and_then(Incremental::progress_json),
        )
    }

    /// A streamed change: it supersedes an incremental snapshot row of the same key.
    pub(crate) fn evict(&mut self, oid: u32, key: &Option<Record>) {
        if let Some(inc) = self.incremental.as_mut() {
            inc.evict(oid, key);
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
        match self.incremental.as_mut() {
            Some(inc) => inc.tracker.around(rows, |progress| at(offset, progress)),
            None => rows,
        }
    }

    /// A row change of the signaling table: a signal (insert, `source` channel) or a
    /// watermark. Returns the rows of a chunk whose window closed (the next chunk is then
    /// to be read: [`Self::next_chunk`]).
    pub(crate) async fn on_row(
        &mut self,
        cells: &[Cell<'_>],
        deleted: bool,
        client: &tokio_postgres::Client,
        tables: &TablesByOid,
    ) -> Result<Option<Vec<ChangeEvent>>, PgError> {
        let (id, kind, data) = (text(cells, 0), text(cells, 1), text(cells, 2));
        tracing::debug!(id = ?id, kind = ?kind, deleted, "Signaling table row.");
        let id = id.unwrap_or_default();
        let kind = kind.unwrap_or_default();
        if deleted || kind == WINDOW_OPEN || kind == WINDOW_CLOSE {
            return match self.incremental.as_mut() {
                Some(inc) => inc.on_watermark(&id, &kind, deleted).await,
                None => Ok(None),
            };
        }
        if self.source_channel {
            self.on_signal(&Signal { id, kind, data }, client, tables)
                .await?;
        }
        Ok(None)
    }

    /// Refuses a signal that cannot be carried out: one warning with the reason, and an
    /// `ABORTED` notification naming it (when an incremental snapshot can send one). The
    /// stream goes on.
    fn refuse(&mut self, signal: &Signal, reason: SignalRefused) {
        match self.incremental.as_mut() {
            Some(inc) => inc.tracker.refuse(signal, &reason),
            None => {
                tracing::warn!(id = %signal.id, r#type = %signal.kind, %reason, "Signal refused.")
            }
        }
    }

    /// Acts on one signal, whichever channel brought it; a malformed one is refused. A
    /// blocking snapshot is kept for the stream to run between transactions; the rest is the
    /// kit's tracker's. The next chunk is for the caller to start ([`Self::next_chunk`]).
    pub(crate) async fn on_signal(
        &mut self,
        signal: &Signal,
        client: &tokio_postgres::Client,
        tables: &TablesByOid,
    ) -> Result<(), PgError> {
        let mut action = match interpret(signal) {
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
        let mut captured: Vec<String> = captured_by_name(tables).into_keys().collect();
        captured.sort();
        // Conditions are keyed by `schema.table` (a `db.` prefix dropped), and checked once
        // before any snapshot, blocking or incremental, may run them.
        if let Action::Execute { conditions, .. } = &mut action {
            let db_prefix = format!("{}.", self.db);
            *conditions = std::mem::take(conditions)
                .into_iter()
                .map(|(k, v)| {
                    (
                        k.strip_prefix(&db_prefix).map(str::to_owned).unwrap_or(k),
                        v,
                    )
                })
                .collect();
            if let Err(reason) = check_conditions(client, conditions).await {
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
            match select_captured(collections, &captured, &self.db) {
                Ok(tables) => {
                    BlockingRequest::add(&mut self.blocking, &signal.id, tables, conditions.clone())
                }
                Err(reason) => self.refuse(signal, reason),
            }
            return Ok(());
        }
        let Some(inc) = self.incremental.as_mut() else {
            self.refuse(signal, SignalRefused::NoSignalingTable);
            return Ok(());
        };
        // Blocking snapshots are taken above (ABILITIES): none comes back from the tracker.
        let mut blocking = None;
        let restart = inc.tracker.carry_out(
            signal,
            action,
            (&captured, &self.db),
            ABILITIES,
            &mut blocking,
        );
        if restart {
            inc.halt();
        }
        Ok(())
    }

    /// Starts the incremental snapshot's chunk reader when one should run.
    pub(crate) fn next_chunk(
        &mut self,
        info: &ConnInfo,
        tables: &TablesByOid,
    ) -> Result<(), PgError> {
        match self.incremental.as_mut() {
            Some(inc) if inc.ready() => inc.start_reader(info, captured_by_name(tables)),
            _ => Ok(()),
        }
    }
}

/// Checks a signal's `additional-conditions` before any snapshot query runs them: each filter
/// is planned (not run) against its table in a read-only transaction with a timeout, and one
/// statement only (the extended protocol refuses `;`-separated commands). `Err` names the
/// filter and the server's reason.
async fn check_conditions(
    client: &tokio_postgres::Client,
    conditions: &std::collections::BTreeMap<String, String>,
) -> Result<(), SignalRefused> {
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
            .map_err(|e| SignalRefused::ConditionsUnchecked(Box::new(e)))?;
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
            return Err(SignalRefused::InvalidCondition {
                table: table.clone(),
                filter: filter.clone(),
                reason: detail,
            });
        }
    }
    Ok(())
}
