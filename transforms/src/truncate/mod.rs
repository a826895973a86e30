//! `truncate`: cuts long values of selected character columns.

mod config;

use sluice_kit::mapping::ColumnMapper;

pub use crate::column_map::ColumnMap;
pub use config::TruncateConfig;

/// A truncation for `config`.
pub fn build(config: &TruncateConfig) -> ColumnMap {
    ColumnMap::new(
        config.columns.0.clone(),
        ColumnMapper::Truncate(config.length),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use proptest::prelude::*;
    use sluice_engine::config::{AnchoredRegex, RegexList};
    use sluice_engine::Transform;
    use sluice_engine::{Op, Value};

    fn truncate(n: usize) -> ColumnMap {
        build(&TruncateConfig {
            columns: RegexList(vec![AnchoredRegex::new(r"public\.customers\.name").unwrap()]),
            length: n,
        })
    }

    proptest! {
        #[test]
        fn idempotent_and_never_lengthens(s in ".*", n in 0usize..16) {
            let schema = customers();
            let mut t = truncate(n);
            let mut once = Vec::new();
            let e = event(&schema, Op::Create, None, Some(row(&schema, 1, Some(&s), None, "x")));
            t.apply(e, &mut once).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let cut = field(&once[0], "after", "name").and_then(Value::as_str).unwrap_or_default().to_owned();
            prop_assert!(cut.chars().count() <= s.chars().count());
            prop_assert!(cut.encode_utf16().count() <= n || cut == s);
            prop_assert!(s.starts_with(&cut));
            let mut twice = Vec::new();
            t.apply(once[0].clone(), &mut twice).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(field(&twice[0], "after", "name"), field(&once[0], "after", "name"));
        }
    }
}
