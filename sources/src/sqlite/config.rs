//! Configuration of the `sqlite` source.

use std::path::PathBuf;

use serde::Deserialize;
use sluice_engine::config::{DurationSpec, RegexList};

/// `type: sqlite`: tables in capture mode (`sluice capture enable`), snapshot then change
/// tables polled in commit order.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqliteConfig {
    /// The database file (it must exist).
    #[serde(rename = "database.path")]
    pub path: PathBuf,
    /// Topics are `<prefix>.main.<table>`.
    #[serde(rename = "topic.prefix")]
    pub topic_prefix: String,
    /// Anchored regexes on table names; default: every table in capture mode.
    #[serde(rename = "table.include.list", default)]
    pub include: Option<RegexList>,
    /// Anchored regexes on table names to leave out.
    #[serde(rename = "table.exclude.list", default)]
    pub exclude: Option<RegexList>,
    /// The options every database source shares (`snapshot.mode`, ...), read beside these.
    #[serde(skip)]
    pub common: sluice_kit::config::SourceCommon,
    /// How long to wait between polls of the change tables when there was nothing new
    /// (default 500 ms).
    #[serde(rename = "poll.interval.ms", default = "default_poll")]
    pub poll_interval_ms: u64,
    /// A null-value record after each delete (default true).
    #[serde(rename = "tombstones.on.delete", default = "default_true")]
    pub tombstones_on_delete: bool,
    /// Delete change rows once every sink acknowledged them (default true).
    #[serde(rename = "purge.committed.changes", default = "default_true")]
    pub purge: bool,
    /// How long acknowledged change rows are kept before they are purged (default 0: at once).
    #[serde(rename = "purge.retention", default = "default_retention")]
    pub purge_retention: DurationSpec,
    /// The signaling table (`debezium_signal` or `main.debezium_signal`; columns `id`, `type`,
    /// `data`), in capture mode: an `execute-snapshot` row starts an incremental snapshot.
    #[serde(rename = "signal.data.collection", default)]
    pub signal_table: Option<String>,
    /// Rows per incremental snapshot chunk (default 1024).
    #[serde(rename = "incremental.snapshot.chunk.size", default = "default_chunk")]
    pub chunk_size: usize,
}

fn default_retention() -> DurationSpec {
    DurationSpec(std::time::Duration::ZERO)
}

fn default_chunk() -> usize {
    1024
}

fn default_poll() -> u64 {
    500
}

fn default_true() -> bool {
    true
}

impl SqliteConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.topic_prefix.trim().is_empty() {
            return Err("`topic.prefix` must not be empty".into());
        }
        if self.chunk_size == 0 {
            return Err("`incremental.snapshot.chunk.size` must be at least 1".into());
        }
        if self.poll_interval_ms == 0 {
            return Err("`poll.interval.ms` must be at least 1".into());
        }
        self.common.snapshotter("sqlite", false)?;
        Ok(())
    }

    /// The signaling table's name, without `main.`.
    pub fn signal_table(&self) -> Option<&str> {
        self.signal_table
            .as_deref()
            .map(|t| t.strip_prefix("main.").unwrap_or(t))
    }

    /// Whether `table` is selected by the include and exclude lists.
    pub fn selects(&self, table: &str) -> bool {
        self.include.as_ref().is_none_or(|l| l.matches(table))
            && !self.exclude.as_ref().is_some_and(|l| l.matches(table))
    }
}

sluice_engine::impl_component!(
    SqliteConfig,
    Source,
    "sqlite",
    parts = sluice_kit::config::SourceCommon => common,
    check = Self::validate,
    build = |c, ctx| super::SqliteSource::new(c.clone(), ctx)?
);
