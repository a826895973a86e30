//! Errors of the MySQL source, each with its retry class.

use sluice_engine::{Classify, ComponentError, ErrorClass};

/// What can go wrong reading a MySQL or MariaDB server.
#[derive(Debug, thiserror::Error)]
pub enum MysqlError {
    /// The server or the configuration cannot work as they are (binlog off, a privilege
    /// missing, a type not mapped): the message says what to change.
    #[error("{0}")]
    Setup(String),
    /// A statement failed.
    #[error("{context}: {source}")]
    Query {
        context: String,
        #[source]
        source: mysql_async::Error,
    },
    /// A value does not fit its column's schema.
    #[error("{0}")]
    Value(String),
}

impl MysqlError {
    /// A failed statement, with what it was for.
    pub fn query(context: impl Into<String>, source: mysql_async::Error) -> Self {
        MysqlError::Query {
            context: context.into(),
            source,
        }
    }
}

impl Classify for MysqlError {
    fn class(&self) -> ErrorClass {
        match self {
            MysqlError::Setup(_) | MysqlError::Value(_) => ErrorClass::Fatal,
            MysqlError::Query { source, .. } => match source {
                // Access denied (1044, 1045, 1142, 1227), unknown database or table (1049,
                // 1146), syntax (1064), the binlog position gone (1236): retrying will not
                // help.
                mysql_async::Error::Server(e)
                    if [1044, 1045, 1049, 1064, 1142, 1146, 1227, 1236].contains(&e.code) =>
                {
                    ErrorClass::Fatal
                }
                _ => ErrorClass::Retryable,
            },
        }
    }
}

impl From<MysqlError> for ComponentError {
    fn from(e: MysqlError) -> Self {
        ComponentError::from_classified(format!("mysql: {e}"), e)
    }
}
