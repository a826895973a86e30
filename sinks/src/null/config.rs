//! Configuration of the `null` sink.

use serde::Deserialize;

/// `type: null`: encodes every event, then discards it (for benchmarks, like Vector's blackhole).
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct NullSinkConfig {
    /// Encode with schemas (default true), so the encoding cost is measured.
    #[serde(rename = "schemas.enable", default = "default_true")]
    pub schemas_enable: bool,
}

fn default_true() -> bool {
    true
}

impl sluice_engine::registry::Component for NullSinkConfig {
    type Built = Box<dyn sluice_engine::Sink>;
    const KIND: &'static str = "null";
    fn from_node(
        node: &sluice_engine::config::Node,
        skip: &[&str],
    ) -> Result<Self, sluice_engine::config::ConfigError> {
        sluice_engine::registry::read_checked(node, skip, |_: &Self| Ok(()))
    }
    fn build(
        &self,
        _ctx: &sluice_engine::BuildContext<'_>,
    ) -> Result<Self::Built, sluice_engine::ComponentError> {
        Ok(Box::new(super::NullSink::new(
            self,
            std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)),
        )))
    }
}
