//! Configuration of the `mask` transform.

use serde::Deserialize;
use sluice_engine::config::RegexList;

/// `type: mask` (Debezium's `column.mask.with.N.chars`): the selected character columns become
/// exactly `chars` asterisks (0: empty), or `replacement` (one of the two). NULL is masked too
/// and the field's schema gets `masked=true`, as Debezium does.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaskConfig {
    /// Column selectors: anchored regexes on `schema.table.column`.
    pub columns: RegexList,
    /// Number of `*`.
    #[serde(default)]
    pub chars: Option<usize>,
    /// A fixed replacement instead.
    #[serde(default)]
    pub replacement: Option<String>,
}

impl MaskConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        match (&self.chars, &self.replacement) {
            (Some(_), Some(_)) => Err("set `chars` or `replacement`, not both".into()),
            (None, None) => Err("set `chars` (number of `*`) or `replacement`".into()),
            _ if self.columns.is_empty() => {
                Err("`columns` selects nothing: list `schema.table.column` regexes".into())
            }
            _ => Ok(()),
        }
    }
}

sluice_engine::impl_component!(
    MaskConfig,
    Transform,
    "mask",
    check = Self::validate,
    build = |c, _ctx| super::build(c)
);
