//! The chunk reader: a thread with its own connection and runtime that reads an incremental
//! snapshot's chunks ahead of the stream, so that the chunk queries and the decoding of their
//! rows overlap the stream's work instead of pausing it.
//!
//! Per chunk, in this order (the order is what makes the windows exact):
//! 1. a permit (at most `windows` chunks are read and not yet emitted: memory follows the chunk
//!    size);
//! 2. `Announce` to the stream: sent before the open watermark is written, so when the stream
//!    meets that watermark in the log the window is known. Read-only: the reader waits until the
//!    stream has the announcement; every change the stream handles afterwards evicts, and every
//!    change it handled before is visible to the chunk's transaction, which starts later;
//! 3. the open watermark, written in one statement with the previous chunk's close watermark
//!    (`insert_insert`: a close row; `insert_delete`: the deletion of its open row);
//! 4. the chunk query, in a repeatable-read transaction whose in-progress transactions travel
//!    with the rows (the stream checks them against what it streamed before the window opened);
//! 5. the previous chunk's rows, decoded while this query ran, as a `Chunk` to the stream: at
//!    most one chunk query after their close watermark, which the stream waits for if it meets
//!    the close first. Read-only: no watermarks; the WAL position after the query travels with
//!    the rows and the window closes once the stream is past it.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_engine::Position;
use tokio::sync::{mpsc, oneshot, Notify, OwnedSemaphorePermit, Semaphore};
use tokio_postgres::Client;

use crate::postgres::capture::incremental::Progress;
use crate::postgres::config::WatermarkStrategy;
use crate::postgres::error::PgError;
use crate::postgres::records::table::{SourceInfo, TableSchema};
use crate::postgres::server::catalog::{quote_ident, ConnInfo};
use crate::postgres::values::types::ReadPath;
use crate::postgres::wire::copy::{for_each_line, last_line_fields};
use sluice_kit::incremental::{ChunkEnd, Held, KeyBuffer};
use sluice_kit::signal::{WINDOW_CLOSE, WINDOW_OPEN};

use super::sql::{copy_in_snapshot, current_lsn, key_types, literal, max_key};

/// What the reader tells the stream.
#[derive(Debug)]
pub(crate) enum Msg {
    /// A query with the signal's `additional-conditions` failed for what it says: the
    /// snapshot is aborted with this reason, the stream goes on.
    Aborted(String),
    /// A chunk is about to be read (its open watermark follows). Read-only: `ack` is answered
    /// once the window is open in the stream.
    Announce {
        id: String,
        oid: u32,
        ack: Option<oneshot::Sender<()>>,
    },
    /// A chunk's rows.
    Chunk(Box<Chunk>),
    /// Tables passed over (empty, unknown or keyless): where reading goes on (`None`: nothing
    /// left; the reader has ended). `empty`: a table found empty, for its notification.
    Progress {
        progress: Option<Progress>,
        empty: Option<String>,
    },
    /// The reader failed; the stream fails with it (and restarts from its committed position).
    Failed(PgError),
}

/// A chunk read, waiting for its window to close in the stream: its rows (the kit's DBLog
/// buffer, evicted by the stream's changes in the window) and bookkeeping, and what the
/// PostgreSQL source keeps with them.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub id: String,
    pub held: Held<Option<String>, Kept>,
}

/// What the source keeps with a chunk's rows until its window closes.
#[derive(Debug)]
pub(crate) struct Kept {
    pub table: Arc<TableSchema>,
    /// Read-only: the window closes once the stream reaches this LSN.
    pub close_at: Option<u64>,
    /// Transactions (low 32 bits of their ids) in progress for the chunk query's snapshot.
    pub xip: Vec<u32>,
    /// Released when the chunk is emitted (or dropped): the reader may read one more.
    pub _permit: OwnedSemaphorePermit,
}

/// What a reader needs.
pub(crate) struct Settings {
    pub info: ConnInfo,
    pub tables: HashMap<String, Arc<TableSchema>>,
    pub progress: Progress,
    pub chunk_size: usize,
    /// A chunk's COPY text is cut at the first row end past this many bytes (the rest of the
    /// chunk is read as the next one), so large rows do not make large chunks.
    pub chunk_bytes: usize,
    pub strategy: WatermarkStrategy,
    pub read_only: bool,
    pub signal_table: String,
    pub prefix: Arc<str>,
    pub db: Arc<str>,
}

