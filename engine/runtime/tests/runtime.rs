//! Runtime behaviour: backpressure, ordered acknowledgement across sinks, failures, restarts.
//!
//! Every test runs a real pipeline (actors, queues, offsets) with in-test components. No test
//! depends on timing for its verdict: waits only decide when to look, never what is seen.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sluice_engine::config::{Backoff, DurationSpec, Limits, OffsetsConfig};
use sluice_engine::{
    delivered, Batch, BuildContext, BuildSink, BuildSource, ChangeEvent, ComponentError, Delivery,
    Position, Record, Schema, SchemaType, Sink, SinkBatch, Source, SourceContext, Value,
};
use sluice_runtime::{PipelinePlan, RunError, RunOptions, RunReport, SinkPlan};

/// Emits `total` events with positions 1..=total, `batch` per emit; fails once (retryably)
/// when about to emit event `fail_at` if set.
struct CountingSource {
    total: u64,
    batch: u64,
    payload: usize,
    emitted: Arc<AtomicU64>,
    fail_at: Option<u64>,
    failed: Arc<AtomicBool>,
}

fn event(n: u64, payload: usize) -> ChangeEvent {
    ChangeEvent {
        topic: "t".into(),
        key: None,
        value: Some(Record {
            schema: Schema::primitive(SchemaType::String, false),
            value: Value::from("x".repeat(payload)),
        }),
        headers: Vec::new(),
        position: Position::Offset(n),
    }
}

#[async_trait]
impl Source for CountingSource {
    async fn run(&mut self, ctx: &mut SourceContext) -> Result<(), ComponentError> {
        let mut next = match ctx.resume_from() {
            Some(Position::Offset(n)) => n + 1,
            _ => 1,
        };
        while next <= self.total && !ctx.is_stopping() {
            if let Some(at) = self.fail_at {
                if next >= at && !self.failed.swap(true, Ordering::SeqCst) {
                    return Err(ComponentError::retryable("injected source failure"));
                }
            }
            let end = (next + self.batch - 1).min(self.total);
            let events = (next..=end).map(|n| event(n, self.payload)).collect();
            if ctx.emit(Batch::new(events)).await.is_err() {
                return Ok(());
            }
            self.emitted.fetch_add(end - next + 1, Ordering::SeqCst);
            next = end + 1;
        }
        Ok(())
    }
}

#[derive(Clone)]
struct SourceSpec(Arc<dyn Fn() -> CountingSource + Send + Sync>);

#[async_trait::async_trait]
impl BuildSource for SourceSpec {
    async fn build(&self, _: &BuildContext<'_>) -> Result<Box<dyn Source>, ComponentError> {
        Ok(Box::new((self.0)()))
    }
}

/// Records written positions. Blocks while `stalled`; after `stall_after` writes it stalls
/// forever; after `fail_after` writes every write fails retryably.
#[derive(Clone, Default)]
struct Recorder {
    written: Arc<Mutex<Vec<u64>>>,
    stalled: Arc<AtomicBool>,
    writes: Arc<AtomicU64>,
    stall_after: Option<u64>,
    fail_after: Option<u64>,
    /// The delivery of this write (0-based) fails once, after later writes were handed over.
    fail_delivery_of: Option<u64>,
    /// The health check fails (fatally) with this message.
    unhealthy: Option<&'static str>,
    /// The health check waits while this is set.
    health_held: Arc<AtomicBool>,
    /// Health checks passed.
    healthy: Arc<AtomicU64>,
    /// The first write panics.
    panics: bool,
}

impl Recorder {
    fn positions(&self) -> Vec<u64> {
        self.written.lock().map(|w| w.clone()).unwrap_or_default()
    }
}

#[async_trait]
impl Sink for Recorder {
    async fn health_check(&mut self) -> Result<(), ComponentError> {
        while self.health_held.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        if let Some(message) = self.unhealthy {
            return Err(ComponentError::fatal(message));
        }
        self.healthy.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn write(&mut self, batch: &SinkBatch<'_>) -> Result<Delivery, ComponentError> {
        assert!(!self.panics, "injected panic in write");
        let done = self.writes.load(Ordering::SeqCst);
        if self.fail_after.is_some_and(|n| done >= n) {
            return Err(ComponentError::retryable("injected sink failure"));
        }
        while self.stalled.load(Ordering::SeqCst) || self.stall_after.is_some_and(|n| done >= n) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        if self.fail_delivery_of == Some(done) {
            self.fail_delivery_of = None;
            self.writes.fetch_add(1, Ordering::SeqCst);
            return Ok(Box::pin(async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Err(ComponentError::retryable("injected delivery failure"))
            }));
        }
        let mut written = self
            .written
            .lock()
            .map_err(|_| ComponentError::fatal("poisoned"))?;
        for e in batch.iter() {
            if let Position::Offset(n) = e.position {
                written.push(n);
            }
        }
        self.writes.fetch_add(1, Ordering::SeqCst);
        Ok(delivered())
    }
}

