//! Configuration of the `columns` transform.

use std::collections::BTreeMap;

use serde::Deserialize;
use sluice_engine::config::RegexList;

/// `type: columns` (Debezium's `column.include.list` / `column.exclude.list`, Kafka Connect's
/// ReplaceField): keeps (`include`) or drops (`exclude`) columns of `before` and `after`, and
/// renames them; selectors are anchored regexes on `schema.table.column`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnsConfig {
    /// Columns kept (default: all).
    #[serde(default)]
    pub include: Option<RegexList>,
    /// Columns dropped.
    #[serde(default)]
    pub exclude: Option<RegexList>,
    /// New names: selector (`schema.table.column` regex) -> new column name.
    #[serde(default)]
    pub rename: BTreeMap<String, String>,
}

impl ColumnsConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.include.is_none() && self.exclude.is_none() && self.rename.is_empty() {
            return Err("set `include`, `exclude` or `rename`".into());
        }
        for (selector, name) in &self.rename {
            sluice_engine::config::AnchoredRegex::new(selector)?;
            if name.trim().is_empty() {
                return Err(format!("`rename`: `{selector}` has an empty new name"));
            }
        }
        Ok(())
    }
}

sluice_engine::impl_component!(
    ColumnsConfig,
    Transform,
    "columns",
    check = Self::validate,
    build =
        |c, _ctx| super::Columns::new(c.clone()).map_err(sluice_engine::ComponentError::fatal)?
);
