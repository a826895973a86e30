//! Incremental snapshots (Debezium's DBLog-style watermark algorithm), running beside the log
//! stream: a reader thread with its own connection reads the chunks ahead (`reader`), the
//! stream merges them.
//!
//! Per chunk: the reader writes the open-window watermark to the signaling table, reads the chunk
//! (keys after the last one read, up to the table's maximum key, in key order, `chunk.size` rows)
//! into a buffer keyed by the event key, then writes the close-window watermark (`insert_insert`)
//! or deletes the open one (`insert_delete`). When the stream reaches the open watermark the
//! window opens: every streamed change of a buffered key drops that key's snapshot row (the
//! change is newer; a change streamed before the rows arrive is remembered and applied when they
//! do). When it reaches the close watermark, the rows left are emitted as `op: r` with
//! `source.snapshot = incremental`. The progress (tables left, last key, maximum key) travels in
//! every position, so a restart continues after the last chunk whose rows were delivered.

mod reader;
mod sql;

use std::collections::VecDeque;
use std::sync::Arc;

use sluice_engine::{ChangeEvent, Record};
use sluice_kit::incremental::{Tracker, Watermark, Windows};
use tokio::sync::Notify;

use crate::postgres::config::{PostgresConfig, WatermarkStrategy};
use crate::postgres::error::PgError;
use crate::postgres::records::table::TableSchema;
use crate::postgres::server::catalog::ConnInfo;
use reader::{Kept, Msg};

/// How long one query with a signal's filter may run (milliseconds).
pub(crate) const FILTER_TIMEOUT_MS: u32 = 60_000;

/// What survives a restart: the kit's progress, with key values as their text.
pub(crate) type Progress = sluice_kit::incremental::Progress<Option<String>>;

/// Transactions remembered to check chunk snapshots against, and the keys they changed.
const RECENT_TRANSACTIONS: usize = 4096;
const RECENT_KEYS: usize = 200_000;
const KEYS_PER_TRANSACTION: usize = 20_000;

/// A transaction streamed while a snapshot runs.
#[derive(Debug)]
struct Recent {
    xid: u32,
    /// Its number in the stream.
    n: u64,
    /// The keys it changed, by table oid (while `complete`).
    keys: Vec<(u32, Vec<u8>)>,
    /// Whether `keys` holds all of them.
    complete: bool,
}

/// The transactions streamed before a window opened (numbered below `opened_at`) that were in
/// progress for the chunk's snapshot: their commits came before the open watermark in the log,
/// yet the chunk query did not see them (the server makes a committed transaction visible a
/// moment after writing its commit record, which a loaded machine stretches), so their changes
/// must drop the chunk's rows too.
fn raced<'r>(
    recent: &'r VecDeque<Recent>,
    opened_at: u64,
    xip: &'r [u32],
) -> impl Iterator<Item = &'r Recent> + 'r {
    recent
        .iter()
        .filter(move |t| t.n < opened_at && xip.contains(&t.xid))
}

/// Chunks read ahead of the stream. Measured on 1M rows (chunks of 1024, 2 cores), with the
/// chunks read in the stream's own task: 76k rows/s with one, 74k with two, 68k with three;
/// read by a thread of their own: see docs/components.md.
const MAX_WINDOWS: usize = 3;

/// The incremental snapshot's state.
#[derive(Debug)]
pub(crate) struct Incremental {
    /// The kit's bookkeeping: the progress read ahead, the progress delivered (what positions
    /// record: a restart reads again what was read ahead), pause, notifications.
    pub tracker: Tracker<Option<String>>,
    /// The chunks in flight (the kit's windows), marked with the transactions streamed
    /// before each opened.
    windows: Windows<u32, Option<String>, Kept>,
    signal_table: String,
    strategy: WatermarkStrategy,
    chunk_size: usize,
    chunk_bytes: usize,
    prefix: Arc<str>,
    db: Arc<str>,
    /// `read.only`: no watermark rows; a chunk's window spans from its announcement to the WAL
    /// position read right after its query.
    read_only: bool,
    /// The running chunk reader.
    reader: Option<reader::Handle>,
    /// Woken when the reader has sent something.
    pub wake: Arc<Notify>,
    /// The last transactions streamed, while a snapshot runs.
    recent: VecDeque<Recent>,
    /// Keys held in `recent`.
    recent_keys: usize,
    /// Transactions streamed so far.
    streamed: u64,
}

