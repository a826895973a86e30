#![allow(clippy::unwrap_used, clippy::expect_used)] // benchmark harness: a panic aborts the run
//! Engine benchmark: `cargo bench --bench engine` (add `-- --quick` for a short run).
//!
//! Measures, on this machine, events/s and bytes/s of:
//! - the queue + acknowledgement path alone (pre-built batches, no encoding);
//! - each piece of the hot path in isolation (datagen generation, JSON encoding);
//! - whole pipelines datagen → (no transform) → file / null, JSON with and without schemas.
//!
//! - the transform chain mask → hash → truncate → route alone (each transform, then the chain)
//!   and in a pipeline (`--chain` runs only those cases; `CHAIN_ONLY=<0..3>` keeps one
//!   transform of the chain).
//!
//! Pipelines run several threads (one arbiter per stage), so CPU seconds are reported beside
//! wall-clock time: events per CPU-second is the per-core figure.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_engine::ack::AckTracker;
use sluice_engine::codec::{JsonEncoder, JsonOptions};
use sluice_engine::config::{AnchoredRegex, RegexList};
use sluice_engine::config::{Backoff, DurationSpec, Limits, OffsetsConfig};
use sluice_engine::queue::{BoundedQueue, Popped, QueueItem};
use sluice_engine::{
    BuildContext, BuildSink, BuildSource, BuildTransform, ChangeEvent, ComponentError, Sink,
    Source, Transform,
};
use sluice_runtime::{PipelinePlan, RunOptions, SinkPlan};
use sluice_sinks::file::{FileSink, FileSinkConfig};
use sluice_sinks::null::{NullSink, NullSinkConfig};
use sluice_sources::datagen::{DatagenConfig, DatagenSource, Generator, OpMix};
use sluice_transforms::hash::HashConfig;
use sluice_transforms::mask::MaskConfig;
use sluice_transforms::route::{Route, RouteConfig};
use sluice_transforms::truncate::TruncateConfig;

use sluice_test_support::procstat;

fn datagen(max_events: u64, mix: OpMix) -> DatagenConfig {
    DatagenConfig {
        topic_prefix: "dbserver1".into(),
        database: "inventory".into(),
        schema: "public".into(),
        tables: vec!["customers".into()],
        rate: 0,
        max_events: Some(max_events),
        mix,
        seed: 1,
        payload_bytes: 0,
        tombstones_on_delete: true,
    }
}

fn report(name: &str, events: u64, bytes: u64, wall: Duration, cpu: f64) {
    let secs = wall.as_secs_f64();
    println!(
        "{name:<44} {:>10.0} events/s {:>8.1} MB/s  {:>10.0} events/cpu-s  ({events} events, {:.2}s wall, {:.2}s cpu)",
        events as f64 / secs,
        bytes as f64 / secs / 1e6,
        if cpu > 0.0 { events as f64 / cpu } else { f64::NAN },
        secs,
        cpu
    );
}

