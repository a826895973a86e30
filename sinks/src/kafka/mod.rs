//! `kafka`: one Kafka record per event, acknowledged by the broker's delivery reports.
//!
//! The producer is idempotent and partitions by the Java client's murmur2 hash of the encoded
//! key, so records land where Kafka Connect would put them. A batch's delivery resolves once
//! every record of it is reported; a source position is committed only after that. Retryable
//! failures (broker down, topic gone) fail the batch, and the runtime writes it again;
//! librdkafka's own retries cover short outages within `message.timeout.ms`.

mod client;
mod config;
mod error;
pub mod offsets;
mod topics;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer, PurgeConfig, ThreadedProducer};
use rdkafka::util::Timeout;
use sluice_engine::{BuildContext, ChangeEvent, ComponentError, Delivery, Sink, SinkBatch};

pub use client::is_record_error;
pub use config::{
    FailureMode, HeaderField, KafkaSinkConfig, TopicCreation, TopicGroup, TopicSettings,
};

use crate::format::{EncodeError, Encoder};
use client::{client_config, BatchAck, SinkContext};
use error::KafkaSinkError;
use topics::Topics;

type KafkaProducer = ThreadedProducer<SinkContext>;

/// How long `close` waits for records still in librdkafka's queue.
const CLOSE_FLUSH: Duration = Duration::from_secs(30);

/// The running Kafka sink.
pub struct KafkaSink {
    name: String,
    config: KafkaSinkConfig,
    client_id: String,
    producer: KafkaProducer,
    topics: Topics,
    encoder: Encoder,
    key: Vec<u8>,
    value: Vec<u8>,
    /// Set when a delivery failed: the next write starts with a new producer.
    failed: Arc<AtomicBool>,
}

impl KafkaSink {
    /// The producer and the topic admin, not connected yet: [`Sink::health_check`] reaches the
    /// brokers and learns the existing topics.
    pub fn open(config: &KafkaSinkConfig, ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        config.validate().map_err(KafkaSinkError::Config)?;
        let name = ctx.component.to_owned();
        let client_id = format!("sluice-{}-{}", ctx.pipeline, ctx.component);
        let producer = create_producer(config, &name, &client_id)?;
        let topics = Topics::new(config, &client_id, &name)?;
        let encoder = Encoder::open(&config.format, &name)?;
        Ok(KafkaSink {
            name,
            config: config.clone(),
            client_id,
            producer,
            topics,
            encoder,
            key: Vec::new(),
            value: Vec::new(),
            failed: Arc::new(AtomicBool::new(false)),
        })
    }

    fn headers(&self, event: &ChangeEvent) -> Option<OwnedHeaders> {
        if event.headers.is_empty() && self.config.headers.is_empty() {
            return None;
        }
        let mut headers = OwnedHeaders::new_with_capacity(event.headers.len() + 3);
        for h in &event.headers {
            headers = headers.insert(Header {
                key: &h.name,
                value: Some(&h.value),
            });
        }
        for field in &self.config.headers {
            let value = match field {
                HeaderField::Op => event.op().map(|op| op.code().to_owned()),
                HeaderField::Table => {
                    let part = |n| {
                        event
                            .source_field(n)
                            .and_then(|v| v.as_str())
                            .map(str::to_owned)
                    };
                    match (part("schema"), part("table")) {
                        (Some(s), Some(t)) => Some(format!("{s}.{t}")),
                        (None, Some(t)) => Some(t),
                        _ => None,
                    }
                }
                HeaderField::Position => Some(event.position.to_string()),
            };
            if let Some(value) = value {
                headers = headers.insert(Header {
                    key: field.name(),
                    value: Some(value.as_bytes()),
                });
            }
        }
        Some(headers)
    }

    /// Encodes the event's key and value into `self.key` / `self.value`; `Ok(false)` when the
    /// failure handling mode skipped it.
    async fn encode(&mut self, event: &ChangeEvent) -> Result<bool, ComponentError> {
        let encoded = self
            .encoder
            .encode(event, &mut self.key, &mut self.value)
            .await;
        match encoded {
            Ok(()) => Ok(true),
            Err(EncodeError::Service(e)) => Err(e),
            Err(EncodeError::Record(reason)) => match self.config.failure_mode {
                FailureMode::Fail => Err(ComponentError::fatal(format!(
                    "sink `{}`: {reason}; set `event.processing.failure.handling.mode: warn` to skip such records",
                    self.name
                ))),
                FailureMode::Warn => {
                    tracing::warn!(sink = %self.name, %reason, "Skipped a record (event.processing.failure.handling.mode: warn).");
                    Ok(false)
                }
                FailureMode::Skip => Ok(false),
            },
        }
    }

