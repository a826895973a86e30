//! The contracts of sources, transforms and sinks, and the contexts the runtime gives them.
//!
//! Delivery is at-least-once: a source resumes from the last position that every sink has
//! acknowledged, so events after it may be delivered again after a crash, never lost.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::watch;

use crate::ack::AckTracker;
use crate::config::Limits;
use crate::error::ComponentError;
use crate::event::{Batch, ChangeEvent, Position};
use crate::metrics::ComponentCounters;
use crate::queue::{BoundedQueue, QueueItem};

/// Reads changes and emits them in order.
#[async_trait]
pub trait Source: Send {
    /// Emits batches through `ctx` until the source is exhausted or `ctx.is_stopping()`, then
    /// returns `Ok`. It resumes after `ctx.resume_from()` when that is set.
    async fn run(&mut self, ctx: &mut SourceContext) -> Result<(), ComponentError>;
}

/// Turns one event into zero or more events (a Debezium SMT).
pub trait Transform: Send {
    /// Appends the results for `event` to `out`. Dropping an event is appending nothing; its
    /// position is still acknowledged.
    fn apply(
        &mut self,
        event: ChangeEvent,
        out: &mut Vec<ChangeEvent>,
    ) -> Result<(), ComponentError>;
}

/// Resolves once a written batch is durable (file synced, broker acknowledged).
pub type Delivery = Pin<Box<dyn Future<Output = Result<(), ComponentError>> + Send>>;

/// A delivery that is already complete (for sinks that are durable when `write` returns).
pub fn delivered() -> Delivery {
    Box::pin(std::future::ready(Ok(())))
}

/// Writes events somewhere durable.
///
/// The runtime calls `write` for consecutive batches without waiting for earlier deliveries,
/// keeping a few in flight, and acknowledges batches in order as their deliveries resolve. Only
/// an acknowledged batch's position may be committed. When a write or a delivery fails with a
/// retryable error, the runtime waits for the other deliveries in flight, then writes the failed
/// batch and every batch after it again, in order (at-least-once).
#[async_trait]
pub trait Sink: Send {
    /// Hands the batch to the sink and returns once it is taken (encoded, buffered, sent); the
    /// returned [`Delivery`] resolves when the events are durable.
    async fn write(&mut self, batch: &SinkBatch<'_>) -> Result<Delivery, ComponentError>;

    /// Reaches the service once (address, login, the declarations the configuration asks
    /// for), keeping what it opened for the writes, so that a wrong address or login stops the
    /// start with the fix. The runtime calls it once per generation, after `build`, on the
    /// runtime the sink writes from, and starts the source only once every sink's check passed.
    async fn health_check(&mut self) -> Result<(), ComponentError> {
        Ok(())
    }

    /// Flushes and releases resources at shutdown.
    async fn close(&mut self) -> Result<(), ComponentError> {
        Ok(())
    }
}

/// The events handed to a sink in one write, in order.
#[derive(Debug, Clone, Copy)]
pub struct SinkBatch<'a> {
    parts: &'a [Arc<Vec<ChangeEvent>>],
}

impl<'a> SinkBatch<'a> {
    /// A batch made of consecutive parts.
    pub fn new(parts: &'a [Arc<Vec<ChangeEvent>>]) -> Self {
        SinkBatch { parts }
    }
    /// The events, in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a ChangeEvent> + 'a {
        self.parts.iter().flat_map(|p| p.iter())
    }
    /// Number of events.
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }
    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a component is built with.
#[derive(Debug, Clone, Copy)]
pub struct BuildContext<'a> {
    /// The pipeline name.
    pub pipeline: &'a str,
    /// The pipeline's data directory.
    pub data_dir: &'a Path,
    /// The component's name (`source`, `transforms[0]`, the sink's name).
    pub component: &'a str,
}

