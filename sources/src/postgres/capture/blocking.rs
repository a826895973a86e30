//! Blocking snapshots: the stream stops, the listed tables are read whole (with their
//! `additional-conditions` as filters) inside one exported snapshot, then the stream goes on.
//!
//! The rows carry the position from before the signal's transaction until the last one, so a
//! restart in the middle streams the signal again and the snapshot is read again (rows already
//! delivered come twice, as Debezium documents for blocking snapshots). Changes committed while
//! the tables are read are streamed afterwards, so the last event of each key is current.

use std::sync::Arc;

use sluice_engine::SourceContext;

use crate::postgres::capture::signaling::captured_by_name;
use crate::postgres::capture::snapshot::{self, SnapshotPlan};
use crate::postgres::capture::stream::Streamer;
use crate::postgres::error::PgError;
use crate::postgres::offset::PgOffset;
use crate::postgres::records::table::TableSchema;

impl Streamer<'_> {
    /// Runs the pending blocking snapshot, if any: rows carry the position `before` (the
    /// signal comes again after a restart), the last one `after`.
    pub(crate) async fn blocking_snapshot(
        &mut self,
        ctx: &mut SourceContext,
        before: u64,
        after: u64,
    ) -> Result<(), PgError> {
        let Some(request) = self.signals.as_mut().and_then(|s| s.blocking.take()) else {
            return Ok(());
        };
        let by_name = captured_by_name(&self.tables);
        let tables: Vec<Arc<TableSchema>> = request
            .tables
            .iter()
            .filter_map(|name| by_name.get(name).cloned())
            .collect();
        tracing::info!(id = %request.id, tables = ?request.tables, "Blocking snapshot: streaming paused.");
        // The snapshot is exported by a connection of its own, so that this task's connection
        // (and the reader threads) can import it.
        let exporter = self.info.connect("sluice-blocking-snapshot").await?;
        let q = |e| PgError::query("exporting a snapshot for a blocking snapshot", e);
        exporter
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(q)?;
        let name: String = exporter
            .query_one("SELECT pg_export_snapshot()", &[])
            .await
            .map_err(q)?
            .get(0);
        let at = |lsn| PgOffset {
            lsn,
            tx: None,
            snapshot_completed: true,
        };
        let plan = SnapshotPlan {
            tables: &tables,
            snapshot_name: &name,
            consistent_point: after,
            prefix: self.prefix.clone(),
            db: self.db.clone(),
            overrides: &self.config.common.snapshot_overrides,
            info: self.info,
            threads: self.config.snapshot_max_threads,
            chunk_size: self.config.snapshot_chunk_size,
            schema_changes: None,
            conditions: &request.conditions,
            positions: Some((self.pos(at(before)), self.pos(at(after)))),
            // Debezium reports a blocking snapshot with the initial snapshot's notifications.
            notifications: self.notifications.as_ref(),
        };
        // Its tables show in the status as it reads them; the snapshot completed stays the
        // initial one's.
        let (rows, _tables_shown) = snapshot::run(self.client, &plan, ctx).await?;
        let _ = exporter.batch_execute("COMMIT").await;
        tracing::info!(notification = "COMPLETED", id = %request.id, rows, "Blocking snapshot: streaming resumes.");
        Ok(())
    }
}
