//! Configuration of the `filter` transform. A `condition` combines comparisons (`==`, `!=`,
//! `<`, `<=`, `>`, `>=`), anchored regex matches (`=~`, `!~`) and `is null` / `is not null`
//! with `&&` / `and`, `||` / `or`, `!` / `not` and parentheses; paths are `topic`,
//! `key.<field>`, `value.<field>` or a field of the value (`op`, `after.status`,
//! `source.table`); literals are `'text'`, `"text"`, numbers, `true`, `false`, `null`. Example:
//! `after.status == 'shipped' && source.table =~ 'orders.*'`. A syntax error is reported at its
//! place in the file.

use serde::Deserialize;
use sluice_engine::config::RegexList;

use crate::unwrap::FieldList;

/// What happens to tombstones (`null.handling.mode`, as Debezium's Filter SMT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum NullHandling {
    /// Tombstones pass (the default).
    #[default]
    Keep,
    /// Tombstones are dropped.
    Drop,
    /// Tombstones are evaluated like other records (their value fields are null).
    Evaluate,
}

/// `type: filter` (Debezium's Filter SMT, without a scripting engine): keeps the change events
/// that satisfy every criterion given.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterConfig {
    /// A predicate in the language above: `after.status == 'shipped' && source.table =~ 'orders.*'`.
    #[serde(default)]
    pub condition: Option<String>,
    /// Operations kept: `c`, `u`, `d`, `r`, `t` (list or comma-separated).
    #[serde(default)]
    pub ops: Option<FieldList>,
    /// Tables kept: anchored regexes on `schema.table`.
    #[serde(default)]
    pub tables: Option<RegexList>,
    /// Tombstones: `keep` (default), `drop`, `evaluate`.
    #[serde(rename = "null.handling.mode", default)]
    pub null_handling: NullHandling,
}

impl FilterConfig {
    /// Checks what serde cannot (the condition's syntax is checked by the caller, which knows
    /// where it is in the file).
    pub fn validate(&self) -> Result<(), String> {
        if self.condition.is_none() && self.ops.is_none() && self.tables.is_none() {
            return Err("a filter needs `condition`, `ops` or `tables`".into());
        }
        if let Some(ops) = &self.ops {
            if let Some(bad) = ops
                .0
                .iter()
                .find(|o| !matches!(o.as_str(), "c" | "u" | "d" | "r" | "t"))
            {
                return Err(format!(
                    "`ops`: `{bad}` is not an operation: use c, u, d, r, t"
                ));
            }
        }
        Ok(())
    }
}

sluice_engine::impl_component!(
    FilterConfig,
    Transform,
    "filter",
    read = read_filter,
    build = |c, _ctx| super::Filter::new(c.clone())
        .map_err(|e| sluice_engine::ComponentError::fatal(format!("filter condition {e}")))?
);

/// A filter whose condition parses; a syntax error points at the condition in the file.
fn read_filter(
    node: &sluice_engine::config::Node,
    skip: &[&str],
) -> Result<FilterConfig, sluice_engine::config::ConfigError> {
    let config = sluice_engine::registry::read_checked(node, skip, FilterConfig::validate)?;
    if let Some(condition) = &config.condition {
        if let Err(e) = super::parse(condition) {
            let at = node.get("condition").map_or(node.loc, |n| n.loc);
            return Err(
                sluice_engine::config::ConfigError::at(at, format!("condition {e}"))
                    .with_path("condition"),
            );
        }
    }
    Ok(config)
}
