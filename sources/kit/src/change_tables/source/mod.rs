//! The change-table source: one source over a dialect. Debezium's Db2 connector is derived from
//! its SQL Server one, and here both are a [`Dialect`] of [`ChangeTableSource`], which runs what
//! they share: the snapshot mode carried out from the stored position ([`mod@start`]), the
//! snapshot and blocking snapshots ([`mod@snapshot`]), the stream's polls, heartbeats,
//! announcements of tables entering capture mode and incremental snapshots between polls
//! ([`mod@stream`]), the `source` block, the events, the schema change events and the schema
//! history. A dialect supplies the connection, its LSN, its statements, the mapping of its
//! types and where a table's changes are.

pub mod chunks;
mod error;
pub mod snapshot;
pub mod start;
pub mod stream;
mod table;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sluice_engine::event::{shared_text, SourceConstants, SourceTimestamps};
use sluice_engine::{
    ChangeEvent, ComponentError, Op, Position, Schema, SchemaType, SourceContext, Struct, Value,
};

use super::history::TableHistory;
use super::lsn::{ChangeLsn, ChangeOffset};
use super::merge::Pieces;
use crate::config::{Feature, Skipped, SourceCommon, Supports};
use crate::history::ChangeKind;
use crate::records::schema_change::SchemaChangeEvents;

use crate::failure::Refusal;
pub use crate::failure::RowError;
pub use error::{ChangeTableError, QueryError};
pub use snapshot::SnapshotRows;
pub use stream::Streaming;
pub use table::{CapturedTable, Column, TableParts};

/// What of the shared options every change-table source implements (all that Debezium's SQL
/// Server and Db2 connectors have), and its signal channels.
pub const SUPPORTS: Supports = Supports {
    features: &[
        Feature::FailureHandling,
        Feature::ColumnFilters,
        Feature::ColumnMasks,
        Feature::MessageKeyColumns,
        Feature::SkippedOperations,
        Feature::SnapshotCollections,
        Feature::Heartbeats,
        Feature::TransactionMetadata,
        Feature::SchemaChanges,
        Feature::Notifications,
        Feature::SchemaHistory,
    ],
    signal_channels: &["source", "file", "http", "kafka"],
};

/// A dialect's captured table.
pub type TableOf<D> = CapturedTable<<D as Dialect>::Kind, <D as Dialect>::ChangeTable>;
/// A dialect's error.
pub type ErrorOf<D> = ChangeTableError<<D as Dialect>::Query>;
/// A dialect's stored position.
pub type OffsetOf<D> = ChangeOffset<<D as Dialect>::Lsn>;
/// The progress of an incremental snapshot: key values as text.
pub type Progress = crate::incremental::Progress<String>;
/// Where a stream goes on from once the snapshot mode was carried out: the position and the
/// running incremental snapshot's progress.
pub type StreamFrom<D> = (OffsetOf<D>, Option<Progress>);

