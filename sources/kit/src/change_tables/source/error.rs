//! The errors of a change-table source, each with its retry class: one type for every
//! dialect, whose driver's errors ([`QueryError`]) say themselves whether retrying can help.

use sluice_engine::{Classify, ComponentError, ErrorClass};

use crate::change_tables::Stopped;
use crate::history::HistoryError;
use crate::signal::ChannelError;

/// A dialect's driver error: how it reads on one line, and whether retrying can help.
pub trait QueryError: std::error::Error + Send + Sync + 'static {
    /// The source's name, before each error's message (`sqlserver: …`).
    const SOURCE: &'static str;
    /// Whether retrying the statement can help (a login refused, an object missing cannot).
    fn class(&self) -> ErrorClass;
}

/// What can go wrong reading a change-table source; `Q` is its driver's error.
#[derive(Debug, thiserror::Error)]
pub enum ChangeTableError<Q: QueryError> {
    /// The server or the configuration cannot work as they are (capture not set up, a type not
    /// mapped): the message says what to change.
    #[error("{0}")]
    Setup(String),
    /// The snapshot mode cannot start with what is stored.
    #[error(transparent)]
    Plan(#[from] crate::snapshot::PlanError),
    /// The committed position is not this source's.
    #[error(transparent)]
    Position(#[from] crate::position::PositionError),
    /// A statement or the connection failed.
    #[error("{context}: {source}")]
    Query {
        context: String,
        #[source]
        source: Q,
    },
    /// The schema history failed.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// A signal channel cannot be opened or read (its class says whether retrying helps).
    #[error(transparent)]
    Signals(#[from] ChannelError),
    /// A change that cannot be represented, under `event.processing.failure.handling.mode:
    /// fail`.
    #[error(transparent)]
    Refused(#[from] crate::failure::Refused),
    /// The pipeline stopped (nothing is wrong).
    #[error("the pipeline stopped")]
    Stopped,
}

impl<Q: QueryError> ChangeTableError<Q> {
    /// A failed statement, with what it was for.
    pub fn query(context: impl Into<String>, source: impl Into<Q>) -> Self {
        ChangeTableError::Query {
            context: context.into(),
            source: source.into(),
        }
    }
}

impl<Q: QueryError> Classify for ChangeTableError<Q> {
    fn class(&self) -> ErrorClass {
        match self {
            ChangeTableError::Setup(_)
            | ChangeTableError::Plan(_)
            | ChangeTableError::Position(_)
            | ChangeTableError::Refused(_) => ErrorClass::Fatal,
            ChangeTableError::Stopped => ErrorClass::Retryable,
            ChangeTableError::Signals(e) => e.class(),
            ChangeTableError::History(e) => e.class(),
            ChangeTableError::Query { source, .. } => source.class(),
        }
    }
}

impl<Q: QueryError> From<Stopped> for ChangeTableError<Q> {
    fn from(_: Stopped) -> Self {
        ChangeTableError::Stopped
    }
}

impl<Q: QueryError> From<ChangeTableError<Q>> for ComponentError {
    fn from(e: ChangeTableError<Q>) -> Self {
        ComponentError::from_classified(format!("{}: {e}", Q::SOURCE), e)
    }
}
