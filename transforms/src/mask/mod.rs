//! `mask`: replaces selected character columns with asterisks or a fixed string.

mod config;

use sluice_kit::mapping::ColumnMapper;

pub use crate::column_map::ColumnMap;
pub use config::MaskConfig;

/// A mask for `config`.
pub fn build(config: &MaskConfig) -> ColumnMap {
    let mapper = match &config.replacement {
        Some(r) => ColumnMapper::Mask(r.as_str().into()),
        None => ColumnMapper::mask_chars(config.chars.unwrap_or(0)),
    };
    ColumnMap::new(config.columns.0.clone(), mapper)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use proptest::prelude::*;
    use sluice_engine::config::{AnchoredRegex, RegexList};
    use sluice_engine::{ComponentError, Transform};
    use sluice_engine::{Op, Value};

    fn mask(chars: usize) -> ColumnMap {
        build(&MaskConfig {
            columns: RegexList(vec![AnchoredRegex::new(r"public\.customers\.(ssn|name)")
                .unwrap_or_else(|e| panic!("{e}"))]),
            chars: Some(chars),
            replacement: None,
        })
    }

    #[test]
    fn selected_columns_become_asterisks_with_the_parameter() -> Result<(), ComponentError> {
        let s = customers();
        let mut out = Vec::new();
        let e = event(
            &s,
            Op::Create,
            None,
            Some(row(&s, 1, Some("Anne"), None, "new")),
        );
        mask(3).apply(e, &mut out)?;
        assert_eq!(field(&out[0], "after", "name"), Some(&Value::from("***")));
        assert_eq!(
            field(&out[0], "after", "ssn"),
            Some(&Value::from("***")),
            "NULL is masked too"
        );
        assert_eq!(field(&out[0], "after", "status"), Some(&Value::from("new")));
        let schema = &out[0]
            .value
            .as_ref()
            .map(|r| r.schema.clone())
            .unwrap_or_default();
        let row = schema
            .field("after")
            .map(|f| f.schema.clone())
            .unwrap_or_default();
        assert_eq!(
            row.field("ssn").and_then(|f| f.schema.parameter("masked")),
            Some("true")
        );
        assert_eq!(
            row.field("status")
                .and_then(|f| f.schema.parameter("masked")),
            None
        );
        Ok(())
    }

    #[test]
    fn other_tables_pass_untouched() -> Result<(), ComponentError> {
        let s = customers();
        let e = event(
            &s,
            Op::Create,
            None,
            Some(row(&s, 1, Some("Anne"), None, "new")),
        );
        let mut m = build(&MaskConfig {
            columns: RegexList(vec![
                AnchoredRegex::new(r"public\.orders\..*").unwrap_or_else(|e| panic!("{e}"))
            ]),
            chars: None,
            replacement: Some("x".into()),
        });
        let mut out = Vec::new();
        m.apply(e.clone(), &mut out)?;
        assert_eq!(out[0], e);
        assert!(std::sync::Arc::ptr_eq(
            &out[0]
                .value
                .as_ref()
                .map(|r| r.schema.clone())
                .unwrap_or_default(),
            &e.value
                .as_ref()
                .map(|r| r.schema.clone())
                .unwrap_or_default()
        ));
        Ok(())
    }

    proptest! {
        #[test]
        fn output_never_depends_on_the_input(a in ".*", b in ".*", n in 0usize..12) {
            let s = customers();
            let mut m = mask(n);
            let mut out = Vec::new();
            for v in [&a, &b] {
                let e = event(&s, Op::Update, None, Some(row(&s, 1, Some(v), Some(v), "x")));
                m.apply(e, &mut out).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            prop_assert_eq!(field(&out[0], "after", "name"), field(&out[1], "after", "name"));
            prop_assert_eq!(field(&out[0], "after", "ssn"), Some(&Value::from("*".repeat(n).as_str())));
        }
    }
}
