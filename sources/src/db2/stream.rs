//! The stream, as Debezium's `Db2StreamingChangeEventSource` reads it: each poll takes the
//! changes of every change-data table between the last commit LSN read and the highest
//! synchpoint, merged in (commit LSN, intent LSN) order by the kit's change-table core, an
//! update's 'D' and 'I' rows (operations 3 and 4) paired into one event, delivered with
//! Debezium's offsets; a restart inside a transaction reads it again from its commit LSN and
//! skips what was delivered.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use sluice_kit::change_tables::snapshots::{Incremental, PollWatch};

use sluice_kit::history::{ChangeKind, TableDef};
use std::time::Duration;

use async_trait::async_trait;
use sluice_engine::event::SourceTimestamps;
use sluice_engine::{Batch, ChangeEvent, Op, SourceContext, Struct};
use sluice_kit::change_tables::merge::Key;
use sluice_kit::change_tables::{Cursor, Merge, PieceLimits, Pieces, Stopped, TxOut};

use super::connection::{lsn_at, row_bytes, text, Conn, Row, Statements};
use super::error::Db2Error;
use super::incremental::{Chunks, Progress};
use super::lsn::{Db2Offset, Lsn};
use super::tables::{self, Table};
use super::{At, Db2Source};

/// One change-data table row: the operation code, the commit and intent LSNs, the
/// transaction's log time, then the table's columns.
type Change = sluice_kit::change_tables::Change<Lsn, Row>;

/// Where the table's columns start in a change row.
const DATA: usize = 4;

/// A poll's change queries.
struct Reader<'a> {
    conn: &'a Conn,
    tables: &'a [Table],
    q: &'a Statements,
    /// The poll's upper bound (inclusive).
    to: Lsn,
}

#[async_trait]
impl Pieces for Reader<'_> {
    type Lsn = Lsn;
    type Row = Row;
    type Error = Db2Error;
    const PAIRED_BY_CHANGE_LSN: bool = false;

    async fn piece(
        &mut self,
        i: usize,
        (commit, intent, _): Key<Lsn>,
        limit: Option<usize>,
    ) -> Result<Vec<Change>, Db2Error> {
        let t = &self.tables[i];
        let columns: Vec<String> = t.columns.iter().map(|(c, _)| c.clone()).collect();
        let sql = self.q.changes(&t.cd, &columns, limit);
        let what = format!("reading the changes of {}.{} ({})", t.schema, t.name, t.cd);
        let found = self
            .conn
            .rows(&what, &sql, &[commit, self.to, commit, commit, intent])
            .await?;
        let mut out = Vec::with_capacity(found.len());
        for row in found {
            let op = text(&row, 0)
                .and_then(|o| o.trim().parse::<i32>().ok())
                .ok_or_else(|| {
                    Db2Error::Setup(format!(
                        "{what}: a change whose IBMSNAP_OPERATION is neither 'I' nor 'D'"
                    ))
                })?;
            let commit = lsn_at(&row, 1, &what)?.ok_or_else(|| {
                Db2Error::Setup(format!("{what}: a change without IBMSNAP_COMMITSEQ"))
            })?;
            let seq = lsn_at(&row, 2, &what)?.ok_or_else(|| {
                Db2Error::Setup(format!("{what}: a change without IBMSNAP_INTENTSEQ"))
            })?;
            out.push(Change {
                commit,
                seq,
                op,
                table: i,
                row,
            });
        }
        Ok(out)
    }

    fn row_bytes(row: &Row) -> usize {
        row_bytes(row)
    }
}

