//! Where a snapshot and the stream meet, and the replication slot's life.
//!
//! - No slot yet: the slot is created with `EXPORT_SNAPSHOT` and the snapshot is read inside the
//!   slot's own snapshot, so the stream starts exactly where the snapshot ends (no gap, no
//!   duplicate). The slot is recorded as this pipeline's.
//! - The slot exists (an interrupted snapshot, `snapshot.mode: always`, offsets kept in memory,
//!   or a slot that was there before): it is never dropped. The snapshot is read in a new
//!   exported snapshot of an ordinary transaction, and the stream starts at the slot's position,
//!   which is at or before that snapshot: changes committed in between come twice (once in the
//!   snapshot, once streamed after it, in order), none is lost. Debezium does the same with an
//!   existing slot.

use pgwire_replication::{Lsn, ReplicationClient};
use tokio_postgres::Client;

use crate::postgres::config::PostgresConfig;
use crate::postgres::error::PgError;
use crate::postgres::offset::parse_lsn;
use crate::postgres::server::catalog::ConnInfo;
use crate::postgres::server::owned::{Kind, Owned};
use crate::postgres::{replication_config, SlotState};

/// A snapshot about to be read: the exported snapshot's name, the point the stream starts
/// from, and what holds the snapshot open.
pub(crate) struct SnapshotStart {
    /// The exported snapshot the readers import.
    pub snapshot_name: String,
    /// Where the stream starts.
    pub consistent_point: u64,
    /// The replication connection that created the slot (it holds the slot's snapshot until
    /// it starts streaming).
    repl: Option<ReplicationClient>,
    /// The transaction that exported the snapshot, for an existing slot.
    _holder: Option<Client>,
}

/// Prepares the snapshot: creates the slot with its snapshot, or exports one beside the
/// existing slot.
pub(crate) async fn begin_snapshot(
    info: &ConnInfo,
    config: &PostgresConfig,
    slot: Option<&SlotState>,
    owned: &mut Owned,
) -> Result<SnapshotStart, PgError> {
    if let Some(slot) = slot {
        if !owned.owns(Kind::Slot, &config.slot_name) {
            tracing::warn!(slot = %config.slot_name, "The replication slot was not created by this pipeline; it is used as it is, from its position (if another connector uses it, stop and set another `slot.name`).");
        }
        tracing::info!(slot = %config.slot_name, "The slot exists: the snapshot is read in a snapshot of its own and the stream starts at the slot's position (changes committed in between come twice, none is lost).");
        let holder = info.connect("sluice-snapshot").await?;
        holder
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(|e| PgError::query("starting the snapshot transaction", e))?;
        let name: String = holder
            .query_one("SELECT pg_export_snapshot()", &[])
            .await
            .map_err(|e| PgError::query("exporting the snapshot", e))?
            .get(0);
        return Ok(SnapshotStart {
            snapshot_name: name,
            consistent_point: slot.confirmed,
            repl: None,
            _holder: Some(holder),
        });
    }
    let mut repl = ReplicationClient::connect_gated(replication_config(info, config))
        .await
        .map_err(|e| PgError::Replication(e.to_string()))?;
    let rows = repl
        .simple_query(&format!(
            "CREATE_REPLICATION_SLOT \"{}\" LOGICAL pgoutput EXPORT_SNAPSHOT",
            config.slot_name
        ))
        .await
        .map_err(|e| {
            PgError::Replication(format!(
                "creating replication slot `{}`: {e}",
                config.slot_name
            ))
        })?;
    owned.record(Kind::Slot, &config.slot_name)?;
    let text = |i: usize| -> Option<String> {
        rows.first()?
            .get(i)?
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    let consistent_point = text(1).as_deref().and_then(parse_lsn).ok_or_else(|| {
        PgError::Replication("CREATE_REPLICATION_SLOT returned no consistent point".into())
    })?;
    let snapshot_name = text(2).ok_or_else(|| {
        PgError::Replication("CREATE_REPLICATION_SLOT returned no snapshot".into())
    })?;
    Ok(SnapshotStart {
        snapshot_name,
        consistent_point,
        repl: Some(repl),
        _holder: None,
    })
}

impl SnapshotStart {
    /// The replication stream after the snapshot, from its consistent point.
    pub(crate) async fn stream(
        self,
        info: &ConnInfo,
        config: &PostgresConfig,
    ) -> Result<ReplicationClient, PgError> {
        match self.repl {
            Some(mut repl) => {
                repl.start()
                    .await
                    .map_err(|e| PgError::Replication(e.to_string()))?;
                Ok(repl)
            }
            None => {
                let cfg =
                    replication_config(info, config).with_start_lsn(Lsn(self.consistent_point));
                ReplicationClient::connect(cfg)
                    .await
                    .map_err(|e| PgError::Replication(e.to_string()))
            }
        }
    }
}

/// `slot.drop.on.stop`: drops the slot when this pipeline created it; a slot that was there
/// before is kept, with a warning.
pub(crate) async fn drop_on_stop(client: &Client, config: &PostgresConfig, owned: &mut Owned) {
    if !owned.owns(Kind::Slot, &config.slot_name) {
        tracing::warn!(slot = %config.slot_name, "slot.drop.on.stop: the replication slot was not created by this pipeline; it is kept.");
        return;
    }
    // The walsender of the stream just shut down may hold the slot for a moment after the
    // replication connection closed: the drop is tried again while the slot is in use.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let dropped = loop {
        let result = client
            .execute("SELECT pg_drop_replication_slot($1)", &[&config.slot_name])
            .await;
        match result {
            Err(e)
                if e.code() == Some(&tokio_postgres::error::SqlState::OBJECT_IN_USE)
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            other => break other,
        }
    };
    match dropped {
        Ok(_) => {
            if let Err(e) = owned.forget(Kind::Slot, &config.slot_name) {
                tracing::warn!(error = %e, "The dropped slot could not be removed from the record.");
            }
        }
        Err(e) => {
            tracing::warn!(slot = %config.slot_name, error = %e, "slot.drop.on.stop: the slot could not be dropped.")
        }
    }
}
