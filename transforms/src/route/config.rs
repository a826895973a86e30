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

sluice_engine::impl_component!(
    RouteConfig,
    Transform,
    "route",
    check = sluice_engine::registry::unchecked,
    build = |c, _ctx| super::Route::new(c.clone())
);
