//! The initial snapshot, read inside the replication slot's exported snapshot so that it meets
//! the stream with no gap and no duplicate.
//!
//! The work is cut into units (a table, or a primary-key range of a large table). Readers (this
//! task's connection, plus `snapshot.max.threads - 1` threads with their own connections, each
//! importing the same exported snapshot) take units in order and send rows through one bounded
//! channel; the collector here marks them the way Debezium does and emits them. Memory stays
//! bounded by the channel and the queues; a full queue holds every reader.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sluice_engine::event::BatchCut;
use sluice_engine::{Batch, ChangeEvent, Position, SourceContext};
use tokio::sync::mpsc;
use tokio_postgres::Client;

use sluice_kit::notification::{Notification, Notifications};

use crate::postgres::error::PgError;
use crate::postgres::offset::PgOffset;
use crate::postgres::records::schema_change::{describe, SchemaChanges};
use crate::postgres::records::table::{SourceInfo, TableSchema};
use crate::postgres::server::catalog::{quote_ident, ConnInfo};
use crate::postgres::values::types::ReadPath;
use crate::postgres::wire::copy::for_each_line;
use sluice_kit::history::ChangeKind;
use sluice_kit::lifecycle::SnapshotRun;

/// The most rows a reader sends at once.
const PIECE: usize = 256;

/// The most units one table is cut into.
const MAX_CHUNKS: u64 = 4096;

/// What the snapshot needs to know.
pub(crate) struct SnapshotPlan<'a> {
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
    /// Custom SELECTs by `schema.table` (`snapshot.select.statement.overrides`); they must return
    /// the table's columns in table order.
    pub overrides: &'a BTreeMap<String, String>,
    /// How to open more connections.
    pub info: &'a ConnInfo,
    /// `snapshot.max.threads`.
    pub threads: usize,
    /// `snapshot.chunk.size` (0: never split a table).
    pub chunk_size: u64,
    /// Schema change events (`CREATE` for every table, before the rows).
    pub schema_changes: Option<&'a SchemaChanges>,
    /// Row filters by `schema.table` (a blocking snapshot's `additional-conditions`).
    pub conditions: &'a BTreeMap<String, String>,
    /// The positions of the rows and of the last row, when not the initial snapshot's
    /// (a blocking snapshot's: it is not an initial snapshot to redo after a restart).
    pub positions: Option<(Position, Position)>,
    /// Notification records (`Initial Snapshot`), when the sink channel is on.
    pub notifications: Option<&'a Notifications>,
}

/// A table, or the key range `[lo, hi)` of one (`None`: unbounded).
#[derive(Debug, Clone)]
struct Unit {
    table: usize,
    range: Option<(Option<i64>, Option<i64>)>,
}

enum Piece {
    /// A table's rows and their estimated bytes (counted once, by the reader).
    Rows(usize, Vec<ChangeEvent>, usize),
    Done(usize),
    Failed(PgError),
}

/// What every reader shares.
struct Shared {
    tables: Vec<Arc<TableSchema>>,
    overrides: BTreeMap<String, String>,
    conditions: BTreeMap<String, String>,
    units: Vec<Unit>,
    next: AtomicUsize,
    snapshot_name: String,
    prefix: Arc<str>,
    db: Arc<str>,
    marker: Arc<str>,
    sequence: Arc<str>,
    started_micros: i64,
    tx_id: i64,
    lsn: i64,
    position: Position,
    /// Where the readers cut the pieces they send (by rows and by bytes).
    batch: BatchCut,
}

fn begin_sql(snapshot_name: &str) -> String {
    format!(
        "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '{}'",
        snapshot_name.replace('\'', "''")
    )
}