/// Builds a source from its configuration (implemented by the source spec enum). Builds are
/// async and run on the runtime of the stage that runs what they build, once per generation.
#[async_trait]
pub trait BuildSource: Send + Sync {
    /// A fresh source instance (called again on every restart).
    async fn build(&self, ctx: &BuildContext<'_>) -> Result<Box<dyn Source>, ComponentError>;
}

/// Builds a transform from its configuration.
#[async_trait]
pub trait BuildTransform: Send + Sync {
    /// A fresh transform instance.
    async fn build(&self, ctx: &BuildContext<'_>) -> Result<Box<dyn Transform>, ComponentError>;
}

/// Builds a sink from its configuration; the runtime then runs its
/// [`health_check`](Sink::health_check).
#[async_trait]
pub trait BuildSink: Send + Sync {
    /// A fresh sink instance.
    async fn build(&self, ctx: &BuildContext<'_>) -> Result<Box<dyn Sink>, ComponentError>;
}

/// Signals received over HTTP (the admin endpoint's `POST /pipelines/<name>/signals`),
/// waiting for the source; shared by restarts of the pipeline.
pub type SignalQueue = Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<String>>>;

/// The pipeline is stopping and takes no more events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the pipeline is stopping")]
pub struct Stopped;

/// Handed to a running source.
pub struct SourceContext {
    pipeline: String,
    data_dir: PathBuf,
    resume_from: Option<Position>,
    /// The partitions' positions of a source that reads several ([`Self::partition_by`]).
    partitions: Option<crate::partitions::Partitions>,
    outlet: Outlet,
    /// The source stage's event counts.
    counters: ComponentCounters,
    lifecycle: Lifecycle,
    /// Whether a graceful stop was asked for (from [`Lifecycle::shutdown_tx`]).
    shutdown: watch::Receiver<bool>,
    signals: Option<SignalQueue>,
    reports: SourceReports,
}

/// Where a source's batches go: the source queue, and the acknowledgements that follow them.
#[derive(Debug)]
pub struct Outlet {
    pub queue: Arc<BoundedQueue>,
    pub acker: Arc<AckTracker>,
    /// The sinks that acknowledge each batch.
    pub sinks: u32,
    pub limits: Limits,
    /// Events after which the run stops (`--stop-after-events`).
    pub stop_after: Option<u64>,
    /// Events emitted by this pipeline run, shared with the runtime.
    pub emitted: Arc<AtomicU64>,
    /// When the last event was emitted (ms since the epoch), shared with the runtime.
    pub last_event_ms: Arc<AtomicU64>,
}

/// The pipeline's state a source follows and reports: connected, stopping, committed.
#[derive(Debug)]
pub struct Lifecycle {
    /// Set once the source has reached its database (`/health/ready`).
    pub connected: Arc<std::sync::atomic::AtomicBool>,
    pub shutdown_tx: Arc<watch::Sender<bool>>,
    pub committed: watch::Receiver<Option<Position>>,
    /// Asks the supervisor to commit as soon as what was emitted is acknowledged.
    pub commit_soon: Arc<tokio::sync::Notify>,
}

/// What only the source knows, for the status and Debezium's metrics.
#[derive(Debug)]
pub struct SourceReports {
    /// The snapshot's tables, as the source announced them ([`SourceContext::snapshot_tables`]).
    pub snapshot_plan: SnapshotPlan,
    /// What the source left out ([`SourceContext::source_counters`]).
    pub source_counters: Arc<SourceCounters>,
}

/// The tables a snapshot reads, with the rows the database estimates each holds (shared by the
/// source, the status and Debezium's metrics).
pub type SnapshotPlan = Arc<std::sync::Mutex<Option<Vec<(String, Option<u64>)>>>>;

/// What only a source knows of the changes it did not emit, for Debezium's
/// `NumberOfEventsFiltered` and `NumberOfErroneousEvents` (kept across restarts of the
/// pipeline, as the other counts are).
#[derive(Debug)]
pub struct SourceCounters {
    filtered: AtomicU64,
    erroneous: AtomicU64,
    /// The connector type and logical name its events' `source` block carries.
    identity: std::sync::OnceLock<(String, String)>,
    /// The sequence number of the batch that ended the snapshot (`u64::MAX`: none said).
    snapshot_through: AtomicU64,
    /// The sequence number of the last batch emitted (`u64::MAX`: none yet).
    last_seq: AtomicU64,
}

impl Default for SourceCounters {
    fn default() -> Self {
        SourceCounters {
            filtered: AtomicU64::new(0),
            erroneous: AtomicU64::new(0),
            identity: std::sync::OnceLock::new(),
            snapshot_through: AtomicU64::new(u64::MAX),
            last_seq: AtomicU64::new(u64::MAX),
        }
    }
}

impl SourceCounters {
    /// The connector type and logical name (`source.connector`, `source.name`), once known.
    pub fn identity(&self) -> Option<&(String, String)> {
        self.identity.get()
    }

