//! Running a pipeline: actors for control, bounded queues for data.
//!
//! ```text
//!                 ┌──────────── Supervisor (actor) ─────────────┐
//!                 │ restarts with backoff, commits offsets,      │
//!                 │ graceful stop with a deadline                │
//!                 └──────────────────────────────────────────────┘
//!  Source ──queue──▶ Transforms ──queue──▶ Sink a ──▶ ack ─┐
//!  (actor)           (actor)     └─queue──▶ Sink b ──▶ ack ─┴─▶ AckTracker ──▶ offsets
//! ```
//!
//! Each stage is an actix actor on its own arbiter (thread); records move only through
//! [`BoundedQueue`](sluice_engine::queue::BoundedQueue)s, never through mailboxes. After a retryable
//! failure the whole data path is torn down and rebuilt from the last committed position, so
//! nothing that was not acknowledged by every sink is skipped.

pub mod admin;
pub mod metrics;
mod stages;
pub mod status;
mod supervisor;
pub mod tap;
pub mod tap_http;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_engine::component::{BuildSink, BuildSource, BuildTransform};
use sluice_engine::config::{Backoff, ComponentSpec, Limits, OffsetsConfig, PipelineConfig};
use sluice_engine::error::ComponentError;
use sluice_engine::event::Position;
use sluice_engine::offsets::OffsetError;

pub use supervisor::{Reporting, Supervisor};

/// One sink of a plan.
#[derive(Clone)]
pub struct SinkPlan {
    /// Unique name.
    pub name: String,
    /// Builds the sink.
    pub spec: Arc<dyn BuildSink>,
    /// Transforms for this sink only.
    pub transforms: Vec<Arc<dyn BuildTransform>>,
    /// Retry policy.
    pub retry: Backoff,
}

/// Everything needed to (re)build a pipeline's components.
#[derive(Clone)]
pub struct PipelinePlan {
    /// Pipeline name.
    pub name: String,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Queue limits.
    pub limits: Limits,
    /// Offset store settings.
    pub offsets: OffsetsConfig,
    /// Graceful stop deadline.
    pub shutdown_timeout: Duration,
    /// Restart policy.
    pub restart: Backoff,
    /// The source.
    pub source: Arc<dyn BuildSource>,
    /// Pipeline-level transforms.
    pub transforms: Vec<Arc<dyn BuildTransform>>,
    /// Sinks.
    pub sinks: Vec<SinkPlan>,
    /// The admin endpoint, off when `None`.
    pub admin: Option<crate::admin::AdminConfig>,
    /// An offset store built outside the engine (`offsets.store: kafka`); used instead of the
    /// engine's own when set.
    pub offset_store: Option<Arc<dyn sluice_engine::offsets::OffsetStore>>,
}

impl std::fmt::Debug for PipelinePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelinePlan")
            .field("name", &self.name)
            .field(
                "sinks",
                &self.sinks.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl PipelinePlan {
    /// The offset store the plan names: the one built outside the engine, else the engine's
    /// `file` (under `data_dir`) or `memory` store.
    pub fn open_offset_store(
        &self,
    ) -> Result<Arc<dyn sluice_engine::offsets::OffsetStore>, sluice_engine::offsets::OffsetError>
    {
        use sluice_engine::offsets::{
            FileOffsetStore, MemoryOffsetStore, OffsetError, OffsetStore,
        };
        match (&self.offset_store, self.offsets.store.as_str()) {
            (Some(store), _) => Ok(store.clone()),
            (None, "file") => {
                FileOffsetStore::open(&self.data_dir).map(|s| Arc::new(s) as Arc<dyn OffsetStore>)
            }
            (None, "memory") => Ok(Arc::new(MemoryOffsetStore::default())),
            (None, other) => Err(OffsetError::Remote {
                store: other.to_owned(),
                message: "no component of this program provides this offset store".into(),
                retryable: false,
            }),
        }
    }

    /// The hold on `data_dir` a run of this plan takes while it runs, when its offsets are
    /// kept there (the `file` store); `None` otherwise.
    pub fn lock_data_dir(
        &self,
    ) -> Result<Option<sluice_engine::offsets::DataDirLock>, sluice_engine::offsets::OffsetError>
    {
        if self.offset_store.is_some() || self.offsets.store != "file" {
            return Ok(None);
        }
        sluice_engine::offsets::DataDirLock::acquire(&self.data_dir, &self.name).map(Some)
    }

    /// A plan from a loaded configuration.
    pub fn from_config<S, T, K>(config: PipelineConfig<S, T, K>) -> Self
    where
        S: ComponentSpec + BuildSource + 'static,
        T: ComponentSpec + BuildTransform + 'static,
        K: ComponentSpec + BuildSink + 'static,
    {
        let transforms = |ts: Vec<T>| {
            ts.into_iter()
                .map(|t| Arc::new(t) as Arc<dyn BuildTransform>)
                .collect::<Vec<_>>()
        };
        PipelinePlan {
            name: config.name,
            data_dir: config.data_dir,
            limits: config.limits,
            offsets: config.offsets,
            shutdown_timeout: config.shutdown_timeout.0,
            restart: config.restart,
            admin: config.admin,
            offset_store: None,
            source: Arc::new(config.source),
            transforms: transforms(config.transforms),
            sinks: config
                .sinks
                .into_iter()
                .map(|s| SinkPlan {
                    name: s.name,
                    spec: Arc::new(s.spec),
                    transforms: transforms(s.transforms),
                    retry: s.retry,
                })
                .collect(),
        }
    }
}

/// How a run should end, besides a signal.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stop gracefully once this many events were emitted by the source.
    pub stop_after_events: Option<u64>,
    /// Stop gracefully once no event arrived for this long and everything is acknowledged.
    pub stop_when_idle: Option<Duration>,
    /// Handle SIGINT/SIGTERM (first: graceful stop; second: immediate stop).
    pub handle_signals: bool,
    /// A graceful stop is requested when this becomes `true` (for embedding and tests).
    pub stop: Option<tokio::sync::watch::Receiver<bool>>,
    /// How a snapshot's progress is shown (bars on a terminal, or log lines).
    pub progress: crate::metrics::ProgressView,
}

