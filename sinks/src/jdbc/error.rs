//! Errors of the `jdbc` sink, each with its retry class and the driver's error kept as its
//! cause. No message holds the password (neither driver repeats it).

use sluice_engine::{Classify, ComponentError, ErrorClass};

/// A driver's error, kept as a cause.
pub(crate) type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why a connection to the target could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    /// The target's address or TLS settings cannot work as they are.
    #[error("{0}")]
    Target(String),
    /// The server answered and refused the login or the database.
    #[error("{database} at {at} refused the connection: {message} (check `connection.username`, `connection.password` and the database)")]
    Refused {
        database: &'static str,
        at: String,
        message: String,
        #[source]
        source: Cause,
    },
    /// The server could not be reached (or its TLS handshake failed).
    #[error(
        "cannot reach {database} at {at} ({detail}): check `connection.url` (and its `{tls_key}`)"
    )]
    Unreachable {
        database: &'static str,
        at: String,
        /// The driver's error with its causes (a refused certificate is a cause).
        detail: String,
        /// The URL parameter that sets TLS (`sslmode`, `sslMode`).
        tls_key: &'static str,
        #[source]
        source: Cause,
    },
    /// The connection opened and its session could not be set up.
    #[error("{database} at {at}: {source}")]
    Session {
        database: &'static str,
        at: String,
        #[source]
        source: Cause,
    },
}

/// What stops the `jdbc` sink or hands a batch back to the pipeline.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JdbcSinkError {
    /// The configuration cannot work as it is.
    #[error("{0}")]
    Config(String),
    /// The target could not be reached when the sink started: the pipeline does not start.
    #[error("sink `{sink}`: {source}")]
    Start {
        sink: String,
        #[source]
        source: ConnectError,
    },
    /// The connection was lost and could not be opened again: the batch is written again.
    #[error("sink `{sink}`: {source}")]
    Reconnect {
        sink: String,
        #[source]
        source: ConnectError,
    },
    /// A batch's statements failed: retryable when the connection or the server's state was
    /// at fault (the batch is written again on a fresh connection), fatal otherwise.
    #[error("sink `{sink}`: {message}")]
    Write {
        sink: String,
        message: String,
        retryable: bool,
        #[source]
        source: Option<Cause>,
    },
}

impl JdbcSinkError {
    /// A batch found no connection to write on: written again on a fresh one.
    pub(crate) fn no_connection(sink: &str) -> Self {
        JdbcSinkError::Write {
            sink: sink.to_owned(),
            message: "no connection".to_owned(),
            retryable: true,
            source: None,
        }
    }
}

impl Classify for JdbcSinkError {
    fn class(&self) -> ErrorClass {
        match self {
            JdbcSinkError::Config(_) | JdbcSinkError::Start { .. } => ErrorClass::Fatal,
            JdbcSinkError::Reconnect { .. } => ErrorClass::Retryable,
            JdbcSinkError::Write { retryable, .. } => match retryable {
                true => ErrorClass::Retryable,
                false => ErrorClass::Fatal,
            },
        }
    }
}

impl From<JdbcSinkError> for ComponentError {
    fn from(e: JdbcSinkError) -> Self {
        ComponentError::from_classified(e.to_string(), e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_says_its_class_and_keeps_its_cause() {
        let cause = || -> Cause { Box::new(std::io::Error::other("connection refused")) };
        let unreachable = || ConnectError::Unreachable {
            database: "PostgreSQL",
            at: "db:5432/app".into(),
            detail: "connection refused".into(),
            tls_key: "sslmode",
            source: cause(),
        };
        let start = JdbcSinkError::Start {
            sink: "warehouse".into(),
            source: unreachable(),
        };
        assert_eq!(start.class(), ErrorClass::Fatal);
        assert_eq!(
            start.to_string(),
            "sink `warehouse`: cannot reach PostgreSQL at db:5432/app (connection refused): check `connection.url` (and its `sslmode`)"
        );
        let again = JdbcSinkError::Reconnect {
            sink: "warehouse".into(),
            source: unreachable(),
        };
        assert_eq!(again.class(), ErrorClass::Retryable);
        let cause_of_cause = std::error::Error::source(&again)
            .and_then(std::error::Error::source)
            .map(ToString::to_string);
        assert_eq!(cause_of_cause.as_deref(), Some("connection refused"));
        let write = |retryable| JdbcSinkError::Write {
            sink: "warehouse".into(),
            message: "deadlock".into(),
            retryable,
            source: None,
        };
        assert_eq!(write(true).class(), ErrorClass::Retryable);
        assert_eq!(write(false).class(), ErrorClass::Fatal);
        let component = ComponentError::from(write(false));
        assert_eq!(component.to_string(), "sink `warehouse`: deadlock");
    }
}

/// An event this sink cannot write as it is: a per-event failure, handled by
/// `event.processing.failure.handling.mode`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EventError {
    /// A column's value the target cannot hold.
    #[error("column `{column}`: {source}")]
    Column {
        column: String,
        #[source]
        source: super::values::ValueError,
    },
    /// `primary.key.mode: record_key` and an event without a struct key.
    #[error("`primary.key.mode: record_key` needs a struct key; this event has none (a table without a primary key?)")]
    NoStructKey,
    /// `primary.key.mode: record_value` and a delete (no row to read the key from).
    #[error("`primary.key.mode: record_value` has no row to take the key from")]
    NoRowForKey,
    /// The value is neither a change event's envelope nor a flat row.
    #[error("the value is not a row")]
    NotARow,
    /// A create, read or update without its `after` image.
    #[error("a change without its `after` row")]
    NoAfter,
}
