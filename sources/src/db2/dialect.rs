//! Db2's side of the kit's change-table source: Debezium's statements for each step (the
//! highest synchpoint, the polls' time span), the snapshot's isolation and locks over ODBC,
//! and the driver's cells decoded.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sluice_engine::{Schema, Struct, Value};
use sluice_kit::change_tables::source::{Dialect, RowError, SnapshotRows};
use sluice_kit::config::{Skipped, SourceCommon};

use super::config::IsolationMode;
use super::connection::{self, lsn_at, quote, text, ChunkSize, Conn, Row};
use super::error::{state, Db2Error, OdbcError};
use super::keys::Lit;
use super::stream::Reader;
use super::{Db2Dialect, Lsn, Table};

/// ODBC's `SQL_TXN_READ_COMMITTED` (Db2's cursor stability), the stream's isolation.
const READ_COMMITTED: u32 = 2;

/// Rows the ODBC thread reads ahead of the snapshot at most (fewer when they hold more than a
/// batch's bytes).
const SNAPSHOT_CHUNK: usize = 512;

#[async_trait]
impl Dialect for Db2Dialect {
    const NAME: &'static str = "db2";
    const SOURCE_RECORD: &'static str = "io.debezium.connector.db2.Source";
    const EVENT_SERIAL_NO: bool = false;
    const ANNOUNCES_ALTERS: bool = true;
    const CHANGE_TABLES: &'static str = "change-data tables";
    const HISTORY_FILE: &'static str = "db2-schema-history.jsonl";