/// What a change-table server is to the source: its connection, LSN, statements and types.
/// Each method says what Debezium's connector does at that step; the source does the rest.
#[async_trait]
pub trait Dialect: Send + Sync + Sized + 'static {
    /// The source's name (`source.connector`, the positions, the logs).
    const NAME: &'static str;
    /// The name of the `source` block's schema (`io.debezium.connector.<name>.Source`).
    const SOURCE_RECORD: &'static str;
    /// Whether the `source` block carries `event_serial_no` (SQL Server's does).
    const EVENT_SERIAL_NO: bool;
    /// Whether a captured table whose structure changed between polls is announced (`ALTER`:
    /// Db2's online schema change; SQL Server's new structure comes with a capture instance).
    const ANNOUNCES_ALTERS: bool;
    /// What the logs call the change tables (`change tables`, `change-data tables`).
    const CHANGE_TABLES: &'static str;
    /// The file name of the schema history in the pipeline's data directory.
    const HISTORY_FILE: &'static str;
    /// Where a change row's table columns start (after the operation, LSNs and commit time).
    const CHANGE_DATA: usize = 4;

    type Lsn: ChangeLsn;
    /// A column's kind (how its values are read).
    type Kind: Send + Sync;
    /// Where a table's changes are (a capture instance, a change-data table).
    type ChangeTable: Send + Sync;
    type Conn: Send;
    /// A row as the driver returns it (snapshot rows and change rows alike).
    type Row: Send + Sync + 'static;
    /// The driver's error.
    type Query: QueryError;
    /// A poll's change queries.
    type Reader<'a>: Pieces<Lsn = Self::Lsn, Row = Self::Row, Error = ErrorOf<Self>> + 'a;
    /// How a chunk key column's values go back into a query.
    type KeyLiteral: Copy + Send + Sync;

    /// The options every database source shares.
    fn common(&self) -> &SourceCommon;
    fn common_mut(&mut self) -> &mut SourceCommon;
    /// The database read (`source.db`).
    fn database(&self) -> &str;
    /// What stands before `schema.table` in a signal's `data-collections` and a transaction's
    /// `data_collection` (SQL Server's database; none for Db2).
    fn qualifier(&self) -> &str;
    /// Whether the `source` signal channel reads a signaling table of this database.
    fn has_signal_table(&self) -> bool;
    /// The wait between polls that had nothing new (`poll.interval.ms`).
    fn poll_interval(&self) -> Duration;
    /// `streaming.fetch.size`.
    fn fetch_size(&self) -> usize;
    /// Where a table's changes start and stop (SQL Server's capture instances: an older one
    /// stops where the newer starts); everything by default.
    fn bounds(_table: &TableOf<Self>) -> (Self::Lsn, Option<Self::Lsn>) {
        (Self::Lsn::default(), None)
    }
    /// Where a table's changes are, for the logs.
    fn locator(table: &TableOf<Self>) -> String;

    /// Connects for the snapshot (at `snapshot.isolation.mode`).
    async fn connect(&self) -> Result<Self::Conn, ErrorOf<Self>>;
    /// Checks that capture is set up and a table of the configuration is captured.
    async fn check_setup(&self, conn: &mut Self::Conn) -> Result<(), ErrorOf<Self>>;
    /// The stream's connection after the snapshot's (the same one by default).
    async fn stream_connection(&self, conn: Self::Conn) -> Result<Self::Conn, ErrorOf<Self>> {
        Ok(conn)
    }
    /// Runs a statement (`heartbeat.action.query`).
    async fn execute(
        &self,
        conn: &mut Self::Conn,
        what: &str,
        sql: &str,
    ) -> Result<(), ErrorOf<Self>>;
    /// Ends a reading transaction (Db2 ends each poll's, so that a table can leave capture
    /// mode); nothing by default.
    async fn end_read(&self, _conn: &mut Self::Conn, _what: &str) -> Result<(), ErrorOf<Self>> {
        Ok(())
    }

    /// The captured tables (those the configuration selects, and the signaling table) whose
    /// capture started at or before `upto` (`None`: all); with `all`, the older capture
    /// instances of a table too.
    async fn tables(
        &self,
        conn: &mut Self::Conn,
        source_schema: &Arc<Schema>,
        upto: Option<Self::Lsn>,
        all: bool,
    ) -> Result<Vec<TableOf<Self>>, ErrorOf<Self>>;
    /// The row of `table` in `row` from its cell `from` on ([`CapturedTable::row`]); `Err`
    /// names the column whose value cannot be represented.
    fn decode(
        &self,
        table: &TableOf<Self>,
        row: &Self::Row,
        from: usize,
    ) -> Result<Struct, RowError>;
    /// The rows the server counts in each of `tables` (`schema.table`), for the progress.
    async fn row_counts(
        &self,
        conn: &mut Self::Conn,
        tables: &[&TableOf<Self>],
    ) -> Result<HashMap<String, Option<u64>>, ErrorOf<Self>>;

    /// The newest LSN changes were captured at (`None`: nothing captured yet).
    async fn max_lsn(&self, conn: &mut Self::Conn) -> Result<Option<Self::Lsn>, ErrorOf<Self>>;
    /// Why the stored commit LSN can no longer be read (`None`: it can; the default, for a
    /// dialect whose connector does not validate it).
    async fn lost(
        &self,
        _conn: &mut Self::Conn,
        _stored: Self::Lsn,
    ) -> Result<Option<String>, ErrorOf<Self>> {
        Ok(None)
    }
    /// The poll's upper bound after `last` (`None`: nothing captured).
    async fn poll_bound(
        &self,
        conn: &mut Self::Conn,
        last: Self::Lsn,
    ) -> Result<Option<Self::Lsn>, ErrorOf<Self>>;
    /// Said once when nothing was captured at all (is the capture job running?).
    async fn nothing_captured(&self, conn: &mut Self::Conn) -> Result<(), ErrorOf<Self>>;
    /// The poll's lower bound after a poll that read up to `last`.
    async fn poll_start(
        &self,
        _conn: &mut Self::Conn,
        last: Self::Lsn,
    ) -> Result<Self::Lsn, ErrorOf<Self>> {
        Ok(last.increment().unwrap_or(last))
    }

    /// Begins the snapshot's transaction (its isolation, its locks): the position it reads
    /// at and the captured tables as of it.
    async fn snapshot_begin(
        &self,
        conn: &mut Self::Conn,
        source_schema: &Arc<Schema>,
    ) -> Result<(Self::Lsn, Vec<TableOf<Self>>), ErrorOf<Self>>;
    /// Ends the snapshot's transaction, whatever happened.
    async fn snapshot_end(&self, conn: &mut Self::Conn);
    /// Begins a blocking snapshot's transaction on `conn`, or on a connection of its own
    /// (returned).
    async fn blocking_begin(
        &self,
        conn: &mut Self::Conn,
    ) -> Result<Option<Self::Conn>, ErrorOf<Self>>;
    /// Ends a blocking snapshot's transaction, whatever happened.
    async fn blocking_end(&self, conn: &mut Self::Conn);
    /// Reads the rows of `table` that `sql` selects (its columns in order) into `rows`,
    /// without holding them all.
    async fn read_rows(
        &self,
        conn: &mut Self::Conn,
        (table, sql): (&TableOf<Self>, &str),
        rows: &mut SnapshotRows<'_, Self>,
    ) -> Result<(), ErrorOf<Self>>;

    /// A poll's change queries on `conn` for `tables`, up to `to`; the operations `skipped`
    /// leaves out may be filtered by the queries.
    fn reader<'a>(
        &'a self,
        conn: &'a mut Self::Conn,
        tables: &'a [TableOf<Self>],
        to: Self::Lsn,
        skipped: &Skipped,
    ) -> Self::Reader<'a>;
    /// The commit time (milliseconds since the epoch) a change row holds, where it has one.
    fn commit_time(row: &Self::Row) -> Option<i64>;

    /// `name` quoted as an identifier.
    fn quote(name: &str) -> String;
    /// `table` as a query names it.
    fn table_ref(&self, table: &TableOf<Self>) -> String;
    /// The query `SELECT <columns> <rest>` limited to its first `n` rows.
    fn first_rows(n: usize, columns: &str, rest: &str) -> String;
    /// The rows of `sql`.
    async fn query(
        &self,
        conn: &mut Self::Conn,
        what: &str,
        sql: &str,
    ) -> Result<Vec<Self::Row>, ErrorOf<Self>>;
    /// How the values of a key column of `kind` (declared `declared`) go back into a query to
    /// read chunks by; `Err` ends "the key column `c` of t …" with why they cannot.
    fn key_literal(kind: &Self::Kind, declared: &str) -> Result<Self::KeyLiteral, String>;
    /// A key value written back into a query (`None`: it cannot be).
    fn literal(value: &str, how: Self::KeyLiteral) -> Option<String>;
    /// Cell `i` of `row` as a key value's text (`None`: NULL or not a key value).
    fn key_text(row: &Self::Row, i: usize) -> Option<String>;
    /// Begins a chunk's transaction: the LSN its window waits for (the newest captured).
    async fn chunk_begin(&self, conn: &mut Self::Conn) -> Result<Self::Lsn, ErrorOf<Self>>;
    /// Ends a chunk's transaction, whatever happened.
    async fn chunk_end(&self, conn: &mut Self::Conn);
    /// The server's message when `e` is a statement it refused (a chunk's condition or
    /// surrogate key the user wrote: the snapshot is aborted, not the stream); `None` when it
    /// is another failure.
    fn refusal(e: &Self::Query) -> Option<String>;
}

