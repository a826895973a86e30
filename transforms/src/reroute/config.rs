//! Configuration of the `reroute` transform.

use serde::Deserialize;
use sluice_engine::config::AnchoredRegex;

/// `type: reroute` (Debezium's ByLogicalTableRouter): topics matching `topic.regex` become
/// `topic.replacement` (`$1` groups), so that several physical tables share one logical topic;
/// the key gets a field naming the physical table so that keys stay unique. The key, envelope
/// and row schemas are renamed after the new topic.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerouteConfig {
    /// Anchored regex on the topic.
    #[serde(rename = "topic.regex")]
    pub topic_regex: AnchoredRegex,
    /// The new topic, with `$1`-style group references.
    #[serde(rename = "topic.replacement")]
    pub topic_replacement: String,
    /// Add the physical table field to the key (default true).
    #[serde(rename = "key.enforce.uniqueness", default = "default_true")]
    pub key_enforce_uniqueness: bool,
    /// Name of that key field (default `__dbz__physicalTableIdentifier`).
    #[serde(rename = "key.field.name", default = "default_field")]
    pub key_field_name: String,
    /// Optional regex on the original topic that derives the field's value...
    #[serde(rename = "key.field.regex", default)]
    pub key_field_regex: Option<AnchoredRegex>,
    /// ...with this replacement (default: the original topic).
    #[serde(rename = "key.field.replacement", default)]
    pub key_field_replacement: Option<String>,
}

fn default_true() -> bool {
    true
}
fn default_field() -> String {
    "__dbz__physicalTableIdentifier".into()
}

impl RerouteConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.key_field_regex.is_some() != self.key_field_replacement.is_some() {
            return Err(
                "set both `key.field.regex` and `key.field.replacement`, or neither".into(),
            );
        }
        Ok(())
    }
}

sluice_engine::impl_component!(
    RerouteConfig,
    Transform,
    "reroute",
    check = Self::validate,
    build = |c, _ctx| super::Reroute::new(c.clone())
);
