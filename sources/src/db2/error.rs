//! Errors of the Db2 source: the kit's change-table errors over the ODBC driver's, whose
//! SQLSTATEs say whether retrying can help.

use sluice_engine::ErrorClass;
use sluice_kit::change_tables::source::{ChangeTableError, QueryError};

/// What can go wrong reading a Db2 database.
pub(crate) type Db2Error = ChangeTableError<OdbcError>;

/// A failed ODBC call (its message on one line).
#[derive(Debug, thiserror::Error)]
#[error("{}", one_line(.0))]
pub(crate) struct OdbcError(#[from] pub odbc_api::Error);

impl OdbcError {
    /// The SQLSTATE of a failed statement.
    pub(crate) fn state(&self) -> Option<String> {
        match &self.0 {
            odbc_api::Error::Diagnostics { record, .. } => {
                Some(String::from_utf8_lossy(&record.state.0).into_owned())
            }
            _ => None,
        }
    }
}

/// The SQLSTATE of `e` when it is a failed statement.
pub(crate) fn state(e: &Db2Error) -> Option<String> {
    match e {
        ChangeTableError::Query { source, .. } => source.state(),
        _ => None,
    }
}

/// ODBC's message (`… calling 'SQLDriverConnect':\n<diagnostics>`) on one line.
fn one_line(e: &odbc_api::Error) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

impl QueryError for OdbcError {
    const SOURCE: &'static str = "db2";

    fn class(&self) -> ErrorClass {
        match self.state().as_deref() {
            // Login refused (28000), the driver not found (IM002, IM003), an object that does
            // not exist (42S02, 42704, 42P01), a privilege missing (42501), a syntax error
            // (42601, 42000): retrying will not help.
            Some(
                "28000" | "28P01" | "IM002" | "IM003" | "42S02" | "42704" | "42P01" | "42501"
                | "42601" | "42000",
            ) => ErrorClass::Fatal,
            _ => ErrorClass::Retryable,
        }
    }
}
