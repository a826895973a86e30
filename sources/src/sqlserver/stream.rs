//! The stream, as Debezium's `SqlServerStreamingChangeEventSource` reads it: each poll takes
//! the changes of every change table between the last commit LSN read and a new upper bound
//! (up to `max.iteration.transactions` transactions on), merges them in (commit LSN, change
//! LSN, operation) order, pairs an update's two rows (3 then 4) into one event, and delivers
//! them with Debezium's offsets. A restart inside a transaction reads it again from its commit
//! LSN and skips what was delivered: changes before the stored change LSN, and at it the first
//! `event_serial_no` rows.

use std::time::Duration;

use serde_json::value::RawValue;

use sluice_engine::event::SourceTimestamps;
use sluice_engine::{Batch, ChangeEvent, Op, SourceContext, Struct};
use sluice_kit::change_tables::{PieceLimits, Stopped, TxOut};
use sluice_kit::history::ChangeKind::Alter;
use tiberius::{ColumnData, Row};

use super::changes::{Change, Reader};
use super::connection::{lsn_at, rows, Conn, Statements};
use super::error::SqlServerError;
use super::incremental::{Chunks, Progress};
use super::lsn::{Lsn, SqlServerOffset};
use super::tables::{self, Table};
use super::{At, SqlServerSource};
use sluice_kit::change_tables::snapshots::{Incremental, PollWatch};

/// The stream's state between events.
type Cursor = sluice_kit::change_tables::Cursor<Lsn>;

/// The poll's events on their way to batches.
type Out = TxOut<Lsn>;

/// An event's `event_serial_no` and the incremental snapshot's delivered progress its
/// position carries.
type Numbered<'p> = (i64, Option<&'p RawValue>);

/// A database's stream between two polls.
pub(super) struct Streaming {
    inc: Incremental<Lsn>,
    q: Statements,
    /// The last commit LSN read up to.
    last_commit: Lsn,
    /// Whether the next poll starts after `last_commit` (not inside its transaction).
    increase: bool,
    cursor: Cursor,
    /// A transaction the stored position is inside: its metadata goes on in the first poll
    /// (the position keeps its counts until then).
    resumed_tx: Option<sluice_kit::records::transaction::TxState>,
    /// The position everything delivered is at.
    position: sluice_engine::Position,
    heartbeats: Option<sluice_kit::records::heartbeat::Heartbeats>,
    last_beat: std::time::Instant,
    /// Whether SQL Server Agent was asked about (once, when nothing was captured).
    agent_checked: bool,
    /// The tables as of the last poll.
    current: Vec<Table>,
    /// The captured tables (their ids) the stream knows: a table entering or leaving capture
    /// mode is announced.
    known: std::collections::BTreeSet<String>,
    /// The largest change row of the last poll: the next one's pieces start at that size.
    row_hint: Option<usize>,
}

impl Streaming {
    /// The incremental snapshot's state (signals routed to this database act on it).
    pub(super) fn incremental(&mut self) -> &mut Incremental<Lsn> {
        &mut self.inc
    }

    /// The captured tables a signal may select (`schema.table`).
    pub(super) fn captured(&self) -> Vec<String> {
        captured_names(&self.current)
    }
}

impl SqlServerSource {
    /// Streams from `from` until the pipeline stops.
    pub(super) async fn stream(
        &self,
        conn: &mut Conn,
        from: (SqlServerOffset, Option<Progress>),
        ctx: &mut SourceContext,
    ) -> Result<(), SqlServerError> {
        let mut s = self.open_stream(conn, from, true, ctx).await?;
        let poll = Duration::from_millis(self.config.poll_interval_ms);
        loop {
            if ctx.is_stopping() {
                return Ok(());
            }
            if !self.iterate(conn, &mut s, ctx).await? {
                tokio::select! {
                    _ = tokio::time::sleep(poll) => {}
                    _ = ctx.stopping() => return Ok(()),
                }
            }
        }
    }