#[async_trait::async_trait]
impl BuildSink for Recorder {
    async fn build(&self, _: &BuildContext<'_>) -> Result<Box<dyn Sink>, ComponentError> {
        Ok(Box::new(self.clone()))
    }
}

fn plan(
    source: SourceSpec,
    sinks: &[(&str, Recorder)],
    limits: Limits,
    data_dir: PathBuf,
) -> PipelinePlan {
    PipelinePlan {
        name: "test".into(),
        data_dir,
        limits,
        offsets: OffsetsConfig {
            store: "file".into(),
            flush_interval: DurationSpec(Duration::from_millis(20)),
            ..OffsetsConfig::default()
        },
        shutdown_timeout: Duration::from_secs(30),
        admin: None,
        offset_store: None,
        restart: Backoff {
            max_retries: 3,
            initial_backoff: DurationSpec(Duration::from_millis(5)),
            max_backoff: DurationSpec(Duration::from_millis(20)),
        },
        source: Arc::new(source),
        transforms: Vec::new(),
        sinks: sinks
            .iter()
            .map(|(name, r)| SinkPlan {
                name: (*name).into(),
                spec: Arc::new(r.clone()),
                transforms: Vec::new(),
                retry: Backoff {
                    max_retries: 2,
                    initial_backoff: DurationSpec(Duration::from_millis(1)),
                    max_backoff: DurationSpec(Duration::from_millis(2)),
                },
            })
            .collect(),
    }
}

fn limits(queue: usize, bytes: u64, batch: usize) -> Limits {
    Limits {
        max_queue_size: queue,
        max_queue_size_bytes: bytes,
        max_batch_size: batch,
        poll_interval: DurationSpec(Duration::from_millis(10)),
    }
}

fn counting(total: u64, batch: u64, payload: usize, emitted: Arc<AtomicU64>) -> SourceSpec {
    SourceSpec(Arc::new(move || CountingSource {
        total,
        batch,
        payload,
        emitted: emitted.clone(),
        fail_at: None,
        failed: Arc::new(AtomicBool::new(false)),
    }))
}

/// Waits until `value` stops changing for a while (or a generous limit passes).
fn settle(value: &AtomicU64) -> u64 {
    let start = Instant::now();
    let mut last = value.load(Ordering::SeqCst);
    let mut since = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
        let now = value.load(Ordering::SeqCst);
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() > Duration::from_millis(300) {
            break;
        }
    }
    last
}

fn spawn_run(
    plan: PipelinePlan,
    options: RunOptions,
) -> std::thread::JoinHandle<Result<RunReport, RunError>> {
    std::thread::spawn(move || sluice_runtime::run(plan, options))
}

fn backpressure_case(limits: Limits, payload: usize, bound: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let emitted = Arc::new(AtomicU64::new(0));
    let sink = Recorder::default();
    sink.stalled.store(true, Ordering::SeqCst);
    let total = 20_000;
    let handle = spawn_run(
        plan(
            counting(total, 10, payload, emitted.clone()),
            &[("s", sink.clone())],
            limits,
            dir.path().into(),
        ),
        RunOptions::default(),
    );
    let stuck_at = settle(&emitted);
    assert!(stuck_at > 0, "the source never started");
    assert!(
        stuck_at <= bound,
        "the source read {stuck_at} events past a stalled sink (bound {bound})"
    );
    assert!(sink.positions().is_empty());
    // The sink recovers: everything flows, in order, and the end is committed.
    sink.stalled.store(false, Ordering::SeqCst);
    let report = handle.join().expect("join").expect("run");
    assert_eq!(sink.positions(), (1..=total).collect::<Vec<_>>());
    assert_eq!(report.committed, Some(Position::Offset(total)));
}

#[test]
fn stalled_sink_stops_the_source_within_the_event_bound() {
    // Source queue + sink queue hold 100 events each; three stages hold a batch of 10 in hand.
    backpressure_case(limits(100, 1 << 30, 10), 8, 100 + 100 + 3 * 10);
}

