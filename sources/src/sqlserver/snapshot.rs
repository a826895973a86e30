//! The snapshot, as Debezium's SQL Server connector takes it: in one transaction at the
//! `snapshot.isolation.mode` level (locks per `TABLOCKX` where the mode locks), the maximum LSN
//! read first (the position the stream goes on from), the captured tables' structure, then
//! their rows.

use futures_util::TryStreamExt;
use sluice_engine::event::{BatchCut, SourceTimestamps};
use sluice_engine::{Batch, ChangeEvent, Op, SourceContext};
use sluice_kit::snapshot::Start;

use super::connection::{quote, rows, run, Conn};
use super::error::SqlServerError;
use super::lsn::SqlServerOffset;
use super::tables::{self, Table};
use super::{At, SqlServerSource};

impl SqlServerSource {
    /// Reads every captured table's rows; the position the stream starts from.
    pub(super) async fn snapshot(
        &self,
        conn: &mut Conn,
        cut_off: Option<SqlServerOffset>,
        ctx: &mut SourceContext,
    ) -> Result<SqlServerOffset, SqlServerError> {
        let mode = self.config.isolation;
        if mode.locks() {
            run(
                conn,
                "setting the lock timeout",
                &format!("SET LOCK_TIMEOUT {}", self.config.lock_timeout_ms),
            )
            .await?;
        }
        run(
            conn,
            "setting the snapshot's isolation level",
            &format!("SET TRANSACTION ISOLATION LEVEL {}", mode.level()),
        )
        .await?;
        run(
            conn,
            "starting the snapshot's transaction",
            "BEGIN TRANSACTION",
        )
        .await?;
        let done = self.read_all(conn, cut_off, ctx).await;
        // The transaction only read: it ends the same way whatever happened.
        let _ = run(
            conn,
            "ending the snapshot's transaction",
            "COMMIT TRANSACTION",
        )
        .await;
        let _ = run(
            conn,
            "restoring the isolation level",
            "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
        )
        .await;
        done
    }

    /// Reads every captured table; `cut_off`: the stored position of a snapshot cut off
    /// earlier, which the rows go out at and the stream resumes from (else the snapshot's own
    /// position is committed before its first row: [`sluice_kit::snapshot::Start`]).
    async fn read_all(
        &self,
        conn: &mut Conn,
        cut_off: Option<SqlServerOffset>,
        ctx: &mut SourceContext,
    ) -> Result<SqlServerOffset, SqlServerError> {
        let max = self.max_lsn(conn).await?;
        let upto = (max != super::Lsn::default()).then_some(max);
        let mode = self.config.isolation;
        if mode.locks() {
            run(
                conn,
                "marking the schema snapshot",
                "SAVE TRANSACTION dbz_schema_snapshot",
            )
            .await?;
        }
        let tables = tables::read(
            conn,
            &self.config,
            self.modes,
            &self.source_schema,
            upto,
            false,
        )
        .await?;
        // The signaling table, when the configuration does not select it, is only streamed.
        let tables: Vec<Table> = tables.into_iter().filter(|t| t.captured).collect();
        let db = quote(&self.config.database);
        if mode.locks() {
            for t in &tables {
                let sql = format!(
                    "SELECT TOP(0) * FROM {db}.{}.{} WITH (TABLOCKX)",
                    quote(&t.schema),
                    quote(&t.name)
                );
                rows(
                    conn,
                    &format!("locking {}.{} (snapshot.lock.timeout.ms)", t.schema, t.name),
                    &sql,
                    &[],
                )
                .await?;
            }
        }
        if mode == super::config::IsolationMode::RepeatableRead {
            run(
                conn,
                "releasing the schema snapshot's locks",
                "ROLLBACK TRANSACTION dbz_schema_snapshot",
            )
            .await?;
        }
        let read_at = SqlServerOffset::at(max, false);
        let under_way = |at: &SqlServerOffset| SqlServerOffset {
            snapshot_completed: false,
            ..at.clone()
        };
        let start = Start::begin(ctx, cut_off, read_at.clone(), |at| under_way(at).position())
            .await
            .map_err(|_| SqlServerError::Stopped)?;
        let reading = under_way(start.position());
        let read: Vec<&Table> = tables
            .iter()
            .filter(|t| {
                self.config
                    .common
                    .snapshots_table(&format!("{}.{}", t.schema, t.name))
            })
            .collect();
        ctx.snapshot_tables(self.estimates(conn, &read).await?);
        let started = SourceTimestamps::now();
        let at = At {
            ts_ms: started.millis(),
            snapshot: "true",
            commit_lsn: max,
            change_lsn: None,
            event_serial_no: None,
        };
        let all: Vec<&Table> = tables.iter().collect();
        // The structure as the snapshot read it, at its own position.
        self.remember(
            &all,
            sluice_kit::history::ChangeKind::Create,
            &read_at.position(),
        )
        .await?;
        let schema_changes = self.schema_changes(&tables, &at, &reading.position());
        let mut reader = Reader {
            source: self,
            batch: schema_changes,
            cut: BatchCut::for_limits(ctx.limits()),
            position: reading.position(),
            ts_ms: started.millis(),
            commit: max,
            rows: 0,
        };
        for (i, table) in read.iter().enumerate() {
            let place = (i == 0, i + 1 == read.len());
            reader.table(conn, (&db, None), table, place, ctx).await?;
        }
        let done = SqlServerOffset {
            snapshot_completed: true,
            ..reading
        };
        let events = std::mem::take(&mut reader.batch);
        ctx.emit(Batch {
            events,
            position: Some(done.position()),
        })
        .await
        .map_err(|_| SqlServerError::Stopped)?;
        ctx.snapshot_completed();
        tracing::info!(rows = reader.rows, tables = read.len(), lsn = %max, "Snapshot completed.");
        Ok(done)
    }
}

