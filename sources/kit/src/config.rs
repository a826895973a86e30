//! The options every database source shares, read once from the source's block beside the
//! source's own keys (`sluice_engine::config::from_node_parts`), documented once.

use serde::Deserialize;

use super::snapshot::{ConfigurationBased, SnapshotMode, Snapshotter};

/// The shared part of a database source's configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceCommon {
    /// `snapshot.mode` (default `initial`).
    #[serde(rename = "snapshot.mode", default)]
    pub snapshot_mode: SnapshotMode,
    /// With `configuration_based`: read the tables' rows.
    #[serde(rename = "snapshot.mode.configuration.based.snapshot.data", default)]
    pub snapshot_data: bool,
    /// With `configuration_based`: capture the tables' schemas.
    #[serde(rename = "snapshot.mode.configuration.based.snapshot.schema", default)]
    pub snapshot_schema: bool,
    /// With `configuration_based`: stream after the snapshot.
    #[serde(rename = "snapshot.mode.configuration.based.start.stream", default)]
    pub start_stream: bool,
    /// With `configuration_based`: capture the schemas again when the history is unusable.
    #[serde(
        rename = "snapshot.mode.configuration.based.snapshot.on.schema.error",
        default
    )]
    pub snapshot_on_schema_error: bool,
    /// With `configuration_based`: snapshot again when the stored position is lost.
    #[serde(
        rename = "snapshot.mode.configuration.based.snapshot.on.data.error",
        default
    )]
    pub snapshot_on_data_error: bool,
}

impl SourceCommon {
    /// The snapshotter these options describe, for the source named `source` (`history`: it
    /// keeps a schema history); `Err` is the configuration error.
    pub fn snapshotter(&self, source: &str, history: bool) -> Result<Snapshotter, String> {
        let flags = ConfigurationBased {
            snapshot_data: self.snapshot_data,
            snapshot_schema: self.snapshot_schema,
            start_stream: self.start_stream,
            on_schema_error: self.snapshot_on_schema_error,
            on_data_error: self.snapshot_on_data_error,
        };
        Snapshotter::new(self.snapshot_mode, flags, source, history)
    }
}