#[test]
fn stalled_sink_stops_the_source_within_the_byte_bound() {
    // 2 KiB events, 64 KiB queues: at most ~32 events per queue, whatever max_queue_size says.
    let per_event = event(1, 2048).estimated_size() as u64;
    let bytes = 64 * 1024;
    let bound = 2 * (bytes / per_event + 10) + 3 * 10;
    backpressure_case(limits(100_000, bytes, 10), 2048, bound);
}

#[test]
fn committed_position_never_passes_an_event_one_sink_has_not_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let emitted = Arc::new(AtomicU64::new(0));
    let fast = Recorder::default();
    let stuck = Recorder {
        stall_after: Some(3),
        ..Recorder::default()
    };
    let mut p = plan(
        counting(5_000, 10, 8, emitted),
        &[("fast", fast.clone()), ("stuck", stuck.clone())],
        limits(100, 1 << 30, 10),
        dir.path().into(),
    );
    p.shutdown_timeout = Duration::from_millis(300);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let handle = spawn_run(
        p,
        RunOptions {
            stop: Some(stop_rx),
            ..RunOptions::default()
        },
    );
    // Once the stuck sink has stalled the pipeline, ask for a graceful stop: it cannot complete,
    // so the deadline cuts the stages off.
    let fast_writes = fast.writes.clone();
    settle(&fast_writes);
    stop_tx.send(true).expect("stop");
    let report = handle.join().expect("join").expect("run");
    assert!(report.forced, "the stuck sink should have forced the stop");
    let fast_max = fast.positions().last().copied().unwrap_or(0);
    let stuck_max = stuck.positions().last().copied().unwrap_or(0);
    assert!(
        fast_max > stuck_max,
        "the fast sink should be ahead ({fast_max} vs {stuck_max})"
    );
    assert_eq!(report.committed, Some(Position::Offset(stuck_max)));
    // And that is what a restart resumes from.
    let store = sluice_engine::offsets::FileOffsetStore::open(dir.path()).expect("store");
    use sluice_engine::offsets::OffsetStore;
    assert_eq!(
        store.load("test").expect("load"),
        Some(Position::Offset(stuck_max))
    );
}

#[test]
fn a_sink_past_its_retry_budget_stops_the_pipeline_without_committing_past_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = Recorder {
        fail_after: Some(4),
        ..Recorder::default()
    };
    let err = sluice_runtime::run(
        plan(
            counting(5_000, 10, 8, Arc::new(AtomicU64::new(0))),
            &[("s", sink.clone())],
            limits(100, 1 << 30, 10),
            dir.path().into(),
        ),
        RunOptions::default(),
    )
    .expect_err("the pipeline should fail");
    let written = sink.positions().last().copied();
    match err {
        RunError::Component {
            component,
            message,
            committed,
        } => {
            assert_eq!(component, "sink:s");
            assert!(message.contains("gave up after 2 retries"), "{message}");
            assert!(message.contains("injected sink failure"), "{message}");
            assert_eq!(committed, written.map(Position::Offset));
        }
        other => panic!("unexpected error {other}"),
    }
}

/// A source spec that counts its builds.
fn counting_builds(total: u64, builds: Arc<AtomicU64>) -> SourceSpec {
    let emitted = Arc::new(AtomicU64::new(0));
    SourceSpec(Arc::new(move || {
        builds.fetch_add(1, Ordering::SeqCst);
        CountingSource {
            total,
            batch: 10,
            payload: 8,
            emitted: emitted.clone(),
            fail_at: None,
            failed: Arc::new(AtomicBool::new(false)),
        }
    }))
}

#[test]
fn a_sink_failing_its_health_check_stops_the_start_before_the_source_is_built() {
    let dir = tempfile::tempdir().expect("tempdir");
    let builds = Arc::new(AtomicU64::new(0));
    let healthy = Recorder::default();
    let failing = Recorder {
        unhealthy: Some("nothing listens at 127.0.0.1:1; check `address`"),
        ..Recorder::default()
    };
    let err = sluice_runtime::run(
        plan(
            counting_builds(100, builds.clone()),
            &[("a", healthy.clone()), ("b", failing.clone())],
            limits(100, 1 << 30, 10),
            dir.path().into(),
        ),
        RunOptions::default(),
    )
    .expect_err("the pipeline should fail");
    match err {
        RunError::Component {
            component,
            message,
            committed,
        } => {
            assert_eq!(component, "sink:b");
            assert!(message.contains("nothing listens"), "{message}");
            assert_eq!(committed, None);
        }
        other => panic!("unexpected error {other}"),
    }
    assert_eq!(builds.load(Ordering::SeqCst), 0, "the source was built");
    assert!(healthy.positions().is_empty());
}

