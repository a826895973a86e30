//! `offsets: {store: kafka}`: committed positions in a compacted Kafka topic, one record per
//! pipeline (key: the pipeline name; value: `{"position":..,"committed_at_ms":..}`), as Kafka
//! Connect keeps source offsets in `offset.storage.topic`. A pipeline restarted on another
//! machine, or with its data directory gone, continues from there.

use std::sync::Mutex;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use sluice_engine::offsets::{OffsetError, OffsetStore};
use sluice_engine::Position;

mod config;

pub use config::KafkaOffsetsConfig;

/// How long a commit, a load or the topic's creation may take.
const TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Serialize, Deserialize)]
struct Stored {
    position: Position,
    committed_at_ms: u64,
}

/// Records the outcome of the commit's delivery.
#[derive(Default)]
struct CommitContext {
    failure: Mutex<Option<String>>,
}

impl ClientContext for CommitContext {}

impl ProducerContext for CommitContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            if let Ok(mut f) = self.failure.lock() {
                *f = Some(e.to_string());
            }
        }
    }
}

/// The compacted-topic store.
pub struct KafkaOffsetStore {
    topic: String,
    client: ClientConfig,
    producer: BaseProducer<CommitContext>,
}

impl KafkaOffsetStore {
    /// Connects and creates the topic when missing (one partition, `cleanup.policy=compact`).
    pub fn open(config: &KafkaOffsetsConfig) -> Result<Self, OffsetError> {
        let topic = config.topic.clone();
        let fail = |message: String, retryable| OffsetError::Remote {
            store: format!("kafka topic {topic}"),
            message,
            retryable,
        };
        let servers = config
            .bootstrap_servers
            .clone()
            .ok_or_else(|| fail("`bootstrap.servers` is required".into(), false))?;
        let mut client = ClientConfig::new();
        client.set("bootstrap.servers", &servers);
        for (k, v) in config.properties.iter() {
            client.set(k, v);
        }
        let mut producer_config = client.clone();
        producer_config
            .set("enable.idempotence", "true")
            .set("linger.ms", "0");
        let producer: BaseProducer<CommitContext> = producer_config
            .create_with_context(CommitContext::default())
            .map_err(|e| fail(format!("invalid client properties: {e}"), false))?;
        let metadata = producer
            .client()
            .fetch_metadata(Some(&topic), Timeout::After(TIMEOUT))
            .map_err(|e| {
                fail(
                    format!("cannot reach the Kafka brokers at {servers}: {e}; check `offsets.bootstrap.servers`"),
                    true,
                )
            })?;
        let exists = metadata
            .topics()
            .iter()
            .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty());
        if !exists {
            let admin: AdminClient<DefaultClientContext> = client
                .create()
                .map_err(|e| fail(format!("cannot create an admin client: {e}"), false))?;
            let replication = config.replication_factor;
            let name = topic.clone();
            // The admin client's answer comes from librdkafka's own thread: no async runtime
            // is needed to wait for it (the store is synchronous, as its callers are).
            let created = futures_executor::block_on(async move {
                let new = NewTopic::new(&name, 1, TopicReplication::Fixed(replication))
                    .set("cleanup.policy", "compact");
                let options = AdminOptions::new().operation_timeout(Some(TIMEOUT));
                let result = admin.create_topics([&new], &options).await;
                result.map(|r| r.into_iter().next())
            });
            match created {
                Ok(Some(Ok(_))) | Ok(Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists)))) => {
                    tracing::info!(topic, "Created the Kafka offsets topic.");
                }
                Ok(Some(Err((_, code)))) => {
                    return Err(fail(format!("cannot create the topic: {code}"), false))
                }
                Ok(None) => {
                    return Err(fail(
                        "the broker did not answer the topic creation".into(),
                        true,
                    ))
                }
                Err(e) => return Err(fail(format!("cannot create the topic: {e}"), true)),
            }
        }
        Ok(KafkaOffsetStore {
            topic,
            client,
            producer,
        })
    }

    fn fail(&self, message: String, retryable: bool) -> OffsetError {
        OffsetError::Remote {
            store: format!("kafka topic {}", self.topic),
            message,
            retryable,
        }
    }
}

impl OffsetStore for KafkaOffsetStore {
    fn load(&self, pipeline: &str) -> Result<Option<Position>, OffsetError> {
        let consumer: BaseConsumer = self
            .client
            .clone()
            .set("group.id", "sluice-offsets-reader")
            .set("enable.auto.commit", "false")
            .create()
            .map_err(|e| self.fail(format!("cannot create a consumer: {e}"), false))?;
        let (_, high) = consumer
            .fetch_watermarks(&self.topic, 0, Timeout::After(TIMEOUT))
            .map_err(|e| self.fail(format!("cannot read the topic's end: {e}"), true))?;
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&self.topic, 0, Offset::Beginning)
            .map_err(|e| self.fail(e.to_string(), false))?;
        consumer
            .assign(&list)
            .map_err(|e| self.fail(format!("cannot read the topic: {e}"), true))?;
        let mut latest = None;
        let deadline = std::time::Instant::now() + TIMEOUT;
        let mut next = 0;
        while next < high {
            if std::time::Instant::now() > deadline {
                return Err(self.fail(
                    format!(
                        "read only {next} of its {high} records within {}s",
                        TIMEOUT.as_secs()
                    ),
                    true,
                ));
            }
            let Some(message) = consumer.poll(Duration::from_millis(100)) else {
                continue;
            };
            let message = message.map_err(|e| self.fail(format!("reading failed: {e}"), true))?;
            next = message.offset() + 1;
            if message.key() != Some(pipeline.as_bytes()) {
                continue;
            }
            latest = match message.payload() {
                // A tombstone forgets the pipeline's offsets.
                None => None,
                Some(bytes) => {
                    let stored: Stored = serde_json::from_slice(bytes).map_err(|e| {
                        self.fail(
                            format!(
                                "record at offset {} is not an offset record: {e}",
                                message.offset()
                            ),
                            false,
                        )
                    })?;
                    Some(stored.position)
                }
            };
        }
        Ok(latest)
    }

    fn commit(&self, pipeline: &str, position: &Position) -> Result<(), OffsetError> {
        let committed_at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let value = serde_json::to_vec(&Stored {
            position: position.clone(),
            committed_at_ms,
        })
        .map_err(|e| self.fail(e.to_string(), false))?;
        self.send(
            BaseRecord::to(&self.topic)
                .key(pipeline)
                .payload(value.as_slice()),
        )
    }

    fn reset(&self, pipeline: &str) -> Result<(), OffsetError> {
        // A tombstone: the topic is compacted, and `load` reads it as no position.
        self.send(BaseRecord::<str, [u8]>::to(&self.topic).key(pipeline))
    }
}

impl KafkaOffsetStore {
    /// Sends `record` and waits for its acknowledgement.
    fn send(&self, record: BaseRecord<'_, str, [u8]>) -> Result<(), OffsetError> {
        self.producer
            .send(record)
            .map_err(|(e, _): (KafkaError, _)| {
                self.fail(format!("cannot send the commit: {e}"), true)
            })?;
        self.producer
            .flush(Timeout::After(TIMEOUT))
            .map_err(|e| self.fail(format!("the commit was not acknowledged: {e}"), true))?;
        let failure = self
            .producer
            .context()
            .failure
            .lock()
            .ok()
            .and_then(|mut f| f.take());
        match failure {
            Some(e) => Err(self.fail(format!("the commit failed: {e}"), true)),
            None => Ok(()),
        }
    }
}
