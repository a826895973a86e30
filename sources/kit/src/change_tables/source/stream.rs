//! The stream, as Debezium's change-table connectors read it (`executeIteration`): each poll
//! takes the changes of every change table between the last commit LSN read and a new upper
//! bound, merges them in (commit LSN, change LSN, operation) order, pairs an update's two rows
//! into one event, and delivers them with Debezium's offsets. A restart inside a transaction
//! reads it again from its commit LSN and skips what was delivered. Between polls: the
//! incremental snapshot's chunks and heartbeats.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use serde_json::value::RawValue;
use sluice_engine::event::SourceTimestamps;
use sluice_engine::{ChangeEvent, Op, Position, SourceContext};

use super::{At, ChangeTableSource, Dialect, ErrorOf, OffsetOf, StreamFrom, TableOf};
use crate::change_tables::snapshots::{Incremental, PollWatch};
use crate::change_tables::{deliver, ChangeLsn, Cursor, Emit, Merge, PieceLimits, TxOut};
use crate::history::{ChangeKind, TableDef};
use crate::records::heartbeat::Heartbeat;
use crate::records::transaction::TxState;

/// One change row of a dialect.
type ChangeOf<D> = crate::change_tables::Change<<D as Dialect>::Lsn, <D as Dialect>::Row>;

/// A stream between two polls.
pub struct Streaming<D: Dialect> {
    inc: Incremental<D::Lsn>,
    /// The last commit LSN read up to.
    last_commit: D::Lsn,
    /// Whether the next poll starts after `last_commit` (not inside its transaction: Debezium's
    /// `shouldIncreaseFromLsn`).
    increase: bool,
    cursor: Cursor<D::Lsn>,
    /// A transaction the stored position is inside: its metadata goes on in the first poll
    /// (the position keeps its counts until then).
    resumed_tx: Option<TxState>,
    /// The position everything delivered is at.
    position: Position,
    heartbeat: Option<Heartbeat>,
    /// Whether an empty server was reported (once).
    empty_reported: bool,
    /// The tables as of the last poll.
    current: Vec<TableOf<D>>,
    /// The captured tables the stream knows (their ids and structures): a table entering
    /// capture mode (or, where the dialect says so, changing its structure) is announced.
    known: BTreeMap<String, TableDef>,
    /// The largest change row of the last poll: the next one's pieces start at that size.
    row_hint: Option<usize>,
}

impl<D: Dialect> Streaming<D> {
    /// The incremental snapshot's state (signals routed to this database act on it).
    pub fn incremental(&mut self) -> &mut Incremental<D::Lsn> {
        &mut self.inc
    }

    /// The captured tables a signal may select (`schema.table`).
    pub fn captured(&self) -> Vec<String> {
        ChangeTableSource::<D>::captured_names(&self.current)
    }
}