/// What an event's `source` block says beyond the table.
#[derive(Debug, Clone, Copy)]
pub struct At<L> {
    pub ts_ms: i64,
    pub snapshot: &'static str,
    pub commit_lsn: L,
    pub change_lsn: Option<L>,
    pub event_serial_no: Option<i64>,
}

impl<L> At<L> {
    /// The `source` block of an event made now at `commit_lsn` outside any change
    /// (`snapshot`: how the event came).
    pub fn now(snapshot: &'static str, commit_lsn: L) -> Self {
        At {
            ts_ms: SourceTimestamps::now().millis(),
            snapshot,
            commit_lsn,
            change_lsn: None,
            event_serial_no: None,
        }
    }
}

sluice_engine::source_block! {
    /// A change-table source's `source` block (SQL Server's and Db2's); SQL Server's also ends
    /// with `event_serial_no` (`Dialect::EVENT_SERIAL_NO`).
    struct ChangeTableBlock {
        sequence: String | null,
        ts_us: Int64 | null,
        ts_ns: Int64 | null,
        schema: String,
        table: String,
        change_lsn: String | null,
        commit_lsn: String | null,
    }
}

/// An LSN as its block's text, shared with one allocation (a `String` made shared takes two).
fn lsn_text(lsn: &impl std::fmt::Display) -> Value {
    use std::fmt::Write as _;
    Value::String(shared_text(|text| {
        let _ = write!(text, "{lsn}");
    }))
}