#[test]
fn the_source_starts_once_every_sink_passed_its_health_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let builds = Arc::new(AtomicU64::new(0));
    let quick = Recorder::default();
    let slow = Recorder::default();
    slow.health_held.store(true, Ordering::SeqCst);
    let handle = spawn_run(
        plan(
            counting_builds(1_000, builds.clone()),
            &[("quick", quick.clone()), ("slow", slow.clone())],
            limits(100, 1 << 30, 10),
            dir.path().into(),
        ),
        RunOptions::default(),
    );
    // The quick sink is healthy; the source waits for the slow one.
    let start = Instant::now();
    while quick.healthy.load(Ordering::SeqCst) == 0 && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(quick.healthy.load(Ordering::SeqCst), 1);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        builds.load(Ordering::SeqCst),
        0,
        "built before every sink was healthy"
    );
    slow.health_held.store(false, Ordering::SeqCst);
    let report = handle.join().expect("join").expect("run");
    assert_eq!(builds.load(Ordering::SeqCst), 1);
    assert_eq!(slow.healthy.load(Ordering::SeqCst), 1);
    assert_eq!(slow.positions(), (1..=1_000).collect::<Vec<_>>());
    assert_eq!(quick.positions(), (1..=1_000).collect::<Vec<_>>());
    assert_eq!(report.committed, Some(Position::Offset(1_000)));
}

/// A sink that panics ends the run with its stage's fatal error naming the panic, instead of
/// leaving the pipeline waiting for the stage forever.
#[test]
fn a_panicking_sink_ends_the_run_with_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = Recorder {
        panics: true,
        ..Recorder::default()
    };
    let handle = spawn_run(
        plan(
            counting_builds(100, Arc::new(AtomicU64::new(0))),
            &[("s", sink)],
            limits(100, 1 << 30, 10),
            dir.path().into(),
        ),
        RunOptions::default(),
    );
    let start = Instant::now();
    while !handle.is_finished() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(handle.is_finished(), "the run hangs after the panic");
    match handle.join().expect("join") {
        Err(RunError::Component {
            component, message, ..
        }) => {
            assert_eq!(component, "sink:s");
            assert!(message.contains("injected panic in write"), "{message}");
        }
        other => panic!("unexpected result {other:?}"),
    }
}

/// A stop asked for while a sink's health check runs: once the check passes, the source is not
/// built, and the run ends gracefully (not forced) with nothing written.
#[test]
fn a_stop_during_a_sinks_health_check_ends_the_run_without_starting_the_source() {
    let dir = tempfile::tempdir().expect("tempdir");
    let builds = Arc::new(AtomicU64::new(0));
    let slow = Recorder::default();
    slow.health_held.store(true, Ordering::SeqCst);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let handle = spawn_run(
        plan(
            counting_builds(1_000, builds.clone()),
            &[("slow", slow.clone())],
            limits(100, 1 << 30, 10),
            dir.path().into(),
        ),
        RunOptions {
            stop: Some(stop_rx),
            ..RunOptions::default()
        },
    );
    std::thread::sleep(Duration::from_millis(300));
    stop_tx.send(true).expect("stop");
    std::thread::sleep(Duration::from_millis(300));
    slow.health_held.store(false, Ordering::SeqCst);
    let report = handle.join().expect("join").expect("run");
    assert!(!report.forced, "the stop was forced");
    assert_eq!(builds.load(Ordering::SeqCst), 0, "the source was built");
    assert_eq!(slow.healthy.load(Ordering::SeqCst), 1);
    assert!(slow.positions().is_empty());
}

#[test]
fn a_retryable_source_failure_restarts_from_the_committed_position_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = Recorder::default();
    let failed = Arc::new(AtomicBool::new(false));
    let spec = SourceSpec(Arc::new(move || CountingSource {
        total: 3_000,
        batch: 10,
        payload: 8,
        emitted: Arc::new(AtomicU64::new(0)),
        fail_at: Some(1_501),
        failed: failed.clone(),
    }));
    let report = sluice_runtime::run(
        plan(
            spec,
            &[("s", sink.clone())],
            limits(100, 1 << 30, 10),
            dir.path().into(),
        ),
        RunOptions::default(),
    )
    .expect("run");
    assert_eq!(report.restarts, 1);
    assert_eq!(report.committed, Some(Position::Offset(3_000)));
    let mut seen = sink.positions();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(
        seen,
        (1..=3_000).collect::<Vec<_>>(),
        "an event was lost across the restart"
    );
}