impl Db2Source {
    /// Streams from `from` until the pipeline stops.
    pub(super) async fn stream(
        &self,
        conn: &Conn,
        (from, progress): (Db2Offset, Option<Progress>),
        ctx: &mut SourceContext,
    ) -> Result<(), Db2Error> {
        let common = &self.config.common;
        let table_signals =
            common.signal_channel("source") && common.signal_data_collection.is_some();
        let mut inc = Incremental::new(common, progress, (table_signals, ""), ctx).await?;
        let q = Statements::new(&self.config);
        let poll = Duration::from_millis(self.config.poll_interval_ms);
        let mut last_commit = from.commit_lsn;
        // After a snapshot or a whole poll the next one starts past the stored LSN; inside a
        // transaction it reads that transaction again (Debezium's `shouldIncreaseFromLsn`).
        let mut increase = from.change_lsn.is_none();
        let mut cursor = Cursor::new(
            from.change_lsn.map(|c| (from.commit_lsn, c)),
            from.event_serial_no,
        );
        // A transaction the stored position is inside: its metadata goes on in the first poll
        // (the position keeps its counts until then).
        let mut resumed_tx = from.transaction.clone();
        let mut position = from.position_with(inc.progress().as_deref());
        let heartbeats = self.config.common.heartbeats();
        let mut last_beat = std::time::Instant::now();
        let mut warned = false;
        // The largest change row of the last poll: the next one's pieces start at that size.
        let mut row_hint = None;
        let mut current = tables::read(conn, &self.reading()).await?;
        // The structures the schema history last recorded (a table altered while the source
        // was down is announced at the first poll), else the current ones.
        let recorded = match &self.history {
            Some(history) => history.tables().await?,
            None => sluice_kit::history::Tables::default(),
        };
        let mut known: BTreeMap<String, TableDef> = (current.iter())
            .filter(|t| t.captured)
            .map(|t| (t.id.clone(), recorded.get(&t.id).unwrap_or(&t.def).clone()))
            .collect();
        conn.end("ending the poll").await?;
        tracing::info!(lsn = %last_commit, "Streaming from the change-data tables.");
        loop {
            if ctx.is_stopping() {
                return Ok(());
            }
            let max = self.max_lsn(conn).await?;
            if max.is_none() && !warned {
                warned = true;
                tracing::warn!(database = %self.config.database, "No maximum LSN in the database: the ASN capture program has not run (start it: `VALUES ASNCDC.ASNCDCSERVICES('start','asncdc')`); no change is read until it does.");
            }
            let Some(to) = max.filter(|to| !(increase && *to <= last_commit)) else {
                conn.end("ending the poll").await?;
                if inc.active() {
                    position = self
                        .between_polls(conn, &mut inc, &current, last_commit, ctx)
                        .await?;
                }
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
            let max = to;
            let to = self.timespan_bound(conn, last_commit, max).await?;
            if to < max {
                tracing::debug!(%to, %max, "The poll reads up to the end of its time span (streaming.query.timespan.seconds).");
            }
            let from_lsn = if increase && !last_commit.is_zero() {
                last_commit.increment().unwrap_or(last_commit)
            } else {
                last_commit
            };
            increase = true;
            let tables = tables::read(conn, &self.reading()).await?;
            self.announce(&tables, &mut known, to, &position, ctx)
                .await?;
            let progress = inc.progress();
            // Every table from the poll's lower bound: no registration bounds its reading.
            let bounds = vec![(Lsn::default(), None); tables.len()];
            let limits = PieceLimits::new(ctx.limits(), self.config.fetch_size, row_hint);
            let mut merge = Merge::new(&bounds, from_lsn, Lsn::default(), limits);
            let mut reader = Reader {
                conn,
                tables: &tables,
                q: &q,
                to,
            };
            let metadata = self.config.common.provide_transaction_metadata;
            let mut out = TxOut::new(
                ctx,
                metadata,
                &self.config.common.topic_prefix,
                position.clone(),
            );
            out.resume(resumed_tx.take());
            let emit = Emitter {
                source: self,
                tables: &tables,
                progress,
                watch: PollWatch::take(&mut inc),
            };
            sluice_kit::change_tables::deliver(
                (&mut merge, &mut reader),
                &mut cursor,
                &mut out,
                &emit,
                ctx,
            )
            .await?;
            row_hint = merge.row_hint();
            // Debezium ends each poll's transaction, so that a table can leave capture mode.
            conn.end("ending the poll").await?;
            // The signaling table's inserts, before the position that carries their effect.
            emit.watch.finish(&mut inc, &captured_names(&tables));
            position = Db2Offset::at(to, true).position_with(inc.progress().as_deref());
            self.emit(ctx, Vec::new(), position.clone()).await?;
            cursor.poll_ended();
            last_commit = to;
            // The incremental snapshot's chunks.
            current = tables;
            if inc.active() {
                position = self
                    .between_polls(conn, &mut inc, &current, to, ctx)
                    .await?;
            }
        }
    }

    /// A heartbeat: `heartbeat.action.query` runs first (a failure is logged), then the
    /// record at the current position.
    async fn heartbeat(
        &self,
        conn: &Conn,
        heartbeats: &sluice_kit::records::heartbeat::Heartbeats,
        position: &sluice_engine::Position,
        ctx: &mut SourceContext,
    ) -> Result<(), Db2Error> {
        if let Some(query) = &self.config.common.heartbeat_action_query {
            let done = conn.run("heartbeat.action.query", query).await;
            let committed = conn.end("committing heartbeat.action.query").await;
            if let Err(e) = done.and(committed) {
                tracing::warn!(error = %e, "heartbeat.action.query failed.");
            }
        }
        let event = heartbeats.event(SourceTimestamps::now().millis(), position.clone());
        self.emit(ctx, vec![event], position.clone()).await
    }

    /// Logs the tables that entered or left capture mode since the last poll, or whose
    /// structure changed (Db2's online schema change: the table and its change-data table
    /// altered; or its registration renewed); their schema change events
    /// (`include.schema.changes`): `CREATE` for a new one, `ALTER` for a changed one.
    async fn announce(
        &self,
        tables: &[Table],
        known: &mut BTreeMap<String, TableDef>,
        to: Lsn,
        position: &sluice_engine::Position,
        ctx: &mut SourceContext,
    ) -> Result<(), Db2Error> {
        let now: BTreeMap<String, TableDef> = (tables.iter())
            .filter(|t| t.captured)
            .map(|t| (t.id.clone(), t.def.clone()))
            .collect();
        for gone in known.keys().filter(|id| !now.contains_key(*id)) {
            tracing::info!(table = %gone, "The table left capture mode (no registration any more).");
        }
        let mut changed: Vec<(&Table, ChangeKind)> = Vec::new();
        for t in tables.iter().filter(|t| t.captured) {
            match known.get(&t.id) {
                None => {
                    tracing::info!(table = %t.id, cd = %t.cd, "The table entered capture mode.");
                    changed.push((t, ChangeKind::Create));
                }
                Some(def) if *def != t.def => {
                    tracing::info!(table = %t.id, cd = %t.cd, "The table's structure changed: its events follow the new one.");
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
        let at = At {
            ts_ms: SourceTimestamps::now().millis(),
            snapshot: "false",
            commit_lsn: to,
            change_lsn: None,
        };
        let events: Vec<ChangeEvent> = (changed.into_iter())
            .filter_map(|(t, kind)| self.schema_change(t, kind, &at, position))
            .collect();
        self.emit(ctx, events, position.clone()).await
    }

    /// The image of a change row.
    fn change_image(&self, table: &Table, change: &Change) -> Result<Option<Struct>, Db2Error> {
        self.image(table, change.row.get(DATA..).unwrap_or_default())
    }
}

/// The source's side of the kit's delivery: a change's events.
struct Emitter<'a> {
    source: &'a Db2Source,
    tables: &'a [Table],
    /// The incremental snapshot's delivered progress, which every position carries.
    progress: Option<Box<RawValue>>,
    /// The incremental snapshot's window and the signaling table's inserts.
    watch: PollWatch<Lsn>,
}

/// The names of the captured tables (`schema.table`) a signal may select.
fn captured_names(tables: &[Table]) -> Vec<String> {
    (tables.iter())
        .filter(|t| t.captured && !t.signals)
        .map(|t| format!("{}.{}", t.schema, t.name))
        .collect()
}

impl Db2Source {
    /// Between polls, everything up to `reached` delivered: the channels' signals and the
    /// incremental snapshot's chunks (the kit's); the position after them.
    async fn between_polls(
        &self,
        conn: &Conn,
        inc: &mut Incremental<Lsn>,
        tables: &[Table],
        reached: Lsn,
        ctx: &mut SourceContext,
    ) -> Result<sluice_engine::Position, Db2Error> {
        let names = captured_names(tables);
        inc.signals(&names);
        // The rows carry the request (a restart in the middle runs it again); the position
        // after them does not.
        let here = Db2Offset::at(reached, true).position_with(inc.progress().as_deref());
        if inc.blocking.is_some() {
            // Committed before the rows: a signal from a channel (already marked read) is not
            // lost to a crash before the first row.
            ctx.emit(Batch {
                events: Vec::new(),
                position: Some(here.clone()),
            })
            .await
            .map_err(|_| Db2Error::Stopped)?;
        }
        if let Some(request) = inc.blocking.take() {
            self.blocking_snapshot(request, tables, (here, reached), ctx)
                .await?;
        }
        let readable: Vec<&Table> = tables.iter().filter(|t| t.captured && !t.signals).collect();
        let mut chunks = Chunks { source: self, conn };
        let at = |p: Option<&RawValue>| Db2Offset::at(reached, true).position_with(p);
        let find =
            |n: &str| (readable.iter().copied()).find(|t| format!("{}.{}", t.schema, t.name) == n);
        let events = inc.step(&mut chunks, (find, &names), &reached, at).await?;
        // Always a batch, if only for its position: the progress may have changed.
        let position = at(inc.progress().as_deref());
        self.emit(ctx, events, position.clone()).await?;
        Ok(position)
    }
}

impl<'a> sluice_kit::change_tables::Emit<Reader<'a>> for Emitter<'_> {
    type Error = Db2Error;

    fn events(
        &self,
        op: Op,
        (change, new): (&Change, Option<&Change>),
        serial: i64,
    ) -> Result<Vec<ChangeEvent>, Db2Error> {
        let s = self.source;
        let table = &self.tables[change.table];
        if s.skipped.skips(op) {
            return Ok(Vec::new());
        }
        let images = match (op, new) {
            (Op::Update, Some(new)) => {
                match (s.change_image(table, change)?, s.change_image(table, new)?) {
                    (Some(b), Some(a)) => (Op::Update, Some(b), Some(a)),
                    _ => return Ok(Vec::new()),
                }
            }
            (Op::Delete, _) => match s.change_image(table, change)? {
                Some(b) => (Op::Delete, Some(b), None),
                None => return Ok(Vec::new()),
            },
            _ => match s.change_image(table, change)? {
                Some(a) => (op, None, Some(a)),
                None => return Ok(Vec::new()),
            },
        };
        // The event carries the change's (commit, intent) LSNs: an update's, its new row's.
        let last = new.unwrap_or(change);
        let at = At {
            ts_ms: self.commit_time(last),
            snapshot: "false",
            commit_lsn: last.commit,
            change_lsn: Some(last.seq),
        };
        let position = Db2Offset {
            commit_lsn: last.commit,
            change_lsn: Some(last.seq),
            event_serial_no: Some(serial),
            snapshot_completed: true,
            transaction: None,
        }
        .position_with(self.progress.as_deref());
        let events = sluice_kit::change_tables::rows::events(
            images,
            (&table.shape, table.envelope.key.is_some()),
            s.config.common.tombstones_on_delete,
            |op, b, a| s.event(table, (op, b, a), &at, position.clone()),
        );
        Ok(self.watch.pass(events, (table.signals, table.captured)))
    }

    fn collection(&self, table: usize) -> String {
        let t = &self.tables[table];
        format!("{}.{}", t.schema, t.name)
    }

    /// The change's transaction's `IBMSNAP_LOGMARKER` from `IBMSNAP_UOW` (the time it was
    /// logged; Debezium asks the server for `CURRENT TIMESTAMP` instead, the time it read the
    /// change); the current time when the unit-of-work row is gone (pruned).
    fn commit_time(&self, change: &Change) -> i64 {
        text(&change.row, 3)
            .and_then(|t| super::types::timestamp_nanos(t.trim()))
            .map_or_else(
                || SourceTimestamps::now().millis(),
                |n| n.div_euclid(1_000_000),
            )
    }

    fn broken(&self, table: usize, what: String) -> Db2Error {
        let t = &self.tables[table];
        Db2Error::Setup(format!(
            "the change-data table {} of {}.{} {what}",
            t.cd, t.schema, t.name
        ))
    }
}

impl From<Stopped> for Db2Error {
    fn from(_: Stopped) -> Self {
        Db2Error::Stopped
    }
}