fn queue_and_ack(events: u64, batch: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let template: Vec<ChangeEvent> = {
        let mut g = Generator::new(&datagen(batch as u64, OpMix::default()));
        let mut out = Vec::new();
        for _ in 0..batch {
            g.next_step(&mut out);
        }
        out
    };
    let shared = Arc::new(template);
    let (cpu0, t0) = (procstat::cpu_seconds("self"), Instant::now());
    rt.block_on(async {
        let source_q = BoundedQueue::new("bench-source", 8192, 64 << 20);
        let sink_q = BoundedQueue::new("bench-sink", 8192, 64 << 20);
        let acker = Arc::new(AckTracker::new(None));
        let batches = events / batch as u64;
        let producer = {
            let (q, acker, shared) = (source_q.clone(), acker.clone(), shared.clone());
            async move {
                for i in 0..batches {
                    let seq = acker.register(Some(sluice_engine::Position::Offset(i)), 1);
                    let item = QueueItem {
                        seq,
                        events: shared.clone(),
                        bytes: 1 << 20,
                    };
                    if q.push(item).await.is_err() {
                        break;
                    }
                }
                q.close();
            }
        };
        let relay = {
            let (input, output) = (source_q.clone(), sink_q.clone());
            async move {
                while let Popped::Items(items) = input
                    .pop(2048, usize::MAX, Duration::from_millis(100))
                    .await
                {
                    for item in items {
                        if output.push(item).await.is_err() {
                            return;
                        }
                    }
                }
                output.close();
            }
        };
        let consumer = {
            let (q, acker) = (sink_q.clone(), acker.clone());
            async move {
                let mut n = 0u64;
                loop {
                    match q.pop(2048, usize::MAX, Duration::from_millis(100)).await {
                        Popped::Items(items) => {
                            for item in items {
                                n += item.events.len() as u64;
                                acker.ack(item.seq);
                            }
                        }
                        Popped::Idle => {}
                        Popped::Closed => return n,
                    }
                }
            }
        };
        let ((), (), n) = tokio::join!(producer, relay, consumer);
        assert_eq!(acker.in_flight(), 0);
        n
    });
    report(
        &format!("queue+ack path, batches of {batch}"),
        events,
        0,
        t0.elapsed(),
        procstat::cpu_seconds("self") - cpu0,
    );
}

/// Generates `events` steps in batches of 2048 (dropped as they go, as in a pipeline) and keeps
/// the last 100k events as the encoding sample.
fn generation(events: u64) -> Vec<ChangeEvent> {
    let mix = OpMix {
        insert: 60,
        update: 30,
        delete: 10,
    };
    let mut g = Generator::new(&datagen(events, mix));
    let mut sample = Vec::new();
    let mut produced = 0u64;
    let (cpu0, t0) = (procstat::cpu_seconds("self"), Instant::now());
    while g.step() < events {
        let mut batch = Vec::with_capacity(2304);
        for _ in 0..2048.min(events - g.step()) {
            g.next_step(&mut batch);
        }
        produced += batch.len() as u64;
        if events - g.step() < 100_000 {
            sample.extend(batch);
        }
    }
    report(
        "datagen generation alone",
        produced,
        0,
        t0.elapsed(),
        procstat::cpu_seconds("self") - cpu0,
    );
    sample
}

fn encoding(events: &[ChangeEvent], schemas: bool) {
    let encoder = JsonEncoder::new(JsonOptions {
        schemas_enable: schemas,
    });
    let mut buf = Vec::with_capacity(1 << 20);
    let mut bytes = 0u64;
    let (cpu0, t0) = (procstat::cpu_seconds("self"), Instant::now());
    for e in events {
        buf.clear();
        encoder.encode_line(e, false, &mut buf);
        bytes += buf.len() as u64;
    }
    let name = format!("JSON encoding alone, schemas.enable={schemas}");
    report(
        &name,
        events.len() as u64,
        bytes,
        t0.elapsed(),
        procstat::cpu_seconds("self") - cpu0,
    );
    println!(
        "{:<44} {:>10} bytes/record",
        "",
        bytes / events.len().max(1) as u64
    );
}

struct Dg(DatagenConfig);
#[async_trait::async_trait]
impl BuildSource for Dg {
    async fn build(&self, ctx: &BuildContext<'_>) -> Result<Box<dyn Source>, ComponentError> {
        Ok(Box::new(DatagenSource::new(self.0.clone(), ctx)?))
    }
}
enum Out {
    File(FileSinkConfig),
    Null(NullSinkConfig, Arc<std::sync::atomic::AtomicU64>),
}
#[async_trait::async_trait]
impl BuildSink for Out {
    async fn build(&self, ctx: &BuildContext<'_>) -> Result<Box<dyn Sink>, ComponentError> {
        Ok(match self {
            Out::File(c) => Box::new(FileSink::open(c, ctx)?),
            Out::Null(c, bytes) => Box::new(NullSink::new(c, bytes.clone())),
        })
    }
}

