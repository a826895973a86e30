//! `sqlserver`: SQL Server tables in CDC capture mode, as Debezium's SQL Server connector
//! reads them: a snapshot at the current maximum LSN (`snapshot`), then the change tables
//! polled between the last LSN read and the newest, merged in commit order (`stream`), with
//! Debezium's statements (`connection`). Tested against an emulated server
//! (`sluice_test_support::sqlserver`): no SQL Server runs on the project's machines.

mod changes;
mod config;
mod connection;
mod databases;
mod error;
mod incremental;
mod lsn;
mod snapshot;
mod stream;
mod tables;
mod types;

use std::sync::Arc;

use sluice_engine::event::{source_block_builder, SourceTimestamps};
use sluice_engine::{
    ChangeEvent, ComponentError, Op, Position, Schema, SchemaType, SourceContext, Struct, Value,
};
use sluice_kit::position::Resume;
use sluice_kit::snapshot::Start;
use tiberius::ColumnData;

pub use config::SqlServerConfig;
pub use databases::SqlServer;
use error::SqlServerError;
use lsn::{Lsn, SqlServerOffset};
use tables::Table;
use types::Modes;

/// A committed position, with a running incremental snapshot's progress.
type Offset = Resume<SqlServerOffset, incremental::Progress>;

/// One database of the `sqlserver` source ([`SqlServer`] reads them all).
pub struct SqlServerSource {
    config: SqlServerConfig,
    source_schema: Arc<Schema>,
    skipped: sluice_kit::config::Skipped,
    modes: Modes,
    /// `source.version`, `source.connector`, `source.name`, `source.db`.
    constants: (Arc<str>, Arc<str>, Arc<str>, Arc<str>),
    /// Schema change events (`include.schema.changes`, on by default as in Debezium).
    schema_events: Option<sluice_kit::records::schema_change::SchemaChangeEvents>,
    /// The schema history (one for all the databases), opened when the source runs.
    history: Option<Arc<sluice_kit::change_tables::history::TableHistory>>,
}

/// What an event's `source` block says beyond the table.
struct At {
    ts_ms: i64,
    snapshot: &'static str,
    commit_lsn: Lsn,
    change_lsn: Option<Lsn>,
    event_serial_no: Option<i64>,
}

