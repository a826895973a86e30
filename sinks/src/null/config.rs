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

sluice_engine::impl_component!(
    NullSinkConfig,
    Sink,
    "null",
    check = sluice_engine::registry::unchecked,
    build = |c, _ctx| super::NullSink::new(c, Default::default())
);