/// Emits every row of every table as `op: r`, with Debezium's `snapshot` markers (`first`,
/// `first_in_data_collection`, `true`, `last_in_data_collection`, `last`). Returns the number of
/// rows and the snapshot as announced (`None`: the pipeline stopped first). Positions say the snapshot is incomplete, except the last
/// one.
pub(crate) async fn run(
    client: &Client,
    plan: &SnapshotPlan<'_>,
    ctx: &mut SourceContext,
) -> Result<(u64, Option<SnapshotRun>), PgError> {
    let q = |e| PgError::query("snapshot", e);
    client
        .batch_execute(&begin_sql(plan.snapshot_name))
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
    if let Some(changes) = plan.schema_changes {
        let events = schema_events(client, plan, changes, started_micros, tx_id).await?;
        if ctx.emit(Batch::new(events)).await.is_err() {
            return Ok((0, None));
        }
    }
    let announced = SnapshotRun::announce(ctx, estimates(client, plan.tables).await.map_err(q)?);
    let units = plan_units(client, plan).await?;
    let threads = plan.threads.clamp(1, units.len().max(1));
    if threads > 1 {
        tracing::info!(
            units = units.len(),
            threads,
            "Reading the snapshot in parallel."
        );
    }
    let shared = Arc::new(Shared {
        tables: plan.tables.to_vec(),
        overrides: plan.overrides.clone(),
        conditions: plan.conditions.clone(),
        units,
        next: AtomicUsize::new(0),
        snapshot_name: plan.snapshot_name.to_owned(),
        prefix: plan.prefix.clone(),
        db: plan.db.clone(),
        marker: "true".into(),
        sequence: format!("[null,\"{}\"]", plan.consistent_point).into(),
        started_micros,
        tx_id,
        lsn: plan.consistent_point as i64,
        position: match &plan.positions {
            Some((rows, _)) => rows.clone(),
            None => PgOffset {
                lsn: plan.consistent_point,
                tx: None,
                snapshot_completed: false,
            }
            .position(),
        },
        batch: BatchCut::new(
            ctx.limits().max_batch_size.clamp(1, PIECE),
            ctx.limits().max_batch_bytes(),
        ),
    });
    let (tx, rx) = mpsc::channel::<Piece>(2 * threads);
    for worker in 1..threads {
        spawn_reader(worker, plan.info.clone(), shared.clone(), tx.clone())?;
    }
    let done = match &plan.positions {
        Some((_, done)) => done.clone(),
        None => PgOffset {
            lsn: plan.consistent_point,
            tx: None,
            snapshot_completed: true,
        }
        .position(),
    };
    let mut collector = Collector::new(plan.tables.len(), &shared.units, done);
    if let Some(n) = plan.notifications {
        let names: Vec<String> = plan
            .tables
            .iter()
            .map(|t| format!("{}.{}", t.schema_name, t.table))
            .collect();
        collector.notes = Some(Notes {
            builder: n.clone(),
            collections: names.join(","),
            names,
            position: shared.position.clone(),
        });
    }
    let (rows, ()) = tokio::join!(collector.run(rx, ctx), read_and_report(client, &shared, tx));
    let rows = rows?;
    client.batch_execute("COMMIT").await.map_err(q)?;
    Ok((rows, Some(announced)))
}

/// The snapshot's tables (`schema.table`) with the rows PostgreSQL's statistics estimate each
/// holds (`pg_class.reltuples`; none for a table never analyzed or vacuumed), in one query of
/// the snapshot's transaction (a failure is the snapshot's: the transaction is aborted).
async fn estimates(
    client: &Client,
    tables: &[Arc<TableSchema>],
) -> Result<Vec<(String, Option<u64>)>, tokio_postgres::Error> {
    let oids: Vec<u32> = tables.iter().map(|t| t.oid).collect();
    let rows = client
        .query(
            "SELECT oid, reltuples::bigint FROM pg_class WHERE oid = ANY($1)",
            &[&oids],
        )
        .await?;
    let by_oid: std::collections::HashMap<u32, i64> = (rows.iter())
        .filter_map(|r| Some((r.try_get::<_, u32>(0).ok()?, r.try_get::<_, i64>(1).ok()?)))
        .collect();
    Ok(tables
        .iter()
        .map(|t| {
            let estimate = by_oid.get(&t.oid).and_then(|n| u64::try_from(*n).ok());
            (format!("{}.{}", t.schema_name, t.table), estimate)
        })
        .collect())
}

/// The `CREATE` schema change event of every table, at the snapshot's start.
async fn schema_events(
    client: &Client,
    plan: &SnapshotPlan<'_>,
    changes: &SchemaChanges,
    started_micros: i64,
    tx_id: i64,
) -> Result<Vec<ChangeEvent>, PgError> {
    let position = PgOffset {
        lsn: plan.consistent_point,
        tx: None,
        snapshot_completed: false,
    }
    .position();
    let marker: Arc<str> = "true".into();
    let mut events = Vec::with_capacity(plan.tables.len());
    for table in plan.tables {
        let description = describe(
            client,
            table.oid,
            &table.schema_name,
            &table.table,
            &table.primary_key,
        )
        .await?;
        let info = SourceInfo {
            name: &plan.prefix,
            db: &plan.db,
            ts_micros: started_micros,
            snapshot: &marker,
            sequence: None,
            tx_id: Some(tx_id),
            lsn: Some(plan.consistent_point as i64),
        };
        events.push(changes.event(
            ChangeKind::Create,
            &description,
            table.source(&info),
            position.clone(),
        ));
    }
    Ok(events)
}