    /// Hands one encoded record to librdkafka, waiting while its queue is full.
    async fn send(&mut self, event: &ChangeEvent, ack: &Arc<BatchAck>) {
        let headers = self.headers(event);
        loop {
            let mut record: BaseRecord<'_, [u8], [u8], _> =
                BaseRecord::with_opaque_to(&event.topic, ack.clone());
            if event.key.is_some() {
                record = record.key(&self.key[..]);
            }
            if event.value.is_some() {
                record = record.payload(&self.value[..]);
            }
            if let Some(h) = &headers {
                record = record.headers(h.clone());
            }
            ack.add();
            match self.producer.send(record) {
                Ok(()) => return,
                Err((error, _)) => {
                    // Not handed over: take the count back.
                    ack.pending_rollback();
                    if matches!(
                        error,
                        KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)
                    ) {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        continue;
                    }
                    let key = event
                        .key
                        .as_ref()
                        .map(|_| String::from_utf8_lossy(&self.key).into_owned());
                    ack.refused(&event.topic, key.as_deref(), &error);
                    return;
                }
            }
        }
    }

    /// After a failed delivery the batch is written again by a new producer: the old one's
    /// idempotence state (producer id, sequence numbers) may be unknown to a broker that lost
    /// its data, and librdkafka then times out every record. Nothing is in flight when a
    /// failed batch is written again, so nothing is lost by purging.
    fn renew_if_failed(&mut self) -> Result<(), ComponentError> {
        let fatal = self.producer.client().fatal_error();
        if !self.failed.swap(false, Ordering::AcqRel) && fatal.is_none() {
            return Ok(());
        }
        if let Some((code, reason)) = fatal {
            tracing::warn!(sink = %self.name, ?code, reason, "The Kafka producer hit a fatal error.");
        }
        tracing::info!(sink = %self.name, "Creating a new Kafka producer for the retry.");
        self.producer
            .purge(PurgeConfig::default().queue().inflight());
        self.producer = create_producer(&self.config, &self.name, &self.client_id)?;
        Ok(())
    }
}

fn create_producer(
    config: &KafkaSinkConfig,
    sink: &str,
    client_id: &str,
) -> Result<KafkaProducer, ComponentError> {
    client_config(config, client_id)
        .create_with_context(SinkContext::default())
        .map_err(|source| {
            ComponentError::from(KafkaSinkError::Producer {
                sink: sink.to_owned(),
                source,
            })
        })
}

#[async_trait]
impl Sink for KafkaSink {
    /// Checks that the brokers answer within `connect.timeout` and learns the existing topics
    /// (librdkafka's metadata request blocks: it runs on this sink's own stage thread), then
    /// reaches the format's services.
    async fn health_check(&mut self) -> Result<(), ComponentError> {
        let timeout = self.config.connect_timeout.0;
        let metadata = (self.producer.client())
            .fetch_metadata(None, Timeout::After(timeout))
            .map_err(|e| {
                client::unreachable(
                    &self.name,
                    self.config.servers(),
                    timeout,
                    &e,
                    self.producer.context().last_error(),
                )
            })?;
        (self.topics).learn(metadata.topics().iter().map(|t| t.name().to_owned()));
        tracing::info!(sink = %self.name, brokers = metadata.brokers().len(), topics = metadata.topics().len(), "Connected to Kafka.");
        self.encoder.health_check().await
    }

    async fn write(&mut self, batch: &SinkBatch<'_>) -> Result<Delivery, ComponentError> {
        self.renew_if_failed()?;
        self.topics.ensure(batch.iter().map(|e| &*e.topic)).await?;
        let (ack, done) = BatchAck::new(self.config.failure_mode);
        for event in batch.iter() {
            if self.encode(event).await? {
                self.send(event, &ack).await;
            }
        }
        ack.sealed();
        let forget = self.topics.forgetter();
        let failed = self.failed.clone();
        Ok(Box::pin(async move {
            if done.await.is_err() {
                return Err(KafkaSinkError::Closed.into());
            }
            forget.forget(ack.unknown_topics());
            let outcome = ack.outcome();
            if outcome.is_err() {
                failed.store(true, Ordering::Release);
            }
            outcome
        }))
    }

    async fn close(&mut self) -> Result<(), ComponentError> {
        self.producer
            .flush(Timeout::After(CLOSE_FLUSH))
            .map_err(|source| {
                ComponentError::from(KafkaSinkError::Unflushed {
                    sink: self.name.clone(),
                    seconds: CLOSE_FLUSH.as_secs(),
                    source,
                })
            })
    }
}
