//! Incremental snapshots (Debezium's DBLog-style watermark algorithm), running inside the log
//! stream's task so that neither blocks the other for longer than one chunk query.
//!
//! Per chunk: write the open-window watermark to the signaling table, read the chunk (keys after
//! the last one read, up to the table's maximum key, in key order, `chunk.size` rows) into a
//! buffer keyed by the event key, then write the close-window watermark (`insert_insert`) or
//! delete the open one (`insert_delete`). When the stream reaches the open watermark the window
//! opens: every streamed change of a buffered key drops that key's snapshot row (the change is
//! newer). When it reaches the close watermark, the rows left are emitted as `op: r` with
//! `source.snapshot = incremental`, and the next chunk starts. The progress (tables left, last
//! key, maximum key) travels in every position, so a restart continues after the last chunk
//! whose rows were delivered.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sluice_engine::codec::{JsonEncoder, JsonOptions};
use sluice_engine::notification::Notification;
use sluice_engine::{ChangeEvent, Op, Position, Record};
use tokio_postgres::Client;

use super::catalog::quote_ident;
use super::config::{PostgresConfig, WatermarkStrategy};
use super::copy::for_each_row;
use super::error::PgError;
use super::signal::{WINDOW_CLOSE, WINDOW_OPEN};
use super::table::{Cell, SourceInfo, TableSchema};

/// What survives a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// The snapshot's id (the signal's).
    pub id: String,
    /// Tables left, `schema.table`, the current one first.
    pub tables: Vec<String>,
    /// The current table's last key read (text per key column).
    #[serde(default)]
    pub last_key: Option<Vec<Option<String>>>,
    /// The current table's maximum key when its scan started.
    #[serde(default)]
    pub max_key: Option<Vec<Option<String>>>,
    /// Extra WHERE conditions by table.
    #[serde(default)]
    pub conditions: BTreeMap<String, String>,
    /// Column used as the key instead of the primary key.
    #[serde(default)]
    pub surrogate_key: Option<String>,
    /// Chunks read so far.
    #[serde(default)]
    pub chunks: u64,
}

/// A chunk read and waiting for its window to close in the stream.
#[derive(Debug)]
struct Window {
    id: String,
    table: Arc<TableSchema>,
    open: bool,
    rows: Vec<Option<ChangeEvent>>,
    index: HashMap<Vec<u8>, usize>,
    next: Progress,
    /// Rows the chunk query returned.
    read: usize,
    /// The last key read and the table's maximum key, as notifications show them.
    last_key: String,
    max_key: String,
    /// The table's last chunk.
    last_of_table: bool,
    /// Read-only: the window closes once the stream reaches this LSN (no watermark rows).
    close_at: Option<u64>,
}

/// A table (oid), its key columns and its column signature.
type KeyTypesOf = (u32, Vec<usize>, Vec<(String, u32, i32)>);

/// A key as notifications show it: the value, or `[a, b]` for a composite key.
fn key_text(key: &[Option<String>]) -> String {
    let text = |v: &Option<String>| v.clone().unwrap_or_else(|| "null".to_owned());
    match key {
        [one] => text(one),
        many => format!("[{}]", many.iter().map(text).collect::<Vec<_>>().join(", ")),
    }
}

/// Chunks in flight. Each has its own window and the windows follow each other in the log,
/// so several can be read ahead of the stream. Measured on 1M rows (chunks of 1024, 2 cores):
/// 76k rows/s with one, 74k with two, 68k with three; the chunks are read in the stream's
/// task either way, so reading ahead only delays the stream. One.
const MAX_WINDOWS: usize = 1;