/// The issue's chain: mask, hash, truncate, route.
struct Chain(usize);
#[async_trait::async_trait]
impl BuildTransform for Chain {
    async fn build(&self, _ctx: &BuildContext<'_>) -> Result<Box<dyn Transform>, ComponentError> {
        let columns = |p: &str| RegexList(vec![AnchoredRegex::new(p).unwrap()]);
        Ok(match self.0 {
            0 => Box::new(sluice_transforms::mask::build(&MaskConfig {
                columns: columns(r"public\.customers\.ssn"),
                chars: Some(4),
                replacement: None,
            })),
            1 => Box::new(
                sluice_transforms::hash::build(&HashConfig {
                    columns: columns(r"public\.customers\.email"),
                    algorithm: "SHA-256".into(),
                    salt: "CzQMA0cB5K".into(),
                    version: "v1".into(),
                })
                .unwrap(),
            ),
            2 => Box::new(sluice_transforms::truncate::build(&TruncateConfig {
                columns: columns(r"public\.customers\.notes"),
                length: 8,
            })),
            _ => Box::new(Route::new(RouteConfig {
                regex: AnchoredRegex::new(r"dbserver1\.public\.(.*)").unwrap(),
                replacement: "cdc.$1".into(),
            })),
        })
    }
}

fn chain() -> Vec<Arc<dyn BuildTransform>> {
    let only: Option<usize> = std::env::var("CHAIN_ONLY")
        .ok()
        .and_then(|v| v.parse().ok());
    (0..4)
        .filter(|i| only.is_none_or(|o| o == *i))
        .map(|i| Arc::new(Chain(i)) as Arc<dyn BuildTransform>)
        .collect()
}

