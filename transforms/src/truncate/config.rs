//! Configuration of the `truncate` transform.

use serde::Deserialize;
use sluice_engine::config::RegexList;

/// `type: truncate` (Debezium's `column.truncate.to.N.chars`): values of the selected character
/// columns longer than `length` characters are cut to `length`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TruncateConfig {
    /// Column selectors: anchored regexes on `schema.table.column`.
    pub columns: RegexList,
    /// Characters kept.
    pub length: usize,
}

impl TruncateConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.columns.is_empty() {
            return Err("`columns` selects nothing: list `schema.table.column` regexes".into());
        }
        Ok(())
    }
}

impl sluice_engine::registry::Component for TruncateConfig {
    type Built = Box<dyn sluice_engine::Transform>;
    const KIND: &'static str = "truncate";
    fn from_node(
        node: &sluice_engine::config::Node,
        skip: &[&str],
    ) -> Result<Self, sluice_engine::config::ConfigError> {
        sluice_engine::registry::read_checked(node, skip, Self::validate)
    }
    fn build(
        &self,
        _ctx: &sluice_engine::BuildContext<'_>,
    ) -> Result<Self::Built, sluice_engine::ComponentError> {
        Ok(Box::new(super::build(self)))
    }
}
