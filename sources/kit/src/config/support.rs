//! Which of the shared options a source implements. Every shared key belongs to a [`Feature`]
//! (or to the core every source has); a key of a feature the source does not implement is a
//! configuration error at that key, never an option silently ignored.

use sluice_engine::config::{ConfigError, Node};

use super::columns::COLUMN_PREFIXES;
use super::OVERRIDE_PREFIX;
use crate::signal::SIGNAL_CONSUMER_PREFIX;

/// A group of shared options a source may or may not implement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// `schema.include.list`, `schema.exclude.list`.
    SchemaFilters,
    /// `column.include.list`, `column.exclude.list`.
    ColumnFilters,
    /// `column.mask.with.N.chars`, `column.mask.hash.*`, `column.truncate.to.N.chars`.
    ColumnMasks,
    /// `message.key.columns`.
    MessageKeyColumns,
    /// `column.propagate.source.type`, `datatype.propagate.source.type`.
    SourceTypes,
    /// `snapshot.select.statement.overrides[.<table>]`.
    SnapshotOverrides,
    /// `snapshot.include.collection.list`.
    SnapshotCollections,
    /// `skipped.operations`.
    SkippedOperations,
    /// `event.processing.failure.handling.mode`.
    FailureHandling,
    /// `heartbeat.interval.ms`, `heartbeat.action.query`, `topic.heartbeat.prefix`.
    Heartbeats,
    /// `provide.transaction.metadata`.
    TransactionMetadata,
    /// `include.schema.changes`.
    SchemaChanges,
    /// `notification.enabled.channels`, `notification.sink.topic.name`.
    Notifications,
    /// `schema.history.internal.*` (and the legacy `database.history.*`).
    SchemaHistory,
}

impl Feature {
    /// What users call it, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Feature::SchemaFilters => "schema include/exclude lists",
            Feature::ColumnFilters => "column include/exclude lists",
            Feature::ColumnMasks => "column masking, hashing and truncation",
            Feature::MessageKeyColumns => "`message.key.columns`",
            Feature::SourceTypes => "source type propagation",
            Feature::SnapshotOverrides => "snapshot SELECT overrides",
            Feature::SnapshotCollections => "`snapshot.include.collection.list`",
            Feature::SkippedOperations => "skipped operations",
            Feature::FailureHandling => "a failure handling mode other than fail",
            Feature::Heartbeats => "heartbeats",
            Feature::TransactionMetadata => "transaction metadata",
            Feature::SchemaChanges => "schema change events",
            Feature::Notifications => "notifications",
            Feature::SchemaHistory => "schema history (it reads each row's structure from its log)",
        }
    }

    /// The feature a shared key belongs to (`None`: the core every source has, or a signal
    /// channel's key).
    pub fn of(key: &str) -> Option<Feature> {
        let feature = match key {
            "schema.include.list"
            | "schema.exclude.list"
            | "schema.whitelist"
            | "schema.blacklist" => Feature::SchemaFilters,
            "column.include.list"
            | "column.exclude.list"
            | "column.whitelist"
            | "column.blacklist" => Feature::ColumnFilters,
            "message.key.columns" => Feature::MessageKeyColumns,
            "column.propagate.source.type" | "datatype.propagate.source.type" => {
                Feature::SourceTypes
            }
            "snapshot.select.statement.overrides" => Feature::SnapshotOverrides,
            "snapshot.include.collection.list" => Feature::SnapshotCollections,
            "skipped.operations" => Feature::SkippedOperations,
            "event.processing.failure.handling.mode" => Feature::FailureHandling,
            "heartbeat.interval.ms"
            | "heartbeat.action.query"
            | "topic.heartbeat.prefix"
            | "heartbeat.topics.prefix" => Feature::Heartbeats,
            "provide.transaction.metadata" => Feature::TransactionMetadata,
            "include.schema.changes" => Feature::SchemaChanges,
            "notification.enabled.channels" | "notification.sink.topic.name" => {
                Feature::Notifications
            }
            _ if COLUMN_PREFIXES.iter().any(|p| key.starts_with(p)) => Feature::ColumnMasks,
            _ if key.starts_with(OVERRIDE_PREFIX) => Feature::SnapshotOverrides,
            _ if key == "schema.history.internal"
                || key.starts_with("schema.history.internal.")
                || key == "database.history"
                || key.starts_with("database.history.") =>
            {
                Feature::SchemaHistory
            }
            _ => return None,
        };
        Some(feature)
    }
}

