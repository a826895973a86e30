//! Errors of the PostgreSQL source, each with its retry class.

use sluice_engine::{Classify, ComponentError, ErrorClass};

/// A PostgreSQL source failure.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// The setup is wrong and retrying will not fix it; the message says how to fix it.
    #[error("{0}")]
    Setup(String),
    /// The committed position is not this source's.
    #[error(transparent)]
    Position(#[from] sluice_kit::position::PositionError),
    /// A query failed.
    #[error("{context}: {}", detail(source))]
    Query {
        /// What was being done.
        context: String,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The server cannot be reached now (refused, restarting); retried.
    #[error("{0}")]
    Unavailable(String),
    /// The replication stream failed.
    #[error("replication: {0}")]
    Replication(String),
    /// The server sent something Sluice cannot decode.
    #[error("decoding: {0}")]
    Decode(String),
    /// A signal channel cannot be opened or read.
    #[error(transparent)]
    Signals(#[from] sluice_kit::signal::ChannelError),
    /// A change that cannot be represented, under `event.processing.failure.handling.mode:
    /// fail`.
    #[error(transparent)]
    Refused(#[from] sluice_kit::failure::Refused),
}

/// The driver's error with the server's message, which its `Display` leaves out.
fn detail(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    }
}

impl PgError {
    /// Whether the server refused a query for what it says (syntax, names, types, a value it
    /// cannot compute, a write in a read-only transaction, the statement timeout): the error
    /// a bad `additional-conditions` filter gives, as opposed to a lost connection.
    pub fn is_statement_error(&self) -> bool {
        let PgError::Query { source, .. } = self else {
            return false;
        };
        source.code().is_some_and(|c| {
            let c = c.code();
            c.starts_with("42") || c.starts_with("22") || c == "57014" || c == "25006"
        })
    }

    /// Wraps a driver error with context.
    pub fn query(context: impl Into<String>, source: tokio_postgres::Error) -> Self {
        PgError::Query {
            context: context.into(),
            source,
        }
    }
}

impl Classify for PgError {
    fn class(&self) -> ErrorClass {
        match self {
            PgError::Setup(_) | PgError::Position(_) | PgError::Decode(_) | PgError::Refused(_) => {
                ErrorClass::Fatal
            }
            PgError::Replication(_) | PgError::Unavailable(_) => ErrorClass::Retryable,
            PgError::Signals(e) => e.class(),
            PgError::Query { source, .. } => match source.code() {
                // Class 28 (auth), 3D (no database), 42 (syntax/privilege/undefined): definite.
                Some(code)
                    if ["28", "3D", "42"]
                        .iter()
                        .any(|c| code.code().starts_with(c)) =>
                {
                    ErrorClass::Fatal
                }
                _ => ErrorClass::Retryable,
            },
        }
    }
}

impl From<PgError> for ComponentError {
    /// Keeps the error (and the driver's under it) as the cause.
    fn from(e: PgError) -> Self {
        ComponentError::from_classified(format!("postgres: {e}"), e)
    }
}
