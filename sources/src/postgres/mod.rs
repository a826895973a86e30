//! `postgres`: Debezium-compatible capture from PostgreSQL through a logical replication slot
//! (pgoutput).
//!
//! Start-up: check the server (`wal_level`, REPLICATION privilege), read the captured tables,
//! make sure the publication exists. Then, when a snapshot is needed, create the slot with
//! `EXPORT_SNAPSHOT`, read every table inside that exported snapshot (REPEATABLE READ,
//! `SET TRANSACTION SNAPSHOT`, with COPY) while the replication session waits, and start streaming from
//! the slot's consistent point: the snapshot and the stream meet with no gap and no duplicate.
//! Otherwise stream from the committed position. The slot is confirmed only up to positions
//! every sink acknowledged.

mod capture;
mod config;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod lifecycle;
mod offset;
mod records;
mod server;
mod values;
mod wire;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pgwire_replication::{Lsn, ReplicationClient, ReplicationConfig, TlsConfig};
use sluice_engine::{BuildContext, ComponentError, Source, SourceContext};

pub use config::PostgresConfig;
pub use error::PgError;
pub use offset::PgOffset;

use capture::{incremental, signaling};
use offset::parse_lsn;
use records::table::TableSchema;
use server::catalog::{self, ConnInfo};
use server::owned;

const SESSION_OPTIONS: &str =
    "-c DateStyle=ISO -c TimeZone=UTC -c IntervalStyle=iso_8601 -c extra_float_digits=3 -c lc_monetary=C -c bytea_output=hex";

/// The running PostgreSQL source.
#[derive(Debug)]
pub struct PostgresSource {
    config: PostgresConfig,
}

impl PostgresSource {
    /// A source for `config` (checked when it was read).
    pub fn new(config: PostgresConfig, _ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        Ok(PostgresSource { config })
    }
}

#[async_trait]
impl Source for PostgresSource {
    async fn run(&mut self, ctx: &mut SourceContext) -> Result<(), ComponentError> {
        sluice_kit::lifecycle::drive(self, ctx).await
    }
}

struct SlotState {
    active_pid: Option<i32>,
    /// Where the slot streams from (`confirmed_flush_lsn`).
    confirmed: u64,
}

async fn slot_state(
    client: &tokio_postgres::Client,
    slot: &str,
) -> Result<Option<SlotState>, PgError> {
    let row = client
        .query_opt(
            "SELECT active_pid, database = current_database(), coalesce(confirmed_flush_lsn, restart_lsn)::text FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(|e| PgError::query("looking up the replication slot", e))?;
    match row {
        None => Ok(None),
        Some(r) => {
            if r.get::<_, Option<bool>>(1) != Some(true) {
                return Err(PgError::Setup(format!(
                    "replication slot `{slot}` belongs to another database: choose another `slot.name`"
                )));
            }
            let confirmed: Option<String> = r.get(2);
            Ok(Some(SlotState {
                active_pid: r.get(0),
                confirmed: confirmed.as_deref().and_then(parse_lsn).unwrap_or(0),
            }))
        }
    }
}

/// The replication connection's TLS, from the same `sslmode`, except that `prefer` does not
/// encrypt it unless a client certificate is set (an earlier machine showed the stream stalling
/// over TLS; see docs/components.md). `require` and `verify-*` encrypt it.
/// Runs `work` on a thread of its own (`name`) with a current-thread runtime; when the runtime
/// cannot be built, `failed` gets the error instead. `what` names the thread in errors.
fn spawn_with_runtime<F>(
    name: String,
    what: &str,
    failed: impl FnOnce(PgError) + Send + 'static,
    work: impl FnOnce() -> F + Send + 'static,
) -> Result<(), PgError>
where
    F: std::future::Future<Output = ()>,
{
    let owned = what.to_owned();
    // The thread logs inside its stage's span (pipeline, component).
    let span = tracing::Span::current();
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            let _stage = span.enter();
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime.block_on(work()),
                Err(e) => failed(PgError::Setup(format!("cannot start {owned}: {e}"))),
            }
        })
        .map(|_| ())
        .map_err(|e| PgError::Setup(format!("cannot start {what}: {e}")))
}