/// The stream's end of a running reader. Dropping it stops the reader (after its current
/// query at most).
#[derive(Debug)]
pub(crate) struct Handle {
    pub rx: mpsc::UnboundedReceiver<Msg>,
    permits: Arc<Semaphore>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.permits.close();
    }
}

/// Starts a reader thread; at most `windows` chunks are read ahead of the stream.
pub(crate) fn spawn(
    settings: Settings,
    wake: Arc<Notify>,
    windows: usize,
) -> Result<Handle, PgError> {
    let (tx, rx) = mpsc::unbounded_channel();
    let permits = Arc::new(Semaphore::new(windows.max(1)));
    let reader = Reader {
        marker: "incremental".into(),
        key_types: HashMap::new(),
        statements: HashMap::new(),
        permits: permits.clone(),
        tx,
        wake,
        rows_that_fit: None,
        s: settings,
    };
    let (failed_tx, failed_wake) = (reader.tx.clone(), reader.wake.clone());
    crate::postgres::spawn_with_runtime(
        "sluice-chunks".into(),
        "the incremental snapshot reader",
        move |e| {
            let _ = failed_tx.send(Msg::Failed(e));
            failed_wake.notify_one();
        },
        move || reader.run(),
    )?;
    Ok(Handle { rx, permits })
}

/// A table (oid), its key columns and its column signature.
type KeyTypesOf = (u32, Vec<usize>, Vec<(String, u32, i32)>);

struct Reader {
    s: Settings,
    marker: Arc<str>,
    /// Key column types by table and key columns (looked up once, not per chunk).
    key_types: HashMap<KeyTypesOf, Vec<String>>,
    /// The watermark statements, prepared once.
    statements: HashMap<String, tokio_postgres::Statement>,
    permits: Arc<Semaphore>,
    tx: mpsc::UnboundedSender<Msg>,
    wake: Arc<Notify>,
    /// Rows per chunk once a chunk was cut by bytes: the next queries ask for no more.
    rows_that_fit: Option<usize>,
}

/// Why reading ended early.
enum End {
    /// The stream let go of the reader.
    Stopped,
    Failed(PgError),
    /// A query with a filter was refused (see [`Msg::Aborted`]).
    Aborted(String),
}

/// A failure of a query that carries a user's filter: refused statements abort the snapshot.
fn filtered(condition: &Option<String>, e: PgError) -> End {
    match condition {
        Some(c) if e.is_statement_error() => {
            End::Aborted(format!("the additional condition `{c}` failed: {e}"))
        }
        _ => End::Failed(e),
    }
}

impl From<PgError> for End {
    fn from(e: PgError) -> Self {
        End::Failed(e)
    }
}

fn now_since_epoch() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

impl Reader {
    /// Sends to the stream; `false` when the stream let go.
    fn send(&self, msg: Msg) -> bool {
        let sent = self.tx.send(msg).is_ok();
        self.wake.notify_one();
        sent
    }

    fn send_or_stop(&self, msg: Msg) -> Result<(), End> {
        if self.send(msg) {
            Ok(())
        } else {
            Err(End::Stopped)
        }
    }

    async fn run(mut self) {
        let client = match self.s.info.connect("sluice-incremental-snapshot").await {
            Ok(c) => c,
            Err(e) => {
                self.send(Msg::Failed(e));
                return;
            }
        };
        match self.read_all(&client).await {
            Ok(()) | Err(End::Stopped) => {}
            Err(End::Failed(e)) => {
                self.send(Msg::Failed(e));
            }
            Err(End::Aborted(reason)) => {
                self.send(Msg::Aborted(reason));
            }
        }
    }

    /// Reads chunks until no table is left. A chunk's close watermark waits for the next
    /// chunk's open one and both go in one statement: one commit per chunk, not two. A chunk's
    /// rows are decoded (on a blocking thread) while the server runs the next chunk's query.
    async fn read_all(&mut self, client: &Client) -> Result<(), End> {
        // Without sorts and bitmap scans the chunk query walks the key index: without
        // statistics (a table just loaded, not analyzed yet) the planner guesses that a key
        // range holds a few rows, scans the whole range with a bitmap and sorts it (77 ms
        // instead of 1 ms for 1024 of 300k rows). The connection is the reader's own.
        client
            .batch_execute("SET enable_sort = off; SET enable_bitmapscan = off")
            .await
            .map_err(|e| PgError::query("setting up the chunk reader's connection", e))?;
        let mut state = Pipeline::default();
        let read = self.read_chunks(client, &mut state).await;
        // What was fetched goes out, and a window whose close is still to be written is
        // closed, even when reading stops early, so that the stream is not left waiting.
        if let Err(End::Failed(e)) = self.flush(client, &mut state).await {
            tracing::debug!(error = %e, "Incremental snapshot: the last chunk was not handed over or closed.");
        }
        read
    }

