//! The pipeline supervisor: builds a generation of stages, commits offsets, restarts after
//! failures, and stops gracefully.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::{
    Actor, ActorContext, ActorFutureExt, Addr, Arbiter, AsyncContext, Context, Handler, Message,
    SpawnHandle, WrapFuture,
};
use tokio::sync::{oneshot, watch};

use super::stages::{self, BuildPlace, SinkStart, SourceStart, StageActor, StageFuture};
use super::{PipelinePlan, RunError, RunOptions, RunReport};
use sluice_engine::ack::AckTracker;
use sluice_engine::component::{
    now_ms, Lifecycle, Outlet, SourceContext, SourceReports, SourceWiring,
};
use sluice_engine::error::{Classify, ComponentError, ErrorClass};
use sluice_engine::event::Position;
use sluice_engine::metrics::{self, ComponentCounters};
use sluice_engine::offsets::OffsetStore;
use sluice_engine::queue::BoundedQueue;

/// A stage finished (successfully, with an error, or aborted).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct StageExited {
    pub generation: u64,
    pub stage: String,
    pub result: Result<(), ComponentError>,
}

/// Requests a graceful stop (a second request stops at once).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct Stop;

struct Generation {
    id: u64,
    acker: Arc<AckTracker>,
    queues: Vec<Arc<BoundedQueue>>,
    shutdown_tx: Arc<watch::Sender<bool>>,
    abort_tx: watch::Sender<bool>,
    arbiters: Vec<Arbiter>,
    live: usize,
    failure: Option<(String, ComponentError)>,
}

/// Owns a pipeline's lifecycle.
pub struct Supervisor {
    plan: PipelinePlan,
    options: RunOptions,
    outcome: Arc<Mutex<Option<Result<RunReport, RunError>>>>,
    store: Option<Arc<dyn OffsetStore>>,
    /// The hold on `data_dir` while the pipeline runs (file offsets), let go when it ends.
    data_dir_lock: Option<sluice_engine::offsets::DataDirLock>,
    committed: Option<Position>,
    committed_tx: watch::Sender<Option<Position>>,
    emitted: Arc<AtomicU64>,
    last_event_ms: Arc<AtomicU64>,
    /// When a commit a source asked for ([`CommitSoon`]) last moved the committed position
    /// (`--stop-when-idle` counts it as activity).
    last_commit_ms: u64,
    /// Sources' requests for a commit as soon as possible ([`SourceContext::commit_soon`]).
    commit_soon: Arc<tokio::sync::Notify>,
    next_generation: u64,
    current: Option<Generation>,
    /// Signals from the admin endpoint, handed to every generation's source.
    signals: Option<crate::admin::SignalQueue>,
    /// What the admin endpoint shows.
    status: crate::status::Status,
    /// The pipeline's metrics recorder (Debezium's metrics with an admin endpoint, and the
    /// snapshot's progress), across generations: ticked by the flush clock too, so a snapshot
    /// a sink holds back still says where it is.
    recorder: crate::metrics::Recorder,
    restarts: u32,
    consecutive_failures: u32,
    committed_at_failure: Option<Position>,
    stopping: bool,
    forced: bool,
    deadline: Option<SpawnHandle>,
}

use crate::metrics::Observation;
use crate::status::State;

/// What a supervisor reports to and hears from: the admin endpoint's signals, the status it
/// writes, the metrics recorder it tells.
pub struct Reporting {
    pub signals: Option<crate::admin::SignalQueue>,
    pub status: crate::status::Status,
    pub recorder: crate::metrics::Recorder,
}

impl Supervisor {
    /// A supervisor that will write its outcome into `outcome` and stop the actor system.
    pub fn new(
        plan: PipelinePlan,
        options: RunOptions,
        outcome: Arc<Mutex<Option<Result<RunReport, RunError>>>>,
        reporting: Reporting,
    ) -> Self {
        let Reporting {
            signals,
            status,
            recorder,
        } = reporting;
        let (committed_tx, _) = watch::channel(None);
        let (emitted, last_event_ms) = status.counters();
        Supervisor {
            plan,
            options,
            outcome,
            store: None,
            data_dir_lock: None,
            committed: None,
            committed_tx,
            emitted,
            last_event_ms,
            last_commit_ms: 0,
            commit_soon: Arc::new(tokio::sync::Notify::new()),
            next_generation: 0,
            current: None,
            signals,
            status,
            recorder,
            restarts: 0,
            consecutive_failures: 0,
            committed_at_failure: None,
            stopping: false,
            forced: false,
            deadline: None,
        }
    }

