//! Errors of the `redis` sink, each with its retry class and its cause kept. What a writer
//! tries again by itself (the server away, full or busy) is no error: these are what stops the
//! start or hands the batch back to the pipeline. No message holds the password (Redis's
//! errors do not repeat it).

use redis::RedisError;
use sluice_engine::{Classify, ComponentError, ErrorClass};

/// What stops the `redis` sink.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RedisSinkError {
    /// The configuration cannot work as it is.
    #[error("{0}")]
    Config(String),
    /// The server could not be reached, or refused the login, when the sink started: the
    /// pipeline does not start (`message` says what to check).
    #[error("sink `{sink}`: {message}")]
    Start {
        sink: String,
        message: String,
        #[source]
        source: RedisError,
    },
    /// The server refused the login or a permission the sink needs while writing.
    #[error("sink `{sink}`: {message}")]
    Refused {
        sink: String,
        message: String,
        #[source]
        source: RedisError,
    },
    /// Fewer replicas than are connected confirmed the entries (`wait.enabled` without
    /// `wait.retry.enabled`): the pipeline sends the batch again.
    #[error("sink `{sink}`: {acked} of {replicas} replicas confirmed the entries within `wait.timeout.ms` ({timeout_ms} ms); the batch is sent again (set `wait.retry.enabled: true` to wait longer instead)")]
    Replicas {
        sink: String,
        acked: u64,
        replicas: u64,
        timeout_ms: u64,
    },
}

impl Classify for RedisSinkError {
    fn class(&self) -> ErrorClass {
        match self {
            RedisSinkError::Config(_)
            | RedisSinkError::Start { .. }
            | RedisSinkError::Refused { .. } => ErrorClass::Fatal,
            RedisSinkError::Replicas { .. } => ErrorClass::Retryable,
        }
    }
}

impl From<RedisSinkError> for ComponentError {
    fn from(e: RedisSinkError) -> Self {
        ComponentError::from_classified(e.to_string(), e)
    }
}
