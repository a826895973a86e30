//! Configuration of the `skip` transform.

use serde::Deserialize;

use crate::unwrap::FieldList;

/// `type: skip` (Debezium's `skipped.operations`): drops change events of the listed
/// operations (`c`, `u`, `d`, `t`, `r`; `none` for nothing); skipping `d` drops the tombstones
/// that follow deletes too.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkipConfig {
    /// Operations to drop.
    pub operations: FieldList,
}

impl SkipConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        match self
            .operations
            .0
            .iter()
            .find(|o| !matches!(o.as_str(), "c" | "u" | "d" | "t" | "r" | "none"))
        {
            Some(bad) => Err(format!(
                "`operations`: `{bad}` is not an operation: use c, u, d, t, r or none"
            )),
            None => Ok(()),
        }
    }
}

sluice_engine::impl_component!(
    SkipConfig,
    Transform,
    "skip",
    check = Self::validate,
    build = |c, _ctx| super::Skip::new(c)
);