    /// The stream's state at `from`; `channels`: whether it reads the `file`, `http` and
    /// `kafka` signal channels itself (not when the source routes them to its databases).
    pub(super) async fn open_stream(
        &self,
        conn: &mut Conn,
        (from, progress): (SqlServerOffset, Option<Progress>),
        channels: bool,
        ctx: &mut SourceContext,
    ) -> Result<Streaming, SqlServerError> {
        let common = &self.config.common;
        let qualifier = (
            self.config.has_signal_table(),
            self.config.database.as_str(),
        );
        let inc = if channels {
            Incremental::new(common, progress, qualifier, ctx).await?
        } else {
            Incremental::routed(common, progress, qualifier)
        };
        let start = (from.commit_lsn != Lsn::default()).then_some(from.commit_lsn);
        let current = tables::read(
            conn,
            &self.config,
            self.modes,
            &self.source_schema,
            start,
            false,
        )
        .await?;
        let known = (current.iter())
            .filter(|t| t.captured)
            .map(|t| t.id.clone())
            .collect();
        tracing::info!(database = %self.config.database, lsn = %from.commit_lsn, "Streaming from the change tables.");
        Ok(Streaming {
            q: Statements::new(&self.config.database),
            last_commit: from.commit_lsn,
            // A position inside a transaction: read it again from its commit LSN.
            increase: from.change_lsn.is_none(),
            cursor: Cursor::new(
                from.change_lsn.map(|c| (from.commit_lsn, c)),
                from.event_serial_no,
            ),
            resumed_tx: from.transaction.clone(),
            position: from.position_with(inc.progress().as_deref()),
            inc,
            heartbeats: common.heartbeats(),
            last_beat: std::time::Instant::now(),
            agent_checked: false,
            current,
            known,
            row_hint: None,
        })
    }

    /// One poll of the change tables (Debezium's `executeIteration`): `true` when it read
    /// changes; when there was nothing new, the incremental snapshot's chunks and a heartbeat
    /// when one is due, and `false` (the caller waits `poll.interval.ms`).
    pub(super) async fn iterate(
        &self,
        conn: &mut Conn,
        s: &mut Streaming,
        ctx: &mut SourceContext,
    ) -> Result<bool, SqlServerError> {
        let to = self.to_lsn(conn, &s.q, s.last_commit).await?;
        if to.is_none() && !s.agent_checked {
            // No transaction captured at all: is the capture job running? (Debezium asks
            // once, the same way.)
            s.agent_checked = true;
            if !self.agent_running(conn, &s.q).await? {
                tracing::warn!(
                    database = %self.config.database,
                    "No change has been captured and SQL Server Agent is not running: its capture job fills the change tables, so no change will be read until it runs (start the SQL Server Agent service)."
                );
            }
        }
        let Some(to) = to.filter(|to| !(s.increase && *to <= s.last_commit)) else {
            if s.inc.active() {
                let at = (s.last_commit, &s.position);
                s.position = (self.between_polls(conn, &mut s.inc, &s.current, at, ctx)).await?;
            }
            if let Some(h) = &s.heartbeats {
                if s.last_beat.elapsed() >= self.config.common.heartbeat_period() {
                    s.last_beat = std::time::Instant::now();
                    self.heartbeat(conn, h, &s.position, ctx).await?;
                }
            }
            return Ok(false);
        };
        let from_lsn = if s.increase && s.last_commit != Lsn::default() {
            self.increment(conn, &s.q, s.last_commit).await?
        } else {
            s.last_commit
        };
        s.increase = true;
        let tables = tables::read(
            conn,
            &self.config,
            self.modes,
            &self.source_schema,
            Some(to),
            true,
        )
        .await?;
        self.announce(&tables, &mut s.known, to, &s.position, ctx)
            .await?;
        self.poll(conn, s, &tables, (from_lsn, to), ctx).await?;
        s.last_commit = to;
        // The incremental snapshot's chunks.
        s.current = tables;
        if s.inc.active() {
            let at = (to, &s.position);
            s.position = (self.between_polls(conn, &mut s.inc, &s.current, at, ctx)).await?;
        }
        Ok(true)
    }

