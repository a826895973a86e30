//! `db2`: Db2 tables in capture mode (SQL Replication's ASN capture fills a change-data table
//! per table), read as Debezium's Db2 connector reads them: a snapshot at the highest
//! synchpoint (`snapshot`), then the change-data tables polled between the last commit LSN
//! read and the newest, merged in commit order by the kit's change-table core (`stream`), with
//! Debezium's statements (`connection`), over ODBC. Tested against an emulation of ASN capture
//! on PostgreSQL through the PostgreSQL ODBC driver (`sluice_test_support::db2`): no Db2
//! server runs on the project's machines.

mod config;
mod connection;
mod driver;
mod error;
mod incremental;
mod lsn;
mod snapshot;
mod stream;
mod tables;
mod types;

use std::sync::Arc;

use async_trait::async_trait;
use sluice_engine::event::{source_block_builder, SourceTimestamps};
use sluice_engine::{
    BuildContext, ChangeEvent, ComponentError, Op, Position, Schema, SchemaType, Source,
    SourceContext, Struct, Value,
};
use sluice_kit::position::Resume;
use sluice_kit::snapshot::Start;

pub use config::Db2Config;
use connection::{Conn, Row, Statements};
use error::Db2Error;
use lsn::{Db2Offset, Lsn};
use tables::{Reading, Table};
use types::Modes;

/// ODBC's `SQL_TXN_READ_COMMITTED` (Db2's cursor stability), the stream's isolation.
const READ_COMMITTED: u32 = 2;

/// A committed position, with a running incremental snapshot's progress.
type Offset = Resume<Db2Offset, incremental::Progress>;

/// The `db2` source.
pub struct Db2Source {
    config: Db2Config,
    source_schema: Arc<Schema>,
    skipped: sluice_kit::config::Skipped,
    modes: Modes,
    /// `source.version`, `source.connector`, `source.name`, `source.db`.
    constants: (Arc<str>, Arc<str>, Arc<str>, Arc<str>),
    schema_events: Option<sluice_kit::records::schema_change::SchemaChangeEvents>,
    /// The pipeline's data directory (the schema history file's default place).
    data_dir: std::path::PathBuf,
    /// The schema history, opened when the source runs.
    history: Option<sluice_kit::change_tables::history::TableHistory>,
}

/// What an event's `source` block says beyond the table.
struct At {
    ts_ms: i64,
    snapshot: &'static str,
    commit_lsn: Lsn,
    change_lsn: Option<Lsn>,
}

impl Db2Source {
    pub(crate) fn new(config: Db2Config, ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        let string = |optional| Schema::primitive(SchemaType::String, optional);
        let int64 = |optional| Schema::primitive(SchemaType::Int64, optional);
        let source_schema = source_block_builder("io.debezium.connector.db2.Source")
            .field("sequence", string(true))
            .field("ts_us", int64(true))
            .field("ts_ns", int64(true))
            .field("schema", string(false))
            .field("table", string(false))
            .field("change_lsn", string(true))
            .field("commit_lsn", string(true))
            .build();
        let skipped = config.common.skipped().map_err(ComponentError::fatal)?;
        let modes = Modes {
            time: config.time_mode,
            decimal: config.decimal_mode,
            binary: config.binary_mode,
        };
        let constants = (
            crate::VERSION.into(),
            "db2".into(),
            config.common.topic_prefix.as_str().into(),
            config.database.as_str().into(),
        );
        let schema_events = config.common.includes_schema_changes(true).then(|| {
            sluice_kit::records::schema_change::SchemaChangeEvents::new(
                "db2",
                &config.common.topic_prefix,
                source_schema.clone(),
            )
        });
        Ok(Db2Source {
            data_dir: ctx.data_dir.to_path_buf(),
            history: None,
            schema_events,
            config,
            source_schema,
            skipped,
            modes,
            constants,
        })
    }

