//! Errors of the SQL Server source: the kit's change-table errors over the TDS driver's,
//! whose server error numbers say whether retrying can help.

use sluice_engine::ErrorClass;
use sluice_kit::change_tables::source::{ChangeTableError, QueryError};

/// What can go wrong reading a SQL Server database.
pub(crate) type SqlServerError = ChangeTableError<TdsError>;

/// A failed TDS call (tiberius's error).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(crate) struct TdsError(#[from] pub tiberius::error::Error);

impl QueryError for TdsError {
    const SOURCE: &'static str = "sqlserver";

    fn class(&self) -> ErrorClass {
        match &self.0 {
            // Login failed (18456), database not available to the login (4060), invalid
            // object (208), permission denied (229, 262, 297, 300), syntax (102):
            // retrying will not help.
            // SNAPSHOT isolation not allowed on the database (3952), a from-LSN below
            // the change table's minimum after a cleanup (313).
            tiberius::error::Error::Server(e)
                if [102, 208, 229, 262, 297, 300, 313, 3952, 4060, 18456].contains(&e.code()) =>
            {
                ErrorClass::Fatal
            }
            _ => ErrorClass::Retryable,
        }
    }
}