fn replication_tls(info: &ConnInfo) -> TlsConfig {
    let mode = match info.sslmode {
        config::SslMode::Prefer if info.client_cert.is_some() => {
            pgwire_replication::SslMode::Require
        }
        config::SslMode::Disable | config::SslMode::Prefer => return TlsConfig::disabled(),
        config::SslMode::Require => pgwire_replication::SslMode::Require,
        config::SslMode::VerifyCa => pgwire_replication::SslMode::VerifyCa,
        config::SslMode::VerifyFull => pgwire_replication::SslMode::VerifyFull,
    };
    TlsConfig {
        mode,
        ca_pem_path: info.sslrootcert.clone(),
        client_cert_pem_path: info.client_cert.as_ref().map(|(c, _)| c.clone()),
        client_key_pem_path: info.client_cert.as_ref().map(|(_, k)| k.clone()),
        ..TlsConfig::disabled()
    }
}

fn replication_config(info: &ConnInfo, config: &PostgresConfig) -> ReplicationConfig {
    ReplicationConfig::new(
        info.host.clone(),
        info.user.clone(),
        info.password.clone().unwrap_or_default(),
        info.dbname.clone(),
        config.slot_name.clone(),
        config.publication_name.clone(),
    )
    .with_port(info.port)
    .with_tls(replication_tls(info))
    .with_options(SESSION_OPTIONS)
    .with_application_name("sluice")
    .with_status_interval(Duration::from_millis(
        config.status_update_interval_ms.max(100),
    ))
    // The client's buffer between the socket and the decoder counts messages, not bytes: kept
    // small, so that a transaction of large rows waits in the server (TCP backpressure)
    // instead of here.
    .with_buffer_size(REPLICATION_BUFFER)
}

/// Messages the replication client buffers ahead of the decoder (its default, 8192, held a
/// whole transaction of 10 MB rows; 4 streams 300k small rows as fast, measured).
const REPLICATION_BUFFER: usize = 4;

/// A committed position as this source reads it (its offset, and a running incremental
/// snapshot's progress), rendered back (`docs/positions.md`'s test).
#[cfg(test)]
pub(crate) fn reread(text: &str) -> Result<serde_json::Value, sluice_kit::position::PositionError> {
    use sluice_kit::position::PositionError;
    let position = sluice_engine::Position::Opaque(text.into());
    let offset = offset::PgOffset::parse(&position)?;
    let unwritable = |e| PositionError::unwritable(text, "postgres", e);
    let mut read: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&offset.position().to_string()).map_err(unwritable)?;
    if let Some(progress) = sluice_kit::position::progress_of::<incremental::Progress>(&position) {
        read.insert(
            "incremental".to_owned(),
            serde_json::to_value(progress).map_err(unwritable)?,
        );
    }
    Ok(serde_json::Value::Object(read))
}

/// The incremental snapshot's progress in the committed position, if one was running.
fn committed_progress(ctx: &SourceContext) -> Option<incremental::Progress> {
    sluice_kit::position::progress_of(ctx.resume_from()?)
}

