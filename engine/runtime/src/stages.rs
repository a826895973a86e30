//! The stage loops and the actor that hosts each of them.

use std::collections::VecDeque;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use actix::{Actor, ActorContext, ActorFutureExt, Addr, AsyncContext, Context, WrapFuture};
use tokio::sync::{oneshot, watch};

use super::supervisor::{StageExited, Supervisor};
use crate::metrics::{Observation, Recorder};
use sluice_engine::ack::AckTracker;
use sluice_engine::component::{
    apply_chain, BuildContext, BuildSink, BuildSource, BuildTransform, Delivery, Sink, SinkBatch,
    SourceContext, Transform,
};
use sluice_engine::config::{Backoff, Limits};
use sluice_engine::error::{Classify, ComponentError, ErrorClass};
use sluice_engine::event::ChangeEvent;
use sluice_engine::metrics::ComponentCounters;
use sluice_engine::queue::{BoundedQueue, Popped, QueueItem};

pub(crate) type StageFuture = Pin<Box<dyn Future<Output = Result<(), ComponentError>> + Send>>;

/// Hosts one stage future; reports its end to the supervisor and stops.
pub(crate) struct StageActor {
    pub name: String,
    pub generation: u64,
    pub future: Option<StageFuture>,
    pub abort: watch::Receiver<bool>,
    pub supervisor: Addr<Supervisor>,
}

impl Actor for StageActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let Some(future) = self.future.take() else {
            ctx.stop();
            return;
        };
        let mut abort = self.abort.clone();
        let guarded = async move {
            tokio::select! {
                result = Unwinding(future) => result,
                _ = abort.wait_for(|a| *a) => Ok(()),
            }
        };
        ctx.spawn(guarded.into_actor(self).map(|result, act, ctx| {
            act.supervisor.do_send(StageExited {
                generation: act.generation,
                stage: act.name.clone(),
                result,
            });
            ctx.stop();
        }));
    }
}

/// A stage's future whose panic ends it with a fatal error, so that the supervisor hears of it
/// (a panicking component would otherwise leave its generation waiting for it forever).
struct Unwinding(StageFuture);

impl Future for Unwinding {
    type Output = Result<(), ComponentError>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let future = &mut self.0;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => {
                let what = (panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".to_owned());
                std::task::Poll::Ready(Err(ComponentError::fatal(format!(
                    "the stage panicked (a bug; please report it): {what}"
                ))))
            }
        }
    }
}

/// Where a stage builds its component: the [`BuildContext`]'s fields, owned by the stage's
/// future (which runs on the stage's own runtime).
#[derive(Debug, Clone)]
pub(crate) struct BuildPlace {
    pub pipeline: String,
    pub data_dir: PathBuf,
    pub component: String,
}

impl BuildPlace {
    fn context(&self) -> BuildContext<'_> {
        BuildContext {
            pipeline: &self.pipeline,
            data_dir: &self.data_dir,
            component: &self.component,
        }
    }
}

/// A chain of transforms, built in order.
async fn build_chain(
    specs: &[Arc<dyn BuildTransform>],
    ctx: &BuildContext<'_>,
) -> Result<Vec<Box<dyn Transform>>, ComponentError> {
    let mut chain = Vec::with_capacity(specs.len());
    for spec in specs {
        chain.push(spec.build(ctx).await?);
    }
    Ok(chain)
}

/// What the source stage is started with.
pub(crate) struct SourceStart {
    pub spec: Arc<dyn BuildSource>,
    pub place: BuildPlace,
    /// One per stage after the source: sent once the transforms are built, and once each sink
    /// is built and its health check passed.
    pub ready: Vec<oneshot::Receiver<()>>,
    pub ctx: SourceContext,
    pub queue: Arc<BoundedQueue>,
}

