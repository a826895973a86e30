//! The librdkafka client: configuration, logging, delivery reports and the startup check.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::ProducerContext;
use sluice_engine::{Classify, ComponentError};
use tokio::sync::oneshot;

use super::config::{FailureMode, KafkaSinkConfig};
use super::error::KafkaSinkError;

/// Producer properties Sluice sets unless the configuration gives them.
const DEFAULTS: &[(&str, &str)] = &[
    // No loss and no reordering on retries.
    ("enable.idempotence", "true"),
    // The Java client's partitioner: the same key lands on the partition Kafka Connect picks.
    ("partitioner", "murmur2_random"),
    // The producer's own buffer is a second queue: keep it well under librdkafka's 1 GiB.
    ("queue.buffering.max.kbytes", "65536"),
];

/// The client configuration of a sink: Sluice's defaults, then the user's properties.
pub(super) fn client_config(config: &KafkaSinkConfig, client_id: &str) -> ClientConfig {
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", config.servers());
    cc.set("client.id", client_id);
    for (k, v) in DEFAULTS {
        cc.set(*k, *v);
    }
    for (k, v) in &config.producer {
        cc.set(k, v);
    }
    cc.set_log_level(RDKafkaLogLevel::Warning);
    cc
}

/// Receives librdkafka's logs, errors and delivery reports.
#[derive(Default)]
pub(super) struct SinkContext {
    /// The most telling error librdkafka reported (for the startup check's message): a
    /// specific cause (resolution, refusal, authentication) wins over "all brokers are down".
    last_error: Mutex<Option<String>>,
}

impl SinkContext {
    /// The most telling error librdkafka reported.
    pub(super) fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }
}

/// Whether a reason only summarizes others (it does not replace a specific one).
fn is_summary(reason: &str) -> bool {
    reason.contains("brokers are down")
}

impl ClientContext for SinkContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        match level {
            // A broker that cannot be reached is logged by librdkafka as an error on every
            // attempt; the sink reports the failures that matter (deliveries) itself.
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error
            | RDKafkaLogLevel::Warning => tracing::warn!(facility = fac, "librdkafka: {message}"),
            _ => tracing::debug!(facility = fac, "librdkafka: {message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        // Connection errors repeat while a broker is down; they are retried by librdkafka and
        // surface as delivery failures, so they are logged at debug level only.
        tracing::debug!(%error, "librdkafka: {reason}");
        if let Ok(mut last) = self.last_error.lock() {
            if last.is_none() || !is_summary(reason) {
                *last = Some(reason.to_owned());
            }
        }
    }
}

impl ProducerContext for SinkContext {
    type DeliveryOpaque = Arc<BatchAck>;

    fn delivery(&self, result: &DeliveryResult<'_>, batch: Arc<BatchAck>) {
        match result {
            Ok(_) => batch.delivered(),
            Err((error, message)) => {
                let key = message.key().map(String::from_utf8_lossy);
                batch.failed(message.topic(), key.as_deref(), error);
            }
        }
    }
}

/// Whether a record's failure is its own fault (it would fail again), not the broker's state.
pub fn is_record_error(error: &KafkaError) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        error.rdkafka_error_code(),
        Some(
            C::MessageSizeTooLarge
                | C::InvalidMessageSize
                | C::InvalidMessage
                | C::InvalidRecord
                | C::MessageBatchTooLarge
                | C::InvalidTimestamp
                | C::PolicyViolation
                | C::BadMessage
        )
    )
}

/// Whether an error cannot be cured by waiting (authorization, authentication, configuration).
pub(super) fn is_fatal(error: &KafkaError) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        error.rdkafka_error_code(),
        Some(
            C::TopicAuthorizationFailed
                | C::ClusterAuthorizationFailed
                | C::SaslAuthenticationFailed
                | C::Authentication
                | C::UnsupportedSASLMechanism
                | C::InvalidConfig
                | C::Fatal
        )
    )
}

/// Tracks the deliveries of one written batch.
pub(super) struct BatchAck {
    /// Records not reported yet, plus one while the batch is being sent.
    pending: AtomicUsize,
    mode: FailureMode,
    /// The first failure that makes the batch fail.
    failure: Mutex<Option<ComponentError>>,
    /// Topics of failed deliveries, checked before the retry.
    unknown_topics: Mutex<Vec<String>>,
    /// Records skipped by the failure handling mode.
    skipped: AtomicUsize,
    done: Mutex<Option<oneshot::Sender<()>>>,
}

impl BatchAck {
    /// A tracker and the receiver that fires once every record is reported.
    pub(super) fn new(mode: FailureMode) -> (Arc<Self>, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let ack = BatchAck {
            pending: AtomicUsize::new(1),
            mode,
            failure: Mutex::new(None),
            unknown_topics: Mutex::new(Vec::new()),
            skipped: AtomicUsize::new(0),
            done: Mutex::new(Some(tx)),
        };
        (Arc::new(ack), rx)
    }

    /// One more record handed to librdkafka.
    pub(super) fn add(&self) {
        self.pending.fetch_add(1, Ordering::AcqRel);
    }

    /// Takes back an `add` whose record librdkafka did not take.
    pub(super) fn pending_rollback(&self) {
        self.pending.fetch_sub(1, Ordering::AcqRel);
    }

    /// All records are handed over.
    pub(super) fn sealed(&self) {
        self.finish_one();
    }