/// Finds the signaling table (it must exist and be published) and sets up the channels.
async fn signal_setup(
    client: &tokio_postgres::Client,
    config: &PostgresConfig,
    db: &str,
    progress: Option<incremental::Progress>,
    chunk_bytes: usize,
) -> Result<Option<signaling::Signals>, PgError> {
    let channels = config.common.signal_channels();
    let file = channels.iter().any(|c| c == "file") && config.common.signal_file.is_some();
    let Some((schema, table)) = config.signal_table() else {
        if !file && !channels.iter().any(|c| c == "http" || c == "kafka") {
            return Ok(None);
        }
        // Read-only snapshots need no signaling table (signals come through the file channel).
        let incremental = config.read_only.then(|| {
            incremental::Incremental::new(config, String::new(), db, progress.clone(), chunk_bytes)
        });
        return Ok(Some(signaling::Signals {
            oid: None,
            source_channel: false,
            incremental,
            db: db.to_owned(),
            blocking: None,
        }));
    };
    let qualified = format!(
        "{}.{}",
        catalog::quote_ident(&schema),
        catalog::quote_ident(&table)
    );
    let oid: Option<u32> = client
        .query_opt(
            "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
            &[&schema, &table],
        )
        .await
        .map_err(|e| PgError::query("looking up the signaling table", e))?
        .map(|r| r.get(0));
    let Some(oid) = oid else {
        return Err(PgError::Setup(format!(
            "the signaling table `{schema}.{table}` (`signal.data.collection`) does not exist: create it with `CREATE TABLE {qualified} (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data text)`"
        )));
    };
    let published = client
        .query_opt(
            "SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
            &[&config.publication_name, &schema, &table],
        )
        .await
        .map_err(|e| PgError::query("checking the publication", e))?
        .is_some();
    if !published {
        if config.publication_autocreate == config::PublicationAutocreate::Disabled {
            return Err(PgError::Setup(format!(
                "publication `{}` does not publish the signaling table: run `ALTER PUBLICATION {} ADD TABLE {qualified}`",
                config.publication_name, config.publication_name
            )));
        }
        client
            .batch_execute(&format!(
                "ALTER PUBLICATION {} ADD TABLE {qualified}",
                catalog::quote_ident(&config.publication_name)
            ))
            .await
            .map_err(|e| PgError::query("adding the signaling table to the publication", e))?;
    }
    if let Some(p) = &progress {
        tracing::info!(id = %p.id, tables = ?p.tables, chunks = p.chunks, "Resuming the incremental snapshot after its last delivered chunk.");
    }
    Ok(Some(signaling::Signals {
        oid: Some(oid),
        source_channel: channels.iter().any(|c| c == "source"),
        incremental: Some(incremental::Incremental::new(
            config,
            qualified,
            db,
            progress,
            chunk_bytes,
        )),
        db: db.to_owned(),
        blocking: None,
    }))
}

/// Tables by relation oid (`None`: not captured).
type TablesByOid = HashMap<u32, Option<Arc<TableSchema>>>;

/// The captured tables' schemas, in catalog order and by relation oid; warns of column
/// selectors that match nothing and of tables without a key.
fn table_schemas(
    config: &PostgresConfig,
    defs: &[catalog::TableDef],
    source: &Arc<sluice_engine::Schema>,
) -> (Vec<Arc<TableSchema>>, TablesByOid) {
    let captured: Vec<String> = defs
        .iter()
        .flat_map(|d| {
            d.columns
                .iter()
                .map(move |c| format!("{}.{}.{}", d.schema, d.name, c.name))
        })
        .collect();
    for unused in config.common.column_rules.unused(&captured) {
        tracing::warn!(selector = %unused, "Column selector matches no captured column.");
    }
    let mut schemas: Vec<Arc<TableSchema>> = Vec::with_capacity(defs.len());
    let mut by_oid = HashMap::new();
    for def in defs {
        let schema = Arc::new(TableSchema::new(def, config, source.clone()));
        if !schema.has_key() {
            tracing::warn!(table = %format!("{}.{}", def.schema, def.name), "Table has no primary key (and no `message.key.columns`); its events have a null key.");
        }
        by_oid.insert(def.oid, Some(schema.clone()));
        schemas.push(schema);
    }
    (schemas, by_oid)
}

/// Streaming without a snapshot: from the committed position, creating the slot when there is
/// none (a lost slot with a committed position was refused or re-snapshotted by the plan).
async fn resume_stream(
    client: &tokio_postgres::Client,
    info: &ConnInfo,
    config: &PostgresConfig,
    slot_exists: bool,
    resume: PgOffset,
    owned: &mut owned::Owned,
) -> Result<ReplicationClient, PgError> {
    if !slot_exists {
        client
            .execute(
                "SELECT pg_create_logical_replication_slot($1, 'pgoutput')",
                &[&config.slot_name],
            )
            .await
            .map_err(|e| {
                PgError::query(
                    format!("creating replication slot `{}`", config.slot_name),
                    e,
                )
            })?;
        owned.record(owned::Kind::Slot, &config.slot_name)?;
    }
    let cfg = replication_config(info, config).with_start_lsn(Lsn(resume.lsn));
    ReplicationClient::connect(cfg)
        .await
        .map_err(|e| PgError::Replication(e.to_string()))
}
