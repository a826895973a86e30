//! The log stream: pgoutput messages from the replication slot turned into change events.

use std::collections::HashMap;
use std::sync::Arc;

use pgwire_replication::{Lsn, ReplicationClient, ReplicationEvent};
use sluice_engine::event::{push_u64, shared_text, BatchCut};
use sluice_engine::{Batch, ChangeEvent, Op, Position, SourceContext, Value};
use tokio_postgres::Client;

use crate::postgres::capture::change;
use crate::postgres::capture::signaling::Signals;
use crate::postgres::config::PostgresConfig;
use crate::postgres::error::PgError;
use crate::postgres::offset::{PgOffset, TxPoint};
use crate::postgres::records::schema_change::{describe, SchemaChanges};
use crate::postgres::records::table::{SourceInfo, TableSchema};
use crate::postgres::server::catalog::TypeResolver;
use crate::postgres::wire::pgoutput::{decode, Message};
use sluice_kit::config::Skipped;
use sluice_kit::history::ChangeKind;
use sluice_kit::records::heartbeat::Heartbeat;
use sluice_kit::records::transaction::{set_block, TxCounts, TxSchemas};

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// A relation message's oid, namespace, name and columns.
type RelationParts = (
    u32,
    String,
    String,
    Vec<crate::postgres::wire::pgoutput::RelationColumn>,
);

/// Confirms a committed position to the slot (positions of an unfinished snapshot are not
/// confirmed).
fn confirm(repl: &mut ReplicationClient, position: Option<&Position>) {
    if let Some(offset) = position.and_then(|p| PgOffset::parse(p).ok()) {
        if offset.snapshot_completed {
            repl.update_applied_lsn(Lsn(offset.lsn));
        }
    }
}

/// Streaming state.
pub(crate) struct Streamer<'a> {
    /// Configuration.
    pub config: &'a PostgresConfig,
    /// How to open more connections (blocking snapshots).
    pub info: &'a crate::postgres::server::catalog::ConnInfo,
    /// Notification records, when the `sink` notification channel is on.
    pub notifications: Option<sluice_kit::notification::Notifications>,
    /// SQL connection for catalog look-ups.
    pub client: &'a Client,
    /// Type cache.
    pub types: TypeResolver,
    /// Database name.
    pub db: Arc<str>,
    /// `topic.prefix`.
    pub prefix: Arc<str>,
    /// The `snapshot` marker of streamed events.
    pub not_snapshot: Arc<str>,
    /// Operations to drop.
    pub skipped: Skipped,
    /// Tables by relation oid (`None`: not captured).
    pub tables: HashMap<u32, Option<Arc<TableSchema>>>,
    /// Where delivery resumes (events of the resumed transaction to skip).
    pub resume: PgOffset,
    /// Transaction metadata schemas, when `provide.transaction.metadata` is on.
    pub tx_meta: Option<TxSchemas>,
    /// Heartbeats, when `heartbeat.interval.ms` is set.
    pub heartbeat: Option<Heartbeat>,
    /// Schema change events, when `include.schema.changes` is on.
    pub schema_changes: Option<Arc<SchemaChanges>>,
    /// Signals and incremental snapshots, when configured.
    pub signals: Option<Signals>,
}

struct Tx {
    xid: u32,
    final_lsn: u64,
    commit_micros: i64,
    /// The change being turned into events: its LSN and its rank among the changes at that
    /// LSN (a multi-row insert gives several changes one LSN).
    change: (u64, u64),
    /// The LSN of the last data change and how many data changes had it.
    seen: (u64, u64),
    /// The identity of the last event placed (delivered or skipped): a position taken
    /// between events points here.
    last: Option<TxPoint>,
    /// Transaction metadata counts.
    meta: TxCounts,
}

/// The stream loop's state between events.
struct Run {
    cut: BatchCut,
    /// Events of the open transaction not emitted yet.
    batch: Vec<ChangeEvent>,
    /// End LSN of the last transaction delivered in full.
    last_done: u64,
    tx: Option<Tx>,
}

impl Run {
    /// Between transactions with nothing waiting: out-of-band work may run.
    fn idle(&self) -> bool {
        self.tx.is_none() && self.batch.is_empty()
    }
}