    /// Decodes and sends the fetched chunk, then writes its close watermark.
    async fn flush(&mut self, client: &Client, state: &mut Pipeline) -> Result<(), End> {
        if let Some(fetched) = state.fetched.take() {
            let chunk = fetched.decode(self).await?;
            self.send_or_stop(Msg::Chunk(Box::new(chunk)))?;
        }
        if let Some(id) = state.pending.take() {
            self.watermarks(client, Some(&id), None).await?;
        }
        Ok(())
    }

    async fn read_chunks(&mut self, client: &Client, state: &mut Pipeline) -> Result<(), End> {
        loop {
            let p = self.s.progress.clone();
            if p.tables.is_empty() {
                self.flush(client, state).await?;
                return self.send_or_stop(Msg::Progress {
                    progress: None,
                    empty: None,
                });
            }
            let Some(query) = self.chunk_query(client, state, &p).await? else {
                continue;
            };
            let permit = self.permit(client, state).await?;
            let chunk_id = self.announce(client, state, &p, query.table.oid).await?;
            self.fetch(client, state, &p, query, chunk_id, permit)
                .await?;
        }
    }

    /// Passes over the current table (not captured, no key, no rows): what was fetched goes
    /// out first, then the progress without it.
    async fn pass_over(
        &mut self,
        client: &Client,
        state: &mut Pipeline,
        p: &Progress,
        empty: Option<String>,
    ) -> Result<(), End> {
        let mut rest = p.clone();
        rest.table_done();
        // Messages keep their order: the chunk before goes first.
        self.flush(client, state).await?;
        self.s.progress = rest.clone();
        self.send_or_stop(Msg::Progress {
            progress: (!rest.tables.is_empty()).then_some(rest),
            empty,
        })
    }

