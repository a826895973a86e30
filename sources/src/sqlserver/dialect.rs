//! SQL Server's side of the kit's change-table source: Debezium's statements for each step
//! (the maximum LSN, the polls' upper bounds, the cleanup check, SQL Server Agent), the
//! snapshot's isolation and locks, and the TDS rows decoded.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::TryStreamExt;
use sluice_engine::{Op, Schema, Struct};
use sluice_kit::change_tables::source::{Dialect, RowError, SnapshotRows};
use sluice_kit::config::{Skipped, SourceCommon};
use tiberius::{ColumnData, Row};

use super::changes::Reader;
use super::config::IsolationMode;
use super::connection::{self, lsn_at, quote, rows, run, Conn};
use super::error::{SqlServerError, TdsError};
use super::keys::Lit;
use super::{Lsn, SqlServerDialect, Table};

#[async_trait]
impl Dialect for SqlServerDialect {
    const NAME: &'static str = "sqlserver";
    const SOURCE_RECORD: &'static str = "io.debezium.connector.sqlserver.Source";
    const EVENT_SERIAL_NO: bool = true;
    const ANNOUNCES_ALTERS: bool = false;
    const CHANGE_TABLES: &'static str = "change tables";
    const HISTORY_FILE: &'static str = "sqlserver-schema-history.jsonl";

    type Lsn = Lsn;
    type Kind = super::types::Kind;
    type ChangeTable = super::tables::Instance;
    type Conn = Conn;
    type Row = Row;
    type Query = TdsError;
    type Reader<'a> = Reader<'a>;
    type KeyLiteral = Lit;