impl Incremental {
    /// State for a stream; `signal_table` is the quoted `schema.table` watermarks go to (unused
    /// with `read.only`).
    pub(crate) fn new(
        config: &PostgresConfig,
        signal_table: String,
        db: &str,
        progress: Option<Progress>,
        chunk_bytes: usize,
    ) -> Self {
        Incremental {
            tracker: Tracker::new(progress, config.common.notifications()),
            windows: Windows::default(),
            signal_table,
            strategy: config.watermarking_strategy,
            chunk_size: config.common.incremental_chunk_size.max(1),
            chunk_bytes: chunk_bytes.max(1),
            prefix: config.common.topic_prefix.as_str().into(),
            db: db.into(),
            read_only: config.read_only,
            reader: None,
            wake: Arc::new(Notify::new()),
            recent: VecDeque::new(),
            recent_keys: 0,
            streamed: 0,
        }
    }

    /// A captured table's columns changed: chunks are read again with the new columns from
    /// the next one on.
    pub(crate) fn table_changed(&mut self) {
        if self.reader.is_some() {
            self.halt();
        }
    }

    /// Aborts the whole snapshot for `reason` (a filter the server refused): warned, and the
    /// `ABORTED` notification names the reason. The stream goes on.
    pub(crate) fn abort(&mut self, reason: String) {
        self.reader = None;
        self.windows.clear();
        self.tracker.abort(reason);
    }

    /// Stops the reader and drops the chunks read ahead: the next reader reads again from
    /// what was delivered. (A chunk kept would wait for a close watermark that the stopped
    /// reader may write after the next reader's, out of order.)
    pub(crate) fn halt(&mut self) {
        self.reader = None;
        self.windows.clear();
        self.tracker.halt();
    }

    /// The progress to store in positions while a snapshot runs.
    pub(crate) fn progress_json(&self) -> Option<&serde_json::value::RawValue> {
        self.tracker.delivered_json()
    }

    fn key_bytes(&self, key: &Option<Record>) -> Vec<u8> {
        sluice_kit::incremental::key_bytes(key.as_ref())
    }

    /// A streamed change of table `oid`: inside an open window it supersedes the chunk's row.
    pub(crate) fn evict(&mut self, oid: u32, key: &Option<Record>) {
        let recording = self.recent.back().is_some_and(|t| t.n == self.streamed);
        let open = self.windows.open_on(&oid);
        if !recording && !open {
            return;
        }
        let bytes = self.key_bytes(key);
        if let Some(t) = self.recent.back_mut().filter(|_| recording) {
            if t.keys.len() < KEYS_PER_TRANSACTION {
                t.keys.push((oid, bytes.clone()));
                self.recent_keys += 1;
            } else {
                t.complete = false;
            }
        }
        if open {
            self.windows.evict(&oid, &bytes);
        }
    }

    /// A transaction starts in the stream.
    pub(crate) fn on_begin(&mut self, xid: u32) {
        self.streamed += 1;
        if self.reader.is_none() && self.windows.is_empty() {
            self.recent.clear();
            self.recent_keys = 0;
            return;
        }
        while self.recent.len() >= RECENT_TRANSACTIONS || self.recent_keys > RECENT_KEYS {
            match self.recent.pop_front() {
                Some(t) => self.recent_keys -= t.keys.len(),
                None => break,
            }
        }
        self.recent.push_back(Recent {
            xid,
            n: self.streamed,
            keys: Vec::new(),
            complete: true,
        });
    }