/// Cuts large tables with a single integer key into key ranges (only when reading in parallel).
async fn plan_units(client: &Client, plan: &SnapshotPlan<'_>) -> Result<Vec<Unit>, PgError> {
    let mut units = Vec::with_capacity(plan.tables.len());
    for (t, table) in plan.tables.iter().enumerate() {
        let name = format!("{}.{}", table.schema_name, table.table);
        let key = match &table.int_key {
            Some(k)
                if plan.threads > 1
                    && plan.chunk_size > 0
                    && !plan.overrides.contains_key(&name) =>
            {
                k
            }
            _ => {
                units.push(Unit {
                    table: t,
                    range: None,
                });
                continue;
            }
        };
        let qualified = format!(
            "{}.{}",
            quote_ident(&table.schema_name),
            quote_ident(&table.table)
        );
        let row = client
            .query_one(
                &format!(
                    "SELECT (SELECT reltuples::bigint FROM pg_class WHERE oid = $1::text::regclass), min({k})::bigint, max({k})::bigint FROM {qualified}",
                    k = quote_ident(key)
                ),
                &[&qualified],
            )
            .await
            .map_err(|e| PgError::query(format!("planning the snapshot of {name}"), e))?;
        let (estimate, min, max): (Option<i64>, Option<i64>, Option<i64>) =
            (row.get(0), row.get(1), row.get(2));
        let (Some(min), Some(max)) = (min, max) else {
            units.push(Unit {
                table: t,
                range: None,
            });
            continue;
        };
        let span = (i128::from(max) - i128::from(min) + 1).max(1) as u128;
        let rows = match estimate {
            Some(n) if n > 0 => n as u128,
            _ => span,
        };
        let chunks = rows
            .div_ceil(u128::from(plan.chunk_size))
            .clamp(1, u128::from(MAX_CHUNKS))
            .min(span);
        let step = span.div_ceil(chunks);
        let mut lo: Option<i64> = None;
        for c in 1..chunks {
            let bound = (i128::from(min) + (c * step) as i128) as i64;
            units.push(Unit {
                table: t,
                range: Some((lo, Some(bound))),
            });
            lo = Some(bound);
        }
        units.push(Unit {
            table: t,
            range: if chunks > 1 { Some((lo, None)) } else { None },
        });
    }
    Ok(units)
}

/// A reader thread with its own connection and runtime.
fn spawn_reader(
    worker: usize,
    info: ConnInfo,
    shared: Arc<Shared>,
    tx: mpsc::Sender<Piece>,
) -> Result<(), PgError> {
    let failed_tx = tx.clone();
    crate::postgres::spawn_with_runtime(
        format!("sluice-snapshot-{worker}"),
        &format!("snapshot reader {worker}"),
        move |e| {
            let _ = failed_tx.blocking_send(Piece::Failed(e));
        },
        move || async move {
            let client = match info.connect("sluice-snapshot").await {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Piece::Failed(e)).await;
                    return;
                }
            };
            if let Err(e) = client
                .batch_execute(&begin_sql(&shared.snapshot_name))
                .await
            {
                let _ = tx
                    .send(Piece::Failed(PgError::query(
                        "importing the exported snapshot",
                        e,
                    )))
                    .await;
                return;
            }
            read_and_report(&client, &shared, tx).await;
            let _ = client.batch_execute("COMMIT").await;
        },
    )
}

/// Reads units until none is left; a failure is sent to the collector.
async fn read_and_report(client: &Client, shared: &Shared, tx: mpsc::Sender<Piece>) {
    loop {
        let i = shared.next.fetch_add(1, Ordering::Relaxed);
        let Some(unit) = shared.units.get(i) else {
            return;
        };
        match read_unit(client, shared, unit, &tx).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                let _ = tx.send(Piece::Failed(e)).await;
                return;
            }
        }
    }
}

/// The SELECT of one unit: the table's override, or its columns with the signal's condition
/// and the unit's key range.
fn unit_select(shared: &Shared, unit: &Unit) -> String {
    let table = &shared.tables[unit.table];
    let columns = table
        .column_names()
        .map(quote_ident)
        .collect::<Vec<_>>()
        .join(", ");
    match shared
        .overrides
        .get(&format!("{}.{}", table.schema_name, table.table))
    {
        Some(custom) => custom.trim().trim_end_matches(';').to_owned(),
        None => {
            let mut select = format!(
                "SELECT {columns} FROM {}.{}",
                quote_ident(&table.schema_name),
                quote_ident(&table.table)
            );
            let mut conditions: Vec<String> = shared
                .conditions
                .get(&format!("{}.{}", table.schema_name, table.table))
                .map(|c| format!("({c})"))
                .into_iter()
                .collect();
            if let (Some((lo, hi)), Some(key)) = (unit.range, &table.int_key) {
                let key = quote_ident(key);
                conditions.extend(lo.map(|lo| format!("{key} >= {lo}")));
                conditions.extend(hi.map(|hi| format!("{key} < {hi}")));
            }
            if !conditions.is_empty() {
                select.push_str(" WHERE ");
                select.push_str(&conditions.join(" AND "));
            }
            select
        }
    }
}