impl SqlServerSource {
    pub(crate) fn new(config: SqlServerConfig) -> Result<Self, ComponentError> {
        let string = |optional| Schema::primitive(SchemaType::String, optional);
        let int64 = |optional| Schema::primitive(SchemaType::Int64, optional);
        let source_schema = source_block_builder("io.debezium.connector.sqlserver.Source")
            .field("sequence", string(true))
            .field("ts_us", int64(true))
            .field("ts_ns", int64(true))
            .field("schema", string(false))
            .field("table", string(false))
            .field("change_lsn", string(true))
            .field("commit_lsn", string(true))
            .field("event_serial_no", int64(true))
            .build();
        let skipped = config.common.skipped().map_err(ComponentError::fatal)?;
        let modes = Modes {
            time: config.time_mode,
            decimal: config.decimal_mode,
            binary: config.binary_mode,
        };
        let constants = (
            crate::VERSION.into(),
            "sqlserver".into(),
            config.common.topic_prefix.as_str().into(),
            config.database.as_str().into(),
        );
        let schema_events = config.common.includes_schema_changes(true).then(|| {
            sluice_kit::records::schema_change::SchemaChangeEvents::new(
                "sqlserver",
                &config.common.topic_prefix,
                source_schema.clone(),
            )
        });
        Ok(SqlServerSource {
            history: None,
            schema_events,
            config,
            source_schema,
            skipped,
            modes,
            constants,
        })
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
                at.event_serial_no.map_or(Value::Null, Value::Int64),
            ],
        )
        .unwrap_or_else(|| Struct::new(self.source_schema.clone()))
    }

    /// The schema change events of a snapshot: one per table, `CREATE` with its structure,
    /// as Debezium's SQL Server connector emits them (`ddl` null).
    fn schema_changes(&self, tables: &[Table], at: &At, position: &Position) -> Vec<ChangeEvent> {
        let create = sluice_kit::history::ChangeKind::Create;
        tables
            .iter()
            .filter_map(|t| self.schema_change(t, create, at, position))
            .collect()
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

    /// The row of `table` in `cells` (its captured columns in order) as the events carry it;
    /// `Err` names the column whose value cannot be represented.
    fn row(&self, table: &Table, cells: &[&ColumnData<'_>]) -> Result<Struct, String> {
        let shape = &table.shape;
        let mut values = Vec::with_capacity(shape.kept.len());
        for (j, &i) in shape.kept.iter().enumerate() {
            let (name, kind) = &table.columns[i];
            let schema = &shape.row.fields()[j].schema;
            let cell = cells
                .get(i)
                .ok_or_else(|| format!("column `{name}` missing from the row"))?;
            let value = kind
                .value(cell, self.modes, schema)
                .map_err(|e| format!("column `{name}`: {e}"))?;
            values.push(shape.map(j, value));
        }
        Struct::from_values(shape.row.clone(), values).ok_or_else(|| {
            format!(
                "a row of {}.{} does not fit its schema",
                table.schema, table.name
            )
        })
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
}

/// Where a database's stream goes on from once its snapshot mode was carried out: the
/// position and the running incremental snapshot's progress.
pub(crate) type StreamFrom = (SqlServerOffset, Option<incremental::Progress>);

impl SqlServerSource {
    /// Carries out the snapshot mode for the database from its stored position (the selected
    /// partition's): a snapshot, the schema only, or nothing; where the stream goes on from.
    async fn start(
        &self,
        conn: &mut connection::Conn,
        ctx: &mut SourceContext,
    ) -> Result<Option<StreamFrom>, SqlServerError> {
        let resume: Option<Offset> = ctx
            .resume_from()
            .map(|p| Offset::parse(p, "sqlserver"))
            .transpose()
            .map_err(SqlServerError::Setup)?;
        let lost = match &resume {
            Some(r) => self.lost(conn, r.at.commit_lsn).await?,
            None => None,
        };
        let stored = sluice_kit::snapshot::Stored {
            offset: resume.is_some(),
            snapshot_completed: resume.as_ref().is_some_and(|r| r.at.snapshot_completed),
            position_available: lost.is_none(),
            history_available: true,
        };
        let Some(plan) = self
            .config
            .common
            .plan("sqlserver", true, stored, lost.as_deref().unwrap_or(""))
            .map_err(SqlServerError::Setup)?
        else {
            return Ok(None);
        };
        // A snapshot cut off earlier whose position the change tables still hold: a new
        // snapshot goes out at it and the stream resumes there (the kit's `snapshot::Start`).
        let cut_off = Start::cut_off(&plan, stored, resume.as_ref().map(|r| r.at.clone()));
        // A new snapshot (`when_needed` after a cleanup): the stored position is not resumed.
        let resume = if plan.data { None } else { resume };
        let progress = resume.as_ref().and_then(|r| r.incremental.clone());
        let from = if plan.data {
            self.snapshot(conn, cut_off, ctx).await?
        } else {
            match resume {
                Some(r) => {
                    // `recovery`: the schema history written again from the current tables.
                    if plan.schema {
                        self.rebuild_history(conn, &r.at).await?;
                    }
                    r.at
                }
                None => match self.start_without_data(conn, plan.schema, ctx).await? {
                    Some(at) => at,
                    None => return Err(SqlServerError::Stopped),
                },
            }
        };
        Ok(plan.stream.then_some((from, progress)))
    }
}

impl SqlServerSource {
    /// A start without a data snapshot (`no_data`, `never`): the stream starts at the newest
    /// LSN, committed at once so that a restart goes on from there; with `schema`, the
    /// tables' schema change events and history. `None`: the pipeline stopped.
    async fn start_without_data(
        &self,
        conn: &mut connection::Conn,
        schema: bool,
        ctx: &mut SourceContext,
    ) -> Result<Option<SqlServerOffset>, SqlServerError> {
        let at = SqlServerOffset::at(self.max_lsn(conn).await?, true);
        let events = if schema {
            let upto = (at.commit_lsn != Lsn::default()).then_some(at.commit_lsn);
            let tables = tables::read(
                conn,
                &self.config,
                self.modes,
                &self.source_schema,
                upto,
                false,
            )
            .await?;
            let tables: Vec<Table> = tables.into_iter().filter(|t| t.captured).collect();
            let source = At {
                ts_ms: SourceTimestamps::now().millis(),
                snapshot: "true",
                commit_lsn: at.commit_lsn,
                change_lsn: None,
                event_serial_no: None,
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
        let batch = sluice_engine::Batch {
            events,
            position: Some(at.position()),
        };
        Ok(ctx.emit(batch).await.ok().map(|()| at))
    }

    /// `snapshot.mode: recovery`: the schema history written again from the current tables,
    /// at the stored position.
    async fn rebuild_history(
        &self,
        conn: &mut connection::Conn,
        at: &SqlServerOffset,
    ) -> Result<(), SqlServerError> {
        let tables = tables::read(
            conn,
            &self.config,
            self.modes,
            &self.source_schema,
            None,
            false,
        )
        .await?;
        let captured: Vec<&Table> = tables.iter().filter(|t| t.captured).collect();
        tracing::info!(
            tables = captured.len(),
            "Recovery: the schema history is written again from the current tables."
        );
        self.remember(
            &captured,
            sluice_kit::history::ChangeKind::Create,
            &at.position(),
        )
        .await
    }

    /// Records `tables`' structures (`kind`) in the schema history at `position`.
    async fn remember(
        &self,
        tables: &[&Table],
        kind: sluice_kit::history::ChangeKind,
        position: &Position,
    ) -> Result<(), SqlServerError> {
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

    /// Checks that CDC is enabled on the database and the login may read change tables, as
    /// Debezium's `checkIfConnectedUserHasAccessToCDCTable` does.
    async fn check_cdc(&self, conn: &mut connection::Conn) -> Result<(), SqlServerError> {
        let q = connection::Statements::new(&self.config.database);
        let db = &self.config.database;
        let listed = connection::rows(conn, "EXEC sys.sp_cdc_help_change_data_capture", &q.help_change_data_capture(), &[])
            .await
            .map_err(|e| match e {
                SqlServerError::Query { source: tiberius::error::Error::Server(s), .. } if s.message().contains("not enabled for Change Data Capture") => {
                    SqlServerError::Setup(format!("CDC is not enabled on the database `{db}`: run `EXEC sys.sp_cdc_enable_db` in it (and `sys.sp_cdc_enable_table` for each table to capture)"))
                }
                other => other,
            })?;
        if listed.is_empty() {
            return Err(SqlServerError::Setup(format!(
                "no table of the database `{db}` is in capture mode, or the login `{}` may read none (sys.sp_cdc_help_change_data_capture lists nothing): run `EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'<table>', @role_name = NULL` for each table to capture",
                self.config.user
            )));
        }
        Ok(())
    }

    /// Why the committed commit LSN `stored` can no longer be read (`None`: it can), as
    /// Debezium's `validateLogPosition` decides: the change tables' oldest LSN is past it (the
    /// cleanup job deleted what came after it).
    async fn lost(
        &self,
        conn: &mut connection::Conn,
        stored: Lsn,
    ) -> Result<Option<String>, SqlServerError> {
        if stored == Lsn::default() {
            return Ok(None);
        }
        let q = connection::Statements::new(&self.config.database);
        let what = "reading the change tables' oldest LSN";
        let found = connection::rows(conn, what, &q.min_lsn_of_change_tables(), &[]).await?;
        let oldest = match found.first() {
            Some(row) => connection::lsn_at(row, 0)?,
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

    /// The newest transaction's commit LSN in `cdc.lsn_time_mapping` (the polls' upper
    /// bound: the capture job's idle entries left out); the zero LSN when none.
    async fn max_transaction_lsn(
        &self,
        conn: &mut connection::Conn,
    ) -> Result<Lsn, SqlServerError> {
        let q = connection::Statements::new(&self.config.database);
        let what = "reading the newest commit LSN (cdc.lsn_time_mapping)";
        let found = connection::rows(conn, what, &q.max_transaction_lsn(), &[]).await?;
        match found.first() {
            Some(row) => Ok(connection::lsn_at(row, 0)?.unwrap_or_default()),
            None => Ok(Lsn::default()),
        }
    }

    /// `fn_cdc_get_max_lsn()`; the zero LSN when the database has no change yet.
    async fn max_lsn(&self, conn: &mut connection::Conn) -> Result<Lsn, SqlServerError> {
        let q = connection::Statements::new(&self.config.database);
        let found = connection::rows(conn, "reading the maximum LSN", &q.max_lsn(), &[]).await?;
        match found.first() {
            Some(row) => Ok(connection::lsn_at(row, 0)?.unwrap_or_default()),
            None => Ok(Lsn::default()),
        }
    }
}
