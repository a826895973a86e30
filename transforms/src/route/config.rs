//! Configuration of the `route` transform.

use serde::Deserialize;
use sluice_engine::config::AnchoredRegex;

/// `type: route`: Kafka Connect's RegexRouter. Topics matching `regex` (whole name) become
/// `replacement`, where `$1`, `${name}` refer to capture groups; other topics are unchanged.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Anchored regex on the topic name.
    pub regex: AnchoredRegex,
    /// Replacement with `$1`-style group references.
    pub replacement: String,
}

impl sluice_engine::registry::Component for RouteConfig {
    type Built = Box<dyn sluice_engine::Transform>;
    const KIND: &'static str = "route";
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
        Ok(Box::new(super::Route::new(self.clone())))
    }
}
