//! The snapshot, as Debezium's change-table connectors take it: in one transaction at
//! `snapshot.isolation.mode` (the dialect's, with its locks), the newest LSN read first (the
//! position the stream goes on from), the captured tables' structure, then their rows; and
//! blocking snapshots (`execute-snapshot` with `"type": "blocking"`) between polls.

use crate::lifecycle::SnapshotRun;
use sluice_engine::event::{BatchCut, SourceTimestamps};
use sluice_engine::{ChangeEvent, Op, Position, SourceContext, Struct};

use super::{At, ChangeTableSource, Dialect, ErrorOf, OffsetOf, TableOf};
use crate::history::ChangeKind;
use crate::snapshot::Start;

impl<D: Dialect> ChangeTableSource<D> {
    /// Reads every captured table's rows; the position the stream starts from. `cut_off`:
    /// the stored position of a snapshot cut off earlier, which the rows go out at and the
    /// stream resumes from (else the snapshot's own position is committed before its first
    /// row: [`Start`]).
    pub async fn snapshot(
        &self,
        conn: &mut D::Conn,
        cut_off: Option<OffsetOf<D>>,
        ctx: &mut SourceContext,
    ) -> Result<OffsetOf<D>, ErrorOf<D>> {
        let done = self.read_all(conn, cut_off, ctx).await;
        // The transaction only read (and locked): it ends the same way whatever happened.
        self.dialect.snapshot_end(conn).await;
        done
    }

    async fn read_all(
        &self,
        conn: &mut D::Conn,
        cut_off: Option<OffsetOf<D>>,
        ctx: &mut SourceContext,
    ) -> Result<OffsetOf<D>, ErrorOf<D>> {
        let (max, tables) = self
            .dialect
            .snapshot_begin(conn, self.source_schema())
            .await?;
        // The signaling table, when the configuration does not select it, is only streamed.
        let tables: Vec<TableOf<D>> = tables.into_iter().filter(|t| t.captured).collect();
        let read_at = OffsetOf::<D>::at(max, false);
        let under_way = |at: &OffsetOf<D>| OffsetOf::<D> {
            snapshot_completed: false,
            ..at.clone()
        };
        let start = Start::begin(ctx, cut_off, read_at.clone(), |at| under_way(at).position())
            .await
            .map_err(|_| super::ChangeTableError::Stopped)?;
        let reading = under_way(start.position());
        let common = self.dialect.common();
        let read: Vec<&TableOf<D>> = (tables.iter())
            .filter(|t| common.snapshots_table(&t.full_name()))
            .collect();
        let announced = SnapshotRun::announce(ctx, self.estimates(conn, &read).await);
        let all: Vec<&TableOf<D>> = tables.iter().collect();
        // The structure as the snapshot read it, at its own position.
        self.remember(&all, ChangeKind::Create, &read_at.position())
            .await?;
        let started = SourceTimestamps::now().millis();
        let at = At {
            ts_ms: started,
            ..At::now("true", max)
        };
        let position = reading.position();
        let mut rows = SnapshotRows::new(self, position.clone(), (started, max), ctx);
        rows.batch = (tables.iter())
            .filter_map(|t| self.schema_change(t, ChangeKind::Create, &at, &position))
            .collect();
        for (i, table) in read.iter().enumerate() {
            rows.table((i == 0, i + 1 == read.len()));
            let sql = self.select_all(table, None);
            self.dialect
                .read_rows(conn, (table, &sql), &mut rows)
                .await?;
            rows.table_read(table).await?;
        }
        let done = OffsetOf::<D> {
            snapshot_completed: true,
            ..reading
        };
        let (events, count) = rows.finish();
        Self::emit(ctx, events, done.position()).await?;
        announced.completed(ctx);
        tracing::info!(rows = count, tables = read.len(), lsn = %max, "Snapshot completed.");
        Ok(done)
    }

    /// A blocking snapshot between polls: the stream waits while the listed tables are read
    /// whole (each filtered by its `additional-conditions`) in one transaction at
    /// `snapshot.isolation.mode`, at the stream's `position`; then it goes on. Changes
    /// committed meanwhile are streamed after the rows, so each key's last event is its
    /// current row; a restart in the middle reads it again (rows come twice, as Debezium
    /// documents for blocking snapshots).
    pub async fn blocking_snapshot(
        &self,
        conn: &mut D::Conn,
        request: crate::signal::BlockingRequest,
        tables: &[TableOf<D>],
        (position, commit): (Position, D::Lsn),
        ctx: &mut SourceContext,
    ) -> Result<(), ErrorOf<D>> {
        let newest = |t: &&TableOf<D>| t.captured && D::bounds(t).1.is_none();
        let chosen: Vec<&TableOf<D>> = (request.tables.iter())
            .filter_map(|n| (tables.iter()).filter(newest).find(|t| t.full_name() == *n))
            .collect();
        tracing::info!(id = %request.id, tables = ?request.tables, "Blocking snapshot: streaming paused.");
        let mut own = self.dialect.blocking_begin(conn).await?;
        let reading = own.as_mut().unwrap_or(conn);
        let mut rows = SnapshotRows::new(
            self,
            position.clone(),
            (SourceTimestamps::now().millis(), commit),
            ctx,
        );
        let mut done = Ok(());
        for (i, table) in chosen.iter().enumerate() {
            rows.table((i == 0, i + 1 == chosen.len()));
            let filter = super::super::snapshots::condition_in(
                &request.conditions,
                &table.full_name(),
                self.dialect.qualifier(),
            );
            let sql = self.select_all(table, filter.map(String::as_str));
            done = (self.dialect)
                .read_rows(reading, (table, &sql), &mut rows)
                .await;
            if done.is_ok() {
                done = rows.table_read(table).await;
            }
            if done.is_err() {
                break;
            }
        }
        self.dialect.blocking_end(reading).await;
        done?;
        let (events, count) = rows.finish();
        Self::emit(ctx, events, position).await?;
        tracing::info!(notification = "COMPLETED", id = %request.id, rows = count, "Blocking snapshot: streaming resumes.");
        Ok(())
    }