/// The signal channel a shared key configures (`file`, `kafka`), if any.
pub(super) fn channel_of(key: &str) -> Option<&'static str> {
    if key == "signal.file" || key == "signal.poll.interval.ms" {
        Some("file")
    } else if key.starts_with("signal.kafka.") || key.starts_with(SIGNAL_CONSUMER_PREFIX) {
        Some("kafka")
    } else {
        None
    }
}

/// What a source implements of the shared options.
#[derive(Debug, Clone, Copy)]
pub struct Supports {
    /// The features beyond the core.
    pub features: &'static [Feature],
    /// The signal channels it reads (`source`, `file`, `http`, `kafka`).
    pub signal_channels: &'static [&'static str],
}

impl Supports {
    /// Whether the source keeps a schema history (the `recovery` snapshot mode needs one).
    pub fn keeps_history(&self) -> bool {
        self.features.contains(&Feature::SchemaHistory)
    }

    /// Checks the keys of `node` against what `source` implements: the first key of a missing
    /// feature or channel is an error located at that key, saying what the source offers.
    pub fn check(&self, source: &str, node: &Node) -> Result<(), ConfigError> {
        for (key, _) in node.entries().unwrap_or_default() {
            let name = key.as_text().unwrap_or_default();
            let missing = match (Feature::of(&name), channel_of(&name)) {
                (Some(f), _) if !self.features.contains(&f) => Some(format!(
                    "the {source} source has no {} yet; remove the key",
                    f.describe()
                )),
                (_, Some(c)) if !self.signal_channels.contains(&c) => Some(format!(
                    "the {source} source has no `{c}` signal channel (it reads signals from: {}); remove the key",
                    self.signal_channels.join(", ")
                )),
                _ => None,
            };
            if let Some(message) = missing {
                return Err(ConfigError::at(key.loc, message).with_path(name));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shared_key_has_a_feature_or_is_core() {
        let core = [
            "topic.prefix",
            "database.server.name",
            "table.include.list",
            "table.exclude.list",
            "table.whitelist",
            "table.blacklist",
            "tombstones.on.delete",
            "snapshot.mode",
            "snapshot.mode.configuration.based.snapshot.data",
            "snapshot.mode.configuration.based.snapshot.schema",
            "snapshot.mode.configuration.based.start.stream",
            "snapshot.mode.configuration.based.snapshot.on.schema.error",
            "snapshot.mode.configuration.based.snapshot.on.data.error",
            "signal.data.collection",
            "signal.enabled.channels",
            "incremental.snapshot.chunk.size",
        ];
        for key in sluice_engine::config::fields_of::<super::super::SourceCommon>() {
            let placed =
                core.contains(key) || Feature::of(key).is_some() || channel_of(key).is_some();
            assert!(placed, "`{key}` is neither core nor a feature's");
            assert!(
                !(core.contains(key) && (Feature::of(key).is_some() || channel_of(key).is_some())),
                "`{key}` is core and a feature's"
            );
        }
        assert_eq!(
            Feature::of("column.mask.with.4.chars"),
            Some(Feature::ColumnMasks)
        );
        assert_eq!(
            Feature::of("snapshot.select.statement.overrides.public.t"),
            Some(Feature::SnapshotOverrides)
        );
        assert_eq!(
            channel_of("signal.consumer.security.protocol"),
            Some("kafka")
        );
    }
}
