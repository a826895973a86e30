//! Errors of `format: avro`, each with its retry class and the cause kept (the registry
//! client's error, apache-avro's).

use schema_registry_converter::error::SRCError;
use sluice_engine::{Classify, ComponentError, ErrorClass};

/// What stops a sink writing Avro, or hands its batch back to the pipeline.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AvroFormatError {
    /// The configuration cannot work as it is.
    #[error("{0}")]
    Config(String),
    /// The registry client could not be set up.
    #[error("sink `{sink}`: cannot set up the schema registry client for {url}: {source}")]
    Client {
        sink: String,
        url: String,
        #[source]
        source: SRCError,
    },
    /// apache-avro refuses the schema derived for a topic (and so would every consumer).
    #[error("sink `{sink}`: the Avro schema derived for topic `{topic}` is invalid: {source}; names with characters Avro rejects need `schema.name.adjustment.mode: avro`")]
    Schema {
        sink: String,
        topic: String,
        #[source]
        source: Box<apache_avro::Error>,
    },
    /// The registry refused or failed a request: retryable when the registry says it may
    /// pass (it was away, say), fatal when only the configuration fixes it.
    #[error("sink `{sink}`: {what} at {url}: {}{}; {check}", .source.error, .source.cause.as_deref().map(|c| format!(" ({c})")).unwrap_or_default())]
    Registry {
        sink: String,
        url: String,
        /// What was asked (`registering the schema of subject ...`).
        what: String,
        /// The setting to check.
        check: &'static str,
        #[source]
        source: SRCError,
    },
}

impl Classify for AvroFormatError {
    fn class(&self) -> ErrorClass {
        match self {
            AvroFormatError::Registry { source, .. } if source.retriable => ErrorClass::Retryable,
            _ => ErrorClass::Fatal,
        }
    }
}

impl From<AvroFormatError> for ComponentError {
    fn from(e: AvroFormatError) -> Self {
        ComponentError::from_classified(e.to_string(), e)
    }
}