impl<D: Dialect> ChangeTableSource<D> {
    /// Streams from `from` until the pipeline stops.
    pub async fn stream(
        &self,
        conn: &mut D::Conn,
        from: StreamFrom<D>,
        ctx: &mut SourceContext,
    ) -> Result<(), ErrorOf<D>> {
        let mut s = self.open_stream(conn, from, true, ctx).await?;
        let poll = self.dialect.poll_interval();
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
    pub async fn open_stream(
        &self,
        conn: &mut D::Conn,
        (from, progress): StreamFrom<D>,
        channels: bool,
        ctx: &mut SourceContext,
    ) -> Result<Streaming<D>, ErrorOf<D>> {
        let common = self.dialect.common();
        let qualifier = (self.dialect.has_signal_table(), self.dialect.qualifier());
        let inc = if channels {
            Incremental::new(common, progress, qualifier, ctx).await?
        } else {
            Incremental::routed(common, progress, qualifier)
        };
        let start = (!from.commit_lsn.is_zero()).then_some(from.commit_lsn);
        let current = self
            .dialect
            .tables(conn, self.source_schema(), start, false);
        let current = current.await?;
        // The structures the schema history last recorded (a table altered while the source
        // was down is announced at the first poll), else the current ones; only a dialect
        // that announces alters compares them.
        let recorded = match &self.history {
            Some(history) if D::ANNOUNCES_ALTERS => history.tables().await?,
            _ => crate::history::Tables::default(),
        };
        let known = (current.iter())
            .filter(|t| t.captured)
            .map(|t| (t.id.clone(), recorded.get(&t.id).unwrap_or(&t.def).clone()))
            .collect();
        self.dialect.end_read(conn, "ending the poll").await?;
        tracing::info!(database = %self.dialect.database(), lsn = %from.commit_lsn, "Streaming from the {}.", D::CHANGE_TABLES);
        Ok(Streaming {
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
            heartbeat: Heartbeat::new(common),
            empty_reported: false,
            current,
            known,
            row_hint: None,
        })
    }

    /// One poll of the change tables: `true` when it read changes; when there was nothing
    /// new, the incremental snapshot's chunks and a heartbeat when one is due, and `false`
    /// (the caller waits `poll.interval.ms`).
    pub async fn iterate(
        &self,
        conn: &mut D::Conn,
        s: &mut Streaming<D>,
        ctx: &mut SourceContext,
    ) -> Result<bool, ErrorOf<D>> {
        let to = self.dialect.poll_bound(conn, s.last_commit).await?;
        if to.is_none() && !s.empty_reported {
            s.empty_reported = true;
            self.dialect.nothing_captured(conn).await?;
        }
        let Some(to) = to.filter(|to| !(s.increase && *to <= s.last_commit)) else {
            self.dialect.end_read(conn, "ending the poll").await?;
            if s.inc.active() {
                let at = (s.last_commit, &s.position);
                s.position = (self.between_polls(conn, &mut s.inc, &s.current, at, ctx)).await?;
            }
            if let Some(h) = s.heartbeat.as_mut().filter(|h| h.due()) {
                self.heartbeat(conn, h, &s.position, ctx).await?;
            }
            return Ok(false);
        };
        let from_lsn = if s.increase && !s.last_commit.is_zero() {
            self.dialect.poll_start(conn, s.last_commit).await?
        } else {
            s.last_commit
        };
        s.increase = true;
        let tables = self
            .dialect
            .tables(conn, self.source_schema(), Some(to), true);
        let tables = tables.await?;
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
        conn: &mut D::Conn,
        s: &mut Streaming<D>,
        tables: &[TableOf<D>],
        (from_lsn, to): (D::Lsn, D::Lsn),
        ctx: &mut SourceContext,
    ) -> Result<(), ErrorOf<D>> {
        let common = self.dialect.common();
        let limits = PieceLimits::new(ctx.limits(), self.dialect.fetch_size(), s.row_hint);
        let bounds: Vec<_> = tables.iter().map(D::bounds).collect();
        let mut merge = Merge::new(&bounds, from_lsn, D::Lsn::default(), limits);
        let metadata = common.provide_transaction_metadata;
        let mut out = TxOut::new(ctx, metadata, &common.topic_prefix, s.position.clone());
        out.resume(s.resumed_tx.take());
        let switching = switches::<D>(tables, (from_lsn, to));
        let emit = Emitter {
            source: self,
            tables,
            switches: Mutex::new(switching.clone()),
            progress: s.inc.progress(),
            watch: PollWatch::take(&mut s.inc),
        };
        {
            let mut reader = self.dialect.reader(conn, tables, to, &self.skipped);
            let pieces = (&mut merge, &mut reader);
            deliver(pieces, &mut s.cursor, &mut out, &emit, ctx).await?;
        }
        s.row_hint = merge.row_hint();
        self.dialect.end_read(conn, "ending the poll").await?;
        // The signaling table's inserts, before the position that carries their effect.
        emit.watch.finish(&mut s.inc, &Self::captured_names(tables));
        // A switch in this poll without a change of the newer instance: its event now.
        let at = At::now("false", to);
        let events: Vec<ChangeEvent> = (emit.switches.into_inner().unwrap_or_default().into_iter())
            .filter_map(|i| self.schema_change(&tables[i], ChangeKind::Alter, &at, &s.position))
            .collect();
        // Everything up to `to` read: the next poll starts after it.
        s.position = OffsetOf::<D>::at(to, true).position_with(s.inc.progress().as_deref());
        let altered: Vec<&TableOf<D>> = switching.iter().map(|&i| &tables[i]).collect();
        self.remember(&altered, ChangeKind::Alter, &s.position)
            .await?;
        Self::emit(ctx, events, s.position.clone()).await?;
        s.cursor.poll_ended();
        Ok(())
    }

    /// A heartbeat: `heartbeat.action.query` runs first (a failure is logged), then the
    /// record at the current position.
    async fn heartbeat(
        &self,
        conn: &mut D::Conn,
        heartbeat: &mut Heartbeat,
        position: &Position,
        ctx: &mut SourceContext,
    ) -> Result<(), ErrorOf<D>> {
        let action = match heartbeat.action_query() {
            Some(query) => {
                let done = self.dialect.execute(conn, "heartbeat.action.query", query);
                let done = done.await;
                let committed = (self.dialect)
                    .end_read(conn, "committing heartbeat.action.query")
                    .await;
                Some(done.and(committed))
            }
            None => None,
        };
        let event = heartbeat.record(action, position.clone());
        Self::emit(ctx, vec![event], position.clone()).await
    }

    /// Logs the tables that entered or left capture mode since the last poll, or (where the
    /// dialect announces alters) whose structure changed; their schema change events
    /// (`include.schema.changes`): `CREATE` for a new one, `ALTER` for a changed one.
    async fn announce(
        &self,
        tables: &[TableOf<D>],
        known: &mut BTreeMap<String, TableDef>,
        to: D::Lsn,
        position: &Position,
        ctx: &mut SourceContext,
    ) -> Result<(), ErrorOf<D>> {
        let newest = |t: &&TableOf<D>| t.captured && D::bounds(t).1.is_none();
        let now: BTreeMap<String, TableDef> = (tables.iter().filter(newest))
            .map(|t| (t.id.clone(), t.def.clone()))
            .collect();
        for gone in known.keys().filter(|id| !now.contains_key(*id)) {
            tracing::info!(table = %gone, "The table left capture mode.");
        }
        let mut changed: Vec<(&TableOf<D>, ChangeKind)> = Vec::new();
        for t in tables.iter().filter(newest) {
            match known.get(&t.id) {
                None => {
                    tracing::info!(table = %t.id, at = %D::locator(t), "The table entered capture mode.");
                    changed.push((t, ChangeKind::Create));
                }
                Some(def) if D::ANNOUNCES_ALTERS && *def != t.def => {
                    tracing::info!(table = %t.id, at = %D::locator(t), "The table's structure changed: its events follow the new one.");
                    changed.push((t, ChangeKind::Alter));
                }
                Some(_) => {}
            }
        }
        *known = now;
        for (t, kind) in &changed {
            self.remember(&[*t], *kind, position).await?;
        }
        if changed.is_empty() || self.schema_events.is_none() {
            return Ok(());
        }
        let at = At::now("false", to);
        let events: Vec<ChangeEvent> = (changed.into_iter())
            .filter_map(|(t, kind)| self.schema_change(t, kind, &at, position))
            .collect();
        Self::emit(ctx, events, position.clone()).await
    }

    /// Between polls, everything up to `reached` delivered: the channels' signals and the
    /// incremental snapshot's chunks (the kit's); the position after them.
    async fn between_polls(
        &self,
        conn: &mut D::Conn,
        inc: &mut Incremental<D::Lsn>,
        tables: &[TableOf<D>],
        (reached, last): (D::Lsn, &Position),
        ctx: &mut SourceContext,
    ) -> Result<Position, ErrorOf<D>> {
        let names = Self::captured_names(tables);
        inc.signals(&names);
        // The rows carry the request (a restart in the middle runs it again); the position
        // after them does not.
        let here = OffsetOf::<D>::at(reached, true).position_with(inc.progress().as_deref());
        if inc.blocking.is_some() {
            // Committed before the rows: a signal from a channel (already marked read) is not
            // lost to a crash before the first row.
            Self::emit(ctx, Vec::new(), here.clone()).await?;
        }
        if let Some(request) = inc.blocking.take() {
            self.blocking_snapshot(conn, request, tables, (here, reached), ctx)
                .await?;
        }
        let readable: Vec<&TableOf<D>> = (tables.iter())
            .filter(|t| t.captured && !t.signals && D::bounds(t).1.is_none())
            .collect();
        let at = |p: Option<&RawValue>| OffsetOf::<D>::at(reached, true).position_with(p);
        let find = |n: &str| (readable.iter().copied()).find(|t| t.full_name() == n);
        let events = {
            let mut chunks = super::chunks::Chunks { source: self, conn };
            inc.step(&mut chunks, (find, &names), &reached, at).await?
        };
        // A batch, if only for its position, when the progress changed.
        let position = at(inc.progress().as_deref());
        if events.is_empty() && position == *last {
            return Ok(position);
        }
        Self::emit(ctx, events, position.clone()).await?;
        Ok(position)
    }

    /// The events of a change (the kit's emitter: key updates split, tombstones).
    fn change_events(
        &self,
        table: &TableOf<D>,
        images: (
            Op,
            Option<sluice_engine::Struct>,
            Option<sluice_engine::Struct>,
        ),
        change: &ChangeOf<D>,
        (serial, progress): (i64, Option<&RawValue>),
    ) -> Vec<ChangeEvent> {
        let at = At {
            ts_ms: self.commit_time(change),
            snapshot: "false",
            commit_lsn: change.commit,
            change_lsn: Some(change.seq),
            event_serial_no: Some(serial),
        };
        let position = OffsetOf::<D> {
            commit_lsn: change.commit,
            change_lsn: Some(change.seq),
            event_serial_no: Some(serial),
            snapshot_completed: true,
            transaction: None,
        }
        .position_with(progress);
        crate::change_tables::rows::events(
            images,
            (&table.shape, table.envelope.key.is_some()),
            self.dialect.common().tombstones_on_delete,
            |op, b, a| self.event(table, (op, b, a), &at, position.clone()),
        )
    }

    /// The commit time of a change: the row's, else now.
    fn commit_time(&self, change: &ChangeOf<D>) -> i64 {
        D::commit_time(&change.row).unwrap_or_else(|| SourceTimestamps::now().millis())
    }
}

/// The newer capture instances (indices into `tables`) that take over from an older one
/// inside the poll's range `(from, to)` (Debezium's `isBetween(fromLsn, currentMaxLsn + 1)`):
/// a restart past the switch does not announce it again.
fn switches<D: Dialect>(tables: &[TableOf<D>], (from, to): (D::Lsn, D::Lsn)) -> BTreeSet<usize> {
    let starts = |t: &TableOf<D>| D::bounds(t).0;
    (tables.iter().enumerate())
        .filter(|(_, t)| t.captured && starts(t) >= from && starts(t) <= to)
        .filter(|(_, t)| (tables.iter()).any(|o| o.id == t.id && D::bounds(o).1 == Some(starts(t))))
        .map(|(i, _)| i)
        .collect()
}

/// The source's side of the kit's delivery: a change's events.
struct Emitter<'a, D: Dialect> {
    source: &'a ChangeTableSource<D>,
    tables: &'a [TableOf<D>],
    /// The incremental snapshot's delivered progress, which every position carries.
    progress: Option<Box<RawValue>>,
    /// The incremental snapshot's window and the signaling table's inserts.
    watch: PollWatch<D::Lsn>,
    /// The tables (indices) whose newer capture instance takes over in this poll, until
    /// their schema change event went out.
    switches: Mutex<BTreeSet<usize>>,
}