    /// Delivers the changes of `tables` in `(from_lsn, to)`, and the position after them.
    async fn poll(
        &self,
        conn: &mut Conn,
        s: &mut Streaming,
        tables: &[Table],
        (from_lsn, to): (Lsn, Lsn),
        ctx: &mut SourceContext,
    ) -> Result<(), SqlServerError> {
        let progress = s.inc.progress();
        let limits = PieceLimits::new(ctx.limits(), self.config.fetch_size, s.row_hint);
        let mut changes = super::changes::merge(tables, from_lsn, limits);
        let mut reader = Reader {
            conn: &mut *conn,
            tables,
            q: &s.q,
            mode: self.config.query_mode,
            skip_ops: self.skipped_operations(),
            to,
        };
        let metadata = self.config.common.provide_transaction_metadata;
        let mut out = Out::new(
            ctx,
            metadata,
            &self.config.common.topic_prefix,
            s.position.clone(),
        );
        out.resume(s.resumed_tx.take());
        let switching = switches(tables, (from_lsn, to));
        let emit = Emitter {
            source: self,
            tables,
            switches: std::sync::Mutex::new(switching.clone()),
            progress,
            watch: PollWatch::take(&mut s.inc),
        };
        sluice_kit::change_tables::deliver(
            (&mut changes, &mut reader),
            &mut s.cursor,
            &mut out,
            &emit,
            ctx,
        )
        .await?;
        s.row_hint = changes.row_hint();
        // The signaling table's inserts, before the position that carries their effect.
        emit.watch.finish(&mut s.inc, &captured_names(tables));
        // A switch in this poll without a change of the newer instance: its event now.
        let at = self.switch_at(to);
        let events: Vec<ChangeEvent> = (emit.switches.into_inner().unwrap_or_default().into_iter())
            .filter_map(|i| self.schema_change(&tables[i], Alter, &at, &s.position))
            .collect();
        // Everything up to `to` read: the next poll starts after it.
        s.position = SqlServerOffset::at(to, true).position_with(s.inc.progress().as_deref());
        let altered: Vec<&Table> = switching.iter().map(|&i| &tables[i]).collect();
        self.remember(&altered, Alter, &s.position).await?;
        ctx.emit(Batch {
            events,
            position: Some(s.position.clone()),
        })
        .await
        .map_err(|_| SqlServerError::Stopped)?;
        s.cursor.poll_ended();
        Ok(())
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
        let now: std::collections::BTreeSet<String> = (tables.iter())
            .filter(|t| t.captured)
            .map(|t| t.id.clone())
            .collect();
        for gone in known.difference(&now) {
            tracing::info!(table = %gone, "The table left capture mode (no capture instance any more).");
        }
        let entered: Vec<&Table> = (tables.iter())
            .filter(|t| t.captured && t.stop_lsn.is_none() && !known.contains(&t.id))
            .collect();
        for t in &entered {
            tracing::info!(table = %t.id, instance = %t.instance, "The table entered capture mode.");
        }
        *known = now;
        self.remember(&entered, sluice_kit::history::ChangeKind::Create, position)
            .await?;
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

    /// The `source` block's position fields and the event's position for a change.
    fn at(
        &self,
        change: &Change,
        (serial, progress): Numbered<'_>,
    ) -> (At, sluice_engine::Position) {
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
            transaction: None,
        }
        .position_with(progress);
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
        serial: Numbered<'_>,
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
        let images = if op == Op::Delete {
            (op, Some(image), None)
        } else {
            (op, None, Some(image))
        };
        Ok(self.events(table, images, change, serial))
    }

    /// An update (rows 3 and 4): one event, or a delete, its tombstone and a create when the
    /// key changed.
    fn update(
        &self,
        table: &Table,
        old: &Change,
        new: &Change,
        serial: Numbered<'_>,
    ) -> Result<Vec<ChangeEvent>, SqlServerError> {
        if self.skipped.skips(Op::Update) {
            return Ok(Vec::new());
        }
        let (Some(before), Some(after)) =
            (self.image(table, &old.row)?, self.image(table, &new.row)?)
        else {
            return Ok(Vec::new());
        };
        Ok(self.events(table, (Op::Update, Some(before), Some(after)), new, serial))
    }

    /// The events of a change (the kit's emitter: key updates split, tombstones).
    fn events(
        &self,
        table: &Table,
        images: (Op, Option<Struct>, Option<Struct>),
        change: &Change,
        serial: Numbered<'_>,
    ) -> Vec<ChangeEvent> {
        let (at, position) = self.at(change, serial);
        sluice_kit::change_tables::rows::events(
            images,
            (&table.shape, table.envelope.key.is_some()),
            self.config.common.tombstones_on_delete,
            |op, b, a| self.event(table, (op, b, a), &at, position.clone()),
        )
    }
}

/// The commit time the change query's last column holds (milliseconds since the epoch).
fn commit_time(row: &Row) -> Option<i64> {
    let (_, last) = row.cells().last()?;
    super::types::epoch_millis(last)
}

/// The source's side of the kit's delivery: a change's events.
struct Emitter<'a> {
    source: &'a SqlServerSource,
    tables: &'a [Table],
    /// The incremental snapshot's delivered progress, which every position carries.
    progress: Option<Box<RawValue>>,
    /// The incremental snapshot's window and the signaling table's inserts.
    watch: PollWatch<Lsn>,
    /// The tables (indices) whose newer capture instance takes over in this poll, until
    /// their schema change event went out.
    switches: std::sync::Mutex<std::collections::BTreeSet<usize>>,
}

/// The newer capture instances (indices into `tables`) that take over from an older one
/// inside the poll's range `(from, to)` (Debezium's `isBetween(fromLsn, currentMaxLsn + 1)`):
/// a restart past the switch does not announce it again.
fn switches(tables: &[Table], (from, to): (Lsn, Lsn)) -> std::collections::BTreeSet<usize> {
    (tables.iter().enumerate())
        .filter(|(_, t)| t.captured && t.start_lsn >= from && t.start_lsn <= to)
        .filter(|(_, t)| (tables.iter()).any(|o| o.id == t.id && o.stop_lsn == Some(t.start_lsn)))
        .map(|(i, _)| i)
        .collect()
}