    fn common(&self) -> &SourceCommon {
        &self.config.common
    }
    fn common_mut(&mut self) -> &mut SourceCommon {
        &mut self.config.common
    }
    fn database(&self) -> &str {
        &self.config.database
    }
    fn qualifier(&self) -> &str {
        &self.config.database
    }
    fn has_signal_table(&self) -> bool {
        self.config.has_signal_table()
    }
    fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.config.poll_interval_ms)
    }
    fn fetch_size(&self) -> usize {
        self.config.fetch_size
    }
    fn bounds(table: &Table) -> (Lsn, Option<Lsn>) {
        (table.change_table.start_lsn, table.change_table.stop_lsn)
    }
    fn locator(table: &Table) -> String {
        format!("capture instance {}", table.change_table.name)
    }

    async fn connect(&self) -> Result<Conn, SqlServerError> {
        connection::connect(&self.config).await
    }

    /// Checks that CDC is enabled on the database and the login may read change tables, as
    /// Debezium's `checkIfConnectedUserHasAccessToCDCTable` does.
    async fn check_setup(&self, conn: &mut Conn) -> Result<(), SqlServerError> {
        let db = &self.config.database;
        let listed = rows(conn, "EXEC sys.sp_cdc_help_change_data_capture", &self.q.help_change_data_capture(), &[])
            .await
            .map_err(|e| match e {
                SqlServerError::Query { source: TdsError(tiberius::error::Error::Server(s)), .. } if s.message().contains("not enabled for Change Data Capture") => {
                    SqlServerError::Setup(format!("CDC is not enabled on the database `{db}`: run `EXEC sys.sp_cdc_enable_db` in it (and `sys.sp_cdc_enable_table` for each table to capture)"))
                }
                other => other,
            })?;
        if listed.is_empty() {
            return Err(SqlServerError::Setup(format!(
                "no table of the database `{db}` is in capture mode, or the login `{}` may read none (sys.sp_cdc_help_change_data_capture lists nothing): run `EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'<table>', @role_name = NULL` for each table to capture",
                self.config.connection.login()
            )));
        }
        Ok(())
    }

    async fn execute(&self, conn: &mut Conn, what: &str, sql: &str) -> Result<(), SqlServerError> {
        run(conn, what, sql).await
    }

    async fn tables(
        &self,
        conn: &mut Conn,
        source_schema: &Arc<Schema>,
        upto: Option<Lsn>,
        all: bool,
    ) -> Result<Vec<Table>, SqlServerError> {
        let reading = super::tables::Reading {
            config: &self.config,
            modes: self.modes,
            source_schema,
            q: &self.q,
        };
        super::tables::read(conn, &reading, upto, all).await
    }

    fn decode(&self, table: &Table, row: &Row, from: usize) -> Result<Struct, RowError> {
        let cells: Vec<&ColumnData<'_>> = row.cells().map(|(_, d)| d).skip(from).collect();
        table.row(|i, kind, schema| {
            let cell = cells.get(i).ok_or("missing from the row")?;
            kind.value(cell, self.modes, schema)
        })
    }

    async fn row_counts(
        &self,
        conn: &mut Conn,
        _tables: &[&Table],
    ) -> Result<HashMap<String, Option<u64>>, SqlServerError> {
        let db = self.config.database.as_str();
        let what = "reading the tables' row counts (sys.partitions)";
        let found = rows(conn, what, &self.q.row_estimates(), &[&db, &db]).await?;
        let mut counted = HashMap::new();
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
        Ok(counted)
    }

    /// `fn_cdc_get_max_lsn()`.
    async fn max_lsn(&self, conn: &mut Conn) -> Result<Option<Lsn>, SqlServerError> {
        let found = rows(conn, "reading the maximum LSN", &self.q.max_lsn(), &[]).await?;
        match found.first() {
            Some(row) => Ok(lsn_at(row, 0)?.filter(|l| !l.is_zero())),
            None => Ok(None),
        }
    }

    /// Why the committed commit LSN `stored` can no longer be read, as Debezium's
    /// `validateLogPosition` decides: the change tables' oldest LSN is past it (the cleanup
    /// job deleted what came after it).
    async fn lost(&self, conn: &mut Conn, stored: Lsn) -> Result<Option<String>, SqlServerError> {
        if stored.is_zero() {
            return Ok(None);
        }
        let what = "reading the change tables' oldest LSN";
        let found = rows(conn, what, &self.q.min_lsn_of_change_tables(), &[]).await?;
        let oldest = match found.first() {
            Some(row) => lsn_at(row, 0)?,
            None => None,
        };
        Ok(match oldest {
            Some(oldest) if oldest <= stored => None,
            Some(oldest) => Some(format!(
                "the committed position (commit LSN {stored}) is older than what the change tables hold (from {oldest}): the CDC cleanup job deleted the changes after it"
            )),
            None => Some("no change table has a start LSN (cdc.change_tables)".to_owned()),
        })
    }

    /// The commit LSN `max.iteration.transactions` transactions after `last` (or the newest),
    /// from `cdc.lsn_time_mapping`.
    async fn poll_bound(&self, conn: &mut Conn, last: Lsn) -> Result<Option<Lsn>, SqlServerError> {
        let n = i32::try_from(self.config.max_iteration_transactions).unwrap_or(i32::MAX);
        let what = "reading the newest commit LSN (cdc.lsn_time_mapping)";
        let q = &self.q;
        let found = if n == 0 {
            rows(conn, what, &q.max_transaction_lsn(), &[]).await?
        } else if last.is_zero() {
            rows(conn, what, &q.nth_transaction_lsn_from_beginning(), &[&n]).await?
        } else {
            let params: [&dyn tiberius::ToSql; 2] = [&n, &&last.0[..]];
            rows(conn, what, &q.nth_transaction_lsn_from_last(), &params).await?
        };
        match found.first() {
            Some(row) => lsn_at(row, 0),
            None => Ok(None),
        }
    }

    /// No transaction captured at all: is the capture job running? (Debezium asks once, the
    /// same way: `sqlserver.agent.status.query`.)
    async fn nothing_captured(&self, conn: &mut Conn) -> Result<(), SqlServerError> {
        let what = "checking SQL Server Agent (sys.dm_server_services)";
        let found = rows(conn, what, &self.q.agent_status(), &[]).await?;
        let running = found
            .first()
            .map(|row| row.get_column_data(0).ok().cloned());
        let running = match running.flatten() {
            Some(ColumnData::I32(Some(v))) => v == 1,
            Some(ColumnData::I64(Some(v))) => v == 1,
            Some(ColumnData::U8(Some(v))) => v == 1,
            Some(ColumnData::Bit(Some(v))) => v,
            // No row (the login may not read the view): not known to be stopped.
            _ => true,
        };
        if !running {
            tracing::warn!(
                database = %self.config.database,
                "No change has been captured and SQL Server Agent is not running: its capture job fills the change tables, so no change will be read until it runs (start the SQL Server Agent service)."
            );
        }
        Ok(())
    }

    /// `sys.fn_cdc_increment_lsn`.
    async fn poll_start(&self, conn: &mut Conn, last: Lsn) -> Result<Lsn, SqlServerError> {
        let what = "sys.fn_cdc_increment_lsn";
        let found = rows(conn, what, &self.q.increment_lsn(), &[&&last.0[..]]).await?;
        (found.first().map(|r| lsn_at(r, 0)).transpose()?.flatten()).ok_or_else(|| {
            SqlServerError::Setup("sys.fn_cdc_increment_lsn returned nothing".into())
        })
    }

    async fn snapshot_begin(
        &self,
        conn: &mut Conn,
        source_schema: &Arc<Schema>,
    ) -> Result<(Lsn, Vec<Table>), SqlServerError> {
        self.begin_snapshot(conn, source_schema).await
    }

    async fn snapshot_end(&self, conn: &mut Conn) {
        self.end_transaction(conn, "ending the snapshot's transaction")
            .await;
    }

    async fn blocking_begin(&self, conn: &mut Conn) -> Result<Option<Conn>, SqlServerError> {
        let level = self.config.isolation.level();
        let what = "setting the snapshot's isolation level";
        run(
            conn,
            what,
            &format!("SET TRANSACTION ISOLATION LEVEL {level}"),
        )
        .await?;
        run(conn, "starting the blocking snapshot", "BEGIN TRANSACTION").await?;
        Ok(None)
    }

    async fn blocking_end(&self, conn: &mut Conn) {
        self.end_transaction(conn, "ending the blocking snapshot")
            .await;
    }

    async fn read_rows(
        &self,
        conn: &mut Conn,
        (table, sql): (&Table, &str),
        out: &mut SnapshotRows<'_, Self>,
    ) -> Result<(), SqlServerError> {
        let what = format!("reading the rows of {}", table.full_name());
        let mut stream = (conn.query(sql, &[]).await)
            .map_err(|e| SqlServerError::query(&what, e))?
            .into_row_stream();
        while let Some(row) =
            (stream.try_next().await).map_err(|e| SqlServerError::query(&what, e))?
        {
            out.row(table, &row).await?;
        }
        Ok(())
    }

    fn reader<'a>(
        &'a self,
        conn: &'a mut Conn,
        tables: &'a [Table],
        to: Lsn,
        skipped: &Skipped,
    ) -> Reader<'a> {
        Reader {
            conn,
            tables,
            q: &self.q,
            mode: self.config.query_mode,
            skip_ops: skipped_operations(skipped),
            to,
        }
    }

    /// The commit time the change query's last column holds.
    fn commit_time(row: &Row) -> Option<i64> {
        let (_, last) = row.cells().last()?;
        super::types::epoch_millis(last)
    }

    fn quote(name: &str) -> String {
        quote(name)
    }

    fn table_ref(&self, table: &Table) -> String {
        let db = quote(&self.config.database);
        format!("{db}.{}.{}", quote(&table.schema), quote(&table.name))
    }

    fn first_rows(n: usize, columns: &str, rest: &str) -> String {
        format!("SELECT TOP ({n}) {columns} {rest}")
    }

    async fn query(
        &self,
        conn: &mut Conn,
        what: &str,
        sql: &str,
    ) -> Result<Vec<Row>, SqlServerError> {
        rows(conn, what, sql, &[]).await
    }

    fn key_literal(kind: &super::types::Kind, declared: &str) -> Result<Lit, String> {
        super::keys::key_literal(kind, declared)
    }

    fn literal(value: &str, how: Lit) -> Option<String> {
        super::keys::literal(value, how)
    }

    fn key_text(row: &Row, i: usize) -> Option<String> {
        super::types::key_text(row.get_column_data(i).ok()?)
    }

    /// The newest transaction's commit LSN (`cdc.lsn_time_mapping`, the capture job's idle
    /// entries left out), read in the chunk's transaction.
    async fn chunk_begin(&self, conn: &mut Conn) -> Result<Lsn, SqlServerError> {
        run(conn, "starting a chunk's transaction", "BEGIN TRANSACTION").await?;
        self.max_transaction_lsn(conn).await
    }

    async fn chunk_end(&self, conn: &mut Conn) {
        let _ = run(conn, "ending a chunk's transaction", "COMMIT TRANSACTION").await;
    }

    fn refusal(e: &TdsError) -> Option<String> {
        match &e.0 {
            tiberius::error::Error::Server(e) => Some(e.message().to_owned()),
            _ => None,
        }
    }
}