    fn finish(&mut self, result: Result<RunReport, RunError>, ctx: &mut Context<Self>) {
        if let Ok(mut slot) = self.outcome.lock() {
            *slot = Some(result);
        }
        self.data_dir_lock = None;
        ctx.stop();
        actix::System::current().stop();
    }

    /// Commits, stopping the pipeline when the store fails for good.
    fn flush(&mut self, ctx: &mut Context<Self>) {
        if let Err(e) = self.commit() {
            tracing::error!(error = %e, "Committing offsets failed.");
            if matches!(&e, RunError::Offsets(o) if o.class() == ErrorClass::Fatal) {
                self.abort_generation();
                self.finish(Err(e), ctx);
            }
        }
    }

    /// Persists the acknowledged position if it moved.
    fn commit(&mut self) -> Result<(), RunError> {
        let Some(generation) = &self.current else {
            return Ok(());
        };
        let acked = generation.acker.acked();
        // The time gauges move while the stages wait (a sink holding the pipeline back).
        self.recorder.tick(Observation::Clock);
        let lag = generation.acker.oldest_pending();
        ::metrics::gauge!(metrics::COMMIT_LAG, "pipeline" => self.plan.name.clone())
            .set(lag.as_secs_f64());
        self.status.commit_lag(lag);
        if acked.is_some() && acked != self.committed {
            if let (Some(store), Some(position)) = (&self.store, &acked) {
                store.commit(&self.plan.name, position)?;
                ::metrics::counter!(metrics::OFFSET_COMMITS, "pipeline" => self.plan.name.clone())
                    .increment(1);
            }
            self.committed = acked;
            if let Some(position) = &self.committed {
                self.status.committed(position);
            }
            let _ = self.committed_tx.send(self.committed.clone());
        }
        Ok(())
    }

    fn start_generation(&mut self, ctx: &mut Context<Self>) {
        let id = self.next_generation;
        self.next_generation += 1;
        let generation = self.build_generation(id, ctx.address());
        tracing::info!(
            pipeline = %self.plan.name,
            generation = id,
            resume_from = ?self.committed,
            "Pipeline started."
        );
        self.status.generation_started();
        // A stop requested from inside (a stop condition met by the source) goes through the
        // same graceful path, with its deadline.
        let mut requested = generation.shutdown_tx.subscribe();
        let id = generation.id;
        self.current = Some(generation);
        ctx.spawn(
            async move { requested.wait_for(|s| *s).await.is_ok() }
                .into_actor(self)
                .map(move |stop, act, ctx| {
                    let current = act.current.as_ref().is_some_and(|g| g.id == id);
                    if stop && current && !act.stopping {
                        act.begin_stop(ctx);
                    }
                }),
        );
    }