    type Lsn = Lsn;
    type Kind = super::types::Kind;
    /// `"CD_OWNER"."CD_TABLE"`.
    type ChangeTable = String;
    type Conn = Conn;
    type Row = Row;
    type Query = OdbcError;
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
        ""
    }
    fn has_signal_table(&self) -> bool {
        let common = &self.config.common;
        common.signal_channel("source") && common.signal_data_collection.is_some()
    }
    fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.config.poll_interval_ms)
    }
    fn fetch_size(&self) -> usize {
        self.config.fetch_size
    }
    fn locator(table: &Table) -> String {
        format!("change-data table {}", table.change_table)
    }

    /// The snapshot reads at `snapshot.isolation.mode`.
    async fn connect(&self) -> Result<Conn, Db2Error> {
        Conn::connect(&self.config, self.config.isolation.odbc()).await
    }

    /// Checks that ASN capture is set up: its control tables are there and a table of the
    /// configuration is registered.
    async fn check_setup(&self, conn: &mut Conn) -> Result<(), Db2Error> {
        let schema = &self.config.control_schema;
        let listed = conn.rows("listing the captured tables", &self.q.change_tables(), &[]).await.map_err(|e| {
            if matches!(state(&e).as_deref(), Some("42S02" | "42704" | "42P01")) {
                Db2Error::Setup(format!(
                    "the ASN capture control tables ({schema}.IBMSNAP_REGISTER) are missing in database `{}`: set up ASN capture as Debezium's Db2 connector documents (asncdctables.sql, asncdcaddremove.sql), then `VALUES ASNCDC.ASNCDCSERVICES('start','asncdc')` and `CALL ASNCDC.ADDTABLE('<schema>', '<table>')` for each table ({e})",
                    self.config.database
                ))
            } else {
                e
            }
        })?;
        let _ = conn.end("ending the setup check").await;
        let selected = listed.iter().any(|row| {
            let (Some(s), Some(t)) = (text(row, 0), text(row, 1)) else {
                return false;
            };
            self.config.selects(s.trim_end(), t.trim_end())
        });
        if !selected {
            return Err(Db2Error::Setup(format!(
                "no table of database `{}` that the configuration selects is in capture mode ({schema}.IBMSNAP_REGISTER lists {} registration(s)): run `CALL ASNCDC.ADDTABLE('<schema>', '<table>')` for each table to capture",
                self.config.database,
                listed.len()
            )));
        }
        Ok(())
    }

    /// The stream on a connection of its own at read committed (Db2's CS), so that a poll
    /// holds no lock the capture program would wait for.
    async fn stream_connection(&self, conn: Conn) -> Result<Conn, Db2Error> {
        drop(conn);
        Conn::connect(&self.config, READ_COMMITTED).await
    }

    async fn execute(&self, conn: &mut Conn, what: &str, sql: &str) -> Result<(), Db2Error> {
        conn.run(what, sql).await
    }

    async fn end_read(&self, conn: &mut Conn, what: &str) -> Result<(), Db2Error> {
        conn.end(what).await
    }

    async fn tables(
        &self,
        conn: &mut Conn,
        source_schema: &Arc<Schema>,
        _upto: Option<Lsn>,
        _all: bool,
    ) -> Result<Vec<Table>, Db2Error> {
        let reading = super::tables::Reading {
            config: &self.config,
            modes: self.modes,
            source_schema,
            q: &self.q,
        };
        super::tables::read(conn, &reading).await
    }

    fn decode(&self, table: &Table, row: &Row, from: usize) -> Result<Struct, RowError> {
        let cells = row.get(from..).unwrap_or_default();
        table.row(|i, kind, schema| match cells.get(i) {
            None => Err("missing from the row".to_owned()),
            Some(None) => Ok(Value::Null),
            Some(Some(bytes)) => kind.value(bytes, self.modes, schema),
        })
    }

    /// The rows the catalog's statistics count in each table (`SYSCAT.TABLES.CARD`; none
    /// for a table `RUNSTATS` has not seen).
    async fn row_counts(
        &self,
        conn: &mut Conn,
        tables: &[&Table],
    ) -> Result<HashMap<String, Option<u64>>, Db2Error> {
        let mut schemas: Vec<&str> = tables.iter().map(|t| t.schema.as_str()).collect();
        schemas.sort_unstable();
        schemas.dedup();
        let mut counted = HashMap::new();
        if schemas.is_empty() {
            return Ok(counted);
        }
        let what = "reading the tables' statistics (CARD)";
        for row in &conn
            .rows(what, &self.q.row_estimates(&schemas), &[])
            .await?
        {
            let (Some(schema), Some(name)) = (text(row, 0), text(row, 1)) else {
                continue;
            };
            counted.insert(
                format!("{}.{}", schema.trim_end(), name.trim_end()),
                text(row, 2).and_then(|n| cardinality(&n)),
            );
        }
        Ok(counted)
    }

    /// The highest synchpoint (`None`: nothing captured, the capture program has not run).
    async fn max_lsn(&self, conn: &mut Conn) -> Result<Option<Lsn>, Db2Error> {
        let what = "reading the highest LSN (IBMSNAP_REGISTER)";
        let found: Vec<Row> = conn.rows(what, &self.q.max_lsn(), &[]).await?;
        match found.first() {
            Some(row) => lsn_at(row, 0, what),
            None => Ok(None),
        }
    }

    /// The highest synchpoint, bounded by `streaming.query.timespan.seconds`.
    async fn poll_bound(&self, conn: &mut Conn, last: Lsn) -> Result<Option<Lsn>, Db2Error> {
        let Some(max) = self.max_lsn(conn).await? else {
            return Ok(None);
        };
        let to = self.timespan_bound(conn, last, max).await?;
        if to < max {
            tracing::debug!(%to, %max, "The poll reads up to the end of its time span (streaming.query.timespan.seconds).");
        }
        Ok(Some(to))
    }

    async fn nothing_captured(&self, _conn: &mut Conn) -> Result<(), Db2Error> {
        tracing::warn!(database = %self.config.database, "No maximum LSN in the database: the ASN capture program has not run (start it: `VALUES ASNCDC.ASNCDCSERVICES('start','asncdc')`); no change is read until it does.");
        Ok(())
    }

    /// Reads the captured tables, locks them in share mode when `exclusive`, then reads the
    /// highest LSN.
    async fn snapshot_begin(
        &self,
        conn: &mut Conn,
        source_schema: &Arc<Schema>,
    ) -> Result<(Lsn, Vec<Table>), Db2Error> {
        let tables = self.tables(conn, source_schema, None, false).await?;
        if self.config.isolation == IsolationMode::Exclusive {
            for t in tables.iter().filter(|t| t.captured) {
                let sql = format!(
                    "LOCK TABLE {}.{} IN SHARE MODE",
                    quote(&t.schema),
                    quote(&t.name)
                );
                conn.run(&format!("locking {}", t.full_name()), &sql)
                    .await?;
            }
        }
        let max = self.max_lsn(conn).await?.unwrap_or_default();
        Ok((max, tables))
    }

    async fn snapshot_end(&self, conn: &mut Conn) {
        let _ = conn.end("ending the snapshot's transaction").await;
    }

    /// A connection of its own at `snapshot.isolation.mode`.
    async fn blocking_begin(&self, _conn: &mut Conn) -> Result<Option<Conn>, Db2Error> {
        self.connect().await.map(Some)
    }

    async fn blocking_end(&self, conn: &mut Conn) {
        let _ = conn.end("ending the blocking snapshot").await;
    }

    /// Reads `table`'s rows a batch's worth at a time from the open cursor.
    async fn read_rows(
        &self,
        conn: &mut Conn,
        (table, sql): (&Table, &str),
        out: &mut SnapshotRows<'_, Self>,
    ) -> Result<(), Db2Error> {
        let what = format!("reading the rows of {}", table.full_name());
        let chunk = ChunkSize {
            rows: SNAPSHOT_CHUNK,
            bytes: out.max_batch_bytes(),
        };
        let mut chunks = conn.cursor(&what, sql, &[], chunk)?;
        while let Some(rows) = chunks.next().await? {
            for row in rows {
                out.row(table, &row).await?;
            }
        }
        Ok(())
    }

    fn reader<'a>(
        &'a self,
        conn: &'a mut Conn,
        tables: &'a [Table],
        to: Lsn,
        _skipped: &Skipped,
    ) -> Reader<'a> {
        Reader {
            conn,
            tables,
            q: &self.q,
            to,
        }
    }

    /// The change's transaction's `IBMSNAP_LOGMARKER` from `IBMSNAP_UOW` (the time it was
    /// logged; Debezium asks the server for `CURRENT TIMESTAMP` instead, the time it read the
    /// change); none when the unit-of-work row is gone (pruned).
    fn commit_time(row: &Row) -> Option<i64> {
        let nanos = super::types::timestamp_nanos(text(row, 3)?.trim())?;
        Some(nanos.div_euclid(1_000_000))
    }

    fn quote(name: &str) -> String {
        quote(name)
    }

    fn table_ref(&self, table: &Table) -> String {
        format!("{}.{}", quote(&table.schema), quote(&table.name))
    }

    fn first_rows(n: usize, columns: &str, rest: &str) -> String {
        format!("SELECT {columns} {rest} FETCH FIRST {n} ROWS ONLY")
    }

    async fn query(&self, conn: &mut Conn, what: &str, sql: &str) -> Result<Vec<Row>, Db2Error> {
        conn.rows(what, sql, &[]).await
    }

    fn key_literal(kind: &super::types::Kind, declared: &str) -> Result<Lit, String> {
        super::keys::key_literal(kind, declared)
    }

    fn literal(value: &str, how: Lit) -> Option<String> {
        super::keys::literal(value, how)
    }

    fn key_text(row: &Row, i: usize) -> Option<String> {
        text(row, i)
    }

    /// The highest synchpoint (the zero LSN when none).
    async fn chunk_begin(&self, conn: &mut Conn) -> Result<Lsn, Db2Error> {
        Ok(self.max_lsn(conn).await?.unwrap_or_default())
    }

    async fn chunk_end(&self, conn: &mut Conn) {
        let _ = conn.end("ending a chunk's transaction").await;
    }

    fn refusal(e: &OdbcError) -> Option<String> {
        Some(e.to_string())
    }
}