/// The incremental snapshot's state.
#[derive(Debug)]
pub struct Incremental {
    /// Where the next chunk is read from (`None`: nothing left to read).
    pub progress: Option<Progress>,
    /// What positions record: the progress after the last chunk whose rows were emitted (a
    /// restart reads again what was read ahead).
    delivered: Option<Progress>,
    /// `delivered` as JSON, rendered once per change rather than once per event.
    delivered_json: Option<Arc<str>>,
    /// Paused by a signal: no new chunk starts.
    pub paused: bool,
    windows: VecDeque<Window>,
    encoder: JsonEncoder,
    signal_table: String,
    strategy: WatermarkStrategy,
    chunk_size: usize,
    marker: Arc<str>,
    prefix: Arc<str>,
    db: Arc<str>,
    /// Notifications for the sink channel (`true`: after the rows they come with).
    pub notes: Vec<(bool, Notification)>,
    /// Whether notifications go to the sink channel (they are always logged).
    sink_notes: bool,
    /// The snapshot's tables, as notifications list them.
    collections: String,
    /// Rows read of the current table.
    scanned: u64,
    /// `read.only`: no watermark rows; a chunk's window spans from its read to the WAL
    /// position read right after it.
    read_only: bool,
    /// Key column types by table and key columns (looked up once, not per chunk; the
    /// table's signature keeps a changed column type from using a stale entry).
    key_types: HashMap<KeyTypesOf, Vec<String>>,
    /// The watermark insert, prepared once.
    insert: Option<tokio_postgres::Statement>,
}

fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

impl Incremental {
    /// State for a stream; `signal_table` is the quoted `schema.table` watermarks go to (unused
    /// with `read.only`).
    pub fn new(
        config: &PostgresConfig,
        signal_table: String,
        db: &str,
        progress: Option<Progress>,
    ) -> Self {
        Incremental {
            delivered_json: None,
            delivered: progress.clone(),
            progress,
            paused: false,
            windows: VecDeque::new(),
            encoder: JsonEncoder::new(JsonOptions {
                schemas_enable: false,
            }),
            signal_table,
            strategy: config.watermarking_strategy,
            chunk_size: config.incremental_chunk_size.max(1),
            marker: "incremental".into(),
            prefix: config.topic_prefix.as_str().into(),
            db: db.into(),
            notes: Vec::new(),
            sink_notes: config.notification_sink().is_some(),
            collections: String::new(),
            scanned: 0,
            read_only: config.read_only,
            key_types: HashMap::new(),
            insert: None,
        }
        .rendered()
    }

