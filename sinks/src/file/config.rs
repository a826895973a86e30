//! Configuration of the `file` sink.

use std::path::PathBuf;

use serde::Deserialize;

/// `type: file`: JSON lines `{"topic":..,"key":..,"value":..}`, appended, fsynced before acknowledging.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSinkConfig {
    /// The file; relative paths are taken from the working directory. Parents are created.
    pub path: PathBuf,
    /// Wrap key and value with their schemas, as JsonConverter's `schemas.enable` (default true).
    #[serde(rename = "schemas.enable", default = "default_true")]
    pub schemas_enable: bool,
    /// Add a `"headers"` object to lines of events that have headers (default false).
    #[serde(default)]
    pub headers: bool,
    /// fdatasync after every write, before acknowledging (default true). Without it a power cut
    /// can lose acknowledged events.
    #[serde(default = "default_true")]
    pub fsync: bool,
}

fn default_true() -> bool {
    true
}

sluice_engine::impl_component!(
    FileSinkConfig,
    Sink,
    "file",
    check = sluice_engine::registry::unchecked,
    build = |c, ctx| super::FileSink::open(c, ctx)?
);