    /// The next chunk's query of the current table; `None` when the table was passed over.
    async fn chunk_query(
        &mut self,
        client: &Client,
        state: &mut Pipeline,
        p: &Progress,
    ) -> Result<Option<ChunkQuery>, End> {
        let name = p.tables[0].clone();
        let Some(table) = self.s.tables.get(&name).cloned() else {
            tracing::warn!(id = %p.id, table = %name, "Incremental snapshot: the table is not captured; passed over.");
            self.pass_over(client, state, p, None).await?;
            return Ok(None);
        };
        let keys: Vec<usize> = match &p.surrogate_key {
            Some(k) => table.column_index(k).into_iter().collect(),
            None => table.key_indexes().to_vec(),
        };
        if keys.is_empty() {
            tracing::warn!(id = %p.id, table = %name, "Incremental snapshot: the table has no key (set `surrogate-key`); passed over.");
            self.pass_over(client, state, p, None).await?;
            return Ok(None);
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
                let last = max_key(client, &qualified, &keys, &names, &condition, &name)
                    .await
                    .map_err(|e| filtered(&condition, e))?;
                let Some(k) = last else {
                    self.pass_over(client, state, p, Some(name)).await?;
                    return Ok(None);
                };
                k
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
        conditions.extend(condition.clone());
        let limit = self.rows_that_fit.unwrap_or(self.s.chunk_size);
        let select = format!(
            "SELECT {} FROM {qualified} WHERE {} ORDER BY {key_list} LIMIT {}",
            names
                .iter()
                .map(|n| quote_ident(n))
                .collect::<Vec<_>>()
                .join(", "),
            conditions.join(" AND "),
            limit
        );
        Ok(Some(ChunkQuery {
            name,
            table,
            keys,
            max_key,
            condition,
            select,
            limit,
        }))
    }

    /// A window permit; when none is free, the fetched chunk and its close go out before
    /// waiting (the stream frees a permit when it closes a window).
    async fn permit(
        &mut self,
        client: &Client,
        state: &mut Pipeline,
    ) -> Result<OwnedSemaphorePermit, End> {
        match self.permits.clone().try_acquire_owned() {
            Ok(permit) => Ok(permit),
            Err(tokio::sync::TryAcquireError::Closed) => Err(End::Stopped),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                self.flush(client, state).await?;
                self.permits
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| End::Stopped)
            }
        }
    }

    /// Announces the next chunk's window to the stream and opens it: its open watermark (with
    /// the previous chunk's close), or under `read.only` the stream's acknowledgement.
    async fn announce(
        &mut self,
        client: &Client,
        state: &mut Pipeline,
        p: &Progress,
        oid: u32,
    ) -> Result<String, End> {
        // Unique across restarts: a chunk read again after a crash gets new watermarks.
        let nonce = now_since_epoch().as_nanos() as u64;
        let chunk_id = format!("{}-{}-{nonce:x}", p.id, p.chunks + 1);
        let (ack, acked) = if self.s.read_only {
            let (a, b) = oneshot::channel();
            (Some(a), Some(b))
        } else {
            (None, None)
        };
        self.send_or_stop(Msg::Announce {
            id: chunk_id.clone(),
            oid,
            ack,
        })?;
        if let Some(acked) = acked {
            acked.await.map_err(|_| End::Stopped)?;
        } else {
            let close = state.pending.take();
            self.watermarks(client, close.as_deref(), Some(&chunk_id))
                .await?;
        }
        Ok(chunk_id)
    }

    /// Runs the chunk's query (decoding the previous chunk meanwhile) and keeps the result as
    /// the fetched chunk, with the progress after it.
    async fn fetch(
        &mut self,
        client: &Client,
        state: &mut Pipeline,
        p: &Progress,
        query: ChunkQuery,
        chunk_id: String,
        permit: OwnedSemaphorePermit,
    ) -> Result<(), End> {
        let ChunkQuery {
            name,
            table,
            keys,
            max_key,
            condition,
            select,
            limit,
        } = query;
        // The previous chunk is decoded while the server runs this chunk's query.
        let decoding = state.fetched.take().map(|f| f.start_decoding(self));
        let started = std::time::Instant::now();
        let what = format!("incremental snapshot of {name}");
        let raw = copy_in_snapshot(client, &select, &what, self.s.chunk_bytes).await;
        if let Some(decoding) = decoding {
            let chunk = finish_decoding(decoding).await?;
            self.send_or_stop(Msg::Chunk(Box::new(chunk)))?;
        }
        let (raw, cut, xip) = raw.map_err(|e| filtered(&condition, e))?;
        let read = raw.iter().filter(|b| **b == b'\n').count();
        if cut {
            self.rows_that_fit = Some(read.max(1));
        }
        tracing::debug!(rows = read, select = %select, elapsed = ?started.elapsed(), "Incremental snapshot chunk read.");
        // A chunk cut short by its bytes is not the table's last, nor is a full one (even at
        // the maximum key: the next, empty, chunk ends the table).
        let last_of_table = !cut && read < limit;
        if last_of_table {
            // The next table's rows may be of another size.
            self.rows_that_fit = None;
        }
        let emitted = p.after_chunk(ChunkEnd {
            read,
            last_key: last_line_fields(&raw, &keys),
            max_key,
            last_of_table,
        });
        let next = emitted.next.clone();
        // Read-only: the window is open from the announcement on (a change streamed after it
        // replaces the chunk's row, which is always safe) until the stream reaches the WAL
        // position read now, past every transaction the chunk's snapshot could see.
        let close_at = if self.s.read_only {
            Some(current_lsn(client).await?)
        } else {
            None
        };
        self.s.progress = next.clone();
        state.fetched = Some(Fetched {
            raw,
            name,
            chunk: Chunk {
                id: chunk_id.clone(),
                held: Held {
                    rows: KeyBuffer::default(),
                    emitted,
                    extra: Kept {
                        table,
                        close_at,
                        xip,
                        _permit: permit,
                    },
                },
            },
        });
        if !self.s.read_only {
            state.pending = Some(chunk_id);
        }
        Ok(())
    }

    /// Writes in one statement (one commit) the close watermark of chunk `close` and the
    /// open watermark of chunk `open`: rows (`insert_insert`), or under `insert_delete` the
    /// deletion of the open row as the close.
    async fn watermarks(
        &mut self,
        client: &Client,
        close: Option<&str>,
        open: Option<&str>,
    ) -> Result<(), PgError> {
        let data = serde_json::json!({ "ts_ms": now_since_epoch().as_millis() as u64 }).to_string();
        let table = &self.s.signal_table;
        let delete = self.s.strategy == WatermarkStrategy::InsertDelete;
        let (sql, params): (String, Vec<String>) = match (close, open) {
            (None, None) => return Ok(()),
            (Some(c), None) if delete => (
                format!("DELETE FROM {table} WHERE id = $1"),
                vec![format!("{c}-open")],
            ),
            (Some(c), Some(o)) if delete => (
                format!("WITH closed AS (DELETE FROM {table} WHERE id = $1) INSERT INTO {table} (id, type, data) VALUES ($2, $3, $4)"),
                vec![format!("{c}-open"), format!("{o}-open"), WINDOW_OPEN.into(), data],
            ),
            (Some(c), None) => (
                format!("INSERT INTO {table} (id, type, data) VALUES ($1, $2, $3)"),
                vec![format!("{c}-close"), WINDOW_CLOSE.into(), data],
            ),
            (Some(c), Some(o)) => (
                format!("INSERT INTO {table} (id, type, data) VALUES ($1, $2, $3), ($4, $5, $6)"),
                vec![format!("{c}-close"), WINDOW_CLOSE.into(), data.clone(), format!("{o}-open"), WINDOW_OPEN.into(), data],
            ),
            (None, Some(o)) => (
                format!("INSERT INTO {table} (id, type, data) VALUES ($1, $2, $3)"),
                vec![format!("{o}-open"), WINDOW_OPEN.into(), data],
            ),
        };
        let statement = match self.statements.get(&sql) {
            Some(statement) => statement.clone(),
            None => {
                let statement = client
                    .prepare(&sql)
                    .await
                    .map_err(|e| PgError::query("preparing the watermark statement", e))?;
                self.statements.insert(sql.clone(), statement.clone());
                statement
            }
        };
        let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
            .iter()
            .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
            .collect();
        let written = client.execute(&statement, &params).await;
        if written.is_err() {
            // Prepared again next time (the table may have changed under the statement).
            self.statements.remove(&sql);
        }
        written
            .map_err(|e| {
                PgError::query(
                    "writing watermarks to the signaling table (incremental snapshots need write access to it)",
                    e,
                )
            })?;
        Ok(())
    }
}

