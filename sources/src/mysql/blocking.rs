//! Blocking snapshots (`execute-snapshot` with `"type": "blocking"`, from any signal channel):
//! between transactions the stream stops reading the binlog, the listed tables are read whole
//! (each filtered by its `additional-conditions`) in one `START TRANSACTION WITH CONSISTENT
//! SNAPSHOT` on a connection of their own, then the stream goes on where it stopped.
//!
//! Asked for by the signaling table, the rows carry the position before the signal's
//! transaction until the last one, so a restart in the middle streams the signal again and
//! the snapshot is read again (rows already delivered come twice, as Debezium documents for
//! blocking snapshots). Changes committed while the tables are read are streamed afterwards,
//! so the last event of each key is the table's current row.

use mysql_async::prelude::Queryable;
use sluice_engine::{Batch, Position, SourceContext};
use sluice_kit::signal::BlockingRequest;

use super::error::MysqlError;
use super::snapshot::Table;
use super::MysqlSource;

impl MysqlSource {
    /// Runs `request` over the captured `tables`: rows at `before`, the last batch at `after`.
    pub(super) async fn blocking_snapshot(
        &self,
        request: BlockingRequest,
        tables: &[&Table],
        (before, after): (Position, Position),
        ctx: &mut SourceContext,
    ) -> Result<(), MysqlError> {
        let chosen: Vec<&Table> = request
            .tables
            .iter()
            .filter_map(|name| tables.iter().find(|t| t.full_name() == *name).copied())
            .collect();
        tracing::info!(id = %request.id, tables = ?request.tables, "Blocking snapshot: streaming paused.");
        let mut conn = self.connect().await?;
        let (file, pos) = super::locking::exact(&mut conn).await?;
        let (rows, mut events) = self
            .read_rows(
                &mut conn,
                (&chosen, &request.conditions),
                (&file, pos),
                (before, Vec::new()),
                ctx,
            )
            .await?;
        let _ = conn.query_drop("COMMIT").await;
        let _ = conn.disconnect().await;
        for e in &mut events {
            e.position = after.clone();
        }
        let _ = ctx
            .emit(Batch {
                events,
                position: Some(after),
            })
            .await;
        tracing::info!(notification = "COMPLETED", id = %request.id, rows, "Blocking snapshot: streaming resumes.");
        Ok(())
    }
}
