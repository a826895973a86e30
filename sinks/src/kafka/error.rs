//! Errors of the `kafka` sink, each with its retry class and its cause kept (librdkafka's
//! error). What the producer retries by itself is no error: these are what stops the start, a
//! batch (sent again by the pipeline) or the pipeline.

use rdkafka::error::KafkaError;
use sluice_engine::{Classify, ComponentError, ErrorClass};

/// What stops the `kafka` sink.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KafkaSinkError {
    /// The configuration cannot work as it is.
    #[error("{0}")]
    Config(String),
    /// librdkafka refused the producer's configuration.
    #[error("sink `{sink}`: invalid Kafka producer configuration")]
    Producer {
        sink: String,
        #[source]
        source: KafkaError,
    },
    /// The brokers did not answer within `connect.timeout` at the start; `fatal` when the
    /// reason (`reason`, librdkafka's last word) is a host name that does not resolve.
    #[error("sink `{sink}`: cannot reach the Kafka brokers at {servers} within {seconds}s: {reason}; {hint}")]
    Unreachable {
        sink: String,
        servers: String,
        seconds: u64,
        reason: String,
        hint: &'static str,
        fatal: bool,
        #[source]
        source: KafkaError,
    },
    /// The brokers refused the connection's credentials at the start.
    #[error("sink `{sink}`: the Kafka brokers at {servers} refused the connection's credentials: {reason}; check `security.protocol` and the `sasl.*` / `ssl.*` properties in `producer`")]
    Credentials {
        sink: String,
        servers: String,
        reason: String,
        #[source]
        source: KafkaError,
    },
    /// A record Kafka rejected (too large, say) under `event.processing.failure.handling.mode:
    /// fail`.
    #[error("Kafka rejected a record for topic `{topic}` (key {key}): {source}; set `event.processing.failure.handling.mode: warn` to skip such records, or raise the broker's and the producer's `message.max.bytes`")]
    Rejected {
        topic: String,
        key: String,
        source: KafkaError,
    },
    /// Kafka refused a record for a reason only the configuration fixes (credentials, ACLs).
    #[error("Kafka refused a record for topic `{topic}`: {source}; check the credentials and ACLs in `producer`")]
    Refused { topic: String, source: KafkaError },
    /// A record's delivery failed for now: the pipeline sends the batch again.
    #[error("delivery to Kafka topic `{topic}` failed: {source}")]
    Delivery { topic: String, source: KafkaError },
    /// The producer was closed before every record of a batch was reported.
    #[error("the Kafka producer was closed before every record was reported")]
    Closed,
    /// librdkafka refused the admin client's configuration (`topic.creation.enable`).
    #[error("sink `{sink}`: cannot create the Kafka admin client")]
    Admin {
        sink: String,
        #[source]
        source: KafkaError,
    },
    /// The request to create topics failed (the brokers away, say): the batch is sent again.
    #[error("sink `{sink}`: creating Kafka topics {topics} failed: {source}")]
    CreateTopics {
        sink: String,
        topics: String,
        #[source]
        source: KafkaError,
    },
    /// Kafka refused to create a topic: retryable when the cluster was busy or away, fatal
    /// when only `topic.creation` or the operator fixes it.
    #[error("sink `{sink}`: Kafka refused to create topic `{topic}`: {code}; adjust `topic.creation` (partitions, replication.factor, config) or create the topic yourself")]
    TopicRefused {
        sink: String,
        topic: String,
        code: rdkafka::types::RDKafkaErrorCode,
    },
    /// Records were still unacknowledged when the sink closed.
    #[error("sink `{sink}`: records were still unacknowledged by Kafka after {seconds}s")]
    Unflushed {
        sink: String,
        seconds: u64,
        #[source]
        source: KafkaError,
    },
}

impl Classify for KafkaSinkError {
    fn class(&self) -> ErrorClass {
        match self {
            KafkaSinkError::Unreachable { fatal: false, .. }
            | KafkaSinkError::Delivery { .. }
            | KafkaSinkError::Closed
            | KafkaSinkError::CreateTopics { .. }
            | KafkaSinkError::Unflushed { .. } => ErrorClass::Retryable,
            KafkaSinkError::TopicRefused { code, .. } if passes(*code) => ErrorClass::Retryable,
            _ => ErrorClass::Fatal,
        }
    }
}

impl From<KafkaSinkError> for ComponentError {
    fn from(e: KafkaSinkError) -> Self {
        ComponentError::from_classified(e.to_string(), e)
    }
}

/// Whether a topic creation refused with `code` may pass by itself (the cluster busy or away).
fn passes(code: rdkafka::types::RDKafkaErrorCode) -> bool {
    use rdkafka::types::RDKafkaErrorCode as Code;
    matches!(
        code,
        Code::RequestTimedOut
            | Code::NotController
            | Code::BrokerNotAvailable
            | Code::OperationTimedOut
            | Code::BrokerTransportFailure
            | Code::AllBrokersDown
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::types::RDKafkaErrorCode as Code;

    #[test]
    fn a_refused_topic_passes_only_when_the_cluster_was_busy_or_away() {
        let refused = |code| KafkaSinkError::TopicRefused {
            sink: "events".into(),
            topic: "app.public.t".into(),
            code,
        };
        assert_eq!(
            refused(Code::RequestTimedOut).class(),
            ErrorClass::Retryable
        );
        assert_eq!(refused(Code::AllBrokersDown).class(), ErrorClass::Retryable);
        let fatal = refused(Code::InvalidReplicationFactor);
        assert_eq!(fatal.class(), ErrorClass::Fatal);
        assert!(
            fatal
                .to_string()
                .starts_with("sink `events`: Kafka refused to create topic `app.public.t`: ")
                && fatal.to_string().contains("adjust `topic.creation`"),
            "{fatal}"
        );
    }
}