/// One chunk's query, before it runs.
struct ChunkQuery {
    name: String,
    table: Arc<TableSchema>,
    keys: Vec<usize>,
    max_key: Vec<Option<String>>,
    condition: Option<String>,
    select: String,
    limit: usize,
}

/// The reader's chunks in flight.
#[derive(Default)]
struct Pipeline {
    /// A chunk fetched, not yet decoded and sent.
    fetched: Option<Fetched>,
    /// A chunk whose close watermark is still to be written.
    pending: Option<String>,
}

/// A chunk's COPY text, with everything about it but its rows.
struct Fetched {
    raw: Vec<u8>,
    name: String,
    /// `rows` empty until decoded.
    chunk: Chunk,
}

type Decoding = tokio::task::JoinHandle<Result<Chunk, PgError>>;

impl Fetched {
    /// Decodes on a blocking thread.
    fn start_decoding(self, reader: &Reader) -> Decoding {
        let prefix = reader.s.prefix.clone();
        let db = reader.s.db.clone();
        let marker = reader.marker.clone();
        tokio::task::spawn_blocking(move || self.decode_now(&prefix, &db, &marker))
    }

    async fn decode(self, reader: &Reader) -> Result<Chunk, PgError> {
        finish_decoding(self.start_decoding(reader)).await
    }

    /// The rows as `op: r` events.
    fn decode_now(
        mut self,
        prefix: &Arc<str>,
        db: &Arc<str>,
        marker: &Arc<str>,
    ) -> Result<Chunk, PgError> {
        let info = SourceInfo {
            name: prefix,
            db,
            ts_micros: now_since_epoch().as_micros() as i64,
            snapshot: marker,
            sequence: None,
            tx_id: None,
            lsn: None,
        };
        let table = self.chunk.held.extra.table.clone();
        let source = table.source(&info).into_shared();
        let mut rows = Vec::with_capacity(self.chunk.held.emitted.read as usize);
        for_each_line(
            &self.raw,
            &format!("incremental snapshot of {}", self.name),
            |cells| {
                match table.read_event(cells, &source, Position::Offset(0)) {
                    Ok(event) => rows.push(event),
                    Err(e) => table
                        .unreadable(ReadPath::Snapshot, e, cells)
                        .map_err(PgError::Refused)?,
                }
                Ok(())
            },
        )?;
        self.chunk.held.rows = KeyBuffer::new(rows);
        Ok(self.chunk)
    }
}

async fn finish_decoding(decoding: Decoding) -> Result<Chunk, PgError> {
    decoding.await.map_err(|e| {
        PgError::Decode(format!(
            "incremental snapshot: decoding a chunk failed: {e}"
        ))
    })?
}
