//! Errors of the SQL Server source, each with its retry class.

use sluice_engine::{Classify, ComponentError, ErrorClass};

/// What can go wrong reading a SQL Server database.
#[derive(Debug, thiserror::Error)]
pub enum SqlServerError {
    /// The server or the configuration cannot work as they are (CDC not enabled, a type not
    /// mapped): the message says what to change.
    #[error("{0}")]
    Setup(String),
    /// A statement or the connection failed.
    #[error("{context}: {source}")]
    Query {
        context: String,
        #[source]
        source: tiberius::error::Error,
    },
    /// The schema history failed.
    #[error(transparent)]
    History(#[from] sluice_kit::history::HistoryError),
    /// A signal channel cannot be reached now (retried).
    #[error("{0}")]
    Unavailable(String),
    /// The pipeline stopped (nothing is wrong).
    #[error("the pipeline stopped")]
    Stopped,
}

impl SqlServerError {
    /// A failed statement, with what it was for.
    pub(crate) fn query(context: impl Into<String>, source: tiberius::error::Error) -> Self {
        SqlServerError::Query {
            context: context.into(),
            source,
        }
    }
}

impl Classify for SqlServerError {
    fn class(&self) -> ErrorClass {
        match self {
            SqlServerError::Setup(_) => ErrorClass::Fatal,
            SqlServerError::Stopped | SqlServerError::Unavailable(_) => ErrorClass::Retryable,
            SqlServerError::History(e) => e.class(),
            SqlServerError::Query { source, .. } => match source {
                // Login failed (18456), database not available to the login (4060), invalid
                // object (208), permission denied (229, 262, 297, 300), syntax (102):
                // retrying will not help.
                // SNAPSHOT isolation not allowed on the database (3952), a from-LSN below
                // the change table's minimum after a cleanup (313).
                tiberius::error::Error::Server(e)
                    if [102, 208, 229, 262, 297, 300, 313, 3952, 4060, 18456]
                        .contains(&e.code()) =>
                {
                    ErrorClass::Fatal
                }
                _ => ErrorClass::Retryable,
            },
        }
    }
}

impl From<sluice_kit::signal::ChannelError> for SqlServerError {
    fn from(e: sluice_kit::signal::ChannelError) -> Self {
        match e {
            sluice_kit::signal::ChannelError::Setup(m) => SqlServerError::Setup(m),
            other => SqlServerError::Unavailable(other.to_string()),
        }
    }
}

impl From<SqlServerError> for ComponentError {
    fn from(e: SqlServerError) -> Self {
        ComponentError::from_classified(format!("sqlserver: {e}"), e)
    }
}
