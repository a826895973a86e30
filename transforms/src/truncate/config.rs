//! Configuration of the `truncate` transform.

use serde::Deserialize;
use sluice_engine::config::RegexList;

/// `type: truncate` (Debezium's `column.truncate.to.N.chars`): values of the selected character
/// columns longer than `length` characters are cut to `length`, counted in UTF-16 units as Java
/// counts them, never inside a character; the schema gets `truncateLength`.
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

sluice_engine::impl_component!(
    TruncateConfig,
    Transform,
    "truncate",
    check = Self::validate,
    build = |c, _ctx| super::build(c)
);