    /// A generation's stages, wired: each builds its component on its own runtime, the sinks
    /// first (the source starts once every sink's health check passed).
    fn build_generation(&mut self, id: u64, me: Addr<Supervisor>) -> Generation {
        let plan = &self.plan;
        let limits = plan.limits;
        let max_bytes = usize::try_from(limits.max_queue_size_bytes).unwrap_or(usize::MAX);
        let place = |component: &str| BuildPlace {
            pipeline: plan.name.clone(),
            data_dir: plan.data_dir.clone(),
            component: component.to_owned(),
        };
        let source_queue =
            BoundedQueue::of_pipeline(&plan.name, "source", limits.max_queue_size, max_bytes);
        let acker = Arc::new(AckTracker::new(self.committed.clone()));
        let (shutdown_tx, _) = watch::channel(self.stopping);
        let shutdown_tx = Arc::new(shutdown_tx);
        let (abort_tx, abort_rx) = watch::channel(false);

        let (sink_stages, sink_queues, sinks_ready) =
            sink_starts(plan, &acker, max_bytes, &self.status);
        let (transforms_ready, transforms_built) = tokio::sync::oneshot::channel();
        let mut ready = vec![transforms_built];
        ready.extend(sinks_ready);
        let mut queues = vec![source_queue.clone()];
        queues.extend(sink_queues);
        (self.status).set_queues(queues.clone(), (limits.max_queue_size, max_bytes));
        let source_ctx = SourceContext::new(SourceWiring {
            pipeline: plan.name.clone(),
            data_dir: plan.data_dir.clone(),
            resume_from: self.committed.clone(),
            outlet: Outlet {
                queue: source_queue.clone(),
                acker: acker.clone(),
                sinks: plan.sinks.len() as u32,
                limits,
                stop_after: self.options.stop_after_events,
                emitted: self.emitted.clone(),
                last_event_ms: self.last_event_ms.clone(),
            },
            lifecycle: Lifecycle {
                connected: self.status.fresh_connected(),
                shutdown_tx: shutdown_tx.clone(),
                committed: self.committed_tx.subscribe(),
                commit_soon: self.commit_soon.clone(),
            },
            signals: self.signals.clone(),
            reports: SourceReports {
                snapshot_plan: self.status.snapshot_plan(),
                source_counters: self.status.source_counters(),
            },
        });

        // Debezium's metrics (when an admin endpoint serves them) are kept across generations:
        // their counts go on. Where the last source said its snapshot ended is forgotten now,
        // before the new one can say it again (the recorder may be behind).
        self.status.source_counters().forget_snapshot_end();
        (self.recorder).send(Observation::Generation {
            queue: source_queue.clone(),
            capacity: (limits.max_queue_size, max_bytes),
        });
        let mut futures: Vec<(String, StageFuture)> = Vec::new();
        futures.push((
            "source".to_owned(),
            Box::pin(stages::source_stage(SourceStart {
                spec: plan.source.clone(),
                place: place("source"),
                ready,
                ctx: source_ctx,
                queue: source_queue.clone(),
            })),
        ));
        futures.push((
            "transforms".to_owned(),
            Box::pin(stages::transform_stage(
                (
                    plan.transforms.clone(),
                    place("transforms"),
                    transforms_ready,
                ),
                source_queue.clone(),
                queues[1..].to_vec(),
                limits,
                (
                    match plan.transforms.is_empty() {
                        true => ComponentCounters::new(&plan.name, "transforms"),
                        false => ComponentCounters::timed(&plan.name, "transforms"),
                    },
                    self.recorder.clone(),
                ),
            )),
        ));
        for stage in sink_stages {
            futures.push((format!("sink:{}", stage.name), Box::pin(stage.run())));
        }

        let live = futures.len();
        let arbiters = start_stages(&plan.name, id, futures, &abort_rx, &me);
        Generation {
            id,
            acker,
            queues,
            shutdown_tx,
            abort_tx,
            arbiters,
            live,
            failure: None,
        }
    }

    /// Cuts the current generation off: stages stop at once, queued events are dropped (they
    /// were not acknowledged, so they come again from the source after a restart).
    fn abort_generation(&mut self) {
        if let Some(generation) = &self.current {
            let _ = generation.abort_tx.send(true);
            for queue in &generation.queues {
                queue.abort();
            }
        }
    }

    /// The generation's source is gone (also when its stages were cut off before they could
    /// say so): Debezium's `Connected` 0, a snapshot it was reading aborted.
    fn source_gone(&self) {
        self.recorder.send(Observation::Disconnected);
    }

    fn on_failure(&mut self, stage: String, error: ComponentError, ctx: &mut Context<Self>) {
        self.source_gone();
        if let Err(e) = self.commit() {
            tracing::error!(error = %e, "Committing offsets failed.");
        }
        let progressed = self.committed != self.committed_at_failure;
        if progressed {
            self.consecutive_failures = 0;
        }
        self.committed_at_failure = self.committed.clone();
        self.consecutive_failures += 1;
        let policy = self.plan.restart;
        let retry = error.class() == ErrorClass::Retryable
            && !self.stopping
            && self.consecutive_failures <= policy.max_retries;
        if !retry {
            tracing::error!(pipeline = %self.plan.name, stage = %stage, error = %error.chain(), "Pipeline stopped.");
            (self.status).failed(
                &stage,
                error.chain().to_string(),
                State::Failed,
                self.restarts,
            );
            let err = RunError::component(&stage, &error, self.committed.clone());
            self.finish(Err(err), ctx);
            return;
        }
        self.restarts += 1;
        (self.status).failed(
            &stage,
            error.chain().to_string(),
            State::Restarting,
            self.restarts,
        );
        ::metrics::counter!(metrics::RESTARTS, "pipeline" => self.plan.name.clone()).increment(1);
        let delay = policy.delay(self.consecutive_failures);
        tracing::warn!(
            pipeline = %self.plan.name,
            stage = %stage,
            error = %error.chain(),
            attempt = self.consecutive_failures,
            delay_ms = delay.as_millis() as u64,
            resume_from = ?self.committed,
            "Stage failed; restarting the pipeline from the last committed position."
        );
        ctx.run_later(delay, |act, ctx| {
            if act.stopping {
                act.finish_ok(ctx);
            } else {
                act.start_generation(ctx);
            }
        });
    }

