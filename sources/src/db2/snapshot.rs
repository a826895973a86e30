//! The snapshot, as Debezium's Db2 connector takes it (seed 002's workflow): in one
//! transaction at `snapshot.isolation.mode` (the tables locked in share mode when
//! `exclusive`), the highest LSN read first (the position the stream goes on from), the
//! captured tables' structure, then their rows.

use sluice_engine::event::{BatchCut, SourceTimestamps};
use sluice_engine::{ChangeEvent, Op, SourceContext, Struct};
use sluice_kit::snapshot::Start;

use super::config::IsolationMode;
use super::connection::{quote, text, ChunkSize, Conn};

/// Rows the ODBC thread reads ahead of the snapshot at most (fewer when they hold more than a
/// batch's bytes).
const SNAPSHOT_CHUNK: usize = 512;
use super::error::Db2Error;
use super::lsn::{Db2Offset, Lsn};
use super::tables::{self, Table};
use super::{At, Db2Source};

impl Db2Source {
    /// Reads every captured table's rows; the position the stream starts from.
    pub(super) async fn snapshot(
        &self,
        conn: &Conn,
        cut_off: Option<Db2Offset>,
        ctx: &mut SourceContext,
    ) -> Result<Db2Offset, Db2Error> {
        let done = self.read_all(conn, cut_off, ctx).await;
        // The transaction only read (and locked): it ends the same way whatever happened.
        let _ = conn.end("ending the snapshot's transaction").await;
        done
    }

    /// Reads every captured table; `cut_off`: the stored position of a snapshot cut off
    /// earlier, which the rows go out at and the stream resumes from (else the snapshot's own
    /// position is committed before its first row: [`sluice_kit::snapshot::Start`]).
    async fn read_all(
        &self,
        conn: &Conn,
        cut_off: Option<Db2Offset>,
        ctx: &mut SourceContext,
    ) -> Result<Db2Offset, Db2Error> {
        let tables = tables::read(conn, &self.reading()).await?;
        // The signaling table, when the configuration does not select it, is only streamed.
        let tables: Vec<Table> = tables.into_iter().filter(|t| t.captured).collect();
        if self.config.isolation == IsolationMode::Exclusive {
            for t in &tables {
                let sql = format!(
                    "LOCK TABLE {}.{} IN SHARE MODE",
                    quote(&t.schema),
                    quote(&t.name)
                );
                conn.run(&format!("locking {}.{}", t.schema, t.name), &sql)
                    .await?;
            }
        }
        let max = self.max_lsn(conn).await?.unwrap_or_default();
        let read_at = Db2Offset::at(max, false);
        let under_way = |at: &Db2Offset| Db2Offset {
            snapshot_completed: false,
            ..at.clone()
        };
        let start = Start::begin(ctx, cut_off, read_at.clone(), |at| under_way(at).position())
            .await
            .map_err(|_| Db2Error::Stopped)?;
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
        };
        let all: Vec<&Table> = tables.iter().collect();
        // The structure as the snapshot read it, at its own position.
        self.remember(
            &all,
            sluice_kit::history::ChangeKind::Create,
            &read_at.position(),
        )
        .await?;
        let mut reader = Reader {
            source: self,
            batch: self.schema_changes(&tables, &at, &reading.position()),
            cut: BatchCut::for_limits(ctx.limits()),
            position: reading.position(),
            ts_ms: started.millis(),
            commit: max,
            rows: 0,
        };
        for (i, table) in read.iter().enumerate() {
            let place = (i == 0, i + 1 == read.len());
            reader.table(conn, (table, None), place, ctx).await?;
        }
        let done = Db2Offset {
            snapshot_completed: true,
            ..reading
        };
        let events = std::mem::take(&mut reader.batch);
        self.emit(ctx, events, done.position()).await?;
        ctx.snapshot_completed();
        tracing::info!(rows = reader.rows, tables = read.len(), lsn = %max, "Snapshot completed.");
        Ok(done)
    }
}

impl Db2Source {
    /// A blocking snapshot (`execute-snapshot` with `"type": "blocking"`) between polls: the
    /// stream waits while the listed tables are read whole (each filtered by its
    /// `additional-conditions`) in one transaction at `snapshot.isolation.mode` on a connection
    /// of their own, at the stream's `position`; then it goes on. Changes committed meanwhile
    /// are streamed after the rows, so each key's last event is its current row.
    pub(super) async fn blocking_snapshot(
        &self,
        request: sluice_kit::signal::BlockingRequest,
        tables: &[Table],
        (position, commit): (sluice_engine::Position, Lsn),
        ctx: &mut SourceContext,
    ) -> Result<(), Db2Error> {
        let chosen: Vec<&Table> = (request.tables.iter())
            .filter_map(|n| {
                (tables.iter())
                    .filter(|t| t.captured)
                    .find(|t| format!("{}.{}", t.schema, t.name) == *n)
            })
            .collect();
        tracing::info!(id = %request.id, tables = ?request.tables, "Blocking snapshot: streaming paused.");
        let conn = Conn::connect(&self.config, self.config.isolation.odbc()).await?;
        let mut reader = Reader {
            source: self,
            batch: Vec::new(),
            cut: BatchCut::for_limits(ctx.limits()),
            position: position.clone(),
            ts_ms: SourceTimestamps::now().millis(),
            commit,
            rows: 0,
        };
        let mut done = Ok(());
        for (i, table) in chosen.iter().enumerate() {
            let place = (i == 0, i + 1 == chosen.len());
            let name = format!("{}.{}", table.schema, table.name);
            let filter =
                sluice_kit::change_tables::snapshots::condition_in(&request.conditions, &name, "");
            done = reader.table(&conn, (table, filter), place, ctx).await;
            if done.is_err() {
                break;
            }
        }
        let _ = conn.end("ending the blocking snapshot").await;
        done?;
        let events = std::mem::take(&mut reader.batch);
        self.emit(ctx, events, position).await?;
        tracing::info!(notification = "COMPLETED", id = %request.id, rows = reader.rows, "Blocking snapshot: streaming resumes.");
        Ok(())
    }
}