/// Waits until the transforms are built and every sink is built and healthy (not at all when a
/// stop is asked for meanwhile), builds the source and runs it, then closes its
/// queue so that the stages after it drain and finish.
pub(crate) async fn source_stage(start: SourceStart) -> Result<(), ComponentError> {
    let SourceStart {
        spec,
        place,
        ready,
        mut ctx,
        queue,
    } = start;
    let result = async {
        let every_stage_ready = async {
            for ready in ready {
                if ready.await.is_err() {
                    // A stage did not start: it says why, and the generation ends.
                    return false;
                }
            }
            true
        };
        let started = tokio::select! {
            started = every_stage_ready => started,
            // A stop asked for meanwhile: the source is not started at all.
            () = ctx.stopping() => false,
        };
        if !started || ctx.is_stopping() {
            return Ok(());
        }
        let mut source = spec.build(&place.context()).await?;
        source.run(&mut ctx).await
    }
    .await;
    queue.close();
    result
}

/// Builds the pipeline transforms (saying so on `ready`), applies them and fans batches out to
/// every sink queue.
pub(crate) async fn transform_stage(
    (specs, place, ready): (
        Vec<Arc<dyn BuildTransform>>,
        BuildPlace,
        oneshot::Sender<()>,
    ),
    input: Arc<BoundedQueue>,
    outputs: Vec<Arc<BoundedQueue>>,
    limits: Limits,
    (counters, recorder): (ComponentCounters, Recorder),
) -> Result<(), ComponentError> {
    let result = async {
        let mut chain = build_chain(&specs, &place.context()).await?;
        let _ = ready.send(());
        loop {
            match input
                .pop(
                    limits.max_batch_size,
                    limits.max_batch_bytes(),
                    limits.poll_interval.0,
                )
                .await
            {
                Popped::Closed => return Ok(()),
                Popped::Idle => {
                    recorder.tick(Observation::Idle);
                    continue;
                }
                Popped::Items(items) => {
                    for item in items {
                        recorder.observe(item.seq, &item.events);
                        let received = item.events.len();
                        counters.received.increment(received as u64);
                        counters.bytes_received.increment(item.bytes as u64);
                        let (events, bytes) = if chain.is_empty() {
                            (item.events, item.bytes)
                        } else {
                            let started = std::time::Instant::now();
                            let owned =
                                Arc::try_unwrap(item.events).unwrap_or_else(|a| (*a).clone());
                            let out = apply_chain(&mut chain, owned).inspect_err(|_| {
                                counters.failed.increment(received as u64);
                            })?;
                            let bytes = out.iter().map(ChangeEvent::estimated_size).sum();
                            counters.batch_took(started.elapsed());
                            (Arc::new(out), bytes)
                        };
                        counters.sent.increment(events.len() as u64);
                        counters.bytes_sent.increment(bytes as u64);
                        for output in &outputs {
                            let queued = QueueItem {
                                seq: item.seq,
                                events: events.clone(),
                                bytes,
                            };
                            if output.push(queued).await.is_err() {
                                // A sink queue was aborted: the pipeline is being torn down.
                                return Ok(());
                            }
                        }
                    }
                }
            }
        }
    }
    .await;
    recorder.send(Observation::Disconnected);
    for output in &outputs {
        output.close();
    }
    result
}

/// Deliveries a sink may have in flight before the stage waits for the oldest: two lets
/// encoding the next batch overlap making the previous one durable, and bounds the encoded
/// bytes a sink holds to about two batches.
const MAX_IN_FLIGHT: usize = 2;

/// What a sink stage is started with: its component to build, and its place in the pipeline.
pub(crate) struct SinkStart {
    pub spec: Arc<dyn BuildSink>,
    pub transforms: Vec<Arc<dyn BuildTransform>>,
    pub place: BuildPlace,
    /// Sent once the sink is built and its health check passed.
    pub ready: oneshot::Sender<()>,
    pub name: String,
    pub input: Arc<BoundedQueue>,
    pub acker: Arc<AckTracker>,
    pub limits: Limits,
    pub retry: Backoff,
    pub counters: ComponentCounters,
    pub status: crate::status::Status,
}