    fn finish_ok(&mut self, ctx: &mut Context<Self>) {
        self.source_gone();
        self.status.set_state(State::Stopped);
        let result = self.commit().map(|()| RunReport {
            events: self.emitted.load(Ordering::Relaxed),
            committed: self.committed.clone(),
            restarts: self.restarts,
            forced: self.forced,
        });
        tracing::info!(pipeline = %self.plan.name, committed = ?self.committed, "Pipeline stopped.");
        self.finish(result, ctx);
    }

    fn begin_stop(&mut self, ctx: &mut Context<Self>) {
        if self.stopping {
            tracing::warn!("Second stop request: stopping now.");
            self.forced = true;
            self.abort_generation();
            return;
        }
        self.stopping = true;
        self.status.set_state(State::Stopping);
        match &self.current {
            Some(generation) => {
                let _ = generation.shutdown_tx.send(true);
                let timeout = self.plan.shutdown_timeout;
                self.deadline = Some(ctx.run_later(timeout, move |act, _| {
                    tracing::warn!(
                        timeout_ms = timeout.as_millis() as u64,
                        "Graceful stop missed its deadline; cutting stages off."
                    );
                    act.forced = true;
                    act.abort_generation();
                }));
            }
            None => self.finish_ok(ctx),
        }
    }

    fn watch_signals(&self, me: Addr<Supervisor>) {
        actix::spawn(async move {
            #[cfg(unix)]
            {
                use tokio::signal::unix::{signal, SignalKind};
                let (Ok(mut int), Ok(mut term)) = (
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::terminate()),
                ) else {
                    tracing::warn!("Cannot install signal handlers.");
                    return;
                };
                loop {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                    tracing::info!("Stop signal received.");
                    me.do_send(Stop);
                }
            }
            #[cfg(not(unix))]
            loop {
                if tokio::signal::ctrl_c().await.is_err() {
                    return;
                }
                me.do_send(Stop);
            }
        });
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let loaded = self.plan.lock_data_dir().and_then(|lock| {
            let store = self.plan.open_offset_store()?;
            let position = store.load(&self.plan.name)?;
            Ok((lock, store, position))
        });
        match loaded {
            Ok((lock, store, position)) => {
                self.data_dir_lock = lock;
                self.store = Some(store);
                self.committed = position;
                let _ = self.committed_tx.send(self.committed.clone());
            }
            Err(e) => {
                (self.status).failed("offsets", e.to_string(), State::Failed, 0);
                self.finish(Err(e.into()), ctx);
                return;
            }
        }
        if self.options.handle_signals {
            self.watch_signals(ctx.address());
        }
        if let Some(mut stop) = self.options.stop.clone() {
            let me = ctx.address();
            actix::spawn(async move {
                if stop.wait_for(|s| *s).await.is_ok() {
                    me.do_send(Stop);
                }
            });
        }
        ctx.run_interval(self.plan.offsets.flush_interval.0, |act, ctx| {
            act.flush(ctx)
        });
        let (asked, me) = (self.commit_soon.clone(), ctx.address());
        actix::spawn(async move {
            loop {
                asked.notified().await;
                if !me.connected() {
                    return;
                }
                me.do_send(CommitSoon(0));
            }
        });
        if let Some(idle) = self.options.stop_when_idle {
            let tick = (idle / 4).clamp(Duration::from_millis(10), Duration::from_millis(250));
            ctx.run_interval(tick, move |act, ctx| {
                // A commit a source asked for counts as the pipeline moving (SQLite's first
                // snapshot waits for one before its first row).
                let last = (act.last_event_ms.load(Ordering::Relaxed)).max(act.last_commit_ms);
                let quiet = now_ms().saturating_sub(last);
                let drained = act
                    .current
                    .as_ref()
                    .is_some_and(|g| g.acker.in_flight() == 0);
                if !act.stopping && drained && quiet >= idle.as_millis() as u64 {
                    tracing::info!(idle_ms = quiet, "No new events; stopping.");
                    act.begin_stop(ctx);
                }
            });
        }
        self.start_generation(ctx);
    }
}

/// A source asked for a commit as soon as what it emitted is acknowledged (the attempt: tried
/// every 5 ms until the committed position moves, for a second at most; the source may ask
/// again, and the flush clock goes on anyway).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
struct CommitSoon(u32);

