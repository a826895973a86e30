//! Errors of the Db2 source, each with its retry class.

use sluice_engine::{Classify, ComponentError, ErrorClass};

/// What can go wrong reading a Db2 database.
#[derive(Debug, thiserror::Error)]
pub enum Db2Error {
    /// The server or the configuration cannot work as they are (ASN capture not set up, a
    /// type not mapped): the message says what to change.
    #[error("{0}")]
    Setup(String),
    /// A statement or the connection failed (the driver's message on one line).
    #[error("{context}: {}", one_line(source))]
    Query {
        context: String,
        #[source]
        source: odbc_api::Error,
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

impl Db2Error {
    /// A failed ODBC call, with what it was for.
    pub(crate) fn query(context: impl Into<String>, source: odbc_api::Error) -> Self {
        Db2Error::Query {
            context: context.into(),
            source,
        }
    }

    /// The SQLSTATE of a failed statement.
    pub(crate) fn state(&self) -> Option<String> {
        match self {
            Db2Error::Query {
                source: odbc_api::Error::Diagnostics { record, .. },
                ..
            } => Some(String::from_utf8_lossy(&record.state.0).into_owned()),
            _ => None,
        }
    }
}

/// ODBC's message (`… calling 'SQLDriverConnect':\n<diagnostics>`) on one line.
fn one_line(e: &odbc_api::Error) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

impl Classify for Db2Error {
    fn class(&self) -> ErrorClass {
        match self {
            Db2Error::Setup(_) => ErrorClass::Fatal,
            Db2Error::Stopped | Db2Error::Unavailable(_) => ErrorClass::Retryable,
            Db2Error::History(e) => e.class(),
            Db2Error::Query { .. } => match self.state().as_deref() {
                // Login refused (28000), the driver not found (IM002, IM003), an object that does
                // not exist (42S02, 42704, 42P01), a privilege missing (42501), a syntax error
                // (42601, 42000): retrying will not help.
                Some(
                    "28000" | "28P01" | "IM002" | "IM003" | "42S02" | "42704" | "42P01" | "42501"
                    | "42601" | "42000",
                ) => ErrorClass::Fatal,
                _ => ErrorClass::Retryable,
            },
        }
    }
}

impl From<sluice_kit::signal::ChannelError> for Db2Error {
    fn from(e: sluice_kit::signal::ChannelError) -> Self {
        match e {
            sluice_kit::signal::ChannelError::Setup(m) => Db2Error::Setup(m),
            other => Db2Error::Unavailable(other.to_string()),
        }
    }
}

impl From<Db2Error> for ComponentError {
    fn from(e: Db2Error) -> Self {
        ComponentError::from_classified(format!("db2: {e}"), e)
    }
}