#[test]
fn offsets_survive_a_clean_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = Recorder::default();
    let limits = limits(100, 1 << 30, 10);
    let r1 = sluice_runtime::run(
        plan(
            counting(2_000, 10, 8, Arc::new(AtomicU64::new(0))),
            &[("s", first.clone())],
            limits,
            dir.path().into(),
        ),
        RunOptions {
            stop_after_events: Some(700),
            ..RunOptions::default()
        },
    )
    .expect("first run");
    assert_eq!(r1.committed, Some(Position::Offset(700)));
    let second = Recorder::default();
    sluice_runtime::run(
        plan(
            counting(2_000, 10, 8, Arc::new(AtomicU64::new(0))),
            &[("s", second.clone())],
            limits,
            dir.path().into(),
        ),
        RunOptions::default(),
    )
    .expect("second run");
    assert_eq!(first.positions(), (1..=700).collect::<Vec<_>>());
    assert_eq!(second.positions(), (701..=2_000).collect::<Vec<_>>());
}

#[test]
fn a_failed_delivery_is_written_again_with_everything_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = Recorder {
        fail_delivery_of: Some(5),
        ..Recorder::default()
    };
    let report = sluice_runtime::run(
        plan(
            counting(3_000, 10, 8, Arc::new(AtomicU64::new(0))),
            &[("s", sink.clone())],
            limits(100, 1 << 30, 10),
            dir.path().into(),
        ),
        RunOptions::default(),
    )
    .expect("run");
    assert_eq!(report.committed, Some(Position::Offset(3_000)));
    let seen = sink.positions();
    assert!(
        seen.len() > 3_000,
        "nothing was replayed: the injected failure did not happen"
    );
    let mut unique = seen.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique,
        (1..=3_000).collect::<Vec<_>>(),
        "the failed batch was lost"
    );
    // Batches are 10 events, one per write: the sixth write (51..=60) failed on delivery. The
    // replay writes it and everything after it again, so the output ends with 51..=3000 in order.
    let replay = seen.iter().rposition(|p| *p == 51).expect("51 was written");
    assert_eq!(seen[replay..].to_vec(), (51..=3_000).collect::<Vec<_>>());
    assert!(
        seen[..replay].iter().all(|p| *p < 51 || *p > 60),
        "the failed delivery was recorded"
    );
}

/// Counters land in whatever recorder is installed; this one keeps them for the test.
#[derive(Default)]
struct Capture {
    counters: Mutex<std::collections::BTreeMap<String, Arc<AtomicU64>>>,
}

struct Count(Arc<AtomicU64>);

impl metrics::CounterFn for Count {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::SeqCst);
    }
    fn absolute(&self, value: u64) {
        self.0.fetch_max(value, Ordering::SeqCst);
    }
}

impl metrics::Recorder for Capture {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        let component = key
            .labels()
            .find(|l| l.key() == "component")
            .map(|l| l.value().to_owned())
            .unwrap_or_default();
        let name = format!("{}{{{component}}}", key.name());
        let cell = self
            .counters
            .lock()
            .unwrap()
            .entry(name)
            .or_default()
            .clone();
        metrics::Counter::from_arc(Arc::new(Count(cell)))
    }
    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

#[test]
fn per_component_counters_count_every_event() {
    let dir = tempfile::tempdir().expect("tempdir");
    let capture = Capture::default();
    let (a, b) = (Recorder::default(), Recorder::default());
    metrics::with_local_recorder(&capture, || {
        sluice_runtime::run(
            plan(
                counting(1_000, 10, 8, Arc::new(AtomicU64::new(0))),
                &[("a", a.clone()), ("b", b.clone())],
                limits(100, 1 << 30, 10),
                dir.path().into(),
            ),
            RunOptions::default(),
        )
        .expect("run");
    });
    let counters = capture.counters.lock().unwrap();
    let get = |name: &str| counters.get(name).map_or(0, |c| c.load(Ordering::SeqCst));
    for component in ["source", "transforms", "sink:a", "sink:b"] {
        assert_eq!(
            get(&format!("sluice_events_received_total{{{component}}}")),
            1_000,
            "{component} received"
        );
        assert_eq!(
            get(&format!("sluice_events_sent_total{{{component}}}")),
            1_000,
            "{component} sent"
        );
        assert_eq!(
            get(&format!("sluice_events_failed_total{{{component}}}")),
            0,
            "{component} failed"
        );
    }
    assert_eq!(a.positions().len(), 1_000);
}