impl<'r, D: Dialect> Emit<D::Reader<'r>> for Emitter<'_, D> {
    type Error = ErrorOf<D>;

    fn events(
        &self,
        op: Op,
        (change, new): (&ChangeOf<D>, Option<&ChangeOf<D>>),
        serial: i64,
    ) -> Result<Vec<ChangeEvent>, ErrorOf<D>> {
        let s = self.source;
        let table = &self.tables[change.table];
        if s.skipped.skips(op) {
            return Ok(Vec::new());
        }
        let image = |c: &ChangeOf<D>| s.image(table, &c.row, D::CHANGE_DATA);
        let images = match (op, new) {
            // The after image is read only once the before image passed: a change left out
            // is warned of and counted once.
            (Op::Update, Some(new)) => match image(change)? {
                Some(b) => match image(new)? {
                    Some(a) => (Op::Update, Some(b), Some(a)),
                    None => return Ok(Vec::new()),
                },
                None => return Ok(Vec::new()),
            },
            (Op::Delete, _) => match image(change)? {
                Some(b) => (Op::Delete, Some(b), None),
                None => return Ok(Vec::new()),
            },
            _ => match image(change)? {
                Some(a) => (op, None, Some(a)),
                None => return Ok(Vec::new()),
            },
        };
        // The event carries the change's (commit, change) LSNs: an update's, its new row's.
        let last = new.unwrap_or(change);
        let numbered = (serial, self.progress.as_deref());
        let events = s.change_events(table, images, last, numbered);
        Ok(self.watch.pass(events, (table.signals, table.captured)))
    }

    fn collection(&self, table: usize) -> String {
        let t = &self.tables[table];
        match self.source.dialect.qualifier() {
            "" => t.full_name(),
            q => format!("{q}.{}", t.full_name()),
        }
    }

    fn commit_time(&self, change: &ChangeOf<D>) -> i64 {
        self.source.commit_time(change)
    }

    /// Where a newer capture instance takes over: its schema change event (`ALTER`, the
    /// newer instance's columns), as Debezium's `migrateTable` emits it.
    fn before(&self, change: &ChangeOf<D>) -> Vec<ChangeEvent> {
        if !(self.switches.lock()).is_ok_and(|mut s| s.remove(&change.table)) {
            return Vec::new();
        }
        let t = &self.tables[change.table];
        tracing::info!(table = %t.id, at = %D::locator(t), lsn = %D::bounds(t).0, "Migrating the table's schema to its newer capture instance.");
        let at = At::now("false", change.commit);
        (self.source)
            .schema_change(t, ChangeKind::Alter, &at, &Position::Offset(0))
            .into_iter()
            .collect()
    }

    fn broken(&self, table: usize, what: String) -> ErrorOf<D> {
        let t = &self.tables[table];
        super::ChangeTableError::Setup(format!(
            "the change table of {} ({}) {what}",
            t.full_name(),
            D::locator(t)
        ))
    }
}
