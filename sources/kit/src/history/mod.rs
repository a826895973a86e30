//! The schema history (Debezium's `schema.history.internal`), for sources whose log does not
//! say which structure a row has (a binlog row event names its table, not its columns' types):
//! every schema change is recorded with the position it happened at, and a restart rebuilds
//! each table as it was at the stored offset before it reads on. Stores: a file, a Kafka topic
//! of one partition, or memory; records are Debezium's (`HistoryRecord` with `tableChanges`),
//! so a history Debezium wrote can be read and the other way round.
//!
//! - [`SchemaHistory::record`] stores one change durably, minus what
//!   `store.only.captured.tables.ddl` / `store.only.captured.databases.ddl` leave out;
//! - [`SchemaHistory::recover`] reads every record and applies those at or before the restart
//!   position (the source says how positions compare);
//! - a history that is missing while an offset is stored is [`HistoryError::Missing`]: the
//!   snapshotter then asks for a schema snapshot (`recovery`, `when_needed`, the
//!   `configuration_based` flag) or the start stops with the fix.

pub mod config;
mod file;
#[cfg(feature = "kafka-history")]
mod kafka;
mod record;
#[cfg(test)]
mod tests;

pub use config::{HistoryConfig, KafkaHistorySettings, StoreKind};
pub use file::FileStore;
#[cfg(feature = "kafka-history")]
pub use kafka::KafkaStore;
pub use record::{table_id, ChangeKind, ColumnDef, HistoryRecord, TableChange, TableDef, Tables};

use sluice_engine::{Classify, ComponentError, ErrorClass};