impl SinkStart {
    /// Builds the sink and its transforms on the stage's runtime, runs the sink's health check,
    /// says it is ready, then drains its queue.
    pub(crate) async fn run(self) -> Result<(), ComponentError> {
        let ctx = self.place.context();
        let mut sink = self.spec.build(&ctx).await?;
        let chain = build_chain(&self.transforms, &ctx).await?;
        sink.health_check().await?;
        let _ = self.ready.send(());
        let stage = SinkStage {
            name: self.name,
            sink,
            chain,
            input: self.input,
            acker: self.acker,
            limits: self.limits,
            retry: self.retry,
            counters: self.counters,
            status: self.status,
            failing: false,
        };
        stage.run().await
    }
}

/// Drains one sink queue: sink transforms, write, deliveries in flight, in-order acknowledgement.
struct SinkStage {
    name: String,
    sink: Box<dyn Sink>,
    chain: Vec<Box<dyn Transform>>,
    input: Arc<BoundedQueue>,
    acker: Arc<AckTracker>,
    limits: Limits,
    retry: Backoff,
    counters: ComponentCounters,
    /// Where a failing write shows (`/health/ready`, the status).
    status: crate::status::Status,
    /// Whether the status shows this sink failing (cleared by its next delivery).
    failing: bool,
}

/// A written batch waiting for its delivery.
/// What a sink is handed at once: shared runs of events.
type Parts = Vec<Arc<Vec<ChangeEvent>>>;

struct InFlight {
    items: Vec<QueueItem>,
    parts: Parts,
    /// Estimated bytes of `parts`.
    bytes: usize,
    /// When its write began.
    started: std::time::Instant,
    delivery: Delivery,
}

/// The next items of a sink's queue: one batch's worth, by events and by bytes.
async fn next_batch(input: &BoundedQueue, limits: Limits) -> Popped {
    input
        .pop(
            limits.max_batch_size,
            limits.max_batch_bytes(),
            limits.poll_interval.0,
        )
        .await
}

impl SinkStage {
    async fn run(mut self) -> Result<(), ComponentError> {
        let mut in_flight: VecDeque<InFlight> = VecDeque::new();
        loop {
            let popped = match in_flight.front_mut() {
                Some(front) => {
                    tokio::select! {
                        biased;
                        delivered = &mut front.delivery => {
                            let done = in_flight.pop_front();
                            self.settle(done, delivered, &mut in_flight).await?;
                            continue;
                        }
                        popped = next_batch(&self.input, self.limits) => popped,
                    }
                }
                None => next_batch(&self.input, self.limits).await,
            };
            match popped {
                Popped::Closed => {
                    while let Some(mut next) = in_flight.pop_front() {
                        let delivered = (&mut next.delivery).await;
                        self.settle(Some(next), delivered, &mut in_flight).await?;
                    }
                    return self.sink.close().await;
                }
                Popped::Idle => {}
                Popped::Items(items) => {
                    let received: usize = items.iter().map(|i| i.events.len()).sum();
                    let received_bytes: usize = items.iter().map(|i| i.bytes).sum();
                    self.counters.received.increment(received as u64);
                    self.counters
                        .bytes_received
                        .increment(received_bytes as u64);
                    let (parts, bytes) = self.transform(&items, (received, received_bytes))?;
                    self.status.taps().offer(&self.name, &parts);
                    let started = std::time::Instant::now();
                    let delivery = match self.sink.write(&SinkBatch::new(&parts)).await {
                        Ok(delivery) => delivery,
                        Err(error) => Box::pin(std::future::ready(Err(error))),
                    };
                    in_flight.push_back(InFlight {
                        items,
                        parts,
                        bytes,
                        started,
                        delivery,
                    });
                    while in_flight.len() >= MAX_IN_FLIGHT {
                        if let Some(mut oldest) = in_flight.pop_front() {
                            let delivered = (&mut oldest.delivery).await;
                            self.settle(Some(oldest), delivered, &mut in_flight).await?;
                        }
                    }
                }
            }
        }
    }

