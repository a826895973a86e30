//! Errors of the `rabbitmq` sink, each with its retry class and its cause kept. What the sink
//! tries again by itself (the broker away, a confirm not received) is no error: these are what
//! stops the start or the pipeline. No message holds the password (brokers are shown without
//! credentials).

use sluice_engine::{Classify, ComponentError, ErrorClass};

/// What stops the `rabbitmq` sink.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RabbitmqSinkError {
    /// The configuration cannot work as it is.
    #[error("{0}")]
    Config(String),
    /// The broker could not be reached (at the start) or refused the login or the virtual
    /// host: `message` says what to check.
    #[error("sink `{sink}`: {message}")]
    Connect {
        sink: String,
        message: String,
        #[source]
        source: lapin::Error,
    },
    /// An exchange, queue or binding the sink declares (`autoCreateExchange`,
    /// `autoCreateRoutingKey`) could not be.
    #[error("sink `{sink}`: cannot {what} at {at}")]
    Declare {
        sink: String,
        /// `declare exchange `e``, `declare queue `q``, `bind queue `q` to exchange `e``.
        what: String,
        at: String,
        #[source]
        source: lapin::Error,
    },
    /// The broker closed the channel on a publish for a reason only a change of its setup
    /// fixes (a missing exchange, no write permission).
    #[error("sink `{sink}`: {message}")]
    Rejected { sink: String, message: String },
    /// The broker returned a message no queue is bound for (`mandatory: true`).
    #[error("sink `{sink}`: no queue is bound to exchange `{exchange}` for routing key `{key}` at {at} (the broker returned the message: {reply}): bind a queue, set `autoCreateRoutingKey: true`, or `mandatory: false` to let the broker drop such messages")]
    Unroutable {
        sink: String,
        exchange: String,
        key: String,
        at: String,
        reply: String,
    },
}

impl Classify for RabbitmqSinkError {
    fn class(&self) -> ErrorClass {
        // Each needs the configuration or the broker's setup changed.
        ErrorClass::Fatal
    }
}

impl From<RabbitmqSinkError> for ComponentError {
    fn from(e: RabbitmqSinkError) -> Self {
        ComponentError::from_classified(e.to_string(), e)
    }
}

/// A declaration that failed, before the sink's name is known.
#[derive(Debug)]
pub(crate) struct DeclareFailed {
    pub what: String,
    pub at: String,
    pub source: lapin::Error,
}

impl DeclareFailed {
    /// The sink's error.
    pub(crate) fn of(self, sink: &str) -> RabbitmqSinkError {
        RabbitmqSinkError::Declare {
            sink: sink.to_owned(),
            what: self.what,
            at: self.at,
            source: self.source,
        }
    }
}