/// The names of the captured tables (`schema.table`) a signal may select.
fn captured_names(tables: &[Table]) -> Vec<String> {
    let mut names: Vec<String> = (tables.iter())
        .filter(|t| t.captured && !t.signals)
        .map(|t| format!("{}.{}", t.schema, t.name))
        .collect();
    names.dedup();
    names
}

impl SqlServerSource {
    /// Between polls, everything up to `reached` delivered: the channels' signals and the
    /// incremental snapshot's chunks (the kit's); the position after them.
    async fn between_polls(
        &self,
        conn: &mut Conn,
        inc: &mut Incremental<Lsn>,
        tables: &[Table],
        (reached, last): (Lsn, &sluice_engine::Position),
        ctx: &mut SourceContext,
    ) -> Result<sluice_engine::Position, SqlServerError> {
        let names = captured_names(tables);
        inc.signals(&names);
        // The rows carry the request (a restart in the middle runs it again); the position
        // after them does not.
        let here = SqlServerOffset::at(reached, true).position_with(inc.progress().as_deref());
        if inc.blocking.is_some() {
            // Committed before the rows: a signal from a channel (already marked read) is not
            // lost to a crash before the first row.
            ctx.emit(Batch {
                events: Vec::new(),
                position: Some(here.clone()),
            })
            .await
            .map_err(|_| SqlServerError::Stopped)?;
        }
        if let Some(request) = inc.blocking.take() {
            self.blocking_snapshot(conn, request, tables, (here, reached), ctx)
                .await?;
        }
        let readable: Vec<&Table> = (tables.iter())
            .filter(|t| t.captured && !t.signals && t.stop_lsn.is_none())
            .collect();
        let mut chunks = Chunks { source: self, conn };
        let at = |p: Option<&RawValue>| SqlServerOffset::at(reached, true).position_with(p);
        let find =
            |n: &str| (readable.iter().copied()).find(|t| format!("{}.{}", t.schema, t.name) == n);
        let events = inc.step(&mut chunks, (find, &names), &reached, at).await?;
        // A batch, if only for its position, when the progress changed.
        let position = at(inc.progress().as_deref());
        if events.is_empty() && position == *last {
            return Ok(position);
        }
        ctx.emit(Batch {
            events,
            position: Some(position.clone()),
        })
        .await
        .map_err(|_| SqlServerError::Stopped)?;
        Ok(position)
    }

    /// The `source` block of a schema change event at a capture instance switch.
    fn switch_at(&self, commit_lsn: Lsn) -> At {
        At {
            ts_ms: SourceTimestamps::now().millis(),
            snapshot: "false",
            commit_lsn,
            change_lsn: None,
            event_serial_no: None,
        }
    }
}

impl<'a> sluice_kit::change_tables::Emit<Reader<'a>> for Emitter<'_> {
    type Error = SqlServerError;

    fn events(
        &self,
        op: Op,
        (change, new): (&Change, Option<&Change>),
        serial: i64,
    ) -> Result<Vec<ChangeEvent>, SqlServerError> {
        let table = &self.tables[change.table];
        let numbered = (serial, self.progress.as_deref());
        let events = match (op, new) {
            (Op::Update, Some(new)) => self.source.update(table, change, new, numbered)?,
            (Op::Delete, _) => {
                (self.source).simple(table, op, (Some(&change.row), None), change, numbered)?
            }
            _ => (self.source).simple(table, op, (None, Some(&change.row)), change, numbered)?,
        };
        Ok(self.watch.pass(events, (table.signals, table.captured)))
    }

    fn collection(&self, table: usize) -> String {
        let t = &self.tables[table];
        format!("{}.{}.{}", self.source.config.database, t.schema, t.name)
    }

    fn commit_time(&self, change: &Change) -> i64 {
        commit_time(&change.row).unwrap_or_else(|| SourceTimestamps::now().millis())
    }

    /// Where a newer capture instance takes over: its schema change event (`ALTER`, the
    /// newer instance's columns), as Debezium's `migrateTable` emits it.
    fn before(&self, change: &Change) -> Vec<ChangeEvent> {
        if !(self.switches.lock()).is_ok_and(|mut s| s.remove(&change.table)) {
            return Vec::new();
        }
        let t = &self.tables[change.table];
        tracing::info!(table = %t.id, instance = %t.instance, lsn = %t.start_lsn, "Migrating the table's schema to its newer capture instance.");
        let at = self.source.switch_at(change.commit);
        let position = sluice_engine::Position::Offset(0);
        self.source
            .schema_change(t, Alter, &at, &position)
            .into_iter()
            .collect()
    }

    fn broken(&self, table: usize, what: String) -> SqlServerError {
        let t = &self.tables[table];
        SqlServerError::Setup(format!(
            "the change table of {}.{} {what}",
            t.schema, t.name
        ))
    }
}

impl From<Stopped> for SqlServerError {
    fn from(_: Stopped) -> Self {
        SqlServerError::Stopped
    }
}
