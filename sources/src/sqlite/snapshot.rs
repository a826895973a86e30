//! The snapshot: every captured table read in one read transaction, with the sequence of the
//! last change, so that a first snapshot and the stream meet with no gap and no duplicate.
//!
//! A first snapshot (no committed position) pins its sequence before its first row goes out:
//! a batch with no event at `{"seq": N, "snapshot_completed": false}`, committed as soon as
//! the sinks have it ([`sluice_engine::SourceContext::commit_soon`]) and waited for. A snapshot
//! cut off later (kill -9) may have delivered rows that change or go before the next start; that
//! start finds the pinned sequence and streams every change after it, so a row deleted
//! meanwhile is deleted downstream too. Changes before a first snapshot are in it and are not
//! streamed again, as with Debezium's connectors.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use sluice_engine::{Batch, ComponentError, Op, Struct};

use super::{at, capture, fatal, quote, sql_error, table, Offset, Out, Point, SqliteSource, Table};

impl SqliteSource {
    /// The snapshot's SELECT of `table`: `snapshot.select.statement.overrides.main.<table>`
    /// (which must return the captured columns in their order), or all its captured columns.
    pub(super) fn snapshot_statement<'c>(
        &self,
        tx: &'c rusqlite::Transaction<'_>,
        table: &Table,
    ) -> Result<rusqlite::Statement<'c>, ComponentError> {
        let sql = match self
            .config
            .common
            .snapshot_overrides
            .get(&format!("main.{}", table.name))
        {
            Some(custom) => custom.clone(),
            None => format!("select {} from {}", table.select_list(), quote(&table.name)),
        };
        let stmt = tx
            .prepare(&sql)
            .map_err(|e| sql_error("snapshot query", e))?;
        if stmt.column_count() != table.columns.len() {
            return Err(fatal(format!(
                "the snapshot SELECT of `main.{}` returns {} columns; it must return the {} captured ones ({}) in that order",
                table.name,
                stmt.column_count(),
                table.columns.len(),
                table.select_list()
            )));
        }
        Ok(stmt)
    }

    /// Reads every table in one read transaction; returns where the stream starts: the
    /// committed sequence when there is one (an interrupted snapshot, `always`), else this
    /// snapshot's own, once committed ([`Self::pin`]).
    pub(super) fn snapshot(
        &self,
        conn: &mut Connection,
        tables: &[Table],
        out: &Out,
        resume: Option<i64>,
    ) -> Result<Option<i64>, ComponentError> {
        let mut cut = out.cut.clone();
        let tx = conn.transaction().map_err(|e| sql_error("BEGIN", e))?;
        let read_at =
            capture::clock(&tx).map_err(|e| sql_error("reading the change sequence", e))?;
        let seq = match resume {
            Some(r) => r.min(read_at),
            None if self.pin(read_at, out) => read_at,
            None => return Ok(None),
        };
        let position = reading(seq);
        // A row is held back until the next one is read, so the last row can be marked `last`.
        let mut pending: Option<(&Table, Option<Struct>, bool)> = None;
        let mut batch = Vec::new();
        let mut rows = 0u64;
        // `snapshot.include.collection.list`: the tables whose rows are read (all streamed).
        let read: Vec<&Table> = tables
            .iter()
            .filter(|t| self.config.common.snapshots_table(&t.name))
            .collect();
        table::announce(&tx, &read, &out.plan);
        for table in read {
            let mut stmt = self.snapshot_statement(&tx, table)?;
            let mut result = stmt.query([]).map_err(|e| sql_error("snapshot query", e))?;
            while let Some(row) = result.next().map_err(|e| sql_error("snapshot read", e))? {
                let Some(after) = self.image(table, row, 0)? else {
                    continue;
                };
                if let Some((t, prev, first)) = pending.replace((table, after, rows == 0)) {
                    let mut event = self.event(
                        t,
                        Op::Read,
                        None,
                        prev,
                        None,
                        if first { "first" } else { "true" },
                    );
                    event.position = position.clone();
                    batch.push(event);
                }
                rows += 1;
                if cut.is_full(&batch) {
                    cut.taken();
                    let events = std::mem::take(&mut batch);
                    if !out.send(Batch {
                        events,
                        position: Some(position.clone()),
                    }) {
                        return Ok(None);
                    }
                }
            }
        }
        drop(tx);
        let done = at(seq, None);
        // The very last row is `last`, as Debezium marks it, even when it is also the first.
        if let Some((t, last, _)) = pending {
            let mut event = self.event(t, Op::Read, None, last, None, "last");
            event.position = done.clone();
            batch.push(event);
        }
        if !out.send(Batch {
            events: batch,
            position: Some(done),
        }) {
            return Ok(None);
        }
        tracing::info!(rows, tables = tables.len(), seq, "Snapshot completed.");
        Ok(Some(seq))
    }

    /// Sends the position of a snapshot read at `seq` ahead of its rows and waits until it is
    /// committed (every sink has what came before it); `false`: the source is stopping.
    fn pin(&self, seq: i64, out: &Out) -> bool {
        let pinned = reading(seq);
        let batch = Batch {
            events: Vec::new(),
            position: Some(pinned.clone()),
        };
        if !out.send(batch) {
            return false;
        }
        tracing::debug!(seq, "Waiting for the snapshot's sequence to be committed.");
        // Asked for at once, then again every half second (a sink that takes a while to
        // connect); given up when the source stops or is cut off (its channel closed).
        let mut asked: Option<Instant> = None;
        while !out.stop.load(Ordering::Relaxed) && !out.tx.is_closed() {
            if out.committed.borrow().as_ref() == Some(&pinned) {
                return true;
            }
            if asked.is_none_or(|t| t.elapsed() >= Duration::from_millis(500)) {
                out.commit_soon.notify_one();
                asked = Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

/// The position of a snapshot under way that streams from change `seq` once it is read.
fn reading(seq: i64) -> sluice_engine::Position {
    Offset {
        at: Point {
            seq,
            snapshot_completed: false,
        },
        incremental: None,
    }
    .position()
}