    /// The sink's own transforms over `items` (`received` events, bytes): the parts to write
    /// and their estimated bytes.
    fn transform(
        &mut self,
        items: &[QueueItem],
        (received, bytes): (usize, usize),
    ) -> Result<(Parts, usize), ComponentError> {
        if self.chain.is_empty() {
            return Ok((items.iter().map(|i| i.events.clone()).collect(), bytes));
        }
        let mut out = Vec::with_capacity(received);
        for item in items {
            let owned = Arc::try_unwrap(item.events.clone()).unwrap_or_else(|a| (*a).clone());
            out.extend(apply_chain(&mut self.chain, owned)?);
        }
        let bytes = out.iter().map(ChangeEvent::estimated_size).sum();
        Ok((vec![Arc::new(out)], bytes))
    }

    /// Acknowledges a delivered batch; after a failure, rewrites it and everything after it.
    async fn settle(
        &mut self,
        done: Option<InFlight>,
        delivered: Result<(), ComponentError>,
        in_flight: &mut VecDeque<InFlight>,
    ) -> Result<(), ComponentError> {
        let Some(done) = done else { return Ok(()) };
        match delivered {
            Ok(()) => {
                self.acknowledge(&done);
                Ok(())
            }
            Err(error) => {
                // Let the later deliveries finish (their outcome no longer matters), then write
                // the failed batch and all later ones again, in order, one at a time.
                let mut replay = vec![done];
                while let Some(mut later) = in_flight.pop_front() {
                    let _ = (&mut later.delivery).await;
                    replay.push(later);
                }
                let mut first_error = Some(error);
                for batch in replay {
                    self.write_durably(&batch.parts, first_error.take()).await?;
                    self.acknowledge(&batch);
                }
                Ok(())
            }
        }
    }

    fn acknowledge(&mut self, done: &InFlight) {
        if self.failing {
            self.failing = false;
            self.status.sink_ok(&self.name);
        }
        for item in &done.items {
            self.acker.ack(item.seq);
        }
        let last = done.items.last().and_then(|i| i.events.last());
        if let Some(event) = last {
            self.status.sink_acknowledged(&self.name, &event.position);
        }
        let n: usize = done.parts.iter().map(|p| p.len()).sum();
        self.counters.sent.increment(n as u64);
        self.counters.bytes_sent.increment(done.bytes as u64);
        self.counters.batch_took(done.started.elapsed());
    }

    /// Writes and awaits one batch, retrying with backoff; `failed` is the error of the first
    /// attempt when it already happened.
    async fn write_durably(
        &mut self,
        parts: &[Arc<Vec<ChangeEvent>>],
        mut failed: Option<ComponentError>,
    ) -> Result<(), ComponentError> {
        let sink_batch = SinkBatch::new(parts);
        let mut attempt = 0;
        loop {
            let error = match failed.take() {
                Some(error) => error,
                None => match self.sink.write(&sink_batch).await {
                    Ok(delivery) => match delivery.await {
                        Ok(()) => return Ok(()),
                        Err(error) => error,
                    },
                    Err(error) => error,
                },
            };
            self.counters.failed.increment(sink_batch.len() as u64);
            if error.class() == ErrorClass::Fatal {
                return Err(error);
            }
            attempt += 1;
            if attempt > self.retry.max_retries {
                return Err(ComponentError::fatal(format!(
                    "sink `{}` gave up after {} retries",
                    self.name, self.retry.max_retries
                ))
                .with_source(error));
            }
            let delay = self.retry.delay(attempt);
            (self.status).sink_failing(&self.name, error.chain().to_string());
            self.failing = true;
            tracing::warn!(
                sink = %self.name,
                attempt,
                delay_ms = delay.as_millis() as u64,
                error = %error.chain(),
                "Sink write failed; retrying."
            );
            tokio::time::sleep(delay).await;
        }
    }
}