/// Whether the stream goes on (`false`: the pipeline is stopping).
type Go = bool;

impl Streamer<'_> {
    /// Streams until stopped. Returns `Ok` on a graceful stop.
    pub(crate) async fn run(
        &mut self,
        repl: &mut ReplicationClient,
        ctx: &mut SourceContext,
    ) -> Result<(), PgError> {
        let mut committed = ctx.committed();
        let mut run = Run {
            cut: BatchCut::for_limits(ctx.limits()),
            batch: Vec::with_capacity(ctx.limits().max_batch_size),
            last_done: self.resume.lsn,
            tx: None,
        };
        let mut channels = sluice_kit::signal::Channels::open(&self.config.common, ctx).await?;
        // An incremental snapshot resumed from the committed position continues now.
        self.next_chunk()?;
        let reader_wake = self
            .signals
            .as_ref()
            .and_then(|s| s.incremental.as_ref())
            .map(|inc| inc.wake.clone());
        loop {
            let go = tokio::select! {
                biased;
                _ = ctx.stopping() => return Ok(()),
                _ = sluice_kit::records::heartbeat::due(self.heartbeat.as_ref().map(Heartbeat::deadline)), if self.heartbeat.is_some() => {
                    self.on_heartbeat(&run, ctx).await
                }
                // The `file`, `http` and `kafka` channels, read between transactions.
                // Signals written together are carried out together (blocking ones merged).
                received = channels.next_batch(), if !channels.is_empty() && run.idle() => {
                    let received = received?;
                    let go = self.on_channel_signals(&received, ctx, run.last_done).await?;
                    // Committed only once carried out (a stop in between reads them again).
                    if go {
                        for r in &received {
                            channels.handled(r);
                        }
                    }
                    go
                }
                // The incremental snapshot's chunk reader sent something.
                _ = async {
                    match &reader_wake {
                        Some(wake) => wake.notified().await,
                        None => std::future::pending().await,
                    }
                } => self.on_reader(ctx, run.last_done, run.idle()).await?,
                changed = committed.changed() => {
                    if changed.is_ok() {
                        let position = committed.borrow_and_update().clone();
                        confirm(repl, position.as_ref());
                    }
                    true
                }
                event = repl.recv() => {
                    let event = event.map_err(|e| PgError::Replication(e.to_string()))?;
                    let Some(event) = event else {
                        return Err(PgError::Replication(
                            "the server ended the replication stream".into(),
                        ));
                    };
                    self.on_event(event, &mut run, ctx).await?
                }
            };
            if !go {
                return Ok(());
            }
        }
    }

    /// A heartbeat tick: between transactions, the action query runs and a heartbeat record
    /// goes out at the last delivered position.
    async fn on_heartbeat(&mut self, run: &Run, ctx: &mut SourceContext) -> Go {
        let Some(mut beat) = self.heartbeat.take() else {
            return true;
        };
        if !run.idle() {
            beat.postpone();
            self.heartbeat = Some(beat);
            return true;
        }
        let action = match beat.action_query() {
            Some(query) => Some(self.client.batch_execute(query).await),
            None => None,
        };
        let done = PgOffset {
            lsn: run.last_done,
            tx: None,
            snapshot_completed: true,
        };
        let record = beat.record(action, self.pos(done));
        self.heartbeat = Some(beat);
        ctx.emit(Batch::new(vec![record])).await.is_ok()
    }

    /// One message of the replication stream.
    async fn on_event(
        &mut self,
        event: ReplicationEvent,
        run: &mut Run,
        ctx: &mut SourceContext,
    ) -> Result<Go, PgError> {
        match event {
            ReplicationEvent::Begin {
                final_lsn,
                xid,
                commit_time_micros,
            } => {
                // Every transaction committed before this one has been streamed.
                if !self
                    .read_only_reached(final_lsn.0.saturating_sub(1), run.last_done, ctx)
                    .await?
                {
                    return Ok(false);
                }
                if let Some(inc) = self.signals.as_mut().and_then(|s| s.incremental.as_mut()) {
                    inc.on_begin(xid);
                }
                run.tx = Some(Tx {
                    xid,
                    final_lsn: final_lsn.0,
                    commit_micros: commit_time_micros + PG_EPOCH_MICROS,
                    change: (0, 0),
                    seen: (0, 0),
                    last: None,
                    meta: TxCounts::default(),
                });
                Ok(true)
            }
            ReplicationEvent::Commit { end_lsn, .. } => self.on_commit(end_lsn.0, run, ctx).await,
            ReplicationEvent::XLogData {
                wal_start, data, ..
            } => {
                let Some(current) = run.tx.as_mut() else {
                    return Ok(true);
                };
                let message = decode(&data).map_err(PgError::Decode)?;
                self.handle(message, current, run.last_done, wal_start.0, &mut run.batch)
                    .await?;
                if run.cut.is_full(&run.batch) {
                    let full = Batch::new(std::mem::take(&mut run.batch));
                    return Ok(ctx.emit_cut(full, &mut run.cut).await.is_ok());
                }
                Ok(true)
            }
            ReplicationEvent::KeepAlive { wal_end, .. } => {
                self.on_keepalive(wal_end.0, run, ctx).await
            }
            ReplicationEvent::Message { .. } => Ok(true),
            ReplicationEvent::StoppedAt { .. } => Ok(false),
        }
    }

    /// A transaction's commit: its END record, the batch at the position after it, then a
    /// blocking snapshot it asked for, then what read-only incremental snapshots can close.
    async fn on_commit(
        &mut self,
        end_lsn: u64,
        run: &mut Run,
        ctx: &mut SourceContext,
    ) -> Result<Go, PgError> {
        if let (Some(meta), Some(mut current)) = (&self.tx_meta, run.tx.take()) {
            if current.meta.begun {
                let id = format!("{}:{}", current.xid, end_lsn);
                let end = meta.end(
                    &id,
                    current.commit_micros / 1000,
                    current.meta.total,
                    &current.meta.per_table,
                );
                current.change = (u64::MAX, 0);
                self.place(&mut current, run.last_done, end, &mut run.batch, ROLE_EVENT);
            }
        }
        run.tx = None;
        let before = run.last_done;
        run.last_done = end_lsn;
        // A blocking snapshot asked for in this transaction runs now; until it ends, positions
        // stay before the transaction, so a restart streams the signal again.
        let blocking = self.signals.as_ref().is_some_and(|s| s.blocking.is_some());
        let done = self.pos(PgOffset {
            lsn: if blocking { before } else { run.last_done },
            tx: None,
            snapshot_completed: true,
        });
        // The batch's position covers the whole transaction, even when it ends with skipped
        // events or has none.
        let out = Batch {
            events: std::mem::take(&mut run.batch),
            position: Some(done),
        };
        if ctx.emit_cut(out, &mut run.cut).await.is_err() {
            return Ok(false);
        }
        if blocking {
            self.blocking_snapshot(ctx, before, run.last_done).await?;
            if ctx.is_stopping() {
                return Ok(false);
            }
        }
        self.read_only_reached(run.last_done, run.last_done, ctx)
            .await
    }

    /// The server's keep-alive: outside a transaction every change up to its position has
    /// been received (events arrive in order), so the position moves there: an idle captured
    /// table does not pin WAL while the rest of the server writes.
    async fn on_keepalive(
        &mut self,
        wal_end: u64,
        run: &mut Run,
        ctx: &mut SourceContext,
    ) -> Result<Go, PgError> {
        if !run.idle() {
            return Ok(true);
        }
        if !self.read_only_reached(wal_end, run.last_done, ctx).await? {
            return Ok(false);
        }
        if wal_end > run.last_done {
            run.last_done = wal_end;
            let done = PgOffset {
                lsn: run.last_done,
                tx: None,
                snapshot_completed: true,
            };
            return Ok(ctx.emit(Batch::heartbeat(self.pos(done))).await.is_ok());
        }
        Ok(true)
    }

    fn table(&self, oid: u32) -> Option<Arc<TableSchema>> {
        self.tables.get(&oid).cloned().flatten()
    }

    /// A relation message: the table's schema (re)built, a schema change event when it
    /// changed (`include.schema.changes`), and an altered table's incremental snapshot told.
    async fn relation(
        &mut self,
        tx: &mut Tx,
        last_done: u64,
        lsn: u64,
        out: &mut Vec<ChangeEvent>,
        (oid, namespace, name, columns): RelationParts,
    ) -> Result<(), PgError> {
        let change = self
            .on_relation(tx.xid, oid, namespace, name, columns)
            .await?;
        if change == Some(ChangeKind::Alter) {
            if let Some(inc) = self.signals.as_mut().and_then(|s| s.incremental.as_mut()) {
                inc.table_changed();
            }
            self.next_chunk()?;
        }
        let (Some(kind), Some(changes), Some(table)) =
            (change, &self.schema_changes, self.table(oid))
        else {
            return Ok(());
        };
        let description = describe(
            self.client,
            oid,
            &table.schema_name,
            &table.table,
            &table.primary_key,
        )
        .await?;
        let info = self.info(tx, last_done, lsn);
        let event = changes.event(kind, &description, table.source(&info), Position::Offset(0));
        // Before the change that follows at the same LSN: its rank is that change's.
        let rank = if tx.seen.0 == lsn { tx.seen.1 } else { 0 };
        tx.change = (lsn, rank);
        self.place(tx, last_done, event, out, ROLE_SCHEMA);
        Ok(())
    }

    async fn handle(
        &mut self,
        message: Message<'_>,
        tx: &mut Tx,
        last_done: u64,
        lsn: u64,
        out: &mut Vec<ChangeEvent>,
    ) -> Result<(), PgError> {
        let oid = match &message {
            Message::Relation {
                oid,
                namespace,
                name,
                columns,
                ..
            } => {
                let (oid, namespace, name, columns) =
                    (*oid, namespace.clone(), name.clone(), columns.clone());
                return self
                    .relation(tx, last_done, lsn, out, (oid, namespace, name, columns))
                    .await;
            }
            Message::Insert { oid, .. }
            | Message::Update { oid, .. }
            | Message::Delete { oid, .. } => {
                tx.next_change(lsn);
                *oid
            }
            Message::Truncate { oids, .. } => {
                tx.next_change(lsn);
                if self.skipped.truncate {
                    return Ok(());
                }
                for (i, oid) in oids.clone().into_iter().enumerate() {
                    if let Some(table) = self.table(oid) {
                        let info = self.info(tx, last_done, lsn);
                        let event =
                            table.event(Op::Truncate, None, None, None, &info, Position::Offset(0));
                        self.push(tx, last_done, event, out, ROLE_EVENT + 2 * i as u64);
                    }
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
        if let Some(signals) = self.signals.as_mut().filter(|s| s.is_table(oid)) {
            let (cells, deleted) = match &message {
                Message::Insert { new, .. } => (new, false),
                Message::Delete {
                    old: (_, cells), ..
                } => (cells, true),
                _ => return Ok(()),
            };
            let rows = signals
                .on_row(cells, deleted, self.client, &self.tables)
                .await?;
            self.next_chunk()?;
            // A chunk's rows are not counted among the transaction's events (a restart
            // re-reads the chunk instead), and carry the progress past the chunk.
            out.extend(self.with_notes(rows.unwrap_or_default(), tx_offset(tx, last_done)));
            return Ok(());
        }
        let Some(table) = self.table(oid) else {
            return Ok(());
        };
        let info = self.info(tx, last_done, lsn);
        let built =
            change::build(&table, &message, &self.skipped, &info).map_err(PgError::Refused)?;
        let Some((events, evicted)) = built else {
            return Ok(());
        };
        // Roles by the event's place in the change (a key change is a delete, its tombstone
        // and a create), not by what was emitted: a restart with other settings skips the same.
        for (i, built) in events.into_iter().enumerate() {
            let role = ROLE_EVENT + 2 * i as u64;
            match built {
                change::Built::Event(e) => self.push(tx, last_done, e, out, role),
                change::Built::Delete(e) => self.push_delete(tx, last_done, e, out, role),
            }
        }
        if let Some(signals) = self.signals.as_mut() {
            for key in evicted {
                signals.evict(oid, &key);
            }
        }
        Ok(())
    }

    fn info<'s>(&'s self, tx: &Tx, last_done: u64, lsn: u64) -> SourceInfo<'s> {
        SourceInfo {
            name: &self.prefix,
            db: &self.db,
            ts_micros: tx.commit_micros,
            snapshot: &self.not_snapshot,
            sequence: Some(sequence(last_done, lsn)),
            tx_id: Some(i64::from(tx.xid)),
            lsn: Some(lsn as i64),
        }
    }

    /// Gives the event its position and keeps it, unless it was delivered before a restart.
    /// A delete, followed by its tombstone when `tombstones.on.delete` is on.
    fn push_delete(
        &self,
        tx: &mut Tx,
        last_done: u64,
        delete: ChangeEvent,
        out: &mut Vec<ChangeEvent>,
        role: u64,
    ) {
        let tombstone = self
            .config
            .common
            .tombstones_on_delete
            .then(|| sluice_kit::records::tombstone(&delete));
        self.push(tx, last_done, delete, out, role);
        if let Some(tombstone) = tombstone {
            self.push(tx, last_done, tombstone, out, role + 1);
        }
    }

    /// Adds transaction metadata to a data event (and the BEGIN record before the first one),
    /// then places it.
    fn push(
        &self,
        tx: &mut Tx,
        last_done: u64,
        mut event: ChangeEvent,
        out: &mut Vec<ChangeEvent>,
        role: u64,
    ) {
        if let (Some(meta), true) = (&self.tx_meta, event.value.is_some()) {
            let lsn = match event.source_field("lsn") {
                Some(Value::Int64(l)) => *l,
                _ => 0,
            };
            let text = |field: &str| {
                event
                    .source_field(field)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let collection = format!("{}.{}", text("schema"), text("table"));
            let id = format!("{}:{lsn}", tx.xid);
            if !tx.meta.begun {
                tx.meta.begun = true;
                let begin = meta.begin(&id, tx.commit_micros / 1000);
                self.place(tx, last_done, begin, out, ROLE_BEGIN);
            }
            let (total, in_collection) = tx.meta.count(&collection);
            set_block(&mut event, meta.block(&id, total, in_collection));
        }
        self.place(tx, last_done, event, out, role);
    }

    /// The position after the last event placed in the transaction so far.
    fn tx_pos(&self, tx: &Tx, last_done: u64) -> Position {
        self.pos(tx_offset(tx, last_done))
    }

    /// Gives the event its identity (the current change, `role`) and its position, and keeps
    /// it unless it was delivered before a restart.
    fn place(
        &self,
        tx: &mut Tx,
        last_done: u64,
        mut event: ChangeEvent,
        out: &mut Vec<ChangeEvent>,
        role: u64,
    ) {
        let (lsn, rank) = tx.change;
        let part = (rank << 32) | role;
        tx.last = Some(TxPoint {
            lsn_commit: tx.final_lsn,
            lsn_proc: lsn,
            part,
        });
        if let Some(resume) = &self.resume.tx {
            if resume.covers(tx.final_lsn, lsn, part) {
                return;
            }
        }
        event.position = self.tx_pos(tx, last_done);
        out.push(event);
    }
}

/// An event's role in its change (the low bits of [`TxPoint::part`]), in emission order.
const ROLE_SCHEMA: u64 = 0;
/// The transaction's BEGIN record, before its first data event.
const ROLE_BEGIN: u64 = 1;
/// The first event of a change; a change's `i`-th event is `ROLE_EVENT + 2 i`, its tombstone
/// the next.
const ROLE_EVENT: u64 = 2;

/// Signal routing: what the stream asks of its [`Signals`] and emits of what they give.
impl Streamer<'_> {
    /// A position carrying the incremental snapshot's progress while one runs.
    pub(crate) fn pos(&self, offset: PgOffset) -> Position {
        match &self.signals {
            Some(signals) => signals.pos(offset),
            None => offset.position(),
        }
    }

    /// A closed chunk's rows with the waiting notifications around them, at `offset`
    /// ([`Signals::with_notes`]).
    pub(crate) fn with_notes(
        &mut self,
        rows: Vec<ChangeEvent>,
        offset: PgOffset,
    ) -> Vec<ChangeEvent> {
        match self.signals.as_mut() {
            Some(signals) => signals.with_notes(rows, offset),
            None => rows,
        }
    }

    /// Starts the incremental snapshot's chunk reader when one should run.
    fn next_chunk(&mut self) -> Result<(), PgError> {
        match self.signals.as_mut() {
            Some(signals) => signals.next_chunk(self.info, &self.tables),
            None => Ok(()),
        }
    }

    /// Signals of the `file`, `http` and `kafka` channels, between transactions: carried out
    /// (a malformed one is logged), then their notifications go out and a blocking snapshot
    /// they asked for runs. `false`: stopping.
    async fn on_channel_signals(
        &mut self,
        received: &[sluice_kit::signal::Received],
        ctx: &mut SourceContext,
        last_done: u64,
    ) -> Result<Go, PgError> {
        for r in received {
            if let (Some(signal), Some(signals)) = (r.signal(), self.signals.as_mut()) {
                signals
                    .on_signal(&signal, self.client, &self.tables)
                    .await?;
                self.next_chunk()?;
            }
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

    /// Outside a transaction: emits `rows` and the waiting notifications at `last_done`
    /// (`always`: the position even when there is nothing else). `false`: the pipeline stops.
    async fn emit_with_notes(
        &mut self,
        rows: Vec<ChangeEvent>,
        last_done: u64,
        always: bool,
        ctx: &mut SourceContext,
    ) -> Go {
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
        let batch = Batch {
            events,
            position: Some(position),
        };
        ctx.emit(batch).await.is_ok()
    }

    /// Read-only incremental snapshots: the stream has delivered every transaction up to
    /// `reached` (outside any transaction), so windows ending there close; their rows go out
    /// at `last_done` and the next chunks are read. `false`: the pipeline stops.
    async fn read_only_reached(
        &mut self,
        reached: u64,
        last_done: u64,
        ctx: &mut SourceContext,
    ) -> Result<Go, PgError> {
        loop {
            let rows = match self.signals.as_mut().and_then(|s| s.incremental.as_mut()) {
                Some(inc) if inc.read_only() => inc.close_reached(reached)?,
                _ => None,
            };
            let Some(rows) = rows else {
                return Ok(true);
            };
            self.next_chunk()?;
            // Even with every row evicted, the position moves past the chunk.
            if !self.emit_with_notes(rows, last_done, true, ctx).await {
                return Ok(false);
            }
        }
    }

    /// The chunk reader sent something: take it in; between transactions, close what can
    /// close and send the notifications waiting. `false`: the pipeline stops.
    async fn on_reader(
        &mut self,
        ctx: &mut SourceContext,
        last_done: u64,
        between_transactions: bool,
    ) -> Result<Go, PgError> {
        if let Some(inc) = self.signals.as_mut().and_then(|s| s.incremental.as_mut()) {
            inc.drain()?;
        }
        if !between_transactions {
            return Ok(true);
        }
        if !self.read_only_reached(last_done, last_done, ctx).await? {
            return Ok(false);
        }
        self.next_chunk()?;
        Ok(self
            .emit_with_notes(Vec::new(), last_done, false, ctx)
            .await)
    }
}

impl Tx {
    /// A data change at `lsn` starts: its rank among the changes at that LSN.
    fn next_change(&mut self, lsn: u64) {
        if self.seen.0 != lsn {
            self.seen = (lsn, 0);
        }
        self.change = (lsn, self.seen.1);
        self.seen.1 += 1;
    }
}

/// Debezium's `sequence`: `["<last commit LSN>","<this LSN>"]`, without formatting machinery
/// (one allocation, the shared text's).
fn sequence(last_done: u64, lsn: u64) -> Arc<str> {
    shared_text(|text| {
        text.push_str("[\"");
        push_u64(text, last_done);
        text.push_str("\",\"");
        push_u64(text, lsn);
        text.push_str("\"]");
    })
}

/// The offset inside transaction `tx` (after its last change placed), `last_done` the last
/// transaction done before it.
fn tx_offset(tx: &Tx, last_done: u64) -> PgOffset {
    PgOffset {
        lsn: last_done,
        tx: Some(tx.last.unwrap_or(TxPoint {
            lsn_commit: tx.final_lsn,
            lsn_proc: 0,
            part: 0,
        })),
        snapshot_completed: true,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_sequence_is_debeziums() {
        assert_eq!(&*super::sequence(0, 42), r#"["0","42"]"#);
        assert_eq!(
            *super::sequence(u64::MAX, 7),
            format!("[\"{}\",\"7\"]", u64::MAX)
        );
    }
}