/// What a finished run did.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// Events the source emitted (over all restarts).
    pub events: u64,
    /// The position committed last.
    pub committed: Option<Position>,
    /// Restarts after retryable failures.
    pub restarts: u32,
    /// Whether the graceful stop missed its deadline and stages were cut off.
    pub forced: bool,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A component failed for good (fatal error, or retries exhausted).
    #[error("{component}: {message}")]
    Component {
        /// Which component.
        component: String,
        /// The error chain on one line.
        message: String,
        /// Position committed before stopping.
        committed: Option<Position>,
    },
    /// The offset store failed.
    #[error(transparent)]
    Offsets(#[from] OffsetError),
    /// The actor system could not run.
    #[error("runtime: {0}")]
    System(#[from] std::io::Error),
}

impl RunError {
    pub(crate) fn component(
        name: &str,
        error: &ComponentError,
        committed: Option<Position>,
    ) -> Self {
        RunError::Component {
            component: name.to_owned(),
            message: error.chain(),
            committed,
        }
    }
}

/// Runs a pipeline to its end on a new actor system (blocks the calling thread), with its own
/// admin endpoint when it has one.
pub fn run(plan: PipelinePlan, options: RunOptions) -> Result<RunReport, RunError> {
    let status = status::Status::starting(&plan.name);
    run_on(plan, options, status, None)
}

/// Runs a pipeline served by an endpoint outside it (`sluice serve`): it writes `status` and
/// its source reads `signals`. Its own `admin` must be `None`.
pub fn run_attached(
    plan: PipelinePlan,
    options: RunOptions,
    (status, signals): (status::Status, admin::SignalQueue),
) -> Result<RunReport, RunError> {
    run_on(plan, options, status, Some(signals))
}

fn run_on(
    plan: PipelinePlan,
    options: RunOptions,
    status: status::Status,
    signals: Option<admin::SignalQueue>,
) -> Result<RunReport, RunError> {
    let outcome: Arc<Mutex<Option<Result<RunReport, RunError>>>> = Arc::new(Mutex::new(None));
    let system = actix::System::new();
    let slot = outcome.clone();
    let started = system.block_on(async move {
        use actix::Actor;
        let signals = match (&plan.admin, signals) {
            (_, Some(signals)) => Some(signals),
            (Some(admin), None) => {
                let sinks: Vec<String> = plan.sinks.iter().map(|s| s.name.clone()).collect();
                Some(
                    admin::start(admin, (&plan.name, sinks), status.clone())
                        .await?
                        .0,
                )
            }
            (None, None) => None,
        };
        let recorder = metrics::Recorder::start(metrics::RecorderSettings {
            pipeline: plan.name.clone(),
            progress: options.progress,
            plan: status.snapshot_plan(),
            counters: status.source_counters(),
            // Debezium's names, when an admin endpoint serves the metrics (its own, or the
            // server's it is attached to).
            debezium: signals.is_some(),
        })?;
        status.metrics_from(recorder.clone());
        let reporting = supervisor::Reporting {
            signals,
            status,
            recorder: recorder.clone(),
        };
        Supervisor::new(plan, options, slot, reporting).start();
        Ok::<_, std::io::Error>(recorder)
    });
    let recorder = started.map_err(RunError::System)?;
    let ran = system.run();
    // The progress says its last before the run is over.
    recorder.finish();
    ran?;
    let result = outcome.lock().unwrap_or_else(|p| p.into_inner()).take();
    result.unwrap_or_else(|| {
        Err(RunError::System(std::io::Error::other(
            "the pipeline supervisor stopped without a result",
        )))
    })
}
