//! The stream, as Debezium's `SqlServerStreamingChangeEventSource` reads it: each poll takes
//! the changes of every change table between the last commit LSN read and a new upper bound
//! (up to `max.iteration.transactions` transactions on), merges them in (commit LSN, change
//! LSN, operation) order, pairs an update's two rows (3 then 4) into one event, and delivers
//! them with Debezium's offsets. A restart inside a transaction reads it again from its commit
//! LSN and skips what was delivered: changes before the stored change LSN, and at it the first
//! `event_serial_no` rows.

use std::time::Duration;

use sluice_engine::event::{BatchCut, SourceTimestamps};
use sluice_engine::{Batch, ChangeEvent, Op, SourceContext, Struct};
use sluice_kit::records::transaction::{set_block, TxCounts, TxSchemas};
use tiberius::{ColumnData, Row};

use super::changes::{Change, Merge};
use super::connection::{lsn_at, rows, Conn, Statements};
use super::error::SqlServerError;
use super::lsn::{Lsn, SqlServerOffset};
use super::tables::{self, Table};
use super::{At, SqlServerSource};

/// Where a restart resumes inside a transaction: the stored (commit, change) LSNs and how many
/// rows at them were delivered.
struct Resuming {
    at: (Lsn, Lsn),
    serial: i64,
    seen: i64,
}

/// The poll's events on their way to batches, with Debezium's transaction metadata when
/// `provide.transaction.metadata` asks for it (the transaction id is its commit LSN).
struct Out {
    batch: Vec<ChangeEvent>,
    cut: BatchCut,
    /// The position of the last event pushed (a BEGIN record takes it: it holds no change).
    last: sluice_engine::Position,
    schemas: Option<TxSchemas>,
    /// The open transaction: its commit LSN, its first change's time, its counts.
    tx: Option<(Lsn, i64, TxCounts)>,
}

impl Out {
    fn new(
        ctx: &SourceContext,
        metadata: bool,
        prefix: &str,
        last: sluice_engine::Position,
    ) -> Self {
        Out {
            batch: Vec::new(),
            cut: BatchCut::for_limits(ctx.limits()),
            last,
            schemas: metadata.then(|| TxSchemas::new(prefix)),
            tx: None,
        }
    }

    /// Adds a change's events (of `collection`, `<db>.<schema>.<table>`, in the transaction
    /// committed at `commit`); emits a batch when one is full.
    async fn push(
        &mut self,
        events: Vec<ChangeEvent>,
        commit: Lsn,
        collection: &str,
        ctx: &mut SourceContext,
    ) -> Result<(), SqlServerError> {
        let Some(first) = events.first() else {
            return Ok(());
        };
        if self.tx.as_ref().is_some_and(|t| t.0 != commit) {
            self.end_transaction();
        }
        if let (Some(schemas), None) = (&self.schemas, &self.tx) {
            let ts = source_ts(first);
            let mut begin = schemas.begin(&commit.to_string(), ts);
            begin.position = self.last.clone();
            self.batch.push(begin);
            self.tx = Some((commit, ts, TxCounts::default()));
        }
        for mut event in events {
            if let (Some(schemas), Some((lsn, _, counts))) = (&self.schemas, self.tx.as_mut()) {
                if event.value.is_some() {
                    let (total, order) = counts.count(collection);
                    set_block(&mut event, schemas.block(&lsn.to_string(), total, order));
                }
            }
            self.last = event.position.clone();
            self.batch.push(event);
        }
        if self.cut.is_full(&self.batch) {
            self.flush(ctx).await?;
        }
        Ok(())
    }

    /// The open transaction's END record.
    fn end_transaction(&mut self) {
        if let (Some(schemas), Some((lsn, ts, counts))) = (&self.schemas, self.tx.take()) {
            let mut end = schemas.end(&lsn.to_string(), ts, counts.total, &counts.per_table);
            end.position = self.last.clone();
            self.batch.push(end);
        }
    }

