//! Configuration of the `stdout` sink.

use serde::Deserialize;

/// `type: stdout`: one JSON line per event on standard output.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdoutSinkConfig {
    /// Wrap key and value with their schemas (default false here: stdout is for people).
    #[serde(rename = "schemas.enable", default)]
    pub schemas_enable: bool,
    /// Indent each event over several lines (default false).
    #[serde(default)]
    pub pretty: bool,
    /// Add a `"headers"` object (default false).
    #[serde(default)]
    pub headers: bool,
}

sluice_engine::impl_component!(
    StdoutSinkConfig,
    Sink,
    "stdout",
    check = sluice_engine::registry::unchecked,
    build = |c, ctx| super::StdoutSink::new(c, ctx)?
);
