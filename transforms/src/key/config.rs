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