impl SqlServerSource {
    /// A blocking snapshot (`execute-snapshot` with `"type": "blocking"`) between polls: the
    /// stream waits while the listed tables are read whole (each filtered by its
    /// `additional-conditions`) in one transaction at `snapshot.isolation.mode`, at the
    /// stream's `position`; then it goes on. Changes committed meanwhile are streamed after
    /// the rows, so each key's last event is its current row; a restart in the middle reads
    /// it again (rows come twice, as Debezium documents for blocking snapshots).
    pub(super) async fn blocking_snapshot(
        &self,
        conn: &mut Conn,
        request: sluice_kit::signal::BlockingRequest,
        tables: &[Table],
        (position, commit): (sluice_engine::Position, super::Lsn),
        ctx: &mut SourceContext,
    ) -> Result<(), SqlServerError> {
        let newest = |t: &&Table| t.captured && t.stop_lsn.is_none();
        let chosen: Vec<&Table> = (request.tables.iter())
            .filter_map(|n| {
                (tables.iter())
                    .filter(newest)
                    .find(|t| format!("{}.{}", t.schema, t.name) == *n)
            })
            .collect();
        tracing::info!(id = %request.id, tables = ?request.tables, "Blocking snapshot: streaming paused.");
        let level = self.config.isolation.level();
        run(
            conn,
            "setting the snapshot's isolation level",
            &format!("SET TRANSACTION ISOLATION LEVEL {level}"),
        )
        .await?;
        run(conn, "starting the blocking snapshot", "BEGIN TRANSACTION").await?;
        let started = SourceTimestamps::now();
        let mut reader = Reader {
            source: self,
            batch: Vec::new(),
            cut: BatchCut::for_limits(ctx.limits()),
            position: position.clone(),
            ts_ms: started.millis(),
            commit,
            rows: 0,
        };
        let db = quote(&self.config.database);
        let mut done = Ok(());
        for (i, table) in chosen.iter().enumerate() {
            let place = (i == 0, i + 1 == chosen.len());
            let name = format!("{}.{}", table.schema, table.name);
            let filter = sluice_kit::change_tables::snapshots::condition_in(
                &request.conditions,
                &name,
                &self.config.database,
            );
            done = reader.table(conn, (&db, filter), table, place, ctx).await;
            if done.is_err() {
                break;
            }
        }
        let _ = run(conn, "ending the blocking snapshot", "COMMIT TRANSACTION").await;
        let _ = run(
            conn,
            "restoring the isolation level",
            "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
        )
        .await;
        done?;
        let events = std::mem::take(&mut reader.batch);
        ctx.emit(Batch {
            events,
            position: Some(position),
        })
        .await
        .map_err(|_| SqlServerError::Stopped)?;
        tracing::info!(notification = "COMPLETED", id = %request.id, rows = reader.rows, "Blocking snapshot: streaming resumes.");
        Ok(())
    }
}