    fn reading(&self) -> Reading<'_> {
        Reading {
            config: &self.config,
            modes: self.modes,
            source_schema: &self.source_schema,
        }
    }

    fn source(&self, table: &Table, at: &At) -> Struct {
        let made = SourceTimestamps {
            nanos: at.ts_ms.saturating_mul(1_000_000),
        };
        Struct::from_values(
            self.source_schema.clone(),
            vec![
                Value::String(Arc::clone(&self.constants.0)),
                Value::String(Arc::clone(&self.constants.1)),
                Value::String(Arc::clone(&self.constants.2)),
                Value::Int64(made.millis()),
                Value::from(at.snapshot),
                Value::String(Arc::clone(&self.constants.3)),
                Value::Null,
                Value::Int64(made.micros()),
                Value::Int64(made.nanos),
                table.values.0.clone(),
                table.values.1.clone(),
                at.change_lsn
                    .map_or(Value::Null, |l| Value::from(l.to_string())),
                Value::from(at.commit_lsn.to_string()),
            ],
        )
        .unwrap_or_else(|| Struct::new(self.source_schema.clone()))
    }

    /// The schema change events of `tables` (`CREATE`, `ddl` null), as Debezium's Db2
    /// connector emits them (seed 004).
    fn schema_changes(&self, tables: &[Table], at: &At, position: &Position) -> Vec<ChangeEvent> {
        let create = sluice_kit::history::ChangeKind::Create;
        tables
            .iter()
            .filter_map(|t| self.schema_change(t, create, at, position))
            .collect()
    }

    /// Records `tables`' structures (`kind`) in the schema history at `position`.
    async fn remember(
        &self,
        tables: &[&Table],
        kind: sluice_kit::history::ChangeKind,
        position: &Position,
    ) -> Result<(), Db2Error> {
        let Some(history) = &self.history else {
            return Ok(());
        };
        let tables: Vec<_> = (tables.iter())
            .map(|t| (t.schema.as_str(), t.id.as_str(), &t.def))
            .collect();
        Ok(history
            .record_all(&self.config.database, &tables, kind, position)
            .await?)
    }

    /// The schema change event of `t` (`None` when `include.schema.changes` is off).
    fn schema_change(
        &self,
        t: &Table,
        kind: sluice_kit::history::ChangeKind,
        at: &At,
        position: &Position,
    ) -> Option<ChangeEvent> {
        let events = self.schema_events.as_ref()?;
        Some(events.table_event(
            (&self.config.database, &t.schema),
            (&t.id, &t.def, kind),
            self.source(t, at),
            at.ts_ms,
            position.clone(),
        ))
    }

    /// The row of `table` in `cells` (its columns in order); `Err` names the column whose
    /// value cannot be represented.
    fn row(&self, table: &Table, cells: &[Option<Vec<u8>>]) -> Result<Struct, String> {
        let shape = &table.shape;
        let mut values = Vec::with_capacity(shape.kept.len());
        for (j, &i) in shape.kept.iter().enumerate() {
            let (name, kind) = &table.columns[i];
            let schema = &shape.row.fields()[j].schema;
            let cell = cells
                .get(i)
                .ok_or_else(|| format!("column `{name}` missing from the row"))?;
            let value = match cell {
                None => Value::Null,
                Some(bytes) => kind
                    .value(bytes, self.modes, schema)
                    .map_err(|e| format!("column `{name}`: {e}"))?,
            };
            values.push(shape.map(j, value));
        }
        Struct::from_values(shape.row.clone(), values).ok_or_else(|| {
            format!(
                "a row of {}.{} does not fit its schema",
                table.schema, table.name
            )
        })
    }

    /// The image of a row: `Ok(None)` when it cannot be represented and the failure handling
    /// mode skips it.
    fn image(&self, table: &Table, cells: &[Option<Vec<u8>>]) -> Result<Option<Struct>, Db2Error> {
        match self.row(table, cells) {
            Ok(s) => Ok(Some(s)),
            Err(e) => {
                self.config
                    .common
                    .unrepresentable(&format!("{}.{}", table.schema, table.name), String::new, &e)
                    .map_err(Db2Error::Setup)?;
                Ok(None)
            }
        }
    }

    /// The change event of a row of `table`.
    fn event(
        &self,
        table: &Table,
        (op, before, after): (Op, Option<Struct>, Option<Struct>),
        at: &At,
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

    /// Emits `events` with the position `position`.
    async fn emit(
        &self,
        ctx: &mut SourceContext,
        events: Vec<ChangeEvent>,
        position: Position,
    ) -> Result<(), Db2Error> {
        ctx.emit(sluice_engine::Batch {
            events,
            position: Some(position),
        })
        .await
        .map_err(|_| Db2Error::Stopped)
    }
}

