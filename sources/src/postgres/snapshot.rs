//! The initial snapshot, read inside the replication slot's exported snapshot so that it meets
//! the stream with no gap and no duplicate.

use std::sync::Arc;

use sluice_engine::{Batch, ChangeEvent, Op, SourceContext};
use tokio_postgres::{Client, SimpleQueryMessage};

use super::catalog::quote_ident;
use super::error::PgError;
use super::offset::PgOffset;
use super::table::{Cell, SourceInfo, TableSchema};

/// What the snapshot needs to know.
pub struct SnapshotPlan<'a> {
    /// Tables, in order.
    pub tables: &'a [Arc<TableSchema>],
    /// Exported snapshot name.
    pub snapshot_name: &'a str,
    /// The slot's consistent point.
    pub consistent_point: u64,
    /// `topic.prefix`.
    pub prefix: Arc<str>,
    /// Database name.
    pub db: Arc<str>,
    /// Rows per FETCH.
    pub fetch_size: usize,
}

/// Emits every row of every table as `op: r`, with Debezium's `snapshot` markers (`first`,
/// `first_in_data_collection`, `true`, `last_in_data_collection`, `last`). Returns the number of
/// rows. Positions say the snapshot is incomplete, except the last one.
pub async fn run(
    client: &Client,
    plan: &SnapshotPlan<'_>,
    ctx: &mut SourceContext,
) -> Result<u64, PgError> {
    let q = |e| PgError::query("snapshot", e);
    client
        .batch_execute(&format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '{}'",
            plan.snapshot_name.replace('\'', "''")
        ))
        .await
        .map_err(q)?;
    let started_micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0);
    let tx_id = client
        .query_one(
            "SELECT txid_snapshot_xmin(txid_current_snapshot())::bigint",
            &[],
        )
        .await
        .map_err(q)?
        .get::<_, i64>(0);
    let incomplete = PgOffset {
        lsn: plan.consistent_point,
        tx: None,
        snapshot_completed: false,
    }
    .position();
    let sequence = format!("[null,\"{}\"]", plan.consistent_point);
    let max_batch = ctx.limits().max_batch_size;
    let mut batch: Vec<ChangeEvent> = Vec::with_capacity(max_batch);
    // One event is held back so that the last one can be marked `last`.
    let mut pending: Option<(usize, ChangeEvent)> = None;
    let mut rows = 0u64;
    let markers: [Arc<str>; 3] = ["first", "first_in_data_collection", "true"].map(Arc::from);
    for (t, table) in plan.tables.iter().enumerate() {
        let cursor = format!("sluice_snapshot_{t}");
        let columns = table
            .column_names()
            .map(quote_ident)
            .collect::<Vec<_>>()
            .join(", ");
        client
            .batch_execute(&format!(
                "DECLARE {cursor} NO SCROLL CURSOR FOR SELECT {columns} FROM {}.{}",
                quote_ident(&table.schema_name),
                quote_ident(&table.table)
            ))
            .await
            .map_err(|e| {
                PgError::query(
                    format!("snapshot of {}.{}", table.schema_name, table.table),
                    e,
                )
            })?;
        let mut first_in_table = true;
        loop {
            let messages = client
                .simple_query(&format!("FETCH {} FROM {cursor}", plan.fetch_size))
                .await
                .map_err(|e| {
                    PgError::query(
                        format!("snapshot of {}.{}", table.schema_name, table.table),
                        e,
                    )
                })?;
            let mut fetched = 0;
            for message in &messages {
                let SimpleQueryMessage::Row(row) = message else {
                    continue;
                };
                fetched += 1;
                let cells: Vec<Cell<'_>> = (0..table.width())
                    .map(|i| row.get(i).map_or(Cell::Null, Cell::Text))
                    .collect();
                let marker = match (rows, first_in_table) {
                    (0, _) => &markers[0],
                    (_, true) => &markers[1],
                    _ => &markers[2],
                };
                first_in_table = false;
                let info = SourceInfo {
                    name: &plan.prefix,
                    db: &plan.db,
                    ts_micros: started_micros,
                    snapshot: marker,
                    sequence: Some(sequence.clone()),
                    tx_id: Some(tx_id),
                    lsn: Some(plan.consistent_point as i64),
                };
                let key = table.key(&cells).map_err(PgError::Decode)?;
                let after = table.row(&cells).map_err(PgError::Decode)?;
                let event =
                    table.event(Op::Read, key, None, Some(after), &info, incomplete.clone());
                rows += 1;
                if let Some((pt, mut previous)) = pending.replace((t, event)) {
                    if pt != t && **marker == *"first_in_data_collection" {
                        set_marker(&mut previous, "last_in_data_collection");
                    }
                    batch.push(previous);
                }
                if batch.len() >= max_batch
                    && ctx
                        .emit(Batch::new(std::mem::take(&mut batch)))
                        .await
                        .is_err()
                {
                    return Ok(rows);
                }
            }
            if fetched < plan.fetch_size {
                break;
            }
        }
        client
            .batch_execute(&format!("CLOSE {cursor}"))
            .await
            .map_err(q)?;
    }
    client.batch_execute("COMMIT").await.map_err(q)?;
    let done = PgOffset {
        lsn: plan.consistent_point,
        tx: None,
        snapshot_completed: true,
    }
    .position();
    if let Some((_, mut last)) = pending.take() {
        set_marker(&mut last, "last");
        last.position = done.clone();
        batch.push(last);
    }
    let _ = ctx
        .emit(Batch {
            events: batch,
            position: Some(done),
        })
        .await;
    Ok(rows)
}

fn set_marker(event: &mut ChangeEvent, marker: &str) {
    let Some(value) = event.value.as_mut().and_then(|v| v.value.as_struct_mut()) else {
        return;
    };
    if let Some(source) = value.get_mut("source").and_then(|s| s.as_struct_mut()) {
        source.set("snapshot", sluice_engine::Value::from(marker));
    }
}