/// The snapshot's rows on their way to batches.
struct Reader<'a> {
    source: &'a Db2Source,
    batch: Vec<ChangeEvent>,
    cut: BatchCut,
    position: sluice_engine::Position,
    ts_ms: i64,
    commit: Lsn,
    rows: u64,
}

impl Reader<'_> {
    /// Reads `table`'s rows (`place`: whether it is the first and the last table read), a
    /// batch's worth at a time from the open cursor.
    async fn table(
        &mut self,
        conn: &Conn,
        (table, filter): (&Table, Option<&String>),
        place: (bool, bool),
        ctx: &mut SourceContext,
    ) -> Result<(), Db2Error> {
        let cols = table
            .columns
            .iter()
            .map(|(c, _)| quote(c))
            .collect::<Vec<_>>()
            .join(", ");
        let filter = filter.map(|f| format!(" WHERE ({f})")).unwrap_or_default();
        let sql = format!(
            "SELECT {cols} FROM {}.{}{filter}",
            quote(&table.schema),
            quote(&table.name)
        );
        let what = format!("reading the rows of {}.{}", table.schema, table.name);
        let chunk = ChunkSize {
            rows: SNAPSHOT_CHUNK,
            bytes: ctx.limits().max_batch_bytes(),
        };
        let mut chunks = conn.cursor(&what, &sql, &[], chunk)?;
        let mut pending: Option<(Struct, bool)> = None;
        while let Some(rows) = chunks.next().await? {
            for cells in rows {
                let after = match self.source.row(table, &cells) {
                    Ok(after) => after,
                    Err(e) => {
                        let name = format!("{}.{}", table.schema, table.name);
                        self.source
                            .config
                            .common
                            .unrepresentable(&name, String::new, &e)
                            .map_err(Db2Error::Setup)?;
                        continue;
                    }
                };
                if let Some((prev, was_first)) = pending.replace((after, false)) {
                    self.push(
                        table,
                        prev,
                        sluice_kit::snapshot::marker(place, was_first, false),
                        ctx,
                    )
                    .await?;
                } else if let Some(p) = pending.as_mut() {
                    p.1 = true;
                }
            }
        }
        if let Some((prev, was_first)) = pending {
            self.push(
                table,
                prev,
                sluice_kit::snapshot::marker(place, was_first, true),
                ctx,
            )
            .await?;
        }
        Ok(())
    }

    async fn push(
        &mut self,
        table: &Table,
        after: Struct,
        snapshot: &'static str,
        ctx: &mut SourceContext,
    ) -> Result<(), Db2Error> {
        let at = At {
            ts_ms: self.ts_ms,
            snapshot,
            commit_lsn: self.commit,
            change_lsn: None,
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
            self.source.emit(ctx, events, self.position.clone()).await?;
        }
        Ok(())
    }
}

impl Db2Source {
    /// `tables` (`schema.table`) with the rows the catalog's statistics count in each
    /// (`SYSCAT.TABLES.CARD`; none for a table `RUNSTATS` has not seen), read in the
    /// snapshot's transaction.
    async fn estimates(
        &self,
        conn: &Conn,
        tables: &[&Table],
    ) -> Result<Vec<(String, Option<u64>)>, Db2Error> {
        let mut schemas: Vec<&str> = tables.iter().map(|t| t.schema.as_str()).collect();
        schemas.sort_unstable();
        schemas.dedup();
        let mut counted = std::collections::HashMap::new();
        if !schemas.is_empty() {
            let q = super::connection::Statements::new(&self.config);
            // Estimates only inform the progress: without them the snapshot goes on.
            let found = conn
                .rows(
                    "reading the tables' statistics (CARD)",
                    &q.row_estimates(&schemas),
                    &[],
                )
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "No row estimates for the snapshot's tables.");
                    Vec::new()
                });
            for row in &found {
                let (Some(schema), Some(name)) = (text(row, 0), text(row, 1)) else {
                    continue;
                };
                counted.insert(
                    format!("{}.{}", schema.trim_end(), name.trim_end()),
                    text(row, 2).and_then(|n| cardinality(&n)),
                );
            }
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

/// A `CARD` (an integer) or `CARDF` (a float) as a row count; none for -1 (no statistics).
fn cardinality(text: &str) -> Option<u64> {
    let text = text.trim();
    if let Ok(n) = text.parse::<i64>() {
        return u64::try_from(n).ok();
    }
    let f = text.parse::<f64>().ok()?;
    // A count of rows far below 2^53: exact as a float; -1 and any fraction are no count.
    (f >= 0.0 && f.fract() == 0.0 && f < 9.0e15).then_some(f as u64)
}

#[cfg(test)]
mod tests {
    use super::cardinality;

    #[test]
    fn cardinalities() {
        assert_eq!(cardinality("1234"), Some(1234));
        assert_eq!(cardinality("-1"), None);
        assert_eq!(cardinality("-1.0E0"), None);
        assert_eq!(cardinality("3.0E0"), Some(3));
        assert_eq!(cardinality(" 42 "), Some(42));
        assert_eq!(cardinality("many"), None);
    }
}