    /// Logs a notification and keeps it for the sink channel when that is on.
    pub fn note(
        &mut self,
        id: &str,
        kind: &'static str,
        after_rows: bool,
        data: Vec<(&'static str, String)>,
    ) {
        tracing::info!(notification = kind, id, data = ?data, "Incremental snapshot.");
        if self.sink_notes {
            self.notes.push((
                after_rows,
                Notification {
                    id: id.to_owned(),
                    kind,
                    aggregate: "Incremental Snapshot",
                    data,
                },
            ));
        }
    }

    fn rendered(mut self) -> Self {
        self.render();
        self
    }

    /// Renders `delivered` for positions; called wherever it changes.
    fn render(&mut self) {
        self.delivered_json = self
            .delivered
            .as_ref()
            .and_then(|p| serde_json::to_string(p).ok())
            .map(Into::into);
    }

    /// Starts a snapshot of `tables`, or adds them to the running one.
    pub fn execute(
        &mut self,
        id: &str,
        tables: Vec<String>,
        conditions: BTreeMap<String, String>,
        surrogate_key: Option<String>,
    ) {
        if self.progress.is_none() && self.delivered.is_none() {
            self.collections = tables.join(",");
            self.scanned = 0;
        } else {
            for t in &tables {
                if !self.collections.split(',').any(|c| c == t) {
                    self.collections = format!("{},{t}", self.collections);
                }
            }
        }
        let collections = self.collections.clone();
        self.note(
            id,
            "STARTED",
            false,
            vec![("data_collections", collections)],
        );
        let fresh = Progress {
            id: id.to_owned(),
            tables: tables.clone(),
            last_key: None,
            max_key: None,
            conditions: conditions.clone(),
            surrogate_key,
            chunks: 0,
        };
        for state in [&mut self.progress, &mut self.delivered] {
            match state {
                Some(p) => {
                    for t in &tables {
                        if !p.tables.contains(t) {
                            p.tables.push(t.clone());
                        }
                    }
                    p.conditions.extend(conditions.clone());
                }
                None => *state = Some(fresh.clone()),
            }
        }
        self.render();
    }

    /// Stops the snapshot of the matching tables (`None`: all).
    pub fn stop(&mut self, matches: Option<&dyn Fn(&str) -> bool>) {
        let Some(p) = self.delivered.clone().or_else(|| self.progress.clone()) else {
            return;
        };
        // Chunks read ahead are dropped; reading starts again from what was delivered.
        self.windows.clear();
        match matches {
            None => {
                self.note(&p.id, "ABORTED", false, Vec::new());
                self.progress = None;
                self.delivered = None;
                self.render();
            }
            Some(m) => {
                let mut p = p;
                let current = p.tables.first().cloned();
                p.tables.retain(|t| !m(t));
                if p.tables.first() != current.as_ref() {
                    p.last_key = None;
                    p.max_key = None;
                }
                let left = p.tables.join(",");
                self.note(&p.id, "ABORTED", false, vec![("data_collections", left)]);
                let left = (!p.tables.is_empty()).then_some(p);
                self.progress = left.clone();
                self.delivered = left;
                self.render();
            }
        }
    }

    /// The progress to store in positions while a snapshot runs.
    pub fn progress_json(&self) -> Option<&str> {
        self.delivered_json.as_deref()
    }

    fn key_bytes(&self, key: &Option<Record>) -> Vec<u8> {
        let mut out = Vec::new();
        self.encoder.encode_record(key.as_ref(), &mut out);
        out
    }

    /// A streamed change of table `oid`: inside an open window it supersedes the chunk's row.
    pub fn evict(&mut self, oid: u32, key: &Option<Record>) {
        if !self.windows.iter().any(|w| w.open && w.table.oid == oid) {
            return;
        }
        let bytes = self.key_bytes(key);
        for w in self
            .windows
            .iter_mut()
            .filter(|w| w.open && w.table.oid == oid)
        {
            if let Some(i) = w.index.remove(&bytes) {
                w.rows[i] = None;
            }
        }
    }

    /// A watermark row seen in the stream (`deleted`: the open row was deleted, which closes
    /// the window under `insert_delete`). Returns the chunk's rows when the window closes.
    pub fn on_watermark(
        &mut self,
        id: &str,
        kind: &str,
        deleted: bool,
    ) -> Option<Vec<ChangeEvent>> {
        if !deleted && kind == WINDOW_OPEN {
            if let Some(w) = self
                .windows
                .iter_mut()
                .find(|w| id.strip_suffix("-open") == Some(w.id.as_str()))
            {
                w.open = true;
            }
            return None;
        }
        // Windows close in log order: only the oldest one can.
        let front = self.windows.front()?;
        let closes = (kind == WINDOW_CLOSE && id.strip_suffix("-close") == Some(front.id.as_str()))
            || (deleted && id.strip_suffix("-open") == Some(front.id.as_str()));
        if !closes || !front.open {
            return None;
        }
        self.close_front()
    }

    /// Read-only: closes the oldest window when the stream has reached its end position
    /// (every transaction the chunk's snapshot could see has been streamed).
    pub fn close_reached(&mut self, lsn: u64) -> Option<Vec<ChangeEvent>> {
        let at = self.windows.front()?.close_at?;
        if lsn < at {
            return None;
        }
        self.close_front()
    }

    /// Whether a read-only window waits for the stream to reach its end.
    pub fn waits_for_lsn(&self) -> bool {
        self.windows.front().is_some_and(|w| w.close_at.is_some())
    }

    /// Closes the oldest window: its rows not evicted by the stream, to emit now.
    fn close_front(&mut self) -> Option<Vec<ChangeEvent>> {
        let w = self.windows.pop_front()?;
        let rows: Vec<ChangeEvent> = w.rows.into_iter().flatten().collect();
        let table = format!("{}.{}", w.table.schema_name, w.table.table);
        let collections = self.collections.clone();
        tracing::debug!(id = %w.next.id, table = %table, chunk = w.next.chunks, rows = rows.len(), "Incremental snapshot chunk emitted.");
        self.note(
            &w.next.id,
            "IN_PROGRESS",
            false,
            vec![
                ("current_collection_in_progress", table.clone()),
                ("maximum_key", w.max_key.clone()),
                ("last_processed_key", w.last_key.clone()),
                ("data_collections", collections.clone()),
            ],
        );
        self.scanned += w.read as u64;
        if w.last_of_table {
            let scanned = std::mem::take(&mut self.scanned);
            self.note(
                &w.next.id,
                "TABLE_SCAN_COMPLETED",
                true,
                vec![
                    ("scanned_collection", table),
                    ("total_rows_scanned", scanned.to_string()),
                    ("status", "SUCCEEDED".to_owned()),
                    ("data_collections", collections),
                ],
            );
        }
        if self.windows.is_empty() && self.progress.is_none() {
            self.note(&w.next.id, "COMPLETED", true, Vec::new());
            self.delivered = None;
        } else {
            self.delivered = Some(w.next);
        }
        self.render();
        Some(rows)
    }

    /// Whether a chunk can start now.
    pub fn ready(&self) -> bool {
        self.progress.is_some() && self.windows.len() < MAX_WINDOWS && !self.paused
    }

    /// Reads the next chunk between its watermarks (tables that are empty, unknown or keyless
    /// are passed over).
    pub async fn next_chunk(
        &mut self,
        client: &Client,
        tables: &HashMap<String, Arc<TableSchema>>,
    ) -> Result<(), PgError> {
        while self.ready() {
            let Some(p) = self.progress.clone() else {
                return Ok(());
            };
            let Some(name) = p.tables.first().cloned() else {
                self.progress = None;
                if self.windows.is_empty() {
                    self.note(&p.id, "COMPLETED", true, Vec::new());
                    self.delivered = None;
                    self.render();
                }
                return Ok(());
            };
            let mut rest = p.clone();
            rest.tables.remove(0);
            rest.last_key = None;
            rest.max_key = None;
            let Some(table) = tables.get(&name).cloned() else {
                tracing::warn!(id = %p.id, table = %name, "Incremental snapshot: the table is not captured; passed over.");
                self.progress = Some(rest);
                continue;
            };
            let keys: Vec<usize> = match &p.surrogate_key {
                Some(k) => table.column_index(k).into_iter().collect(),
                None => table.key_indexes().to_vec(),
            };
            if keys.is_empty() {
                tracing::warn!(id = %p.id, table = %name, "Incremental snapshot: the table has no key (set `surrogate-key`); passed over.");
                self.progress = Some(rest);
                continue;
            }
            let names: Vec<String> = table.column_names().map(str::to_owned).collect();
            let qualified = format!(
                "{}.{}",
                quote_ident(&table.schema_name),
                quote_ident(&table.table)
            );
            let key_list = keys
                .iter()
                .map(|&i| quote_ident(&names[i]))
                .collect::<Vec<_>>()
                .join(", ");
            let cache_key = (table.oid, keys.clone(), table.signature.clone());
            let types = match self.key_types.get(&cache_key) {
                Some(t) => t.clone(),
                None => {
                    let t = key_types(client, table.oid, &keys, &names).await?;
                    self.key_types.insert(cache_key, t.clone());
                    t
                }
            };
            let condition = p.conditions.get(&name).map(|c| format!("({c})"));
            let max_key = match &p.max_key {
                Some(k) => k.clone(),
                None => {
                    // Ordered by the table's columns (`t.`), not by the text output columns of
                    // the same names: "9995" > "19998" as text.
                    let select = format!(
                        "SELECT {} FROM {qualified} t{} ORDER BY {} LIMIT 1",
                        keys.iter()
                            .map(|&i| format!("t.{}::text", quote_ident(&names[i])))
                            .collect::<Vec<_>>()
                            .join(", "),
                        condition
                            .as_ref()
                            .map(|c| format!(" WHERE {c}"))
                            .unwrap_or_default(),
                        keys.iter()
                            .map(|&i| format!("t.{} DESC", quote_ident(&names[i])))
                            .collect::<Vec<_>>()
                            .join(", "),
                    );
                    let row = client.query_opt(&select, &[]).await.map_err(|e| {
                        PgError::query(format!("reading the last key of {name}"), e)
                    })?;
                    match row {
                        Some(r) => (0..keys.len())
                            .map(|i| r.get::<_, Option<String>>(i))
                            .collect(),
                        None => {
                            let collections = self.collections.clone();
                            self.note(
                                &p.id,
                                "TABLE_SCAN_COMPLETED",
                                true,
                                vec![
                                    ("scanned_collection", name.clone()),
                                    ("total_rows_scanned", "0".to_owned()),
                                    ("status", "SUCCEEDED".to_owned()),
                                    ("data_collections", collections),
                                ],
                            );
                            self.progress = Some(rest);
                            continue;
                        }
                    }
                }
            };
            let tuple = |values: &[Option<String>]| {
                values
                    .iter()
                    .zip(&types)
                    .map(|(v, t)| match v {
                        Some(v) => format!("{}::{t}", literal(v)),
                        None => "NULL".to_owned(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut conditions = vec![format!("({key_list}) <= ({})", tuple(&max_key))];
            if let Some(last) = &p.last_key {
                conditions.push(format!("({key_list}) > ({})", tuple(last)));
            }
            conditions.extend(condition);
            let select = format!(
                "SELECT {} FROM {qualified} WHERE {} ORDER BY {key_list} LIMIT {}",
                names
                    .iter()
                    .map(|n| quote_ident(n))
                    .collect::<Vec<_>>()
                    .join(", "),
                conditions.join(" AND "),
                self.chunk_size
            );
            // Unique across restarts: a chunk read again after a crash gets new watermarks.
            let nonce = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            let chunk_id = format!("{}-{}-{nonce:x}", p.id, p.chunks + 1);
            if !self.read_only {
                self.watermark(client, &format!("{chunk_id}-open"), WINDOW_OPEN)
                    .await?;
            }

            let mut rows = Vec::new();
            let mut index = HashMap::new();
            let mut last: Option<Vec<Option<String>>> = None;
            let ts = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros() as i64)
                .unwrap_or(0);
            let info = SourceInfo {
                name: &self.prefix,
                db: &self.db,
                ts_micros: ts,
                snapshot: &self.marker,
                sequence: None,
                tx_id: None,
                lsn: None,
            };
            let encoder = &self.encoder;
            let started = std::time::Instant::now();
            // Walk the key index: without statistics (a table just loaded, not analyzed yet)
            // the planner guesses that a key range holds a few rows, scans the whole range
            // with a bitmap and sorts it (77 ms instead of 1 ms for 1024 of 300k rows).
            client
                .batch_execute(
                    "BEGIN READ ONLY; SET LOCAL enable_sort = off; SET LOCAL enable_bitmapscan = off",
                )
                .await
                .map_err(|e| PgError::query("starting a chunk query", e))?;
            let read = for_each_row(
                client,
                &select,
                &format!("incremental snapshot of {name}"),
                |cells| {
                    let key = table.key(cells).map_err(PgError::Decode)?;
                    let after = table.row(cells).map_err(PgError::Decode)?;
                    let mut bytes = Vec::new();
                    encoder.encode_record(key.as_ref(), &mut bytes);
                    last = Some(
                        keys.iter()
                            .map(|&i| match cells.get(i) {
                                Some(Cell::Text(t)) => Some((*t).to_owned()),
                                _ => None,
                            })
                            .collect(),
                    );
                    index.insert(bytes, rows.len());
                    rows.push(Some(table.event(
                        Op::Read,
                        key,
                        None,
                        Some(after),
                        &info,
                        Position::Offset(0),
                    )));
                    Ok(())
                },
            )
            .await;
            let end = if read.is_ok() { "COMMIT" } else { "ROLLBACK" };
            let ended = client.batch_execute(end).await;
            read?;
            ended.map_err(|e| PgError::query("ending a chunk query", e))?;
            tracing::debug!(chunk = %chunk_id, rows = rows.len(), select = %select, elapsed = ?started.elapsed(), "Incremental snapshot chunk read.");
            let mut next = p.clone();
            next.chunks += 1;
            let read = rows.len();
            let last_of_table = read < self.chunk_size;
            let last_key = last.as_deref().map(key_text).unwrap_or_default();
            let max_text = key_text(&max_key);
            if last_of_table {
                next.tables.remove(0);
                next.last_key = None;
                next.max_key = None;
            } else {
                next.last_key = last;
                next.max_key = Some(max_key);
            }
            // Read-only: the window is open from the read on (a change streamed after it
            // replaces the chunk's row, which is always safe) until the stream reaches the WAL
            // position read now, past every transaction the chunk's snapshot could see.
            let close_at = if self.read_only {
                Some(current_lsn(client).await?)
            } else {
                None
            };
            match self.strategy {
                _ if self.read_only => {}
                WatermarkStrategy::InsertInsert => {
                    self.watermark(client, &format!("{chunk_id}-close"), WINDOW_CLOSE)
                        .await?
                }
                WatermarkStrategy::InsertDelete => {
                    client
                        .execute(
                            &format!("DELETE FROM {} WHERE id = $1", self.signal_table),
                            &[&format!("{chunk_id}-open")],
                        )
                        .await
                        .map_err(|e| PgError::query("deleting the open-window watermark", e))?;
                }
            }
            self.progress = (!next.tables.is_empty()).then(|| next.clone());
            self.windows.push_back(Window {
                id: chunk_id,
                table,
                open: close_at.is_some(),
                rows,
                index,
                next,
                read,
                last_key,
                max_key: max_text,
                last_of_table,
                close_at,
            });
        }
        Ok(())
    }

    async fn watermark(&mut self, client: &Client, id: &str, kind: &str) -> Result<(), PgError> {
        let data = serde_json::json!({ "ts_ms": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0) })
        .to_string();
        let insert = match &self.insert {
            Some(statement) => statement.clone(),
            None => {
                let statement = client
                    .prepare(&format!(
                        "INSERT INTO {} (id, type, data) VALUES ($1, $2, $3)",
                        self.signal_table
                    ))
                    .await
                    .map_err(|e| PgError::query("preparing the watermark insert", e))?;
                self.insert = Some(statement.clone());
                statement
            }
        };
        let written = client.execute(&insert, &[&id, &kind, &data]).await;
        if written.is_err() {
            // Prepared again next time (the table may have changed under the statement).
            self.insert = None;
        }
        written
            .map_err(|e| {
                PgError::query(
                    format!("writing the {kind} watermark to the signaling table (incremental snapshots need write access to it)"),
                    e,
                )
            })?;
        Ok(())
    }
}

/// The server's WAL position: the insert position, or the replayed one on a standby.
async fn current_lsn(client: &Client) -> Result<u64, PgError> {
    let row = client
        .query_one(
            "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text",
            &[],
        )
        .await
        .map_err(|e| PgError::query("reading the WAL position (read-only incremental snapshot)", e))?;
    let text: String = row.get(0);
    super::offset::parse_lsn(&text)
        .ok_or_else(|| PgError::Decode(format!("the server gave `{text}` as its WAL position")))
}

/// SQL type names of the key columns, for typed literals.
async fn key_types(
    client: &Client,
    oid: u32,
    keys: &[usize],
    names: &[String],
) -> Result<Vec<String>, PgError> {
    let wanted: Vec<String> = keys.iter().map(|&i| names[i].clone()).collect();
    let rows = client
        .query(
            "SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = $1 AND attname = ANY($2)",
            &[&oid, &wanted],
        )
        .await
        .map_err(|e| PgError::query("reading key column types", e))?;
    let by_name: HashMap<String, String> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    Ok(wanted
        .iter()
        .map(|n| by_name.get(n).cloned().unwrap_or_else(|| "text".into()))
        .collect())
}
