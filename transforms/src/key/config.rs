//! Configuration of the `key` transform.

use serde::Deserialize;

/// `type: key` (Debezium's `message.key.columns`): the key of the selected tables' events is
/// built from the listed columns, also for tables without a primary key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    /// `<schema.table regex>:<column>,<column>;<schema.table regex>:<column>`.
    #[serde(rename = "message.key.columns")]
    pub columns: String,
}

impl sluice_engine::registry::Component for KeyConfig {
    type Built = Box<dyn sluice_engine::Transform>;
    const KIND: &'static str = "key";
    fn from_node(
        node: &sluice_engine::config::Node,
        skip: &[&str],
    ) -> Result<Self, sluice_engine::config::ConfigError> {
        sluice_engine::registry::read_checked(node, skip, |c: &Self| {
            super::parse(&c.columns).map(|_| ())
        })
    }
    fn build(
        &self,
        _ctx: &sluice_engine::BuildContext<'_>,
    ) -> Result<Self::Built, sluice_engine::ComponentError> {
        Ok(Box::new(
            super::Key::new(self).map_err(sluice_engine::ComponentError::fatal)?,
        ))
    }
}