/// The chain alone, on pre-built events (the clone each event needs is timed separately and
/// subtracted), beside the cost of generating and encoding the same events.
fn chain_cost(events: &[ChangeEvent]) {
    let ctx_dir = tempfile::tempdir().expect("tempdir");
    let ctx = BuildContext {
        pipeline: "bench",
        data_dir: ctx_dir.path(),
        component: "transforms",
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut transforms: Vec<Box<dyn Transform>> = chain()
        .iter()
        .map(|t| rt.block_on(t.build(&ctx)).unwrap())
        .collect();
    let t0 = Instant::now();
    let mut sink = 0usize;
    for e in events {
        sink += e.clone().topic.len();
    }
    let clone = t0.elapsed();
    let t0 = Instant::now();
    let mut out = Vec::with_capacity(4);
    for e in events {
        let mut current = vec![e.clone()];
        for t in transforms.iter_mut() {
            out.clear();
            for e in current.drain(..) {
                t.apply(e, &mut out).unwrap();
            }
            std::mem::swap(&mut current, &mut out);
        }
        sink += current.len();
    }
    let total = t0.elapsed();
    let per = (total.saturating_sub(clone)).as_secs_f64() * 1e9 / events.len() as f64;
    let mut parts = Vec::new();
    for (i, t) in transforms.iter_mut().enumerate() {
        let t0 = Instant::now();
        for e in events {
            out.clear();
            t.apply(e.clone(), &mut out).unwrap();
            sink += out.len();
        }
        let ns = t0.elapsed().saturating_sub(clone).as_secs_f64() * 1e9 / events.len() as f64;
        parts.push(format!(
            "{}: {ns:.0}",
            ["mask", "hash", "truncate", "route"][i]
        ));
    }
    println!("{:<44} {} ns/event", "  each alone", parts.join(", "));
    let encoder = JsonEncoder::new(JsonOptions {
        schemas_enable: false,
    });
    let t0 = Instant::now();
    let mut buf = Vec::new();
    for e in events {
        buf.clear();
        encoder.encode_line(e, false, &mut buf);
        sink += buf.len();
    }
    let enc = t0.elapsed().as_secs_f64() * 1e9 / events.len() as f64;
    println!(
        "{:<44} {per:>10.0} ns/event (JSON encoding without schemas: {enc:.0} ns/event; chain/(chain+encoding) = {:.1}%) [{sink}]",
        "chain mask+hash+truncate+route",
        100.0 * per / (per + enc)
    );
}

fn pipeline(name: &str, events: u64, out: Out, dir: &Path, bytes_of: impl Fn() -> u64) {
    pipeline_with(name, events, out, dir, bytes_of, Vec::new());
}

fn pipeline_with(
    name: &str,
    events: u64,
    out: Out,
    dir: &Path,
    bytes_of: impl Fn() -> u64,
    transforms: Vec<Arc<dyn BuildTransform>>,
) {
    let plan = PipelinePlan {
        name: "bench".into(),
        data_dir: dir.join("data"),
        limits: Limits::default(),
        offsets: OffsetsConfig {
            store: "memory".into(),
            flush_interval: DurationSpec(Duration::from_secs(1)),
            ..OffsetsConfig::default()
        },
        shutdown_timeout: Duration::from_secs(60),
        restart: Backoff::default(),
        admin: None,
        offset_store: None,
        source: Arc::new(Dg(datagen(
            events,
            OpMix {
                insert: 60,
                update: 30,
                delete: 10,
            },
        ))),
        transforms,
        sinks: vec![SinkPlan {
            name: "out".into(),
            spec: Arc::new(out),
            transforms: Vec::new(),
            retry: Backoff::default(),
        }],
    };
    let (cpu0, t0) = (procstat::cpu_seconds("self"), Instant::now());
    let result = sluice_runtime::run(plan, RunOptions::default()).expect("pipeline run");
    report(
        name,
        result.events,
        bytes_of(),
        t0.elapsed(),
        procstat::cpu_seconds("self") - cpu0,
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n: u64 = if quick { 200_000 } else { 1_000_000 };
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "sluice engine benchmark ({} cores), {n} changes per case",
        std::thread::available_parallelism()
            .map(|p| p.get())
            .unwrap_or(1)
    );
    let chain_only = std::env::args().any(|a| a == "--chain");
    for batch in [1, 16, 256, 2048] {
        if chain_only {
            break;
        }
        queue_and_ack(n * batch as u64 / 4, batch);
    }
    let events = generation(n);
    encoding(&events, false);
    encoding(&events, true);
    chain_cost(&events);
    drop(events);
    for (schemas, fsync) in [(false, true), (true, true), (false, false)] {
        if chain_only {
            break;
        }
        let path = dir.path().join(format!("out-{schemas}-{fsync}.jsonl"));
        let config = FileSinkConfig {
            path: path.clone(),
            schemas_enable: schemas,
            headers: false,
            fsync,
            format: Default::default(),
            extension_attributes: true,
            failure_mode: Default::default(),
        };
        let name = format!("datagen→file, schemas={schemas}, fsync={fsync}");
        pipeline(&name, n, Out::File(config), dir.path(), || {
            std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0)
        });
        let _ = std::fs::remove_file(&path);
    }
    for schemas in [false, true] {
        if chain_only {
            break;
        }
        let bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = bytes.clone();
        let name = format!("datagen→null, schemas={schemas}");
        pipeline(
            &name,
            n,
            Out::Null(
                NullSinkConfig {
                    schemas_enable: schemas,
                },
                bytes,
            ),
            dir.path(),
            move || counter.load(std::sync::atomic::Ordering::Relaxed),
        );
    }
    for with_chain in [false, true] {
        let bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = bytes.clone();
        let name = format!(
            "datagen→{}null, schemas=false",
            if with_chain { "chain→" } else { "" }
        );
        pipeline_with(
            &name,
            n,
            Out::Null(
                NullSinkConfig {
                    schemas_enable: false,
                },
                bytes,
            ),
            dir.path(),
            move || counter.load(std::sync::atomic::Ordering::Relaxed),
            if with_chain { chain() } else { Vec::new() },
        );
    }
}
/// The binary's allocator, so that the figures are the product's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