/// What can go wrong with a history.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The file store failed.
    #[error("{what} the schema history file {}: {source}", path.display())]
    Io {
        /// What was being done (`writing`).
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The Kafka store failed.
    #[cfg(feature = "kafka-history")]
    #[error("{what}: {source}")]
    Kafka {
        /// Where.
        what: String,
        /// The cause.
        #[source]
        source: rdkafka::error::KafkaError,
    },
    /// A stored record is not one.
    #[error("the schema history record at {at} is not a Debezium history record: {source}; restore the history from a backup, or rebuild it with `snapshot.mode: recovery`")]
    Corrupt {
        /// The file and line, or topic and offset.
        at: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A record could not be written as JSON.
    #[error("encoding a schema history record: {0}")]
    Encode(#[source] serde_json::Error),
    /// An offset is stored but the history is gone.
    #[error("the schema history ({0}) is missing or empty while an offset is stored, so the tables' structure at that position is unknown: set `snapshot.mode: recovery` to rebuild it from the current schemas (only safe if no schema changed since the last stop), or `when_needed` to snapshot again")]
    Missing(String),
    /// The store cannot be used as configured.
    #[error("{0}")]
    Setup(String),
}

impl Classify for HistoryError {
    /// Whether trying again may help (a broker that is away) or the user must act.
    fn class(&self) -> ErrorClass {
        match self {
            #[cfg(feature = "kafka-history")]
            HistoryError::Kafka { .. } => ErrorClass::Retryable,
            HistoryError::Io { source, .. } if source.kind() == std::io::ErrorKind::Interrupted => {
                ErrorClass::Retryable
            }
            _ => ErrorClass::Fatal,
        }
    }
}

impl From<HistoryError> for ComponentError {
    fn from(e: HistoryError) -> Self {
        ComponentError::from_classified(e.to_string(), e)
    }
}

/// Where the records are.
#[derive(Debug)]
enum Store {
    File(FileStore),
    #[cfg(feature = "kafka-history")]
    Kafka(KafkaStore),
    Memory(Vec<HistoryRecord>),
}

/// What [`SchemaHistory::recover`] rebuilt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recovered {
    /// The tables at the restart position.
    pub tables: Tables,
    /// Records read.
    pub read: usize,
    /// Records applied (at or before the position).
    pub applied: usize,
}

/// A source's schema history.
#[derive(Debug)]
pub struct SchemaHistory {
    store: Store,
    only_captured_tables: bool,
    only_captured_databases: bool,
}

impl SchemaHistory {
    /// Opens the store `config` names (`file_name` in `data_dir` unless a file or topic is
    /// set).
    pub async fn open(
        config: &HistoryConfig,
        data_dir: &std::path::Path,
        file_name: &str,
    ) -> Result<Self, HistoryError> {
        let store = match config.store(data_dir, file_name).map_err(HistoryError::Setup)? {
            StoreKind::File(path) => Store::File(FileStore::new(path)),
            StoreKind::Memory => Store::Memory(Vec::new()),
            #[cfg(feature = "kafka-history")]
            StoreKind::Kafka(settings) => Store::Kafka(KafkaStore::connect(settings).await?),
            #[cfg(not(feature = "kafka-history"))]
            StoreKind::Kafka(_) => {
                return Err(HistoryError::Setup(
                    "this build of Sluice has no Kafka schema history (built without the `kafka` feature): use `schema.history.internal: file`".into(),
                ))
            }
        };
        Ok(SchemaHistory {
            store,
            only_captured_tables: config.only_captured_tables,
            only_captured_databases: config.only_captured_databases,
        })
    }

    /// What the store is, for messages.
    pub fn describe(&self) -> String {
        match &self.store {
            Store::File(f) => format!("file {}", f.path().display()),
            #[cfg(feature = "kafka-history")]
            Store::Kafka(k) => format!("{k:?}"),
            Store::Memory(_) => "memory".to_owned(),
        }
    }

    /// Whether the store holds a history.
    pub fn exists(&self) -> Result<bool, HistoryError> {
        match &self.store {
            Store::File(f) => f.exists(),
            #[cfg(feature = "kafka-history")]
            Store::Kafka(k) => k.exists(),
            Store::Memory(records) => Ok(!records.is_empty()),
        }
    }

    /// Stores `record` durably, leaving out the tables (and databases) that are not captured
    /// when `store.only.captured.*.ddl` say so (`captured_table` takes a table id,
    /// `captured_database` a database name). Returns whether anything was stored.
    pub async fn record(
        &mut self,
        mut record: HistoryRecord,
        captured_table: impl Fn(&str) -> bool,
        captured_database: impl Fn(&str) -> bool,
    ) -> Result<bool, HistoryError> {
        if self.only_captured_databases
            && record
                .database_name
                .as_deref()
                .is_some_and(|db| !db.is_empty() && !captured_database(db))
        {
            return Ok(false);
        }
        if self.only_captured_tables && !record.table_changes.is_empty() {
            record.table_changes.retain(|c| captured_table(&c.id));
            if record.table_changes.is_empty() {
                return Ok(false);
            }
        }
        match &mut self.store {
            Store::File(f) => f.append(&record)?,
            #[cfg(feature = "kafka-history")]
            Store::Kafka(k) => k.append(&record).await?,
            Store::Memory(records) => records.push(record),
        }
        Ok(true)
    }

    /// Every stored record, oldest first.
    pub fn records(&self) -> Result<Vec<HistoryRecord>, HistoryError> {
        match &self.store {
            Store::File(f) => f.read_all(),
            #[cfg(feature = "kafka-history")]
            Store::Kafka(k) => k.read_all(),
            Store::Memory(records) => Ok(records.clone()),
        }
    }

    /// Rebuilds the tables as they were at the restart position: every record whose position
    /// `at_or_before` says is not after it is applied, in order. A missing or empty history is
    /// [`HistoryError::Missing`].
    pub fn recover(
        &self,
        at_or_before: impl Fn(&serde_json::Value) -> bool,
    ) -> Result<Recovered, HistoryError> {
        let records = self.records()?;
        if records.is_empty() {
            return Err(HistoryError::Missing(self.describe()));
        }
        let mut recovered = Recovered {
            read: records.len(),
            ..Recovered::default()
        };
        for record in &records {
            if at_or_before(&record.position) {
                recovered.tables.apply(record);
                recovered.applied += 1;
            }
        }
        Ok(recovered)
    }
}