    /// Emits what is gathered.
    async fn flush(&mut self, ctx: &mut SourceContext) -> Result<(), SqlServerError> {
        self.cut.taken();
        if self.batch.is_empty() {
            return Ok(());
        }
        let events = std::mem::take(&mut self.batch);
        ctx.emit(Batch {
            events,
            position: Some(self.last.clone()),
        })
        .await
        .map_err(|_| SqlServerError::Stopped)
    }
}

/// `source.ts_ms` of a data event.
fn source_ts(event: &ChangeEvent) -> i64 {
    event
        .value
        .as_ref()
        .and_then(|v| v.value.as_struct())
        .and_then(|v| v.get("source"))
        .and_then(|s| s.as_struct())
        .and_then(|s| s.get("ts_ms"))
        .and_then(|t| match t {
            sluice_engine::Value::Int64(v) => Some(*v),
            _ => None,
        })
        .unwrap_or_default()
}

/// The stream's state between events.
struct Cursor {
    /// The last event's (commit, change) LSNs and its `event_serial_no`.
    last: Option<(Lsn, Lsn)>,
    serial: i64,
    resuming: Option<Resuming>,
}

impl SqlServerSource {
    /// Streams from `from` until the pipeline stops.
    pub(super) async fn stream(
        &self,
        conn: &mut Conn,
        from: SqlServerOffset,
        ctx: &mut SourceContext,
    ) -> Result<(), SqlServerError> {
        let q = Statements::new(&self.config.database);
        let poll = Duration::from_millis(self.config.poll_interval_ms);
        let mut last_commit = from.commit_lsn;
        // A position inside a transaction: read it again from its commit LSN.
        let mut increase = from.change_lsn.is_none();
        let mut cursor = Cursor {
            last: from.change_lsn.map(|c| (from.commit_lsn, c)),
            serial: from.event_serial_no.unwrap_or(0),
            resuming: from.change_lsn.map(|c| Resuming {
                at: (from.commit_lsn, c),
                serial: from.event_serial_no.unwrap_or(0),
                seen: 0,
            }),
        };
        let mut position = from.position();
        let heartbeats = self.config.common.heartbeats();
        let mut last_beat = std::time::Instant::now();
        let mut agent_checked = false;
        // The captured tables (their ids) the stream knows: a table entering or leaving capture
        // mode is announced.
        let start = (last_commit != Lsn::default()).then_some(last_commit);
        let mut known: std::collections::BTreeSet<String> = tables::read(
            conn,
            &self.config,
            self.modes,
            &self.source_schema,
            start,
            false,
        )
        .await?
        .into_iter()
        .map(|t| t.id)
        .collect();
        tracing::info!(lsn = %last_commit, "Streaming from the change tables.");
        loop {
            if ctx.is_stopping() {
                return Ok(());
            }
            let to = self.to_lsn(conn, &q, last_commit).await?;
            if to.is_none() && !agent_checked {
                // No transaction captured at all: is the capture job running? (Debezium asks
                // once, the same way.)
                agent_checked = true;
                if !self.agent_running(conn, &q).await? {
                    tracing::warn!(
                        database = %self.config.database,
                        "No change has been captured and SQL Server Agent is not running: its capture job fills the change tables, so no change will be read until it runs (start the SQL Server Agent service)."
                    );
                }
            }
            let Some(to) = to.filter(|to| !(increase && *to <= last_commit)) else {
                // Nothing new: a heartbeat when one is due, then wait.
                if let Some(h) = &heartbeats {
                    if last_beat.elapsed() >= self.config.common.heartbeat_period() {
                        last_beat = std::time::Instant::now();
                        self.heartbeat(conn, h, &position, ctx).await?;
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(poll) => {}
                    _ = ctx.stopping() => return Ok(()),
                }
                continue;
            };
            let from_lsn = if increase && last_commit != Lsn::default() {
                self.increment(conn, &q, last_commit).await?
            } else {
                last_commit
            };
            increase = true;
            let tables = tables::read(
                conn,
                &self.config,
                self.modes,
                &self.source_schema,
                Some(to),
                true,
            )
            .await?;
            self.announce(&tables, &mut known, to, &position, ctx)
                .await?;
            let fetch = (
                self.config.query_mode,
                self.config.fetch_size,
                self.skipped_operations(),
            );
            let mut changes = Merge::new(&tables, &q, fetch, from_lsn, to);
            let metadata = self.config.common.provide_transaction_metadata;
            let mut out = Out::new(
                ctx,
                metadata,
                &self.config.common.topic_prefix,
                position.clone(),
            );
            self.deliver(conn, (&tables, &mut changes), &mut cursor, &mut out, ctx)
                .await?;
            // Everything up to `to` read: the next poll starts after it.
            position = SqlServerOffset {
                commit_lsn: to,
                change_lsn: None,
                event_serial_no: None,
                snapshot_completed: true,
            }
            .position();
            ctx.emit(Batch {
                events: Vec::new(),
                position: Some(position.clone()),
            })
            .await
            .map_err(|_| SqlServerError::Stopped)?;
            cursor.last = None;
            last_commit = to;
        }
    }

    /// A heartbeat: `heartbeat.action.query` runs first (a failure is logged), then the
    /// record at the current position.
    async fn heartbeat(
        &self,
        conn: &mut Conn,
        heartbeats: &sluice_kit::records::heartbeat::Heartbeats,
        position: &sluice_engine::Position,
        ctx: &mut SourceContext,
    ) -> Result<(), SqlServerError> {
        if let Some(query) = &self.config.common.heartbeat_action_query {
            if let Err(e) = super::connection::run(conn, "heartbeat.action.query", query).await {
                tracing::warn!(error = %e, "heartbeat.action.query failed.");
            }
        }
        let event = heartbeats.event(SourceTimestamps::now().millis(), position.clone());
        ctx.emit(Batch {
            events: vec![event],
            position: Some(position.clone()),
        })
        .await
        .map_err(|_| SqlServerError::Stopped)
    }

    /// The poll's upper bound: the commit LSN `max.iteration.transactions` transactions after
    /// `last` (or the newest), from `cdc.lsn_time_mapping`; `None` when nothing was captured.
    async fn to_lsn(
        &self,
        conn: &mut Conn,
        q: &Statements,
        last: Lsn,
    ) -> Result<Option<Lsn>, SqlServerError> {
        let n = i32::try_from(self.config.max_iteration_transactions).unwrap_or(i32::MAX);
        let what = "reading the newest commit LSN (cdc.lsn_time_mapping)";
        let found = if n == 0 {
            rows(conn, what, &q.max_transaction_lsn(), &[]).await?
        } else if last == Lsn::default() {
            rows(conn, what, &q.nth_transaction_lsn_from_beginning(), &[&n]).await?
        } else {
            rows(
                conn,
                what,
                &q.nth_transaction_lsn_from_last(),
                &[&n, &&last.0[..]],
            )
            .await?
        };
        match found.first() {
            Some(row) => lsn_at(row, 0),
            None => Ok(None),
        }
    }

    /// Logs the tables that entered or left capture mode since the last poll; a new one's
    /// schema change event (`include.schema.changes`), as Debezium emits it.
    async fn announce(
        &self,
        tables: &[Table],
        known: &mut std::collections::BTreeSet<String>,
        to: Lsn,
        position: &sluice_engine::Position,
        ctx: &mut SourceContext,
    ) -> Result<(), SqlServerError> {
        let now: std::collections::BTreeSet<String> = tables.iter().map(|t| t.id.clone()).collect();
        for gone in known.difference(&now) {
            tracing::info!(table = %gone, "The table left capture mode (no capture instance any more).");
        }
        let entered: Vec<&Table> = tables.iter().filter(|t| !known.contains(&t.id)).collect();
        for t in &entered {
            tracing::info!(table = %t.id, instance = %t.instance, "The table entered capture mode.");
        }
        *known = now;
        if entered.is_empty() || self.schema_events.is_none() {
            return Ok(());
        }
        let at = At {
            ts_ms: SourceTimestamps::now().millis(),
            snapshot: "false",
            commit_lsn: to,
            change_lsn: None,
            event_serial_no: None,
        };
        let events: Vec<ChangeEvent> = entered
            .iter()
            .flat_map(|t| self.schema_changes(std::slice::from_ref(*t), &at, position))
            .collect();
        ctx.emit(Batch {
            events,
            position: Some(position.clone()),
        })
        .await
        .map_err(|_| SqlServerError::Stopped)
    }

    /// The change table operations `skipped.operations` leaves out: c 2, u 3 and 4, d 1.
    fn skipped_operations(&self) -> Vec<i32> {
        let mut ops = Vec::new();
        if self.skipped.skips(Op::Delete) {
            ops.push(1);
        }
        if self.skipped.skips(Op::Create) {
            ops.push(2);
        }
        if self.skipped.skips(Op::Update) {
            ops.extend([3, 4]);
        }
        ops
    }

    /// Whether SQL Server Agent runs (Debezium's `sqlserver.agent.status.query`).
    async fn agent_running(&self, conn: &mut Conn, q: &Statements) -> Result<bool, SqlServerError> {
        let found = rows(
            conn,
            "checking SQL Server Agent (sys.dm_server_services)",
            &q.agent_status(),
            &[],
        )
        .await?;
        let running = found
            .first()
            .map(|row| row.get_column_data(0).ok().cloned());
        Ok(match running.flatten() {
            Some(tiberius::ColumnData::I32(Some(v))) => v == 1,
            Some(tiberius::ColumnData::I64(Some(v))) => v == 1,
            Some(tiberius::ColumnData::U8(Some(v))) => v == 1,
            Some(tiberius::ColumnData::Bit(Some(v))) => v,
            // No row (the login may not read the view): not known to be stopped.
            _ => true,
        })
    }

    async fn increment(
        &self,
        conn: &mut Conn,
        q: &Statements,
        lsn: Lsn,
    ) -> Result<Lsn, SqlServerError> {
        let found = rows(
            conn,
            "sys.fn_cdc_increment_lsn",
            &q.increment_lsn(),
            &[&&lsn.0[..]],
        )
        .await?;
        found
            .first()
            .map(|r| lsn_at(r, 0))
            .transpose()?
            .flatten()
            .ok_or_else(|| {
                SqlServerError::Setup("sys.fn_cdc_increment_lsn returned nothing".into())
            })
    }

    /// Turns the poll's changes into events and emits them in batches.
    async fn deliver(
        &self,
        conn: &mut Conn,
        (tables, changes): (&[Table], &mut Merge<'_>),
        cursor: &mut Cursor,
        out: &mut Out,
        ctx: &mut SourceContext,
    ) -> Result<(), SqlServerError> {
        while let Some(change) = changes.next(conn).await? {
            if cursor.skips(&change) {
                // An update's new row goes with its old one.
                if change.op == 3 {
                    if let Some(next) = changes.new_row(conn, &change).await? {
                        cursor.skips(&next);
                    }
                }
                continue;
            }
            let table = &tables[change.table];
            let events = match change.op {
                1 | 2 => {
                    let serial = cursor.next_serial((change.commit, change.seq), 1);
                    let (op, images) = if change.op == 1 {
                        (Op::Delete, (Some(&change.row), None))
                    } else {
                        (Op::Create, (None, Some(&change.row)))
                    };
                    self.simple(table, op, images, &change, serial)?
                }
                3 => {
                    let next = changes.new_row(conn, &change).await?;
                    let Some(next) = next else {
                        return Err(SqlServerError::Setup(format!(
                            "the change table of {}.{} holds an update's old row (operation 3) at {} without its new row (operation 4)",
                            table.schema, table.name, change.seq
                        )));
                    };
                    if cursor.skips(&next) {
                        continue;
                    }
                    self.update(table, &change, &next, cursor)?
                }
                other => {
                    return Err(SqlServerError::Setup(format!(
                        "the change table of {}.{} holds operation {other} at {} where 1, 2 or 3 was expected",
                        table.schema, table.name, change.seq
                    )))
                }
            };
            let collection = format!("{}.{}.{}", self.config.database, table.schema, table.name);
            out.push(events, change.commit, &collection, ctx).await?;
        }
        out.end_transaction();
        out.flush(ctx).await
    }

    /// The `source` block's position fields and the event's position for a change.
    fn at(&self, change: &Change, serial: i64) -> (At, sluice_engine::Position) {
        let at = At {
            ts_ms: commit_time(&change.row).unwrap_or_else(|| SourceTimestamps::now().millis()),
            snapshot: "false",
            commit_lsn: change.commit,
            change_lsn: Some(change.seq),
            event_serial_no: Some(serial),
        };
        let position = SqlServerOffset {
            commit_lsn: change.commit,
            change_lsn: Some(change.seq),
            event_serial_no: Some(serial),
            snapshot_completed: true,
        }
        .position();
        (at, position)
    }

    /// The image of a change row: `Ok(None)` when it cannot be represented and the failure
    /// handling mode skips it.
    fn image(&self, table: &Table, row: &Row) -> Result<Option<Struct>, SqlServerError> {
        let cells: Vec<&ColumnData<'_>> = row.cells().map(|(_, d)| d).skip(4).collect();
        match self.row(table, &cells) {
            Ok(s) => Ok(Some(s)),
            Err(e) => {
                self.config
                    .common
                    .unrepresentable(&format!("{}.{}", table.schema, table.name), String::new, &e)
                    .map_err(SqlServerError::Setup)?;
                Ok(None)
            }
        }
    }

    /// A create or a delete (and its tombstone).
    fn simple(
        &self,
        table: &Table,
        op: Op,
        (before, after): (Option<&Row>, Option<&Row>),
        change: &Change,
        serial: i64,
    ) -> Result<Vec<ChangeEvent>, SqlServerError> {
        if self.skipped.skips(op) {
            return Ok(Vec::new());
        }
        let image = match before.or(after) {
            Some(row) => self.image(table, row)?,
            None => None,
        };
        let Some(image) = image else {
            return Ok(Vec::new());
        };
        let (at, position) = self.at(change, serial);
        let (b, a) = if op == Op::Delete {
            (Some(image), None)
        } else {
            (None, Some(image))
        };
        let event = self.event(table, (op, b, a), &at, position);
        let mut out = vec![];
        let tombstone = (op == Op::Delete && self.config.common.tombstones_on_delete)
            .then(|| sluice_kit::records::tombstone(&event));
        out.push(event);
        out.extend(tombstone);
        Ok(out)
    }

    /// An update (rows 3 and 4): one event, or a delete, its tombstone and a create when the
    /// key changed, as Debezium's relational emitter does.
    fn update(
        &self,
        table: &Table,
        old: &Change,
        new: &Change,
        cursor: &mut Cursor,
    ) -> Result<Vec<ChangeEvent>, SqlServerError> {
        let serial = cursor.next_serial((new.commit, new.seq), 2);
        if self.skipped.skips(Op::Update) {
            return Ok(Vec::new());
        }
        let (Some(before), Some(after)) =
            (self.image(table, &old.row)?, self.image(table, &new.row)?)
        else {
            return Ok(Vec::new());
        };
        let (at, position) = self.at(new, serial);
        let key = |s: &Struct| -> Vec<sluice_engine::Value> {
            table
                .shape
                .event_key
                .iter()
                .map(|&i| s.values()[i].clone())
                .collect()
        };
        if table.envelope.key.is_some() && key(&before) != key(&after) {
            let delete = self.event(
                table,
                (Op::Delete, Some(before), None),
                &at,
                position.clone(),
            );
            let mut out = Vec::new();
            let tombstone = self
                .config
                .common
                .tombstones_on_delete
                .then(|| sluice_kit::records::tombstone(&delete));
            out.push(delete);
            out.extend(tombstone);
            out.push(self.event(table, (Op::Create, None, Some(after)), &at, position));
            return Ok(out);
        }
        Ok(vec![self.event(
            table,
            (Op::Update, Some(before), Some(after)),
            &at,
            position,
        )])
    }
}

impl Cursor {
    /// Whether a restart already delivered `change` (Debezium's skip rules at the stored
    /// position).
    fn skips(&mut self, change: &Change) -> bool {
        self.skips_at((change.commit, change.seq))
    }

    fn skips_at(&mut self, at: (Lsn, Lsn)) -> bool {
        let Some(r) = self.resuming.as_mut() else {
            return false;
        };
        match at.cmp(&r.at) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Equal => {
                r.seen += 1;
                r.seen <= r.serial
            }
            std::cmp::Ordering::Greater => {
                self.resuming = None;
                false
            }
        }
    }

    /// The `event_serial_no` of an event at `at` that took `count` rows: the last one's plus
    /// `count` when it is at the same LSNs, else `count` (Debezium's `setChangePosition`).
    fn next_serial(&mut self, at: (Lsn, Lsn), count: i64) -> i64 {
        self.serial = if self.last == Some(at) {
            self.serial + count
        } else {
            count
        };
        self.last = Some(at);
        self.serial
    }
}

/// The commit time the change query's last column holds (milliseconds since the epoch).
fn commit_time(row: &Row) -> Option<i64> {
    let (_, last) = row.cells().last()?;
    super::types::epoch_millis(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lsn(n: u8) -> Lsn {
        Lsn([0, 0, 0, 0x27, 0, 0, 0, n, 0, 1])
    }

    fn resuming(at: (Lsn, Lsn), serial: i64) -> Cursor {
        Cursor {
            last: Some(at),
            serial,
            resuming: Some(Resuming {
                at,
                serial,
                seen: 0,
            }),
        }
    }

    #[test]
    fn a_restart_skips_what_was_delivered_and_numbers_the_rest() {
        // Stored after the delete of a key update (delete, create at one change LSN): the
        // delete's row is skipped, the create comes with event number 2.
        let mut c = resuming((lsn(9), lsn(5)), 1);
        assert!(c.skips_at((lsn(9), lsn(4))));
        assert!(c.skips_at((lsn(9), lsn(5))));
        assert!(!c.skips_at((lsn(9), lsn(5))));
        assert_eq!(c.next_serial((lsn(9), lsn(5)), 1), 2);
        assert!(!c.skips_at((lsn(9), lsn(6))));
        assert_eq!(c.next_serial((lsn(9), lsn(6)), 1), 1);
        // Stored after an update (two rows, event number 2): both rows skipped.
        let mut c = resuming((lsn(9), lsn(5)), 2);
        assert!(c.skips_at((lsn(9), lsn(5))));
        assert!(c.skips_at((lsn(9), lsn(5))));
        assert!(!c.skips_at((lsn(10), lsn(1))));
        assert_eq!(c.next_serial((lsn(10), lsn(1)), 2), 2);
        // Nothing stored inside a transaction: nothing skipped.
        let mut c = Cursor {
            last: None,
            serial: 0,
            resuming: None,
        };
        assert!(!c.skips_at((lsn(1), lsn(1))));
    }
}
