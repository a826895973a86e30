//! The `kafka` signal channel (Debezium's `KafkaSignalChannel`): signals are records of a
//! topic (`signal.kafka.topic`, default `<topic.prefix>-signal`) whose key equals the
//! connector's `topic.prefix` and whose value is the signal as JSON
//! (`{"id":..,"type":..,"data":{..}}`). Records with another key are ignored. The topic's
//! single partition is read from the consumer group's committed offset (`signal.kafka.groupId`),
//! or from the beginning, and a signal's offset is committed once it was handled.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

pub use super::{KafkaSignalSettings, SIGNAL_CONSUMER_PREFIX};

/// How long the startup checks wait for the brokers.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the `kafka` signal channel cannot be opened or read (`channel` names its topic and
/// brokers). Retryable: the brokers may come back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KafkaSignalError {
    #[error("{channel}: invalid consumer properties: {source}")]
    Properties { channel: String, source: KafkaError },
    #[error(
        "{channel}: cannot reach the brokers: {source}; check `signal.kafka.bootstrap.servers`"
    )]
    Unreachable { channel: String, source: KafkaError },
    #[error("{channel}: cannot create an admin client: {source}")]
    Admin { channel: String, source: KafkaError },
    #[error("{channel}: cannot create the topic: {source}")]
    CreateTopic { channel: String, source: KafkaError },
    #[error("{channel}: cannot create the topic: {code}")]
    TopicRefused {
        channel: String,
        code: RDKafkaErrorCode,
    },
    #[error("{channel}: {source}")]
    Partition { channel: String, source: KafkaError },
    #[error("{channel}: cannot read the topic: {source}")]
    Assign { channel: String, source: KafkaError },
    #[error("the kafka signal channel failed: {source}")]
    Read { source: KafkaError },
}

/// A connected channel.
pub struct KafkaSignals {
    consumer: StreamConsumer,
    settings: KafkaSignalSettings,
}

impl KafkaSignals {
    /// Connects, creates the topic (one partition) when missing, and starts reading.
    pub async fn connect(settings: KafkaSignalSettings) -> Result<Self, KafkaSignalError> {
        let mut client = ClientConfig::new();
        client
            .set("bootstrap.servers", &settings.bootstrap_servers)
            .set("group.id", &settings.group_id)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            // Short fetch waits: a signal is handled as soon as it is written.
            .set("fetch.wait.max.ms", "100");
        for (k, v) in &settings.consumer {
            client.set(k, v);
        }
        client.set_log_level(RDKafkaLogLevel::Warning);
        let channel = || {
            format!(
                "the kafka signal channel (topic `{}` at {})",
                settings.topic, settings.bootstrap_servers
            )
        };
        let consumer: StreamConsumer =
            (client.create()).map_err(|source| KafkaSignalError::Properties {
                channel: channel(),
                source,
            })?;
        let metadata = (consumer.fetch_metadata(Some(&settings.topic), CONNECT_TIMEOUT)).map_err(
            |source| KafkaSignalError::Unreachable {
                channel: channel(),
                source,
            },
        )?;
        let exists = metadata.topics().iter().any(|t| {
            t.name() == settings.topic && t.error().is_none() && !t.partitions().is_empty()
        });
        if !exists {
            let admin: AdminClient<DefaultClientContext> =
                (client.create()).map_err(|source| KafkaSignalError::Admin {
                    channel: channel(),
                    source,
                })?;
            let topic = NewTopic::new(&settings.topic, 1, TopicReplication::Fixed(-1));
            let options = AdminOptions::new().operation_timeout(Some(CONNECT_TIMEOUT));
            let results = admin
                .create_topics([&topic], &options)
                .await
                .map_err(|source| KafkaSignalError::CreateTopic {
                    channel: channel(),
                    source,
                })?;
            for result in results {
                match result {
                    Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                    Err((_, code)) => {
                        return Err(KafkaSignalError::TopicRefused {
                            channel: channel(),
                            code,
                        })
                    }
                }
            }
            tracing::info!(topic = %settings.topic, "Created the signal topic.");
        }
        let mut list = TopicPartitionList::new();
        (list.add_partition_offset(&settings.topic, 0, Offset::Stored)).map_err(|source| {
            KafkaSignalError::Partition {
                channel: channel(),
                source,
            }
        })?;
        consumer
            .assign(&list)
            .map_err(|source| KafkaSignalError::Assign {
                channel: channel(),
                source,
            })?;
        Ok(KafkaSignals { consumer, settings })
    }

    /// The next signal (its JSON text) and its offset; records with another key, or without a
    /// value, are skipped. Cancel-safe.
    pub async fn next(&self) -> Result<(String, i64), KafkaSignalError> {
        loop {
            let message =
                (self.consumer.recv().await).map_err(|source| KafkaSignalError::Read { source })?;
            let key = message.key().map(String::from_utf8_lossy);
            if key.as_deref() != Some(self.settings.key.as_str()) {
                tracing::info!(key = ?key, expected = %self.settings.key, "Ignoring a signal record whose key is not the connector's topic.prefix.");
                continue;
            }
            let Some(value) = message.payload() else {
                continue;
            };
            return Ok((
                String::from_utf8_lossy(value).into_owned(),
                message.offset(),
            ));
        }
    }

    /// Records that the signal at `offset` was handled.
    pub fn commit(&self, offset: i64) {
        let mut list = TopicPartitionList::new();
        if list
            .add_partition_offset(&self.settings.topic, 0, Offset::Offset(offset + 1))
            .is_ok()
        {
            if let Err(e) = self.consumer.commit(&list, CommitMode::Async) {
                tracing::warn!(error = %e, "Committing the signal topic's offset failed; the signal may be read again after a restart.");
            }
        }
    }
}