    fn delivered(&self) {
        self.finish_one();
    }

    /// A record failed (in a delivery report, or when handed over).
    pub(super) fn failed(&self, topic: &str, key: Option<&str>, error: &KafkaError) {
        self.record_failure(topic, key, error);
        self.finish_one();
    }

    /// A record failed before it was handed over (it was never added).
    pub(super) fn refused(&self, topic: &str, key: Option<&str>, error: &KafkaError) {
        self.record_failure(topic, key, error);
    }

    fn record_failure(&self, topic: &str, key: Option<&str>, error: &KafkaError) {
        let key = key.unwrap_or("null");
        let failure = if is_record_error(error) {
            match self.mode {
                FailureMode::Fail => KafkaSinkError::Rejected {
                    topic: topic.to_owned(),
                    key: key.to_owned(),
                    source: error.clone(),
                },
                FailureMode::Warn | FailureMode::Skip => {
                    if self.mode == FailureMode::Warn {
                        tracing::warn!(topic, key, %error, "Kafka rejected a record; skipped (event.processing.failure.handling.mode: warn).");
                    }
                    self.skipped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        } else if is_fatal(error) {
            KafkaSinkError::Refused {
                topic: topic.to_owned(),
                source: error.clone(),
            }
        } else {
            // The topic may be gone (a broker that lost its data, a deleted topic): the retry
            // makes sure it exists; creating an existing topic is a no-op.
            if let Ok(mut topics) = self.unknown_topics.lock() {
                if !topics.iter().any(|t| t == topic) {
                    topics.push(topic.to_owned());
                }
            }
            KafkaSinkError::Delivery {
                topic: topic.to_owned(),
                source: error.clone(),
            }
        };
        let error = ComponentError::from(failure);
        if let Ok(mut first) = self.failure.lock() {
            // A fatal failure wins over a retryable one.
            let replace = match &*first {
                None => true,
                Some(old) => {
                    old.class() == sluice_engine::ErrorClass::Retryable
                        && error.class() == sluice_engine::ErrorClass::Fatal
                }
            };
            if replace {
                *first = Some(error);
            }
        }
    }

    fn finish_one(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(tx) = self.done.lock().ok().and_then(|mut d| d.take()) {
                let _ = tx.send(());
            }
        }
    }

    /// The batch's outcome, once every record was reported.
    pub(super) fn outcome(&self) -> Result<(), ComponentError> {
        match self.failure.lock().ok().and_then(|mut f| f.take()) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Topics of records that failed and will be retried.
    pub(super) fn unknown_topics(&self) -> Vec<String> {
        self.unknown_topics
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default()
    }
}

/// The startup check's failure, with its class.
pub(super) fn unreachable(
    sink: &str,
    servers: &str,
    timeout: Duration,
    error: &KafkaError,
    reason: Option<String>,
) -> ComponentError {
    let reason = reason.unwrap_or_else(|| error.to_string());
    let lower = reason.to_ascii_lowercase();
    let (sink, servers, source) = (sink.to_owned(), servers.to_owned(), error.clone());
    let resolve = lower.contains("resolve");
    let credentials = lower.contains("authentic") || lower.contains("sasl") || is_fatal(error);
    let failure = if credentials && !resolve {
        KafkaSinkError::Credentials {
            sink,
            servers,
            reason,
            source,
        }
    } else {
        KafkaSinkError::Unreachable {
            sink,
            servers,
            seconds: timeout.as_secs(),
            reason,
            hint: if resolve {
                "check the host names in `bootstrap.servers`"
            } else {
                "check `bootstrap.servers` and that the brokers are running"
            },
            fatal: resolve,
            source,
        }
    };
    failure.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(code: RDKafkaErrorCode) -> KafkaError {
        KafkaError::MessageProduction(code)
    }

    #[test]
    fn a_batch_settles_after_its_last_record_and_keeps_the_worst_failure() {
        let (ack, mut rx) = BatchAck::new(FailureMode::Fail);
        ack.add();
        ack.add();
        ack.sealed();
        assert!(rx.try_recv().is_err());
        ack.failed("t", Some("k"), &err(RDKafkaErrorCode::MessageTimedOut));
        ack.failed("t", None, &err(RDKafkaErrorCode::MessageSizeTooLarge));
        assert!(rx.try_recv().is_ok());
        let e = ack.outcome().err().map(|e| (e.class(), e.to_string()));
        assert!(
            matches!(e, Some((sluice_engine::ErrorClass::Fatal, m)) if m.contains("handling.mode"))
        );
    }

    #[test]
    fn warn_mode_skips_rejected_records_and_unknown_topics_are_retryable() {
        let (ack, _rx) = BatchAck::new(FailureMode::Warn);
        ack.add();
        ack.add();
        ack.failed("t", None, &err(RDKafkaErrorCode::MessageSizeTooLarge));
        ack.failed(
            "gone",
            None,
            &err(RDKafkaErrorCode::UnknownTopicOrPartition),
        );
        ack.sealed();
        assert_eq!(ack.skipped.load(Ordering::Relaxed), 1);
        assert_eq!(ack.unknown_topics(), vec!["gone".to_owned()]);
        let class = ack.outcome().err().map(|e| e.class());
        assert_eq!(class, Some(sluice_engine::ErrorClass::Retryable));
    }
}