/// Reads one unit with COPY (TCP backpressure holds the server while the channel is full).
/// Returns `false` when the collector is gone.
async fn read_unit(
    client: &Client,
    shared: &Shared,
    unit: &Unit,
    tx: &mpsc::Sender<Piece>,
) -> Result<bool, PgError> {
    let table = &shared.tables[unit.table];
    let what = || format!("snapshot of {}.{}", table.schema_name, table.table);
    let select = unit_select(shared, unit);
    let stream = client
        .copy_out(&format!("COPY ({select}) TO STDOUT"))
        .await
        .map_err(|e| PgError::query(what(), e))?;
    futures_util::pin_mut!(stream);
    let info = SourceInfo {
        name: &shared.prefix,
        db: &shared.db,
        ts_micros: shared.started_micros,
        snapshot: &shared.marker,
        sequence: Some(shared.sequence.clone()),
        tx_id: Some(shared.tx_id),
        lsn: Some(shared.lsn),
    };
    // Every row of the snapshot has the same `source` block (until the first and the last
    // get their markers): built once, shared.
    let source = table.source(&info).into_shared();
    let mut cut = shared.batch.clone();
    let mut events: Vec<ChangeEvent> = Vec::with_capacity(cut.max_events());
    let what = what();
    // The server sends one COPY message per row: rows are gathered and decoded in runs of
    // about PARSE_BYTES, so per-run costs are not paid per row.
    const PARSE_BYTES: usize = 64 * 1024;
    let mut carry: Vec<u8> = Vec::with_capacity(PARSE_BYTES + 4096);
    let mut ended = false;
    while !ended {
        match futures_util::StreamExt::next(&mut stream).await {
            Some(chunk) => {
                let chunk = chunk.map_err(|e| PgError::query(what.clone(), e))?;
                carry.extend_from_slice(&chunk);
                if carry.len() < PARSE_BYTES {
                    continue;
                }
            }
            None => ended = true,
        }
        let mut full = Vec::new();
        let consumed = for_each_line(&carry, &what, |cells| {
            match table.read_event(cells, &source, shared.position.clone()) {
                Ok(event) => events.push(event),
                Err(e) => table
                    .unreadable(ReadPath::Snapshot, e, cells)
                    .map_err(PgError::Refused)?,
            }
            if cut.is_full(&events) {
                let bytes = cut.taken();
                let next = Vec::with_capacity(cut.max_events());
                full.push((std::mem::replace(&mut events, next), bytes));
            }
            Ok(())
        })?;
        carry.drain(..consumed);
        for (batch, bytes) in full {
            if tx
                .send(Piece::Rows(unit.table, batch, bytes))
                .await
                .is_err()
            {
                return Ok(false);
            }
        }
    }
    cut.is_full(&events);
    let bytes = cut.taken();
    if !events.is_empty()
        && tx
            .send(Piece::Rows(unit.table, events, bytes))
            .await
            .is_err()
    {
        return Ok(false);
    }
    Ok(tx.send(Piece::Done(unit.table)).await.is_ok())
}

/// Marks and emits what the readers send.
struct Collector {
    /// Units still being read, per table.
    remaining: Vec<usize>,
    tables_left: usize,
    /// Each table's latest row, held back until the next one (or the table's end) tells its
    /// marker.
    pending: Vec<Option<ChangeEvent>>,
    seen: Vec<bool>,
    rows: u64,
    done: Position,
    /// Rows per table, for notifications.
    per_table: Vec<u64>,
    notes: Option<Notes>,
}

/// `Initial Snapshot` notifications (Debezium's: `STARTED`, `IN_PROGRESS` per table,
/// `TABLE_SCAN_COMPLETED` per table, `COMPLETED`), each with a fresh id.
struct Notes {
    builder: Notifications,
    names: Vec<String>,
    collections: String,
    position: Position,
}