impl Handler<CommitSoon> for Supervisor {
    type Result = ();
    fn handle(&mut self, CommitSoon(attempt): CommitSoon, ctx: &mut Self::Context) {
        if self.current.is_none() || self.stopping {
            return;
        }
        let before = self.committed.clone();
        self.flush(ctx);
        if self.committed != before {
            self.last_commit_ms = now_ms();
        } else if attempt < 200 {
            ctx.notify_later(CommitSoon(attempt + 1), Duration::from_millis(5));
        }
    }
}

impl Handler<Stop> for Supervisor {
    type Result = ();
    fn handle(&mut self, _: Stop, ctx: &mut Self::Context) {
        self.begin_stop(ctx);
    }
}

impl Handler<StageExited> for Supervisor {
    type Result = ();
    fn handle(&mut self, msg: StageExited, ctx: &mut Self::Context) {
        let Some(generation) = self.current.as_mut() else {
            return;
        };
        if generation.id != msg.generation {
            return;
        }
        generation.live = generation.live.saturating_sub(1);
        if let Err(error) = msg.result {
            tracing::error!(stage = %msg.stage, error = %error.chain(), "Stage failed.");
            if generation.failure.is_none() {
                generation.failure = Some((msg.stage.clone(), error));
                self.abort_generation();
            }
        }
        let Some(generation) = self.current.as_mut() else {
            return;
        };
        if generation.live > 0 {
            return;
        }
        // Every stage of this generation has ended.
        let failure = generation.failure.take();
        if let Err(e) = self.commit() {
            tracing::error!(error = %e, "Committing offsets failed.");
        }
        if let Some(generation) = self.current.take() {
            for arbiter in generation.arbiters {
                arbiter.stop();
            }
        }
        if let Some(handle) = self.deadline.take() {
            ctx.cancel_future(handle);
        }
        match failure {
            Some((stage, error)) => self.on_failure(stage, error, ctx),
            None => self.finish_ok(ctx),
        }
    }
}

/// The sink stages, their input queues, and the receivers of their readiness.
type SinkStarts = (
    Vec<SinkStart>,
    Vec<Arc<BoundedQueue>>,
    Vec<oneshot::Receiver<()>>,
);

/// Each sink of `plan` with its own transforms and input queue, to be built by its stage.
fn sink_starts(
    plan: &PipelinePlan,
    acker: &Arc<AckTracker>,
    max_bytes: usize,
    status: &crate::status::Status,
) -> SinkStarts {
    let limits = plan.limits;
    let (mut starts, mut queues, mut ready) = (Vec::new(), Vec::new(), Vec::new());
    for sink in &plan.sinks {
        let queue = BoundedQueue::of_pipeline(
            &plan.name,
            format!("sink:{}", sink.name),
            limits.max_queue_size,
            max_bytes,
        );
        queues.push(queue.clone());
        let (ready_tx, ready_rx) = oneshot::channel();
        ready.push(ready_rx);
        starts.push(SinkStart {
            spec: sink.spec.clone(),
            transforms: sink.transforms.clone(),
            place: BuildPlace {
                pipeline: plan.name.clone(),
                data_dir: plan.data_dir.clone(),
                component: sink.name.clone(),
            },
            ready: ready_tx,
            name: sink.name.clone(),
            input: queue,
            acker: acker.clone(),
            limits,
            retry: sink.retry,
            counters: ComponentCounters::timed(&plan.name, &format!("sink:{}", sink.name)),
            status: status.clone(),
        });
    }
    (starts, queues, ready)
}

/// Each stage on an arbiter (thread) of its own, inside a span naming its pipeline, component
/// and generation, so that every line it logs says where it comes from.
fn start_stages(
    pipeline: &str,
    id: u64,
    futures: Vec<(String, StageFuture)>,
    abort_rx: &watch::Receiver<bool>,
    me: &Addr<Supervisor>,
) -> Vec<Arbiter> {
    let mut arbiters = Vec::new();
    for (name, future) in futures {
        let span =
            tracing::info_span!("stage", pipeline = %pipeline, component = %name, generation = id);
        let future: StageFuture = Box::pin(tracing::Instrument::instrument(future, span));
        let arbiter = Arbiter::new();
        let abort = abort_rx.clone();
        let supervisor = me.clone();
        StageActor::start_in_arbiter(&arbiter.handle(), move |_| StageActor {
            name,
            generation: id,
            future: Some(future),
            abort,
            supervisor,
        });
        arbiters.push(arbiter);
    }
    arbiters
}
