//! The stage loops and the actor that hosts each of them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use actix::{Actor, ActorContext, ActorFutureExt, Addr, AsyncContext, Context, WrapFuture};
use tokio::sync::watch;

use super::supervisor::{StageExited, Supervisor};
use crate::ack::AckTracker;
use crate::component::{apply_chain, Sink, SinkBatch, Source, SourceContext, Transform};
use crate::config::{Backoff, Limits};
use crate::error::{Classify, ComponentError, ErrorClass};
use crate::event::ChangeEvent;
use crate::metrics::ComponentCounters;
use crate::queue::{BoundedQueue, Popped, QueueItem};

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
                result = future => result,
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

/// Runs the source, then closes its queue so that the stages after it drain and finish.
pub(crate) async fn source_stage(
    mut source: Box<dyn Source>,
    mut ctx: SourceContext,
    queue: Arc<BoundedQueue>,
) -> Result<(), ComponentError> {
    let result = source.run(&mut ctx).await;
    queue.close();
    result
}

/// Applies the pipeline transforms and fans batches out to every sink queue.
pub(crate) async fn transform_stage(
    mut chain: Vec<Box<dyn Transform>>,
    input: Arc<BoundedQueue>,
    outputs: Vec<Arc<BoundedQueue>>,
    limits: Limits,
    counters: ComponentCounters,
) -> Result<(), ComponentError> {
    let result = async {
        loop {
            match input
                .pop(limits.max_batch_size, limits.poll_interval.0)
                .await
            {
                Popped::Closed => return Ok(()),
                Popped::Idle => continue,
                Popped::Items(items) => {
                    for item in items {
                        let received = item.events.len();
                        counters.received.increment(received as u64);
                        let (events, bytes) = if chain.is_empty() {
                            (item.events, item.bytes)
                        } else {
                            let owned =
                                Arc::try_unwrap(item.events).unwrap_or_else(|a| (*a).clone());
                            let out = apply_chain(&mut chain, owned).inspect_err(|_| {
                                counters.failed.increment(received as u64);
                            })?;
                            let bytes = out.iter().map(ChangeEvent::estimated_size).sum();
                            (Arc::new(out), bytes)
                        };
                        counters.sent.increment(events.len() as u64);
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
    for output in &outputs {
        output.close();
    }
    result
}

/// Drains one sink queue: sink transforms, write with retries, acknowledge.
pub(crate) struct SinkStage {
    pub name: String,
    pub sink: Box<dyn Sink>,
    pub chain: Vec<Box<dyn Transform>>,
    pub input: Arc<BoundedQueue>,
    pub acker: Arc<AckTracker>,
    pub limits: Limits,
    pub retry: Backoff,
    pub counters: ComponentCounters,
}

impl SinkStage {
    pub(crate) async fn run(mut self) -> Result<(), ComponentError> {
        loop {
            match self
                .input
                .pop(self.limits.max_batch_size, self.limits.poll_interval.0)
                .await
            {
                Popped::Closed => {
                    return self.sink.close().await;
                }
                Popped::Idle => continue,
                Popped::Items(items) => {
                    let received: usize = items.iter().map(|i| i.events.len()).sum();
                    self.counters.received.increment(received as u64);
                    let parts: Vec<Arc<Vec<ChangeEvent>>> = if self.chain.is_empty() {
                        items.iter().map(|i| i.events.clone()).collect()
                    } else {
                        let mut out = Vec::with_capacity(received);
                        for item in &items {
                            let owned = Arc::try_unwrap(item.events.clone())
                                .unwrap_or_else(|a| (*a).clone());
                            out.extend(apply_chain(&mut self.chain, owned)?);
                        }
                        vec![Arc::new(out)]
                    };
                    let batch = SinkBatch::new(&parts);
                    if !batch.is_empty() {
                        self.write_with_retry(&batch).await?;
                    }
                    for item in &items {
                        self.acker.ack(item.seq);
                    }
                    self.counters.sent.increment(batch.len() as u64);
                }
            }
        }
    }

    async fn write_with_retry(&mut self, batch: &SinkBatch<'_>) -> Result<(), ComponentError> {
        let mut attempt = 0;
        loop {
            match self.sink.write(batch).await {
                Ok(()) => return Ok(()),
                Err(error) => {
                    self.counters.failed.increment(batch.len() as u64);
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
    }
}