#[async_trait]
impl Source for Db2Source {
    async fn run(&mut self, ctx: &mut SourceContext) -> Result<(), ComponentError> {
        self.config.common.count_into(ctx);
        let span = tracing::info_span!("db2", database = %self.config.database);
        let _guard = span.enter();
        let resume: Option<Offset> = ctx
            .resume_from()
            .map(|p| Offset::parse(p, "db2"))
            .transpose()
            .map_err(ComponentError::fatal)?;
        // The snapshot reads at `snapshot.isolation.mode`; the stream on a connection of its
        // own at read committed (Db2's CS), so that a poll holds no lock the capture program
        // would wait for.
        let history = sluice_kit::change_tables::history::TableHistory::open(
            &self.config.common,
            &self.data_dir,
            "db2-schema-history.jsonl",
        );
        self.history = Some(history.await.map_err(Db2Error::from)?);
        let conn = Conn::connect(&self.config, self.config.isolation.odbc()).await?;
        self.check_setup(&conn).await?;
        ctx.connected();
        ctx.identify("db2", &self.config.common.topic_prefix);
        let stored = sluice_kit::snapshot::Stored {
            offset: resume.is_some(),
            snapshot_completed: resume.as_ref().is_some_and(|r| r.at.snapshot_completed),
            // Debezium's Db2 connector does not validate the stored position (DBZ-9471).
            position_available: true,
            history_available: true,
        };
        let Some(plan) = self
            .config
            .common
            .plan("db2", true, stored, "")
            .map_err(ComponentError::fatal)?
        else {
            return Ok(());
        };
        // A snapshot cut off earlier: a new snapshot goes out at its position and the stream
        // resumes there (the kit's `snapshot::Start`).
        let cut_off = Start::cut_off(&plan, stored, resume.as_ref().map(|r| r.at.clone()));
        let resume = if plan.data { None } else { resume };
        let progress = resume.as_ref().and_then(|r| r.incremental.clone());
        let from = if plan.data {
            match self.snapshot(&conn, cut_off, ctx).await {
                Err(Db2Error::Stopped) => return Ok(()),
                done => done?,
            }
        } else if let Some(r) = resume {
            // `recovery`: the schema history written again from the current tables.
            if plan.schema {
                let tables = tables::read(&conn, &self.reading()).await?;
                let captured: Vec<&Table> = tables.iter().filter(|t| t.captured).collect();
                tracing::info!(
                    tables = captured.len(),
                    "Recovery: the schema history is written again from the current tables."
                );
                self.remember(
                    &captured,
                    sluice_kit::history::ChangeKind::Create,
                    &r.at.position(),
                )
                .await?;
                conn.end("ending the recovery").await?;
            }
            r.at
        } else {
            match self.start_without_data(&conn, plan.schema, ctx).await {
                Err(Db2Error::Stopped) => return Ok(()),
                done => done?,
            }
        };
        if !plan.stream || ctx.is_stopping() {
            return Ok(());
        }
        drop(conn);
        let conn = Conn::connect(&self.config, READ_COMMITTED).await?;
        match self.stream(&conn, (from, progress), ctx).await {
            Err(Db2Error::Stopped) => Ok(()),
            done => Ok(done?),
        }
    }
}

