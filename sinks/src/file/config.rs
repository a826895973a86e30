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

impl sluice_engine::registry::Component for FileSinkConfig {
    type Built = Box<dyn sluice_engine::Sink>;
    const KIND: &'static str = "file";
    fn from_node(
        node: &sluice_engine::config::Node,
        skip: &[&str],
    ) -> Result<Self, sluice_engine::config::ConfigError> {
        sluice_engine::registry::read_checked(node, skip, |_: &Self| Ok(()))
    }
    fn build(
        &self,
        ctx: &sluice_engine::BuildContext<'_>,
    ) -> Result<Self::Built, sluice_engine::ComponentError> {
        Ok(Box::new(super::FileSink::open(self, ctx)?))
    }
}
