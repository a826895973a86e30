//! `columns`: include, exclude and rename columns of change events.

mod config;

use std::sync::Arc;

use sluice_engine::config::AnchoredRegex;
use sluice_engine::{ChangeEvent, ComponentError, Schema, SchemaType, Struct, Transform, Value};

pub use config::ColumnsConfig;

use crate::envelope::{is_envelope, reschema, table_name, with_row, SchemaCache};

#[derive(Debug)]
struct Plan {
    /// Source field index of each output field.
    keep: Vec<usize>,
    /// Nothing changes for this table.
    identity: bool,
    /// The value is a flat row (after `unwrap`), not an envelope.
    flat: bool,
    envelope: Arc<Schema>,
    row: Arc<Schema>,
}

/// The running columns transform.
#[derive(Debug)]
pub struct Columns {
    config: ColumnsConfig,
    rename: Vec<(AnchoredRegex, String)>,
    plans: SchemaCache<Option<Plan>>,
}

impl Columns {
    /// A columns transform for `config` (validated).
    pub fn new(config: ColumnsConfig) -> Result<Self, String> {
        let rename = config
            .rename
            .iter()
            .map(|(s, n)| Ok((AnchoredRegex::new(s)?, n.clone())))
            .collect::<Result<_, String>>()?;
        Ok(Columns {
            config,
            rename,
            plans: SchemaCache::default(),
        })
    }

    fn plan(&self, table: &str, schema: &Arc<Schema>) -> Option<Plan> {
        let flat = !is_envelope(schema);
        let row = if flat {
            (schema.kind() == SchemaType::Struct).then(|| schema.clone())?
        } else {
            schema.field("after")?.schema.clone()
        };
        let mut keep = Vec::new();
        let mut b = row.to_builder().clear_fields();
        let mut identity = true;
        for (i, f) in row.fields().iter().enumerate() {
            let full = format!("{table}.{}", f.name);
            let included = self
                .config
                .include
                .as_ref()
                .is_none_or(|l| l.matches(&full))
                && !self
                    .config
                    .exclude
                    .as_ref()
                    .is_some_and(|l| l.matches(&full));
            if !included {
                identity = false;
                continue;
            }
            let name = match self.rename.iter().find(|(r, _)| r.is_match(&full)) {
                Some((_, n)) => {
                    identity = false;
                    n.clone()
                }
                None => f.name.to_string(),
            };
            b = b.field(name, f.schema.clone());
            keep.push(i);
        }
        let row = b.build();
        let envelope = if flat {
            row.clone()
        } else {
            with_row(schema, &row).build()
        };
        Some(Plan {
            keep,
            identity,
            flat,
            envelope,
            row,
        })
    }
}

fn project(row: &mut Struct, plan: &Plan) {
    let values = row.values();
    let kept: Vec<Value> = plan
        .keep
        .iter()
        .map(|&i| values.get(i).cloned().unwrap_or(Value::Null))
        .collect();
    if let Some(s) = Struct::from_values(plan.row.clone(), kept) {
        *row = s;
    }
}

impl Transform for Columns {
    fn apply(
        &mut self,
        mut event: ChangeEvent,
        out: &mut Vec<ChangeEvent>,
    ) -> Result<(), ComponentError> {
        let Some(schema) = event.value.as_ref().map(|r| r.schema.clone()) else {
            out.push(event);
            return Ok(());
        };
        let table = table_name(&event).unwrap_or_default();
        let mut plans = std::mem::take(&mut self.plans);
        let plan = plans.get_or_insert(&schema, || self.plan(&table, &schema));
        if let (Some(plan), Some(record)) = (plan, event.value.as_mut()) {
            if !plan.identity {
                record.schema = plan.envelope.clone();
                if plan.flat {
                    if let Value::Struct(row) = &mut record.value {
                        project(row, plan);
                    }
                } else {
                    reschema(&mut record.value, &plan.envelope);
                    if let Some(env) = record.value.as_struct_mut() {
                        for side in ["before", "after"] {
                            if let Some(Value::Struct(row)) = env.get_mut(side) {
                                project(row, plan);
                            }
                        }
                    }
                }
            }
        }
        self.plans = plans;
        out.push(event);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use sluice_engine::config::RegexList;
    use sluice_engine::Op;

    #[test]
    fn include_exclude_and_rename() {
        let s = customers();
        let mut c = Columns::new(ColumnsConfig {
            include: None,
            exclude: Some(RegexList(vec![AnchoredRegex::new(r".*\.ssn").unwrap()])),
            rename: [(
                r"public\.customers\.name".to_owned(),
                "full_name".to_owned(),
            )]
            .into(),
        })
        .unwrap();
        let mut out = Vec::new();
        c.apply(
            event(
                &s,
                Op::Update,
                Some(row(&s, 1, Some("A"), Some("x"), "o")),
                Some(row(&s, 1, Some("B"), Some("y"), "n")),
            ),
            &mut out,
        )
        .unwrap();
        let after = field(&out[0], "after", "full_name");
        assert_eq!(after, Some(&Value::from("B")));
        assert_eq!(
            field(&out[0], "before", "full_name"),
            Some(&Value::from("A"))
        );
        assert_eq!(field(&out[0], "after", "ssn"), None);
        let row_schema = out[0]
            .value
            .as_ref()
            .unwrap()
            .schema
            .field("after")
            .unwrap()
            .schema
            .clone();
        let names: Vec<&str> = row_schema.fields().iter().map(|f| &*f.name).collect();
        assert_eq!(names, ["id", "full_name", "status"]);
    }
}