    /// Checks the window at `i` once it is open and has its rows: a chunk whose snapshot missed
    /// a transaction streamed before the window opened is dropped, and reading starts again
    /// from the last delivered chunk (rare: it takes a commit racing the open watermark).
    fn check_race(&mut self, i: usize) {
        let Some(chunk) = self.windows.open_chunk(i) else {
            return;
        };
        let xip = std::mem::take(&mut chunk.held.extra.xip);
        let oid = *chunk.table;
        let mut incomplete = false;
        for t in raced(&self.recent, chunk.opened_at, &xip) {
            tracing::debug!(chunk = %chunk.id, xid = t.xid, "Incremental snapshot: a transaction streamed before the window was not visible to the chunk query; its changes drop the chunk's rows.");
            incomplete |= !t.complete;
            for (_, key) in t.keys.iter().filter(|(o, _)| *o == oid) {
                chunk.held.rows.evict(key);
            }
        }
        if incomplete {
            tracing::info!(chunk = %chunk.id, "Incremental snapshot: a transaction too large to remember was not visible to the chunk query; reading again from the last delivered chunk.");
            self.halt();
        }
    }

    /// Whether windows are bounded by WAL positions instead of watermark rows.
    pub(crate) fn read_only(&self) -> bool {
        self.read_only
    }

    /// Whether a reader should start now.
    pub(crate) fn ready(&self) -> bool {
        self.tracker.wants_chunk() && self.reader.is_none()
    }

    /// Starts a reader when one should run; `tables` are the captured tables by
    /// `schema.table`.
    pub(crate) fn start_reader(
        &mut self,
        info: &ConnInfo,
        tables: std::collections::HashMap<String, Arc<TableSchema>>,
    ) -> Result<(), PgError> {
        if !self.ready() {
            return Ok(());
        }
        let Some(progress) = self.tracker.ahead().cloned() else {
            return Ok(());
        };
        let settings = reader::Settings {
            info: info.clone(),
            tables,
            progress,
            chunk_size: self.chunk_size,
            chunk_bytes: self.chunk_bytes,
            strategy: self.strategy,
            read_only: self.read_only,
            signal_table: self.signal_table.clone(),
            prefix: self.prefix.clone(),
            db: self.db.clone(),
        };
        self.reader = Some(reader::spawn(settings, self.wake.clone(), MAX_WINDOWS)?);
        Ok(())
    }

    /// Takes in what the reader has sent so far.
    pub(crate) fn drain(&mut self) -> Result<(), PgError> {
        while let Some(msg) = self.reader.as_mut().and_then(|r| r.rx.try_recv().ok()) {
            self.apply(msg)?;
        }
        Ok(())
    }

    fn apply(&mut self, msg: Msg) -> Result<(), PgError> {
        match msg {
            Msg::Announce { id, oid, ack } => {
                // Read-only: open from now on.
                self.windows
                    .announce(id, oid, ack.is_some(), self.streamed + 1);
                if let Some(ack) = ack {
                    // The reader waits for this before it reads; gone means halted.
                    let _ = ack.send(());
                }
            }
            Msg::Chunk(chunk) => {
                self.tracker
                    .read_ahead(Some(chunk.held.emitted.next.clone()));
                if let Some(i) = self.windows.arrived(&chunk.id, chunk.held) {
                    self.check_race(i);
                }
            }
            Msg::Progress { progress, empty } => {
                let ended = progress.is_none();
                self.tracker.read_ahead(progress);
                if let Some(table) = empty {
                    if !self.windows.empty_after_last(table.clone()) {
                        self.tracker.table_scanned(&table, 0);
                    }
                }
                if ended {
                    self.reader = None;
                    if self.windows.is_empty() {
                        self.tracker.complete();
                    }
                }
            }
            Msg::Failed(e) => {
                self.reader = None;
                return Err(e);
            }
            Msg::Aborted(reason) => self.abort(reason),
        }
        Ok(())
    }

