//! Configuration of the `key` transform.

use serde::Deserialize;

/// `type: key` (Debezium's `message.key.columns`): the key of the selected tables' events is
/// built from the listed columns, also for tables without a primary key; a delete's tombstone
/// gets the same key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    /// `<schema.table regex>:<column>,<column>;<schema.table regex>:<column>`.
    #[serde(rename = "message.key.columns")]
    pub columns: String,
}

sluice_engine::impl_component!(
    KeyConfig,
    Transform,
    "key",
    check = |c: &Self| super::parse(&c.columns).map(|_| ()),
    build = |c, _ctx| super::Key::new(c).map_err(sluice_engine::ComponentError::fatal)?
);
