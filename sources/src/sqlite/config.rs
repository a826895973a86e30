//! Configuration of the `sqlite` source.

use std::path::PathBuf;

use serde::Deserialize;
use sluice_engine::config::DurationSpec;
use sluice_kit::config::{DatabaseSource, Feature, SourceCommon, Supports};

/// `type: sqlite`: tables in capture mode (`sluice capture enable`), snapshot then change
/// tables polled in commit order. `table.include.list` and `table.exclude.list` match table
/// names; the signaling table (`signal.data.collection`: `debezium_signal` or
/// `main.debezium_signal`; columns `id`, `type`, `data`) must be in capture mode.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqliteConfig {
    /// The database file (it must exist).
    #[serde(rename = "database.path")]
    pub path: PathBuf,
    /// The options every database source shares (`topic.prefix`, `snapshot.mode`, ...), read
    /// beside these.
    #[serde(skip)]
    pub common: SourceCommon,
    /// How long to wait between polls of the change tables when there was nothing new
    /// (default 500 ms).
    #[serde(rename = "poll.interval.ms", default = "default_poll")]
    pub poll_interval_ms: u64,
    /// Delete change rows once every sink acknowledged them (default true).
    #[serde(rename = "purge.committed.changes", default = "default_true")]
    pub purge: bool,
    /// How long acknowledged change rows are kept before they are purged (default 0: at once).
    #[serde(rename = "purge.retention", default = "default_retention")]
    pub purge_retention: DurationSpec,
}

fn default_retention() -> DurationSpec {
    DurationSpec(std::time::Duration::ZERO)
}

fn default_poll() -> u64 {
    500
}

fn default_true() -> bool {
    true
}

impl SqliteConfig {
    /// The signaling table's name, without `main.`.
    pub fn signal_table(&self) -> Option<String> {
        self.common.signal_table("main").map(|(_, table)| table)
    }

    /// Whether `table` is selected by the include and exclude lists.
    pub fn selects(&self, table: &str) -> bool {
        self.common.selects_table("main", table)
    }
}

impl DatabaseSource for SqliteConfig {
    const SUPPORTS: Supports = Supports {
        features: &[
            Feature::SkippedOperations,
            Feature::FailureHandling,
            Feature::Heartbeats,
            Feature::Notifications,
            Feature::ColumnFilters,
            Feature::ColumnMasks,
            Feature::MessageKeyColumns,
            Feature::SnapshotOverrides,
            Feature::SnapshotCollections,
        ],
        signal_channels: &["source", "file", "http", "kafka"],
    };
    fn set_common(&mut self, common: SourceCommon) {
        self.common = common;
    }
    fn check(&self) -> Result<(), String> {
        if self.poll_interval_ms == 0 {
            return Err("`poll.interval.ms` must be at least 1".into());
        }
        if let Some((schema, _)) = self.common.signal_table("main") {
            if schema != "main" {
                return Err(format!(
                    "`signal.data.collection`: the signaling table must be in `main`, not `{schema}`"
                ));
            }
        }
        Ok(())
    }
}

sluice_engine::impl_component!(
    SqliteConfig,
    Source,
    "sqlite",
    read = sluice_kit::config::read,
    build = |c, ctx| super::SqliteSource::new(c.clone(), ctx)?
);
