//! `sqlserver`: SQL Server tables in CDC capture mode, as Debezium's SQL Server connector
//! reads them: the kit's change-table source ([`sluice_kit::change_tables::source`]) over
//! SQL Server's dialect (`dialect`): a snapshot at the current maximum LSN, then the change
//! tables polled between the last LSN read and the newest, merged in commit order, with
//! Debezium's statements (`connection`); several databases (`databases`). Tested against an
//! emulated server (`sluice_test_support::sqlserver`): no SQL Server runs on the project's
//! machines.

mod changes;
mod config;
mod connection;
mod databases;
mod dialect;
mod error;
mod keys;
mod lsn;
mod tables;
mod types;

pub use config::SqlServerConfig;
pub use databases::SqlServer;
use lsn::Lsn;
use types::Modes;

/// A captured table and its capture instance.
type Table = sluice_kit::change_tables::source::TableOf<SqlServerDialect>;

/// One database of the `sqlserver` source ([`SqlServer`] reads them all).
type SqlServerSource = sluice_kit::change_tables::source::ChangeTableSource<SqlServerDialect>;

/// SQL Server to the kit's change-table source: one database of the configuration.
pub(crate) struct SqlServerDialect {
    config: SqlServerConfig,
    modes: Modes,
    q: connection::Statements,
}

impl SqlServerDialect {
    pub(crate) fn new(config: SqlServerConfig) -> Self {
        let modes = Modes {
            time: config.time_mode,
            decimal: config.decimal_mode,
            binary: config.binary_mode,
        };
        SqlServerDialect {
            q: connection::Statements::new(&config.database),
            config,
            modes,
        }
    }
}

/// A committed position as this source reads it, rendered back (`docs/positions.md`'s test).
#[cfg(test)]
pub(crate) fn reread(text: &str) -> Result<serde_json::Value, sluice_kit::position::PositionError> {
    use sluice_kit::change_tables::{lsn::ChangeOffset, source::Progress};
    sluice_kit::position::reread::<ChangeOffset<Lsn>, Progress>(text, "sqlserver")
}
