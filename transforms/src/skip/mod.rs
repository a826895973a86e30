//! `skip`: drops change events by operation.

mod config;

use sluice_engine::{ChangeEvent, ComponentError, Transform};

pub use config::SkipConfig;

/// The running skip transform.
#[derive(Debug)]
pub struct Skip {
    ops: Vec<String>,
}

impl Skip {
    /// A skip for `config`.
    pub fn new(config: &SkipConfig) -> Self {
        let ops = if config.operations.0.iter().any(|o| o == "none") {
            Vec::new()
        } else {
            config.operations.0.clone()
        };
        Skip { ops }
    }
}

impl Transform for Skip {
    fn apply(
        &mut self,
        event: ChangeEvent,
        out: &mut Vec<ChangeEvent>,
    ) -> Result<(), ComponentError> {
        let code = match (&event.value, event.op()) {
            (None, _) => "d",
            (_, Some(op)) => op.code(),
            _ => "",
        };
        if !self.ops.iter().any(|o| o == code) {
            out.push(event);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use crate::unwrap::FieldList;
    use sluice_engine::Op;

    #[test]
    fn skipped_operations_and_their_tombstones_are_dropped() {
        let s = customers();
        let del = event(&s, Op::Delete, Some(row(&s, 1, None, None, "x")), None);
        let events = vec![
            event(&s, Op::Create, None, Some(row(&s, 1, None, None, "x"))),
            del.clone(),
            tombstone(&del),
        ];
        let run = |ops: &[&str]| {
            let mut k = Skip::new(&SkipConfig {
                operations: FieldList(ops.iter().map(|o| o.to_string()).collect()),
            });
            let mut out = Vec::new();
            for e in events.clone() {
                k.apply(e, &mut out).unwrap();
            }
            out.len()
        };
        assert_eq!(run(&["d"]), 1);
        assert_eq!(run(&["c"]), 2);
        assert_eq!(run(&["none"]), 3);
    }
}
