//! The PostgreSQL source's steps as the kit's driver runs them
//! ([`sluice_kit::lifecycle::drive`]): reach the server, prepare (the captured tables, the
//! publication, the signals, the slot and the committed position), then the initial snapshot in
//! the slot's exported snapshot or the resume from the committed position, then the stream.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use pgwire_replication::ReplicationClient;
use sluice_engine::{Batch, SourceContext};
use sluice_kit::lifecycle::Prepared;
use sluice_kit::snapshot::Plan;

use super::capture::{signaling, snapshot, stream};
use super::records::schema_change;
use super::records::table::{source_schema, TableSchema};
use super::server::catalog::{
    captured_tables, check_setup, ensure_publication, ConnInfo, TypeResolver,
};
use super::server::{owned, slot};
use super::{
    committed_progress, resume_stream, signal_setup, slot_state, table_schemas, PgError, PgOffset,
    PostgresConfig, PostgresSource, SlotState, TablesByOid,
};

/// The database reached: its connection settings and a checked connection.
pub struct Reached {
    info: ConnInfo,
    client: tokio_postgres::Client,
}

/// What the snapshot, the resume and the stream share.
pub struct Capture {
    info: ConnInfo,
    client: tokio_postgres::Client,
    types: TypeResolver,
    /// The slot and publication Sluice made (dropped on stop only when it made them).
    owned: owned::Owned,
    signals: Option<signaling::Signals>,
    /// The captured tables, and the same by relation id for the stream.
    schemas: Vec<Arc<TableSchema>>,
    by_oid: TablesByOid,
    committed: Option<PgOffset>,
    slot: Option<SlotState>,
    db: String,
    notifications: Option<sluice_kit::notification::Notifications>,
    schema_changes: Option<Arc<schema_change::SchemaChanges>>,
}

/// Where the stream starts: the replication connection started, and the position it streams
/// from.
pub struct Started {
    repl: ReplicationClient,
    resume: PgOffset,
}

#[async_trait]
impl sluice_kit::lifecycle::DatabaseSource for PostgresSource {
    type Reached = Reached;
    type Prepared = Capture;
    type From = Started;
    type Error = PgError;

    fn connector(&self) -> &'static str {
        "postgresql"
    }

    fn common_mut(&mut self) -> &mut sluice_kit::config::SourceCommon {
        &mut self.config.common
    }

    async fn reach(&mut self, _ctx: &mut SourceContext) -> Result<Reached, PgError> {
        let info = ConnInfo::from_config(&self.config)?;
        let client = info.connect("sluice").await?;
        check_setup(&client, &info).await?;
        Ok(Reached { info, client })
    }

    async fn prepare(
        &mut self,
        Reached { info, client }: Reached,
        ctx: &mut SourceContext,
    ) -> Result<Prepared<Capture>, PgError> {
        prepare(&self.config, info, client, ctx).await
    }

    async fn snapshot(
        &mut self,
        state: &mut Capture,
        plan: &Plan,
        ctx: &mut SourceContext,
    ) -> Result<Option<Started>, PgError> {
        let config = &self.config;
        // `snapshot.include.collection.list`: the tables whose rows are read (all streamed).
        let read: Vec<Arc<TableSchema>> = (state.schemas.iter())
            .filter(|t| (config.common).snapshots_table(&format!("{}.{}", t.schema_name, t.table)))
            .cloned()
            .collect();
        let tables = InitialSnapshot {
            tables: &read,
            db: &state.db,
            schema_changes: state.schema_changes.as_deref(),
            notifications: state.notifications.as_ref(),
        };
        let slot = (state.slot.as_ref(), &mut state.owned);
        let setup = (&state.client, &state.info, config);
        let Some((repl, resume)) = initial_snapshot(setup, slot, &tables, plan.stream, ctx).await?
        else {
            return Ok(None);
        };
        started(repl, resume).await.map(Some)
    }

    async fn resume(
        &mut self,
        state: &mut Capture,
        _plan: &Plan,
        ctx: &mut SourceContext,
    ) -> Result<Option<Started>, PgError> {
        let resume = state.committed.unwrap_or_default();
        let slot_exists = state.slot.is_some();
        let (client, info, owned) = (&state.client, &state.info, &mut state.owned);
        let repl = resume_stream(client, info, &self.config, slot_exists, resume, owned).await?;
        let started = started(repl, resume).await?;
        if !note_skipped(state.notifications.as_ref(), resume, ctx).await {
            return Ok(None);
        }
        Ok(Some(started))
    }

    async fn stream(
        &mut self,
        state: Capture,
        Started { mut repl, resume }: Started,
        ctx: &mut SourceContext,
    ) -> Result<(), PgError> {
        let config = &self.config;
        let Capture {
            info,
            client,
            types,
            mut owned,
            signals,
            by_oid,
            db,
            notifications,
            schema_changes,
            ..
        } = state;
        let (heartbeats, tx_meta) = kit_records(config);
        let mut streamer = stream::Streamer {
            config,
            info: &info,
            notifications,
            client: &client,
            types,
            db: db.as_str().into(),
            prefix: config.common.topic_prefix.as_str().into(),
            not_snapshot: "false".into(),
            heartbeat: heartbeats,
            tx_meta,
            skipped: config.common.skipped().map_err(PgError::Setup)?,
            tables: by_oid,
            schema_changes,
            signals,
            resume,
        };
        let result = streamer.run(&mut repl, ctx).await;
        let _ = repl.shutdown().await;
        if config.slot_drop_on_stop && result.is_ok() {
            slot::drop_on_stop(&client, config, &mut owned).await;
        }
        result
    }
}