impl Notes {
    fn event(
        &self,
        kind: &'static str,
        data: Vec<(&'static str, String)>,
        position: &Position,
    ) -> ChangeEvent {
        tracing::info!(notification = kind, data = ?data, "Initial snapshot.");
        self.builder.event_now(
            &Notification::initial_snapshot(kind, data),
            position.clone(),
        )
    }

    fn table_started(&self, t: usize) -> ChangeEvent {
        self.event(
            "IN_PROGRESS",
            vec![
                ("current_collection_in_progress", self.names[t].clone()),
                ("data_collections", self.collections.clone()),
            ],
            &self.position,
        )
    }

    fn table_done(&self, t: usize, rows: u64) -> ChangeEvent {
        self.event(
            "TABLE_SCAN_COMPLETED",
            vec![
                ("scanned_collection", self.names[t].clone()),
                ("total_rows_scanned", rows.to_string()),
                ("status", "SUCCEEDED".to_owned()),
                ("data_collections", self.collections.clone()),
            ],
            &self.position,
        )
    }
}

impl Collector {
    fn new(tables: usize, units: &[Unit], done: Position) -> Self {
        let mut remaining = vec![0; tables];
        for u in units {
            remaining[u.table] += 1;
        }
        Collector {
            tables_left: remaining.iter().filter(|n| **n > 0).count(),
            remaining,
            pending: (0..tables).map(|_| None).collect(),
            seen: vec![false; tables],
            rows: 0,
            done,
            per_table: vec![0; tables],
            notes: None,
        }
    }

    async fn run(
        mut self,
        mut rx: mpsc::Receiver<Piece>,
        ctx: &mut SourceContext,
    ) -> Result<u64, PgError> {
        let mut cut = BatchCut::for_limits(ctx.limits());
        let mut batch: Vec<ChangeEvent> = Vec::with_capacity(cut.max_events());
        if let Some(notes) = &self.notes {
            batch.push(notes.event("STARTED", Vec::new(), &notes.position));
        }
        while self.tables_left > 0 {
            let Some(piece) = rx.recv().await else {
                if ctx.is_stopping() {
                    return Ok(self.rows);
                }
                return Err(PgError::Replication(
                    "the snapshot readers ended before the snapshot was complete".into(),
                ));
            };
            match piece {
                Piece::Failed(e) => return Err(e),
                Piece::Rows(t, events, bytes) => {
                    if let (false, Some(notes)) = (self.seen[t], &self.notes) {
                        batch.push(notes.table_started(t));
                    }
                    cut.is_full(&batch);
                    self.per_table[t] += events.len() as u64;
                    for mut event in events {
                        if self.rows == 0 {
                            set_marker(&mut event, "first");
                        } else if !self.seen[t] {
                            set_marker(&mut event, "first_in_data_collection");
                        }
                        self.seen[t] = true;
                        self.rows += 1;
                        if let Some(previous) = self.pending[t].replace(event) {
                            batch.push(previous);
                        }
                    }
                    // The reader counted the rows' bytes (one held back or not, near enough).
                    cut.counted_elsewhere(batch.len(), bytes);
                }
                Piece::Done(t) => {
                    self.remaining[t] -= 1;
                    if self.remaining[t] == 0 {
                        self.tables_left -= 1;
                        if let Some(mut last) = self.pending[t].take() {
                            if self.tables_left == 0 {
                                set_marker(&mut last, "last");
                                last.position = self.done.clone();
                            } else {
                                set_marker(&mut last, "last_in_data_collection");
                            }
                            batch.push(last);
                        }
                        if let Some(notes) = &self.notes {
                            if !self.seen[t] {
                                batch.push(notes.table_started(t));
                            }
                            let mut done = notes.table_done(t, self.per_table[t]);
                            if self.tables_left == 0 {
                                done.position = self.done.clone();
                            }
                            batch.push(done);
                        }
                    }
                }
            }
            if cut.is_full(&batch)
                && ctx
                    .emit_cut(Batch::new(std::mem::take(&mut batch)), &mut cut)
                    .await
                    .is_err()
            {
                return Ok(self.rows);
            }
        }
        if let Some(notes) = &self.notes {
            batch.push(notes.event("COMPLETED", Vec::new(), &self.done));
        }
        let batch = Batch {
            events: batch,
            position: Some(self.done),
        };
        let _ = ctx.emit_cut(batch, &mut cut).await;
        Ok(self.rows)
    }
}

fn set_marker(event: &mut ChangeEvent, marker: &str) {
    let Some(value) = event.value.as_mut().and_then(|v| v.value.as_struct_mut()) else {
        return;
    };
    if let Some(source) = value.get_mut("source").and_then(|s| s.as_struct_mut()) {
        source.set("snapshot", sluice_engine::Value::from(marker));
    }
}