impl Db2Source {
    /// Checks that ASN capture is set up: its control tables are there and a table of the
    /// configuration is registered.
    async fn check_setup(&self, conn: &Conn) -> Result<(), Db2Error> {
        let schema = &self.config.control_schema;
        let q = Statements::new(&self.config);
        let listed = conn.rows("listing the captured tables", &q.change_tables(), &[]).await.map_err(|e| {
            if matches!(e.state().as_deref(), Some("42S02" | "42704" | "42P01")) {
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
            let (Some(s), Some(t)) = (connection::text(row, 0), connection::text(row, 1)) else {
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

    /// The highest synchpoint (`None`: nothing captured, the capture program has not run).
    async fn max_lsn(&self, conn: &Conn) -> Result<Option<Lsn>, Db2Error> {
        let q = Statements::new(&self.config);
        let what = "reading the highest LSN (IBMSNAP_REGISTER)";
        let found: Vec<Row> = conn.rows(what, &q.max_lsn(), &[]).await?;
        match found.first() {
            Some(row) => connection::lsn_at(row, 0, what),
            None => Ok(None),
        }
    }

    /// The poll's upper bound under `streaming.query.timespan.seconds`: the last transaction
    /// logged at most that many seconds after the first one past `after`, up to `max`; `max`
    /// when the option is off or no transaction's log time is known (pruned).
    pub(crate) async fn timespan_bound(
        &self,
        conn: &Conn,
        after: Lsn,
        max: Lsn,
    ) -> Result<Lsn, Db2Error> {
        let seconds = self.config.timespan_seconds;
        if seconds == 0 {
            return Ok(max);
        }
        let c = &self.config.control_schema;
        let what = "reading the poll's time span (IBMSNAP_UOW)";
        let first = (conn.rows(what, &format!("SELECT MIN(IBMSNAP_LOGMARKER) FROM {c}.IBMSNAP_UOW WHERE IBMSNAP_COMMITSEQ > ?"), &[after]).await?)
            .first()
            .and_then(|row| connection::text(row, 0))
            .and_then(|t| types::timestamp_nanos(t.trim()));
        let Some(first) = first else {
            return Ok(max);
        };
        let end = first.saturating_add(
            i64::try_from(seconds)
                .unwrap_or(i64::MAX / 2)
                .saturating_mul(1_000_000_000),
        );
        let end = types::timestamp_text(end);
        let sql = format!("SELECT MAX(IBMSNAP_COMMITSEQ) FROM {c}.IBMSNAP_UOW WHERE IBMSNAP_COMMITSEQ > ? AND IBMSNAP_COMMITSEQ <= ? AND IBMSNAP_LOGMARKER <= {}", connection::literal(&end));
        let found = conn.rows(what, &sql, &[after, max]).await?;
        match found.first() {
            Some(row) => Ok(connection::lsn_at(row, 0, what)?.unwrap_or(max)),
            None => Ok(max),
        }
    }

    /// A start without a data snapshot (`no_data`, `never`): the stream starts at the highest
    /// LSN, committed at once; a schema snapshot's events when `schema`.
    async fn start_without_data(
        &self,
        conn: &Conn,
        schema: bool,
        ctx: &mut SourceContext,
    ) -> Result<Db2Offset, Db2Error> {
        let max = self.max_lsn(conn).await?.unwrap_or_default();
        let at = Db2Offset::at(max, true);
        let events = if schema {
            let tables = tables::read(conn, &self.reading()).await?;
            // The signaling table, when the configuration does not select it, is only streamed.
            let tables: Vec<Table> = tables.into_iter().filter(|t| t.captured).collect();
            let source = At {
                ts_ms: SourceTimestamps::now().millis(),
                snapshot: "true",
                commit_lsn: max,
                change_lsn: None,
            };
            let all: Vec<&Table> = tables.iter().collect();
            self.remember(
                &all,
                sluice_kit::history::ChangeKind::Create,
                &at.position(),
            )
            .await?;
            self.schema_changes(&tables, &source, &at.position())
        } else {
            Vec::new()
        };
        conn.end("ending the schema snapshot").await?;
        self.emit(ctx, events, at.position()).await?;
        Ok(at)
    }
}
