//! The Kafka store, as Debezium's `KafkaSchemaHistory`: one record per message (no key) on a
//! topic of one partition (its order is the history's), created when missing with unlimited
//! retention. An append returns once the broker acknowledged the message; recovery reads the
//! partition from the beginning up to its end as it was when recovery started.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::config::KafkaHistorySettings;
use super::{HistoryError, HistoryRecord};

/// A history topic.
pub struct KafkaStore {
    settings: KafkaHistorySettings,
    producer: FutureProducer,
}

impl std::fmt::Debug for KafkaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaStore")
            .field("topic", &self.settings.topic)
            .finish_non_exhaustive()
    }
}

fn kafka(what: String) -> impl FnOnce(rdkafka::error::KafkaError) -> HistoryError {
    move |source| HistoryError::Kafka { what, source }
}

impl KafkaStore {
    /// Connects, checks the topic (one partition) and creates it when missing.
    pub async fn connect(settings: KafkaHistorySettings) -> Result<Self, HistoryError> {
        let mut client = ClientConfig::new();
        client
            .set("bootstrap.servers", &settings.bootstrap_servers)
            .set("enable.idempotence", "true")
            .set("acks", "all");
        for (k, v) in settings.producer.iter() {
            client.set(k, v);
        }
        client.set_log_level(RDKafkaLogLevel::Warning);
        let what = format!(
            "the schema history topic `{}` at {}",
            settings.topic, settings.bootstrap_servers
        );
        let producer: FutureProducer = client
            .create()
            .map_err(kafka(format!("{what}: invalid producer properties")))?;
        let timeout = Duration::from_millis(settings.query_timeout_ms);
        let metadata = producer
            .client()
            .fetch_metadata(Some(&settings.topic), timeout)
            .map_err(kafka(format!("{what}: cannot reach the brokers (check `schema.history.internal.kafka.bootstrap.servers`)")))?;
        let partitions = metadata
            .topics()
            .iter()
            .find(|t| t.name() == settings.topic && t.error().is_none())
            .map_or(0, |t| t.partitions().len());
        match partitions {
            0 => create_topic(&client, &settings, &what).await?,
            1 => {}
            n => {
                return Err(HistoryError::Setup(format!(
                    "{what} has {n} partitions: a schema history needs exactly one (its order is the history's); use a new topic with one partition"
                )))
            }
        }
        Ok(KafkaStore { settings, producer })
    }

    /// Whether the topic holds a record.
    pub fn exists(&self) -> Result<bool, HistoryError> {
        let (low, high) = self.watermarks()?;
        Ok(high > low)
    }

    fn watermarks(&self) -> Result<(i64, i64), HistoryError> {
        self.producer
            .client()
            .fetch_watermarks(
                &self.settings.topic,
                0,
                Duration::from_millis(self.settings.query_timeout_ms),
            )
            .map_err(kafka(format!(
                "the schema history topic `{}`: reading its offsets",
                self.settings.topic
            )))
    }

    /// Appends `record`; returns once the broker has it.
    pub async fn append(&mut self, record: &HistoryRecord) -> Result<(), HistoryError> {
        let payload = serde_json::to_vec(record).map_err(HistoryError::Encode)?;
        let message: FutureRecord<'_, (), [u8]> = FutureRecord::to(&self.settings.topic)
            .partition(0)
            .payload(&payload);
        self.producer
            .send(message, Duration::from_secs(30))
            .await
            .map(|_| ())
            .map_err(|(source, _)| HistoryError::Kafka {
                what: format!(
                    "the schema history topic `{}`: writing a record",
                    self.settings.topic
                ),
                source,
            })
    }

    /// Every record up to the end of the topic as it is now, oldest first. Reading gives up
    /// after `recovery.attempts` polls in a row that brought nothing.
    pub fn read_all(&self) -> Result<Vec<HistoryRecord>, HistoryError> {
        let topic = &self.settings.topic;
        let (low, high) = self.watermarks()?;
        if high <= low {
            return Ok(Vec::new());
        }
        let mut client = ClientConfig::new();
        client
            .set("bootstrap.servers", &self.settings.bootstrap_servers)
            .set("group.id", format!("{topic}-recovery"))
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "100");
        for (k, v) in self.settings.consumer.iter() {
            client.set(k, v);
        }
        client.set_log_level(RDKafkaLogLevel::Warning);
        let what = format!("the schema history topic `{topic}`: recovery");
        let consumer: BaseConsumer = client
            .create()
            .map_err(kafka(format!("{what}: invalid consumer properties")))?;
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(topic, 0, Offset::Offset(low))
            .map_err(kafka(what.clone()))?;
        consumer.assign(&list).map_err(kafka(what.clone()))?;
        let mut records = Vec::new();
        let mut next = low;
        let mut idle = 0;
        let poll = Duration::from_millis(self.settings.poll_interval_ms);
        while next < high {
            let Some(message) = consumer.poll(poll) else {
                idle += 1;
                if idle >= self.settings.recovery_attempts {
                    return Err(HistoryError::Setup(format!(
                        "{what}: no record after {idle} reads of {} ms, at offset {next} of {high}; check the brokers, or raise `schema.history.internal.kafka.recovery.attempts`",
                        poll.as_millis()
                    )));
                }
                continue;
            };
            let message = message.map_err(kafka(what.clone()))?;
            idle = 0;
            next = message.offset() + 1;
            let Some(payload) = message.payload() else {
                continue;
            };
            let record =
                serde_json::from_slice(payload).map_err(|source| HistoryError::Corrupt {
                    at: format!("{topic} offset {}", message.offset()),
                    source,
                })?;
            records.push(record);
        }
        Ok(records)
    }
}

async fn create_topic(
    client: &ClientConfig,
    settings: &KafkaHistorySettings,
    what: &str,
) -> Result<(), HistoryError> {
    let admin: AdminClient<DefaultClientContext> = client
        .create()
        .map_err(kafka(format!("{what}: cannot create an admin client")))?;
    let topic = NewTopic::new(&settings.topic, 1, TopicReplication::Fixed(-1))
        .set("cleanup.policy", "delete")
        .set("retention.ms", "-1")
        .set("retention.bytes", "-1");
    let options = AdminOptions::new()
        .operation_timeout(Some(Duration::from_millis(settings.create_timeout_ms)));
    let results = admin
        .create_topics([&topic], &options)
        .await
        .map_err(kafka(format!("{what}: cannot create the topic")))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => {
                return Err(HistoryError::Setup(format!(
                    "{what}: cannot create the topic: {code}"
                )))
            }
        }
    }
    tracing::info!(topic = %settings.topic, "Created the schema history topic.");
    Ok(())
}
