//! `key`: message keys from chosen columns (`message.key.columns`).

mod config;

use std::sync::Arc;

use sluice_engine::config::AnchoredRegex;
use sluice_engine::{ChangeEvent, ComponentError, Record, Schema, Struct, Transform, Value};

pub use config::KeyConfig;

use crate::envelope::{envelope, is_envelope, table_name, SchemaCache};

/// `(table regex, columns)` rules.
pub fn parse(text: &str) -> Result<Vec<(AnchoredRegex, Vec<String>)>, String> {
    let rules = sluice_kit::mapping::parse_key_columns(text)?;
    if rules.is_empty() {
        return Err("`message.key.columns` is empty".into());
    }
    Ok(rules)
}

#[derive(Debug)]
struct Plan {
    schema: Arc<Schema>,
    fields: Vec<usize>,
}

/// The running key transform.
#[derive(Debug)]
pub struct Key {
    rules: Vec<(AnchoredRegex, Vec<String>)>,
    plans: SchemaCache<Option<Plan>>,
    /// The last delete's original and new key, for the tombstone that follows it.
    last_delete: Option<(Arc<str>, Option<Record>, Option<Record>)>,
}

impl Key {
    /// A key transform for `config`.
    pub fn new(config: &KeyConfig) -> Result<Self, String> {
        Ok(Key {
            rules: parse(&config.columns)?,
            plans: SchemaCache::default(),
            last_delete: None,
        })
    }

    /// `row`: the schema of the rows the key is taken from (`after` of an envelope, or a flat
    /// value after `unwrap`).
    fn plan(
        rules: &[(AnchoredRegex, Vec<String>)],
        table: &str,
        old_key: Option<&Arc<Schema>>,
        schema: &Arc<Schema>,
    ) -> Option<Plan> {
        let row = if is_envelope(schema) {
            schema.field("after")?.schema.clone()
        } else if schema.kind() == sluice_engine::SchemaType::Struct {
            schema.clone()
        } else {
            return None;
        };
        let (_, columns) = rules.iter().find(|(r, _)| r.is_match(table))?;
        let name = old_key
            .and_then(|k| k.name().map(str::to_owned))
            .or_else(|| {
                schema.name().map(|n| {
                    n.trim_end_matches(".Envelope")
                        .trim_end_matches(".Value")
                        .to_owned()
                        + ".Key"
                })
            })
            .unwrap_or_default();
        let mut b = Schema::struct_builder().name(name);
        let mut fields = Vec::new();
        for c in columns {
            let Some(i) = row.field_index(c) else {
                tracing::warn!(table, column = %c, "message.key.columns names a column the table does not have; its key is unchanged.");
                return None;
            };
            // The column's schema as it is: a nullable column's NULL stays NULL in the key,
            // as Debezium's `message.key.columns` keeps it.
            b = b.field(c.as_str(), row.fields()[i].schema.clone());
            fields.push(i);
        }
        Some(Plan {
            schema: b.build(),
            fields,
        })
    }
}

impl Transform for Key {
    fn apply(
        &mut self,
        mut event: ChangeEvent,
        out: &mut Vec<ChangeEvent>,
    ) -> Result<(), ComponentError> {
        if event.value.is_none() {
            if let Some((topic, old, new)) = &self.last_delete {
                if *topic == event.topic && *old == event.key {
                    event.key = new.clone();
                }
            }
            out.push(event);
            return Ok(());
        }
        let delete = event.op() == Some(sluice_engine::Op::Delete);
        let row = match envelope(&event) {
            Some(env) => env
                .get(if delete { "before" } else { "after" })
                .and_then(Value::as_struct)
                .cloned(),
            None => event
                .value
                .as_ref()
                .and_then(|v| v.value.as_struct())
                .cloned(),
        };
        let Some(schema) = event.value.as_ref().map(|r| r.schema.clone()) else {
            return Ok(());
        };
        let table = table_name(&event).unwrap_or_default();
        let rules = &self.rules;
        let old_key = event.key.as_ref().map(|k| &k.schema);
        let Some(plan) = self
            .plans
            .get_or_insert(&schema, || Self::plan(rules, &table, old_key, &schema))
        else {
            out.push(event);
            return Ok(());
        };
        let values: Vec<Value> = plan
            .fields
            .iter()
            .map(|&i| {
                row.as_ref()
                    .and_then(|r| r.values().get(i).cloned())
                    .unwrap_or(Value::Null)
            })
            .collect();
        let new_key = Struct::from_values(plan.schema.clone(), values).map(|s| Record {
            schema: plan.schema.clone(),
            value: Value::Struct(s),
        });
        if delete {
            self.last_delete = Some((event.topic.clone(), event.key.clone(), new_key.clone()));
        }
        event.key = new_key;
        out.push(event);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use sluice_engine::Op;

    #[test]
    fn keys_come_from_the_listed_columns_and_tombstones_follow() {
        let s = customers();
        let mut k = Key::new(&KeyConfig {
            columns: "public.customers:status,id".into(),
        })
        .unwrap();
        let del = event(&s, Op::Delete, Some(row(&s, 3, None, None, "gone")), None);
        let mut out = Vec::new();
        k.apply(
            event(&s, Op::Create, None, Some(row(&s, 1, None, None, "new"))),
            &mut out,
        )
        .unwrap();
        k.apply(del.clone(), &mut out).unwrap();
        k.apply(tombstone(&del), &mut out).unwrap();
        let key = |e: &ChangeEvent| {
            e.key
                .as_ref()
                .unwrap()
                .value
                .as_struct()
                .unwrap()
                .values()
                .to_vec()
        };
        assert_eq!(key(&out[0]), vec![Value::from("new"), Value::Int32(1)]);
        assert_eq!(key(&out[1]), vec![Value::from("gone"), Value::Int32(3)]);
        assert_eq!(key(&out[2]), key(&out[1]));
        let schema = &out[0].key.as_ref().unwrap().schema;
        assert_eq!(schema.name(), Some("dbserver1.public.customers.Key"));
        assert!(
            schema.field("status").unwrap().schema.is_optional(),
            "a nullable column stays optional in the key"
        );
        assert!(Key::new(&KeyConfig {
            columns: "public.x".into()
        })
        .is_err());
    }
}