/// The change table operations `skipped.operations` leaves out (filtered by the change query,
/// as Debezium does): c 2, u 3 and 4, d 1.
fn skipped_operations(skipped: &Skipped) -> Vec<i32> {
    let mut ops = Vec::new();
    if skipped.skips(Op::Delete) {
        ops.push(1);
    }
    if skipped.skips(Op::Create) {
        ops.push(2);
    }
    if skipped.skips(Op::Update) {
        ops.extend([3, 4]);
    }
    ops
}

impl SqlServerDialect {
    /// The snapshot's transaction at `snapshot.isolation.mode` (locks per `TABLOCKX` where
    /// the mode locks): the maximum LSN read first, then the captured tables' structure.
    async fn begin_snapshot(
        &self,
        conn: &mut Conn,
        source_schema: &Arc<Schema>,
    ) -> Result<(Lsn, Vec<Table>), SqlServerError> {
        let mode = self.config.isolation;
        if mode.locks() {
            let timeout = format!("SET LOCK_TIMEOUT {}", self.config.lock_timeout_ms);
            run(conn, "setting the lock timeout", &timeout).await?;
        }
        let level = format!("SET TRANSACTION ISOLATION LEVEL {}", mode.level());
        run(conn, "setting the snapshot's isolation level", &level).await?;
        run(
            conn,
            "starting the snapshot's transaction",
            "BEGIN TRANSACTION",
        )
        .await?;
        let max = self.max_lsn(conn).await?;
        if mode.locks() {
            let savepoint = "SAVE TRANSACTION dbz_schema_snapshot";
            run(conn, "marking the schema snapshot", savepoint).await?;
        }
        let tables = self.tables(conn, source_schema, max, false).await?;
        let db = quote(&self.config.database);
        if mode.locks() {
            for t in tables.iter().filter(|t| t.captured) {
                let (schema, name) = (quote(&t.schema), quote(&t.name));
                let sql = format!("SELECT TOP(0) * FROM {db}.{schema}.{name} WITH (TABLOCKX)");
                let what = format!("locking {} (snapshot.lock.timeout.ms)", t.full_name());
                rows(conn, &what, &sql, &[]).await?;
            }
        }
        if mode == IsolationMode::RepeatableRead {
            let release = "ROLLBACK TRANSACTION dbz_schema_snapshot";
            run(conn, "releasing the schema snapshot's locks", release).await?;
        }
        Ok((max.unwrap_or_default(), tables))
    }

    /// The transaction ends (it only read) and the isolation level is restored, whatever
    /// happened.
    async fn end_transaction(&self, conn: &mut Conn, what: &str) {
        let _ = run(conn, what, "COMMIT TRANSACTION").await;
        let restore = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED";
        let _ = run(conn, "restoring the isolation level", restore).await;
    }

    /// The newest transaction's commit LSN in `cdc.lsn_time_mapping` (an incremental
    /// snapshot's chunk waits for it: the capture job's idle entries left out); the zero LSN
    /// when none.
    async fn max_transaction_lsn(&self, conn: &mut Conn) -> Result<Lsn, SqlServerError> {
        let what = "reading the newest commit LSN (cdc.lsn_time_mapping)";
        let found = rows(conn, what, &self.q.max_transaction_lsn(), &[]).await?;
        match found.first() {
            Some(row) => Ok(lsn_at(row, 0)?.unwrap_or_default()),
            None => Ok(Lsn::default()),
        }
    }
}
