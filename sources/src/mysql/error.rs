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
    /// The pipeline stopped while a snapshot was read (nothing is wrong).
    #[error("the pipeline stopped during a snapshot")]
    Stopped,
    /// The schema history could not be read or written.
    #[error(transparent)]
    History(#[from] sluice_kit::history::HistoryError),
    /// A signal channel cannot be opened or read.
    #[error(transparent)]
    Signals(#[from] sluice_kit::signal::ChannelError),
    /// A change that cannot be represented, under `event.processing.failure.handling.mode:
    /// fail`.
    #[error(transparent)]
    Refused(#[from] sluice_kit::failure::Refused),
    /// The committed position is not this source's.
    #[error(transparent)]
    Position(#[from] sluice_kit::position::PositionError),
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

/// An error of the binlog stream read as replica `server_id`: one a duplicate
/// `database.server.id` causes (MariaDB's 4052, MySQL's 1236 with that text) says so.
pub(super) fn binlog(source: mysql_async::Error, server_id: u32) -> MysqlError {
    let duplicate = matches!(&source, mysql_async::Error::Server(e)
        if e.code == 4052 || (e.code == 1236 && e.message.contains("same server_uuid/server_id")));
    let context = if duplicate {
        format!("reading the binlog: another replica connected as `database.server.id: {server_id}` and the server dropped this connection; give every pipeline and replica of the server its own id")
    } else {
        "reading the binlog".to_owned()
    };
    MysqlError::Query { context, source }
}

impl Classify for MysqlError {
    fn class(&self) -> ErrorClass {
        match self {
            MysqlError::Setup(_)
            | MysqlError::Value(_)
            | MysqlError::Refused(_)
            | MysqlError::Position(_) => ErrorClass::Fatal,
            MysqlError::Stopped => ErrorClass::Retryable,
            MysqlError::History(e) => e.class(),
            MysqlError::Signals(e) => e.class(),
            MysqlError::Query { source, .. } => match source {
                // Access denied (1044, 1045, 1142, 1227), unknown database or table (1049,
                // 1146), syntax (1064), the binlog position gone (1236), another replica
                // with this server id took the binlog connection over (4052; the server
                // drops the older one): retrying will not help.
                mysql_async::Error::Server(e)
                    if [1044, 1045, 1049, 1064, 1142, 1146, 1227, 1236, 4052].contains(&e.code) =>
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
