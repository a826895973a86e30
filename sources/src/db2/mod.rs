//! `db2`: Db2 tables in capture mode (SQL Replication's ASN capture fills a change-data table
//! per table), read as Debezium's Db2 connector reads them: the kit's change-table source
//! ([`sluice_kit::change_tables::source`]) over Db2's dialect (`dialect`): a snapshot at the
//! highest synchpoint, then the change-data tables polled between the last commit LSN read and
//! the newest, merged in commit order, with Debezium's statements (`connection`), over ODBC.
//! Tested against an emulation of ASN capture on PostgreSQL through the PostgreSQL ODBC driver
//! (`sluice_test_support::db2`): no Db2 server runs on the project's machines.

mod config;
mod connection;
mod dialect;
mod driver;
mod error;
mod keys;
mod lsn;
mod stream;
mod tables;
mod types;

use async_trait::async_trait;
use sluice_engine::{BuildContext, ComponentError, Source, SourceContext};
use sluice_kit::change_tables::source::ChangeTableSource;

pub use config::Db2Config;
use lsn::Lsn;
use types::Modes;

/// A captured table and its change-data table.
type Table = sluice_kit::change_tables::source::TableOf<Db2Dialect>;

/// Db2 to the kit's change-table source.
pub(crate) struct Db2Dialect {
    config: Db2Config,
    modes: Modes,
    /// Debezium's statements for this configuration.
    q: connection::Statements,
}

/// The `db2` source.
pub struct Db2Source {
    source: ChangeTableSource<Db2Dialect>,
    /// The pipeline's data directory (the schema history file's default place).
    data_dir: std::path::PathBuf,
}

impl Db2Source {
    pub(crate) fn new(config: Db2Config, ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        let modes = Modes {
            time: config.time_mode,
            decimal: config.decimal_mode,
            binary: config.binary_mode,
        };
        let q = connection::Statements::new(&config);
        let dialect = Db2Dialect { config, modes, q };
        Ok(Db2Source {
            source: ChangeTableSource::new(dialect, crate::VERSION)?,
            data_dir: ctx.data_dir.to_path_buf(),
        })
    }
}

#[async_trait]
impl Source for Db2Source {
    async fn run(&mut self, ctx: &mut SourceContext) -> Result<(), ComponentError> {
        let database = self.source.dialect.config.database.clone();
        let span = tracing::info_span!("db2", %database);
        let _guard = span.enter();
        Ok(self.source.run(&self.data_dir, ctx).await?)
    }
}

/// A committed position as this source reads it, rendered back (`docs/positions.md`'s test).
#[cfg(test)]
pub(crate) fn reread(text: &str) -> Result<serde_json::Value, sluice_kit::position::PositionError> {
    use sluice_kit::change_tables::{lsn::ChangeOffset, source::Progress};
    sluice_kit::position::reread::<ChangeOffset<Lsn>, Progress>(text, "db2")
}