/// A change-table source over the dialect `D`.
pub struct ChangeTableSource<D: Dialect> {
    pub dialect: D,
    source_schema: Arc<Schema>,
    skipped: Skipped,
    /// `source.version`, `source.connector` and `source.name`.
    constants: SourceConstants,
    /// `source.db`.
    db: Value,
    /// Schema change events (`include.schema.changes`, on by default as in Debezium).
    schema_events: Option<SchemaChangeEvents>,
    /// The schema history, opened when the source runs.
    history: Option<Arc<TableHistory>>,
}

impl<D: Dialect> ChangeTableSource<D> {
    /// The source of `dialect`; `version` is `source.version`.
    pub fn new(dialect: D, version: &str) -> Result<Self, ComponentError> {
        let mut block = ChangeTableBlock::schema_builder(D::SOURCE_RECORD);
        if D::EVENT_SERIAL_NO {
            block = block.field(
                "event_serial_no",
                Schema::primitive(SchemaType::Int64, true),
            );
        }
        let source_schema = block.build();
        let common = dialect.common();
        let skipped = common.skipped().map_err(ComponentError::fatal)?;
        let constants = SourceConstants::new(version, D::NAME, &common.topic_prefix);
        let db = Value::from(dialect.database());
        let schema_events = common
            .includes_schema_changes(true)
            .then(|| SchemaChangeEvents::new(D::NAME, &common.topic_prefix, source_schema.clone()));
        Ok(ChangeTableSource {
            dialect,
            source_schema,
            skipped,
            constants,
            db,
            schema_events,
            history: None,
        })
    }

    /// The `source` block's schema.
    pub fn source_schema(&self) -> &Arc<Schema> {
        &self.source_schema
    }

    /// The operations `skipped.operations` leaves out.
    pub fn skipped(&self) -> &Skipped {
        &self.skipped
    }

    /// Counts what the source skips into the running pipeline's counters.
    pub fn count_into(&mut self, ctx: &SourceContext) {
        self.dialect.common_mut().count_into(ctx);
    }

    /// Opens the schema history (one for all of a source's databases: `shared`), or uses
    /// `shared` when given.
    pub async fn open_history(
        &mut self,
        data_dir: &std::path::Path,
        shared: Option<Arc<TableHistory>>,
    ) -> Result<Arc<TableHistory>, ErrorOf<D>> {
        let history = match shared {
            Some(h) => h,
            None => {
                let opened = TableHistory::open(self.dialect.common(), data_dir, D::HISTORY_FILE);
                Arc::new(opened.await?)
            }
        };
        self.history = Some(Arc::clone(&history));
        Ok(history)
    }

    /// The `source` block of an event of `table`.
    pub fn source(&self, table: &TableOf<D>, at: &At<D::Lsn>) -> Struct {
        let made = SourceTimestamps {
            nanos: at.ts_ms.saturating_mul(1_000_000),
        };
        // `event_serial_no` where the dialect has it, after the declared fields (as `new`
        // adds it to the schema).
        let serial =
            (D::EVENT_SERIAL_NO).then(|| at.event_serial_no.map_or(Value::Null, Value::Int64));
        ChangeTableBlock {
            head: (self.constants).head(self.db.clone(), made.millis(), at.snapshot),
            sequence: Value::Null,
            ts_us: Value::Int64(made.micros()),
            ts_ns: Value::Int64(made.nanos),
            schema: table.values.0.clone(),
            table: table.values.1.clone(),
            change_lsn: at.change_lsn.map_or(Value::Null, |l| lsn_text(&l)),
            commit_lsn: lsn_text(&at.commit_lsn),
        }
        .into_struct_with(&self.source_schema, serial)
    }

