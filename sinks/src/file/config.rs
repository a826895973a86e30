//! Configuration of the `file` sink.

use std::path::PathBuf;

use serde::Deserialize;
use sluice_engine::FailureMode;

/// How a line's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileFormat {
    /// JsonConverter's JSON.
    #[default]
    Json,
    /// Debezium's CloudEventsConverter, JSON structured mode (the key stays `json`).
    Cloudevents,
}

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
    /// `json` (default) or `cloudevents`.
    #[serde(default)]
    pub format: FileFormat,
    /// `format: cloudevents`: the `iodebezium*` extension attributes (default true).
    #[serde(rename = "extension.attributes.enable", default = "default_true")]
    pub extension_attributes: bool,
    /// `format: cloudevents`: a value that is not a change event (a heartbeat, a schema
    /// change): `fail` (default), `warn` (logged, skipped), `skip`.
    #[serde(rename = "event.processing.failure.handling.mode", default)]
    pub failure_mode: FailureMode,
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
