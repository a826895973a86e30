//! Errors of the `nats` sink, each with its retry class and its cause kept. What the sink tries
//! again by itself (the server away, a publish not acknowledged in time) is no error: these
//! are what stops the start or the pipeline. No message holds a secret (server URLs are shown
//! without their credentials).

use async_nats::jetstream::context::CreateStreamError;
use async_nats::ConnectError;
use sluice_engine::{Classify, ComponentError, ErrorClass};

/// What stops the `nats` sink.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NatsSinkError {
    /// The configuration cannot work as it is.
    #[error("{0}")]
    Config(String),
    /// The server could not be reached, or refused the login (at the start), or refused it
    /// while writing: `message` says what to check.
    #[error("sink `{sink}`: {message}")]
    Connect {
        sink: String,
        message: String,
        #[source]
        source: ConnectError,
    },
    /// `create-stream: true` and the stream could not be created.
    #[error("sink `{sink}`: cannot create the stream `{stream}` at {at}")]
    CreateStream {
        sink: String,
        stream: String,
        at: String,
        #[source]
        source: CreateStreamError,
    },
    /// A stream takes the subjects of the replies JetStream sends the sink, and would store
    /// every acknowledgement as a message.
    #[error("sink `{sink}`: the stream `{stream}` takes the subjects of the replies JetStream sends the sink ({inbox}.…) and would store them as messages: narrow its subjects (`<topic.prefix>.>`)")]
    InboxTaken {
        sink: String,
        stream: String,
        inbox: &'static str,
    },
    /// No stream takes a subject the sink publishes to.
    #[error("sink `{sink}`: no JetStream stream takes subject `{subject}` at {at}: add one whose subjects match it (`nats stream add`), or set `create-stream: true` with `subjects`")]
    NoStream {
        sink: String,
        subject: String,
        at: String,
    },
}

impl Classify for NatsSinkError {
    fn class(&self) -> ErrorClass {
        // Each needs the configuration or the server's setup changed.
        ErrorClass::Fatal
    }
}

impl From<NatsSinkError> for ComponentError {
    fn from(e: NatsSinkError) -> Self {
        ComponentError::from_classified(e.to_string(), e)
    }
}