/// The captured tables, the publication and the signaling table set up, the slot and the
/// committed position read.
async fn prepare(
    config: &PostgresConfig,
    info: ConnInfo,
    client: tokio_postgres::Client,
    ctx: &mut SourceContext,
) -> Result<Prepared<Capture>, PgError> {
    let mut types = TypeResolver::default();
    let defs = captured_tables(&client, config, &mut types).await?;
    if defs.is_empty() {
        tracing::warn!(
            "No table matches the include/exclude lists; only new tables will be captured."
        );
    }
    let mut owned = owned::Owned::load(ctx.data_dir(), &info)?;
    ensure_publication(&client, config, &defs, &mut owned).await?;
    // Before the stream starts: the signaling table must be published before any signal is
    // written.
    let chunk_bytes = ctx.limits().max_batch_bytes();
    let progress = committed_progress(ctx);
    let signals = signal_setup(&client, config, &info.dbname, progress, chunk_bytes).await?;
    let source = source_schema();
    let (schemas, by_oid) = table_schemas(config, &defs, &source);
    let committed = ctx.resume_from().map(PgOffset::parse).transpose()?;
    let slot = slot_state(&client, &config.slot_name).await?;
    if let Some(pid) = slot.as_ref().and_then(|s| s.active_pid) {
        return Err(PgError::Replication(format!(
            "replication slot `{}` is in use by another process (pid {pid}): stop it, or set another `slot.name`",
            config.slot_name
        )));
    }
    let stored = sluice_kit::snapshot::Stored {
        offset: committed.is_some(),
        snapshot_completed: committed.is_some_and(|o| o.snapshot_completed),
        position_available: slot.is_some(),
        history_available: true,
    };
    let lost = format!("replication slot `{}` no longer exists", config.slot_name);
    let db = info.dbname.clone();
    let notifications = config.common.notifications();
    let schema_changes = config.common.includes_schema_changes(false).then(|| {
        Arc::new(schema_change::SchemaChanges::new(
            &config.common.topic_prefix,
            &db,
            source.clone(),
        ))
    });
    let state = Capture {
        info,
        client,
        types,
        owned,
        signals,
        schemas,
        by_oid,
        committed,
        slot,
        db,
        notifications,
        schema_changes,
    };
    Ok(Prepared {
        state,
        stored,
        lost,
    })
}