impl Db2Dialect {
    /// The poll's upper bound under `streaming.query.timespan.seconds`: the last transaction
    /// logged at most that many seconds after the first one past `after`, up to `max`; `max`
    /// when the option is off or no transaction's log time is known (pruned).
    async fn timespan_bound(&self, conn: &Conn, after: Lsn, max: Lsn) -> Result<Lsn, Db2Error> {
        let seconds = self.config.timespan_seconds;
        if seconds == 0 {
            return Ok(max);
        }
        let c = &self.config.control_schema;
        let what = "reading the poll's time span (IBMSNAP_UOW)";
        let first = (conn.rows(what, &format!("SELECT MIN(IBMSNAP_LOGMARKER) FROM {c}.IBMSNAP_UOW WHERE IBMSNAP_COMMITSEQ > ?"), &[after]).await?)
            .first()
            .and_then(|row| text(row, 0))
            .and_then(|t| super::types::timestamp_nanos(t.trim()));
        let Some(first) = first else {
            return Ok(max);
        };
        let span = i64::try_from(seconds).unwrap_or(i64::MAX / 2);
        let end = first.saturating_add(span.saturating_mul(1_000_000_000));
        let end = super::types::timestamp_text(end);
        let sql = format!("SELECT MAX(IBMSNAP_COMMITSEQ) FROM {c}.IBMSNAP_UOW WHERE IBMSNAP_COMMITSEQ > ? AND IBMSNAP_COMMITSEQ <= ? AND IBMSNAP_LOGMARKER <= {}", connection::literal(&end));
        let found = conn.rows(what, &sql, &[after, max]).await?;
        match found.first() {
            Some(row) => Ok(lsn_at(row, 0, what)?.unwrap_or(max)),
            None => Ok(max),
        }
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