    /// The sequence number of the batch that ended the snapshot, if the source said so since
    /// [`Self::forget_snapshot_end`].
    pub fn snapshot_through(&self) -> Option<u64> {
        let seq = self
            .snapshot_through
            .load(std::sync::atomic::Ordering::Relaxed);
        (seq != u64::MAX).then_some(seq)
    }

    /// Forgets where the snapshot ended, once that was seen (or belongs to an earlier
    /// snapshot).
    pub fn snapshot_end_seen(&self) {
        (self.snapshot_through).store(u64::MAX, std::sync::atomic::Ordering::Relaxed);
    }

    /// Forgets where the snapshot ended and the last batch (a new generation numbers its
    /// batches afresh).
    pub fn forget_snapshot_end(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.snapshot_through.store(u64::MAX, Relaxed);
        self.last_seq.store(u64::MAX, Relaxed);
    }
    /// `n` changes read and left out: of tables (or transaction sources) not captured.
    pub fn filtered(&self, n: u64) {
        self.filtered
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// `n` changes that could not be represented, skipped under
    /// `event.processing.failure.handling.mode: warn` or `skip`.
    pub fn erroneous(&self, n: u64) {
        self.erroneous
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// The counts so far: filtered, erroneous.
    pub fn counts(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.filtered.load(Relaxed), self.erroneous.load(Relaxed))
    }
}

impl std::fmt::Debug for SourceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceContext")
            .field("pipeline", &self.pipeline)
            .field("resume_from", &self.resume_from)
            .finish()
    }
}

/// The parts of a [`SourceContext`] that the runtime wires (`sluice-runtime` builds it).
#[derive(Debug)]
pub struct SourceWiring {
    pub pipeline: String,
    pub data_dir: PathBuf,
    pub resume_from: Option<Position>,
    pub outlet: Outlet,
    pub lifecycle: Lifecycle,
    pub signals: Option<SignalQueue>,
    pub reports: SourceReports,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl SourceContext {
    pub fn new(w: SourceWiring) -> Self {
        SourceContext {
            counters: ComponentCounters::new(&w.pipeline, "source"),
            shutdown: w.lifecycle.shutdown_tx.subscribe(),
            pipeline: w.pipeline,
            data_dir: w.data_dir,
            resume_from: w.resume_from,
            partitions: None,
            outlet: w.outlet,
            lifecycle: w.lifecycle,
            signals: w.signals,
            reports: w.reports,
        }
    }

    /// The source has reached its database (connected, its setup checked): the pipeline is
    /// ready (`/health/ready`) from here on. Sources call it once per run.
    pub fn connected(&self) {
        if !self.lifecycle.connected.swap(true, Ordering::Relaxed) {
            tracing::debug!(pipeline = %self.pipeline, "The source is connected.");
        }
    }

    /// The connector type and logical name the source's events carry in their `source` block
    /// (`postgresql`, `mysql`, ... and the `topic.prefix`): Debezium's metrics are named after
    /// them from here on (`Connected` before any event). Sources call it when connected.
    pub fn identify(&self, connector: &str, logical_name: &str) {
        let _ = (self.reports.source_counters.identity)
            .set((connector.to_owned(), logical_name.to_owned()));
    }

    /// The snapshot's last batch has been emitted (also when its last table had no row to
    /// mark `last`): Debezium's `SnapshotCompleted` follows once the pipeline has handled it.
    pub fn snapshot_completed(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.reports.source_counters;
        let last = c.last_seq.load(Relaxed);
        c.snapshot_through
            .store(if last == u64::MAX { 0 } else { last }, Relaxed);
    }

    /// Signals received by the admin endpoint (`http` channel), one JSON object per entry;
    /// `None` when the endpoint is off. Lock it while reading.
    pub fn external_signals(&self) -> Option<SignalQueue> {
        self.signals.clone()
    }

    /// The pipeline name.
    pub fn pipeline(&self) -> &str {
        &self.pipeline
    }

    /// The pipeline's data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The committed position to resume after, if any (of the selected partition, when the
    /// source has several).
    pub fn resume_from(&self) -> Option<&Position> {
        match &self.partitions {
            Some(p) => p.stored(),
            None => self.resume_from.as_ref(),
        }
    }

    /// The source reads the partitions `names` (a SQL Server source's databases), each with
    /// its own position: from here on [`Self::resume_from`] is the selected partition's, and
    /// each batch emitted carries the selected partition's position, committed as the latest
    /// position of every partition. `Err`: the committed position cannot be split (written by
    /// a source that read one partition, with several listed now).
    pub fn partition_by(
        &mut self,
        names: &[String],
    ) -> Result<(), crate::partitions::PartitionError> {
        let committed = self.resume_from.as_ref();
        self.partitions = Some(crate::partitions::Partitions::new(names, committed)?);
        Ok(())
    }

    /// A snapshot starts reading `tables` (`schema.table`, or `table` where the database has no
    /// schemas), each with the rows the database estimates it holds (`None`: no estimate): the
    /// status shows rows read against them, and Debezium's `TotalTableCount` and
    /// `RemainingTableCount` follow.
    pub fn snapshot_tables(&self, tables: Vec<(String, Option<u64>)>) {
        *self
            .reports
            .snapshot_plan
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(tables);
    }

    /// Where the source counts the changes it leaves out (Debezium's `NumberOfEventsFiltered`,
    /// `NumberOfErroneousEvents`), for its readers to keep.
    pub fn source_counters(&self) -> Arc<SourceCounters> {
        Arc::clone(&self.reports.source_counters)
    }

    /// Where [`Self::snapshot_tables`] writes, for a reader on a thread of its own.
    pub fn snapshot_plan(&self) -> SnapshotPlan {
        Arc::clone(&self.reports.snapshot_plan)
    }

    /// Emits and resumes for partition `i` (of [`Self::partition_by`]'s names) from here on.
    pub fn select_partition(&mut self, i: usize) {
        if let Some(p) = &mut self.partitions {
            p.select(i);
        }
    }

    /// Queue and batch limits (sources batch up to `max_batch_size` events).
    pub fn limits(&self) -> &Limits {
        &self.outlet.limits
    }

    /// True once a graceful stop was requested; the source should return soon.
    pub fn is_stopping(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Resolves when a graceful stop is requested.
    pub async fn stopping(&mut self) {
        // An error means the runtime is gone, which is a stop too.
        let _ = self.shutdown.wait_for(|s| *s).await;
    }

    /// Positions as they are committed (for sources that confirm progress upstream, such as a
    /// replication slot).
    pub fn committed(&self) -> watch::Receiver<Option<Position>> {
        self.lifecycle.committed.clone()
    }

    /// A handle that asks for a commit as soon as everything emitted before is acknowledged,
    /// instead of at the next `offsets.flush_interval` (for a source that waits for a position
    /// of its own to be committed, [`Self::committed`] showing it); usable from any thread.
    pub fn commit_soon(&self) -> Arc<tokio::sync::Notify> {
        self.lifecycle.commit_soon.clone()
    }

    /// Events emitted so far by this pipeline run.
    pub fn emitted(&self) -> u64 {
        self.outlet.emitted.load(Ordering::Relaxed)
    }

    /// Emits `position` in a batch with no event and waits until the pipeline has committed
    /// it (every sink holds everything emitted before it), asking the runtime to commit at
    /// once and again every half second (a sink that takes a while to connect acknowledges
    /// late): a position the source needs stored before it goes on, such as a first
    /// snapshot's before its first row. With partitions, the pipeline position that holds it.
    /// `Err(Stopped)`: the pipeline stops meanwhile.
    pub async fn commit_position(&mut self, position: Position) -> Result<(), Stopped> {
        let target = match &mut self.partitions {
            Some(partitions) => partitions.reached(position.clone()),
            None => position.clone(),
        };
        self.emit(Batch {
            events: Vec::new(),
            position: Some(position),
        })
        .await?;
        let mut committed = self.lifecycle.committed.clone();
        let ask = self.lifecycle.commit_soon.clone();
        loop {
            if committed.borrow_and_update().as_ref() == Some(&target) {
                return Ok(());
            }
            ask.notify_one();
            tokio::select! {
                changed = committed.changed() => changed.map_err(|_| Stopped)?,
                () = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
                () = self.stopping() => return Err(Stopped),
            }
        }
    }

    /// Emits a batch, waiting while downstream queues are full (backpressure).
    pub async fn emit(&mut self, batch: Batch) -> Result<(), Stopped> {
        self.emit_sized(batch, None).await
    }

    /// Emits a batch whose events a [`BatchCut`](crate::event::BatchCut) counted (their bytes
    /// are known, not counted again), and starts the cut's count anew.
    pub async fn emit_cut(
        &mut self,
        batch: Batch,
        cut: &mut crate::event::BatchCut,
    ) -> Result<(), Stopped> {
        cut.is_full(&batch.events);
        let bytes = cut.taken();
        self.emit_sized(batch, Some(bytes)).await
    }

    async fn emit_sized(&mut self, mut batch: Batch, bytes: Option<usize>) -> Result<(), Stopped> {
        let counted = batch.events.len();
        if let Some(limit) = self.outlet.stop_after {
            let done = self.outlet.emitted.load(Ordering::Relaxed);
            let room = limit.saturating_sub(done) as usize;
            if batch.events.len() >= room {
                batch.events.truncate(room);
                batch.position = None;
                let _ = self.lifecycle.shutdown_tx.send(true);
                if batch.events.is_empty() {
                    return Ok(());
                }
            }
        }
        let mut position = batch.resume_position().cloned();
        if let Some(partitions) = &mut self.partitions {
            position = position.map(|p| partitions.reached(p));
            for event in &mut batch.events {
                if let Some(p) = partitions.event_position(&event.position) {
                    event.position = p;
                }
            }
        }
        if batch.events.is_empty() && position.is_none() {
            return Ok(());
        }
        let n = batch.events.len();
        let bytes = match bytes {
            Some(bytes) if counted == n => bytes,
            _ => batch.events.iter().map(ChangeEvent::estimated_size).sum(),
        };
        let seq = self.outlet.acker.register(position, self.outlet.sinks);
        (self.reports.source_counters.last_seq).store(seq, Ordering::Relaxed);
        self.outlet
            .queue
            .push(QueueItem {
                seq,
                events: Arc::new(batch.events),
                bytes,
            })
            .await
            .map_err(|_| Stopped)?;
        if n > 0 {
            self.outlet.emitted.fetch_add(n as u64, Ordering::Relaxed);
            self.outlet.last_event_ms.store(now_ms(), Ordering::Relaxed);
            self.counters.received.increment(n as u64);
            self.counters.sent.increment(n as u64);
            self.counters.bytes_received.increment(bytes as u64);
            self.counters.bytes_sent.increment(bytes as u64);
        }
        Ok(())
    }
}

/// Applies a chain of transforms to events, in order.
pub fn apply_chain(
    chain: &mut [Box<dyn Transform>],
    events: Vec<ChangeEvent>,
) -> Result<Vec<ChangeEvent>, ComponentError> {
    let mut current = events;
    for transform in chain.iter_mut() {
        let mut next = Vec::with_capacity(current.len());
        for event in current {
            transform.apply(event, &mut next)?;
        }
        current = next;
    }
    Ok(current)
}