/// The replication connection once the server has started streaming.
async fn started(mut repl: ReplicationClient, resume: PgOffset) -> Result<Started, PgError> {
    repl.wait_started()
        .await
        .map_err(|e| PgError::Replication(format!("starting replication: {e}")))?;
    Ok(Started { repl, resume })
}

/// What the initial snapshot reads and emits besides rows.
struct InitialSnapshot<'a> {
    tables: &'a [Arc<TableSchema>],
    db: &'a str,
    schema_changes: Option<&'a schema_change::SchemaChanges>,
    notifications: Option<&'a sluice_kit::notification::Notifications>,
}

/// The initial snapshot in the slot's exported snapshot, then (`stream`) the stream from its
/// consistent point; `None`: nothing to stream (`initial_only`, or the pipeline stops).
async fn initial_snapshot(
    (client, info, config): (&tokio_postgres::Client, &ConnInfo, &PostgresConfig),
    (slot, owned): (Option<&SlotState>, &mut owned::Owned),
    tables: &InitialSnapshot<'_>,
    stream: bool,
    ctx: &mut SourceContext,
) -> Result<Option<(ReplicationClient, PgOffset)>, PgError> {
    let start = slot::begin_snapshot(info, config, slot, owned).await?;
    let consistent_point = start.consistent_point;
    snapshot_tables(client, info, config, &start, tables, ctx).await?;
    if !stream || ctx.is_stopping() {
        return Ok(None);
    }
    let resume = PgOffset {
        lsn: consistent_point,
        tx: None,
        snapshot_completed: true,
    };
    Ok(Some((start.stream(info, config).await?, resume)))
}

/// Reads every captured table inside the slot's exported snapshot.
async fn snapshot_tables(
    client: &tokio_postgres::Client,
    info: &ConnInfo,
    config: &PostgresConfig,
    start: &slot::SnapshotStart,
    what: &InitialSnapshot<'_>,
    ctx: &mut SourceContext,
) -> Result<(), PgError> {
    let plan = snapshot::SnapshotPlan {
        tables: what.tables,
        snapshot_name: &start.snapshot_name,
        consistent_point: start.consistent_point,
        prefix: config.common.topic_prefix.as_str().into(),
        db: what.db.into(),
        overrides: &config.common.snapshot_overrides,
        info,
        threads: config.snapshot_max_threads,
        chunk_size: config.snapshot_chunk_size,
        schema_changes: what.schema_changes,
        conditions: &BTreeMap::new(),
        positions: None,
        notifications: what.notifications,
    };
    let (rows, announced) = snapshot::run(client, &plan, ctx).await?;
    if let Some(run) = announced {
        run.completed(ctx);
    }
    tracing::info!(rows, tables = what.tables.len(), "Snapshot completed.");
    Ok(())
}

/// As Debezium: a start that does not take the initial snapshot says so (`SKIPPED`) on the
/// notification sink; `false` once the pipeline stops.
async fn note_skipped(
    notifications: Option<&sluice_kit::notification::Notifications>,
    resume: PgOffset,
    ctx: &mut SourceContext,
) -> bool {
    let Some(n) = notifications else {
        return true;
    };
    let skipped = n.event_now(
        &sluice_kit::notification::Notification::initial_snapshot("SKIPPED", Vec::new()),
        resume.position(),
    );
    ctx.emit(Batch::new(vec![skipped])).await.is_ok()
}

/// The kit's heartbeat and transaction records, when the options ask for them.
fn kit_records(
    config: &PostgresConfig,
) -> (
    Option<sluice_kit::records::heartbeat::Heartbeat>,
    Option<sluice_kit::records::transaction::TxSchemas>,
) {
    let common = &config.common;
    let heartbeats = sluice_kit::records::heartbeat::Heartbeat::new(common);
    let tx_meta = common
        .provide_transaction_metadata
        .then(|| sluice_kit::records::transaction::TxSchemas::new(&common.topic_prefix));
    (heartbeats, tx_meta)
}