    /// The query of `table`'s rows (its columns in order), filtered by `filter`.
    fn select_all(&self, table: &TableOf<D>, filter: Option<&str>) -> String {
        let cols: Vec<String> = table.columns.iter().map(|(c, _)| D::quote(c)).collect();
        let filter = filter.map(|f| format!(" WHERE ({f})")).unwrap_or_default();
        let from = self.dialect.table_ref(table);
        format!("SELECT {} FROM {from}{filter}", cols.join(", "))
    }

    /// `tables` (`schema.table`) with the rows the server counts in each, read in the
    /// snapshot's transaction; estimates only inform the progress: without them the snapshot
    /// goes on.
    async fn estimates(
        &self,
        conn: &mut D::Conn,
        tables: &[&TableOf<D>],
    ) -> Vec<(String, Option<u64>)> {
        let counted = match self.dialect.row_counts(conn, tables).await {
            Ok(counted) => counted,
            Err(e) => {
                tracing::warn!(error = %e, "No row estimates for the snapshot's tables.");
                Default::default()
            }
        };
        (tables.iter())
            .map(|t| {
                let name = t.full_name();
                let estimate = counted.get(&name).copied().flatten();
                (name, estimate)
            })
            .collect()
    }
}

/// A snapshot's rows on their way to batches: each table's first and last rows marked
/// (`snapshot: first`, `last_in_data_collection`, …), a batch emitted each time it is full.
pub struct SnapshotRows<'s, D: Dialect> {
    source: &'s ChangeTableSource<D>,
    ctx: &'s mut SourceContext,
    batch: Vec<ChangeEvent>,
    cut: BatchCut,
    position: Position,
    ts_ms: i64,
    commit: D::Lsn,
    rows: u64,
    /// Whether the table read is the first and the last.
    place: (bool, bool),
    /// The row read last, held until the next tells whether it is the table's last; and
    /// whether it is the table's first.
    pending: Option<(Struct, bool)>,
}

impl<'s, D: Dialect> SnapshotRows<'s, D> {
    fn new(
        source: &'s ChangeTableSource<D>,
        position: Position,
        (ts_ms, commit): (i64, D::Lsn),
        ctx: &'s mut SourceContext,
    ) -> Self {
        SnapshotRows {
            source,
            cut: BatchCut::for_limits(ctx.limits()),
            ctx,
            batch: Vec::new(),
            position,
            ts_ms,
            commit,
            rows: 0,
            place: (false, false),
            pending: None,
        }
    }

    /// The next table is read (`place`: whether it is the first and the last).
    fn table(&mut self, place: (bool, bool)) {
        self.place = place;
        self.pending = None;
    }

    /// How many bytes a batch holds at most (a driver that reads ahead reads no more).
    pub fn max_batch_bytes(&self) -> usize {
        self.ctx.limits().max_batch_bytes()
    }

    /// The next row of `table` (a row holding a value that cannot be represented is handled
    /// by `event.processing.failure.handling.mode`).
    pub async fn row(&mut self, table: &TableOf<D>, row: &D::Row) -> Result<(), ErrorOf<D>> {
        let Some(after) = self.source.image(table, row, 0)? else {
            return Ok(());
        };
        match self.pending.replace((after, false)) {
            Some((prev, first)) => {
                let marker = crate::snapshot::marker(self.place, first, false);
                self.push(table, prev, marker).await?;
            }
            None => {
                if let Some(p) = self.pending.as_mut() {
                    p.1 = true;
                }
            }
        }
        Ok(())
    }

    /// `table` read whole: its last row goes out.
    async fn table_read(&mut self, table: &TableOf<D>) -> Result<(), ErrorOf<D>> {
        if let Some((prev, first)) = self.pending.take() {
            let marker = crate::snapshot::marker(self.place, first, true);
            self.push(table, prev, marker).await?;
        }
        Ok(())
    }

    async fn push(
        &mut self,
        table: &TableOf<D>,
        after: Struct,
        snapshot: &'static str,
    ) -> Result<(), ErrorOf<D>> {
        let at = At {
            ts_ms: self.ts_ms,
            ..At::now(snapshot, self.commit)
        };
        let event = (self.source).event(
            table,
            (Op::Read, None, Some(after)),
            &at,
            self.position.clone(),
        );
        self.rows += 1;
        self.batch.push(event);
        if self.cut.is_full(&self.batch) {
            self.cut.taken();
            let events = std::mem::take(&mut self.batch);
            ChangeTableSource::<D>::emit(self.ctx, events, self.position.clone()).await?;
        }
        Ok(())
    }

    /// The events not emitted yet and the count of rows read.
    fn finish(self) -> (Vec<ChangeEvent>, u64) {
        (self.batch, self.rows)
    }
}
