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

impl sluice_engine::registry::Component for StdoutSinkConfig {
    type Built = Box<dyn sluice_engine::Sink>;
    const KIND: &'static str = "stdout";
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
        Ok(Box::new(super::StdoutSink::new(self, ctx)?))
    }
}
