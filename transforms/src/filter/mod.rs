//! `filter`: keeps events by operation, table and a predicate over their fields.

mod config;
pub mod predicate;

use sluice_engine::{ChangeEvent, ComponentError, Transform};

pub use config::{FilterConfig, NullHandling};
pub use predicate::{parse, Expr, ParseError};

use crate::envelope::{envelope, table_name};

/// The running filter.
#[derive(Debug)]
pub struct Filter {
    config: FilterConfig,
    condition: Option<Expr>,
}

impl Filter {
    /// A filter for `config`; fails on a condition that does not parse.
    pub fn new(config: FilterConfig) -> Result<Self, ParseError> {
        let condition = config.condition.as_deref().map(parse).transpose()?;
        Ok(Filter { config, condition })
    }

    fn keep(&self, event: &ChangeEvent) -> bool {
        if event.value.is_none() {
            match self.config.null_handling {
                NullHandling::Keep => return true,
                NullHandling::Drop => return false,
                NullHandling::Evaluate => {}
            }
        }
        if envelope(event).is_some() {
            if let Some(ops) = &self.config.ops {
                let op = event.op().map(|o| o.code()).unwrap_or_default();
                if !ops.0.iter().any(|o| o == op) {
                    return false;
                }
            }
            if let Some(tables) = &self.config.tables {
                if !table_name(event).is_some_and(|t| tables.matches(&t)) {
                    return false;
                }
            }
        }
        self.condition.as_ref().is_none_or(|c| c.eval(event))
    }
}

impl Transform for Filter {
    fn apply(
        &mut self,
        event: ChangeEvent,
        out: &mut Vec<ChangeEvent>,
    ) -> Result<(), ComponentError> {
        if self.keep(&event) {
            out.push(event);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use proptest::prelude::*;
    use sluice_engine::Op;

    fn filter(condition: &str) -> Filter {
        Filter::new(FilterConfig {
            condition: Some(condition.into()),
            ops: None,
            tables: None,
            null_handling: NullHandling::Keep,
        })
        .unwrap()
    }

    fn sample() -> Vec<ChangeEvent> {
        let s = customers();
        vec![
            event(
                &s,
                Op::Create,
                None,
                Some(row(&s, 1, Some("Anne"), None, "shipped")),
            ),
            event(
                &s,
                Op::Update,
                Some(row(&s, 2, Some("Bob"), Some("1"), "new")),
                Some(row(&s, 2, Some("Bob"), Some("1"), "shipped")),
            ),
            event(&s, Op::Delete, Some(row(&s, 3, None, None, "new")), None),
        ]
    }

    fn kept(f: &mut Filter) -> Vec<i32> {
        let mut out = Vec::new();
        for e in sample() {
            f.apply(e, &mut out).unwrap();
        }
        out.iter()
            .map(|e| {
                match e
                    .key
                    .as_ref()
                    .and_then(|k| k.value.as_struct())
                    .and_then(|k| k.get("id"))
                {
                    Some(sluice_engine::Value::Int32(i)) => *i,
                    _ => -1,
                }
            })
            .collect()
    }

    #[test]
    fn the_language_works() {
        let cases: &[(&str, &[i32])] = &[
            (
                "after.status == 'shipped' && source.table =~ 'cust.*'",
                &[1, 2],
            ),
            (
                "after.status == 'shipped' && source.table =~ 'orders.*'",
                &[],
            ),
            ("op != 'd' and before is null", &[1]),
            ("!(key.id > 1) || before.ssn == \"1\"", &[1, 2]),
            ("after is null or key.id >= 3", &[3]),
            ("before.name is not null", &[2]),
            ("topic =~ 'dbserver1\\\\..*' && key.id <= 2.5", &[1, 2]),
            ("after.name !~ 'A.*'", &[2, 3]),
            ("source.lsn == 42 and value.op == 'c'", &[1]),
        ];
        for (c, expected) in cases {
            assert_eq!(kept(&mut filter(c)), *expected, "{c}");
        }
    }

    #[test]
    fn errors_point_at_the_character() {
        let e = parse("after.status == ").unwrap_err();
        assert_eq!(
            (e.column, e.message.as_str()),
            (17, "expected a value after `==`")
        );
        assert_eq!(parse("a = 1").unwrap_err().column, 3);
        assert!(parse("a =~ 'x(' ")
            .unwrap_err()
            .message
            .starts_with("invalid regex"));
        assert_eq!(parse("(a == 1").unwrap_err().message, "expected `)`");
        assert_eq!(parse("a == 1 b").unwrap_err().column, 8);
        assert!(parse("'open").unwrap_err().message.contains("unterminated"));
    }

    #[test]
    fn ops_and_tables_select_change_events_and_tombstones_follow_the_mode() {
        let s = customers();
        let del = event(&s, Op::Delete, Some(row(&s, 3, None, None, "x")), None);
        let mut f = Filter::new(FilterConfig {
            condition: None,
            ops: Some(crate::unwrap::FieldList(vec!["d".into()])),
            tables: Some(sluice_engine::config::RegexList(vec![
                sluice_engine::config::AnchoredRegex::new("public\\..*").unwrap(),
            ])),
            null_handling: NullHandling::Drop,
        })
        .unwrap();
        let mut out = Vec::new();
        for e in sample().into_iter().chain([tombstone(&del)]) {
            f.apply(e, &mut out).unwrap();
        }
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].op(), Some(Op::Delete));
    }

    proptest! {
        #[test]
        fn never_panics_on_any_input(src in ".{0,40}") {
            if let Ok(expr) = parse(&src) {
                for e in sample() {
                    let _ = expr.eval(&e);
                }
            }
        }

        #[test]
        fn not_negates(n in -5i64..5) {
            let c = format!("key.id > {n}");
            let a = kept(&mut filter(&c));
            let b = kept(&mut filter(&format!("!({c})")));
            prop_assert_eq!(a.len() + b.len(), 3);
        }
    }
}

#[cfg(test)]
mod depth_tests {
    /// Found while writing the fuzz target (a recursive-descent parser, a recursive drop):
    /// deep nesting is refused with a column, never a stack overflow.
    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        for deep in [
            format!("{}a == 1{}", "(".repeat(200_000), ")".repeat(200_000)),
            format!("{}a", "!".repeat(200_000)),
            format!("{}a", "not ".repeat(100_000)),
            vec!["a == 1"; 100_000].join(" || "),
            vec!["a"; 100_000].join(" and "),
        ] {
            let error = super::parse(&deep).err().map(|e| e.to_string());
            assert!(
                error.as_deref().is_some_and(|e| e.contains("nested")),
                "{error:?}"
            );
        }
        let fine = format!("{}a == 1{}", "(".repeat(30), ")".repeat(30));
        assert!(super::parse(&fine).is_ok());
        assert!(super::parse(&vec!["a == 1"; 500].join(" || ")).is_ok());
    }
}