    /// The change event of a row of `table`.
    pub fn event(
        &self,
        table: &TableOf<D>,
        (op, before, after): (Op, Option<Struct>, Option<Struct>),
        at: &At<D::Lsn>,
        position: Position,
    ) -> ChangeEvent {
        let source = self.source(table, at);
        let row = before.as_ref().or(after.as_ref());
        let key = table.shape.key_record(table.envelope.key.as_ref(), row);
        let value = table
            .envelope
            .value(op, before, after, source, None, SourceTimestamps::now());
        ChangeEvent {
            topic: Arc::clone(&table.topic),
            key,
            value: Some(value),
            headers: Vec::new(),
            position,
        }
    }

    /// The image of `row` from its cell `from` on: `Ok(None)` when a value cannot be
    /// represented and `event.processing.failure.handling.mode` goes on without the row
    /// (`warn` logs the table, the column, why and the row's key); `Err` under `fail`.
    pub fn image(
        &self,
        table: &TableOf<D>,
        row: &D::Row,
        from: usize,
    ) -> Result<Option<Struct>, ErrorOf<D>> {
        match self.dialect.decode(table, row, from) {
            Ok(s) => Ok(Some(s)),
            Err(e) => {
                let key = || table.shape.key_text(|i| D::key_text(row, from + i));
                (self.dialect.common()).refuse(Refusal::of(&table.full_name(), &e), key)?;
                Ok(None)
            }
        }
    }

    /// The schema change event of `t` (`None` when `include.schema.changes` is off).
    pub fn schema_change(
        &self,
        t: &TableOf<D>,
        kind: ChangeKind,
        at: &At<D::Lsn>,
        position: &Position,
    ) -> Option<ChangeEvent> {
        let events = self.schema_events.as_ref()?;
        Some(events.table_event(
            (self.dialect.database(), &t.schema),
            (&t.id, &t.def, kind),
            self.source(t, at),
            at.ts_ms,
            position.clone(),
        ))
    }

    /// Records `tables`' structures (`kind`) in the schema history at `position`.
    pub async fn remember(
        &self,
        tables: &[&TableOf<D>],
        kind: ChangeKind,
        position: &Position,
    ) -> Result<(), ErrorOf<D>> {
        let Some(history) = &self.history else {
            return Ok(());
        };
        let tables: Vec<_> = (tables.iter())
            .map(|t| (t.schema.as_str(), t.id.as_str(), &t.def))
            .collect();
        let database = self.dialect.database();
        Ok(history
            .record_all(database, &tables, kind, position)
            .await?)
    }

    /// Emits `events` with the position `position`.
    pub async fn emit(
        ctx: &mut SourceContext,
        events: Vec<ChangeEvent>,
        position: Position,
    ) -> Result<(), ErrorOf<D>> {
        ctx.emit(sluice_engine::Batch {
            events,
            position: Some(position),
        })
        .await
        .map_err(|_| ChangeTableError::Stopped)
    }

    /// The captured tables (their `schema.table`) a signal may select.
    pub fn captured_names(tables: &[TableOf<D>]) -> Vec<String> {
        let mut names: Vec<String> = (tables.iter())
            .filter(|t| t.captured && !t.signals)
            .map(CapturedTable::full_name)
            .collect();
        names.dedup();
        names
    }

    /// Runs the source on one database: connects and checks the setup, carries out the
    /// snapshot mode, then streams until the pipeline stops.
    pub async fn run(
        &mut self,
        data_dir: &std::path::Path,
        ctx: &mut SourceContext,
    ) -> Result<(), ErrorOf<D>> {
        match self.run_until_stopped(data_dir, ctx).await {
            Err(ChangeTableError::Stopped) => Ok(()),
            done => done,
        }
    }

    async fn run_until_stopped(
        &mut self,
        data_dir: &std::path::Path,
        ctx: &mut SourceContext,
    ) -> Result<(), ErrorOf<D>> {
        self.count_into(ctx);
        self.open_history(data_dir, None).await?;
        let mut conn = self.dialect.connect().await?;
        self.dialect.check_setup(&mut conn).await?;
        crate::lifecycle::announce(ctx, D::NAME, &self.dialect.common().topic_prefix);
        let Some(from) = self.start(&mut conn, ctx).await? else {
            return Ok(());
        };
        if ctx.is_stopping() {
            return Ok(());
        }
        let mut conn = self.dialect.stream_connection(conn).await?;
        self.stream(&mut conn, from, ctx).await
    }
}