/// The snapshot's rows on their way to batches.
struct Reader<'a> {
    source: &'a SqlServerSource,
    batch: Vec<ChangeEvent>,
    cut: BatchCut,
    position: sluice_engine::Position,
    ts_ms: i64,
    commit: super::Lsn,
    rows: u64,
}

impl Reader<'_> {
    /// Reads `table`'s rows (`place`: whether it is the first and the last table read).
    async fn table(
        &mut self,
        conn: &mut Conn,
        (db, filter): (&str, Option<&String>),
        table: &Table,
        place: (bool, bool),
        ctx: &mut SourceContext,
    ) -> Result<(), SqlServerError> {
        let cols = table
            .columns
            .iter()
            .map(|(c, _)| quote(c))
            .collect::<Vec<_>>()
            .join(", ");
        let filter = filter.map(|f| format!(" WHERE ({f})")).unwrap_or_default();
        let sql = format!(
            "SELECT {cols} FROM {db}.{}.{}{filter}",
            quote(&table.schema),
            quote(&table.name)
        );
        let what = format!("reading the rows of {}.{}", table.schema, table.name);
        let mut stream = conn
            .query(sql, &[])
            .await
            .map_err(|e| SqlServerError::query(&what, e))?
            .into_row_stream();
        let mut pending: Option<(sluice_engine::Struct, bool)> = None;
        while let Some(row) = stream
            .try_next()
            .await
            .map_err(|e| SqlServerError::query(&what, e))?
        {
            let cells: Vec<_> = row.cells().map(|(_, d)| d).collect();
            let after = match self.source.row(table, &cells) {
                Ok(after) => after,
                Err(e) => {
                    self.source
                        .config
                        .common
                        .unrepresentable(
                            &format!("{}.{}", table.schema, table.name),
                            String::new,
                            &e,
                        )
                        .map_err(SqlServerError::Setup)?;
                    continue;
                }
            };
            if let Some((prev, first)) = pending.replace((after, false)) {
                self.push(
                    table,
                    prev,
                    sluice_kit::snapshot::marker(place, first, false),
                    ctx,
                )
                .await?;
            } else if let Some(p) = pending.as_mut() {
                p.1 = true;
            }
        }
        drop(stream);
        if let Some((prev, first)) = pending {
            self.push(
                table,
                prev,
                sluice_kit::snapshot::marker(place, first, true),
                ctx,
            )
            .await?;
        }
        Ok(())
    }

    async fn push(
        &mut self,
        table: &Table,
        after: sluice_engine::Struct,
        snapshot: &'static str,
        ctx: &mut SourceContext,
    ) -> Result<(), SqlServerError> {
        let at = At {
            ts_ms: self.ts_ms,
            snapshot,
            commit_lsn: self.commit,
            change_lsn: None,
            event_serial_no: None,
        };
        let event = self.source.event(
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
            ctx.emit(Batch {
                events,
                position: Some(self.position.clone()),
            })
            .await
            .map_err(|_| SqlServerError::Stopped)?;
        }
        Ok(())
    }
}

impl SqlServerSource {
    /// `tables` (`schema.table`) with the rows the server counts in each (`sys.partitions`),
    /// read in the snapshot's transaction.
    async fn estimates(
        &self,
        conn: &mut Conn,
        tables: &[&Table],
    ) -> Result<Vec<(String, Option<u64>)>, SqlServerError> {
        let q = super::connection::Statements::new(&self.config.database);
        let db = self.config.database.as_str();
        // Estimates only inform the progress: without them the snapshot goes on.
        let found = match rows(
            conn,
            "reading the tables' row counts (sys.partitions)",
            &q.row_estimates(),
            &[&db, &db],
        )
        .await
        {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "No row estimates for the snapshot's tables.");
                Vec::new()
            }
        };
        let mut counted = std::collections::HashMap::new();
        for row in &found {
            let text = |i| row.try_get::<&str, _>(i).ok().flatten();
            let (Some(schema), Some(name)) = (text(0), text(1)) else {
                continue;
            };
            let n = row.try_get::<i64, _>(2).ok().flatten();
            counted.insert(
                format!("{schema}.{name}"),
                n.and_then(|n| u64::try_from(n).ok()),
            );
        }
        Ok(tables
            .iter()
            .map(|t| {
                let name = format!("{}.{}", t.schema, t.name);
                let estimate = counted.get(&name).copied().flatten();
                (name, estimate)
            })
            .collect())
    }
}