    /// A watermark row seen in the stream (`deleted`: the open row was deleted, which closes
    /// the window under `insert_delete`). Returns the chunk's rows when the window closes.
    pub(crate) async fn on_watermark(
        &mut self,
        id: &str,
        kind: &str,
        deleted: bool,
    ) -> Result<Option<Vec<ChangeEvent>>, PgError> {
        // The chunk was announced before its open watermark was written.
        self.drain()?;
        // The open watermark's own transaction is the last one before the window.
        match self.windows.watermark(id, kind, deleted, self.streamed + 1) {
            Watermark::Opened(i) => {
                self.check_race(i);
                return Ok(None);
            }
            Watermark::Other => return Ok(None),
            Watermark::Closes => {}
        }
        // The rows were sent before the close watermark was written: they are on their way.
        while self.windows.waiting_for_rows() {
            let Some(reader) = self.reader.as_mut() else {
                break;
            };
            // Bounded, so that a reader that stopped answering cannot hold the stream (and a
            // graceful stop) forever: the stream fails and restarts from its committed position.
            match tokio::time::timeout(std::time::Duration::from_secs(60), reader.rx.recv()).await
            {
                Ok(Some(msg)) => self.apply(msg)?,
                Ok(None) => break,
                Err(_) => {
                    return Err(PgError::Replication(
                        "the incremental snapshot reader sent no rows for 60 s after its window closed; restarting from the last committed chunk".into(),
                    ))
                }
            }
        }
        self.close_front()
    }

    /// Read-only: closes the oldest window when the stream has reached its end position
    /// (every transaction the chunk's snapshot could see has been streamed).
    pub(crate) fn close_reached(&mut self, lsn: u64) -> Result<Option<Vec<ChangeEvent>>, PgError> {
        self.drain()?;
        let at = self.windows.front().and_then(|kept| kept.close_at);
        match at {
            Some(at) if lsn >= at => self.close_front(),
            _ => Ok(None),
        }
    }

    /// Closes the oldest window: its rows not evicted by the stream, to emit now.
    fn close_front(&mut self) -> Result<Option<Vec<ChangeEvent>>, PgError> {
        match self.windows.close_front(&mut self.tracker) {
            Ok(closed) => Ok(closed.map(|(rows, _kept)| rows)),
            // Cannot happen: the rows are sent before the window can close.
            Err(id) => Err(PgError::Replication(format!(
                "incremental snapshot chunk {id} closed without its rows; restarting from the last committed chunk"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{raced, sql::in_progress, Recent};
    use std::collections::VecDeque;

    #[test]
    fn a_transaction_streamed_before_the_window_and_invisible_to_the_chunk_is_a_race() {
        let recent: VecDeque<Recent> = [(100, 1), (101, 2), (102, 3)]
            .into_iter()
            .map(|(xid, n)| Recent {
                xid,
                n,
                keys: Vec::new(),
                complete: true,
            })
            .collect();
        let xids = |xip: &[u32]| raced(&recent, 3, xip).map(|t| t.xid).collect::<Vec<_>>();
        // The window opened after transaction 2: 101 came before it.
        assert_eq!(xids(&[101, 500]), vec![101]);
        // Streamed after the window opened: its changes are evicted as usual.
        assert!(xids(&[102]).is_empty());
        // Not streamed yet: it will be streamed inside the window.
        assert!(xids(&[103]).is_empty());
        assert!(xids(&[]).is_empty());
    }

    #[test]
    fn snapshot_text_gives_the_in_progress_ids() {
        assert_eq!(in_progress("10:20:12,15"), vec![12, 15]);
        assert_eq!(in_progress("10:20:"), Vec::<u32>::new());
        // Epoch-qualified ids keep their low 32 bits, as the log stream gives them.
        assert_eq!(in_progress("4294967306:4294967316:4294967308"), vec![12]);
    }
}
