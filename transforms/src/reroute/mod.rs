//! `reroute` (ByLogicalTableRouter): several physical tables into one logical topic.

mod config;

use std::collections::HashMap;
use std::sync::Arc;

use sluice_engine::{ChangeEvent, ComponentError, Record, Schema, SchemaType, Transform, Value};

pub use config::RerouteConfig;

use crate::envelope::{is_envelope, java_replacement, reschema, with_row};

/// The original envelope schema (kept alive for its address), the renamed envelope, and its
/// renamed row schema.
type ValueSchemas = (Arc<Schema>, Arc<Schema>, Arc<Schema>);

/// What one original topic turns into.
#[derive(Debug)]
struct Route {
    topic: Arc<str>,
    identifier: Arc<str>,
    /// Key schemas by original key schema (pointer), and the value schemas likewise.
    keys: HashMap<usize, (Arc<Schema>, Arc<Schema>)>,
    values: HashMap<usize, ValueSchemas>,
}

/// The running reroute transform.
#[derive(Debug)]
pub struct Reroute {
    config: RerouteConfig,
    /// `None`: the topic does not match.
    routes: HashMap<Arc<str>, Option<Route>>,
}

fn expand(regex: &regex::Regex, text: &str, replacement: &str) -> Option<String> {
    let caps = regex.captures(text)?;
    let mut out = String::new();
    caps.expand(
        &java_replacement(replacement, regex.captures_len()),
        &mut out,
    );
    Some(out)
}

impl Reroute {
    /// A router for `config`.
    pub fn new(config: RerouteConfig) -> Self {
        Reroute {
            config,
            routes: HashMap::new(),
        }
    }

    fn route_for(config: &RerouteConfig, topic: &str) -> Option<Route> {
        let new_topic = expand(config.topic_regex.regex(), topic, &config.topic_replacement)?;
        let identifier = match (&config.key_field_regex, &config.key_field_replacement) {
            (Some(r), Some(rep)) => {
                expand(r.regex(), topic, rep).unwrap_or_else(|| topic.to_owned())
            }
            _ => topic.to_owned(),
        };
        Some(Route {
            topic: new_topic.into(),
            identifier: identifier.into(),
            keys: HashMap::new(),
            values: HashMap::new(),
        })
    }
}

fn renamed(schema: &Arc<Schema>, name: String) -> Arc<Schema> {
    schema.to_builder().name(name).build()
}

impl Transform for Reroute {
    fn apply(
        &mut self,
        mut event: ChangeEvent,
        out: &mut Vec<ChangeEvent>,
    ) -> Result<(), ComponentError> {
        let config = &self.config;
        if !self.routes.contains_key(&event.topic) {
            if self.routes.len() > 4096 {
                self.routes.clear();
            }
            let route = Self::route_for(config, &event.topic);
            self.routes.insert(event.topic.clone(), route);
        }
        let Some(Some(route)) = self.routes.get_mut(&event.topic) else {
            out.push(event);
            return Ok(());
        };
        if let Some(key) = event.key.as_mut() {
            let id = Arc::as_ptr(&key.schema) as usize;
            let (_, new_schema) = route.keys.entry(id).or_insert_with(|| {
                let mut b = key.schema.to_builder().name(format!("{}.Key", route.topic));
                if config.key_enforce_uniqueness {
                    b = b.field(
                        config.key_field_name.clone(),
                        Schema::primitive(SchemaType::String, false),
                    );
                }
                (key.schema.clone(), b.build())
            });
            let new_schema = new_schema.clone();
            let mut values = match std::mem::replace(&mut key.value, Value::Null) {
                Value::Struct(s) => s.into_parts().1,
                _ => Vec::new(),
            };
            if config.key_enforce_uniqueness {
                values.push(Value::String(route.identifier.clone()));
            }
            key.value = sluice_engine::Struct::from_values(new_schema.clone(), values)
                .map_or(Value::Null, Value::Struct);
            key.schema = new_schema;
        }
        if let Some(value) = event.value.as_mut() {
            if is_envelope(&value.schema) {
                let id = Arc::as_ptr(&value.schema) as usize;
                let (_, envelope, row) = route.values.entry(id).or_insert_with(|| {
                    let old_row = value
                        .schema
                        .field("after")
                        .map(|f| f.schema.clone())
                        .unwrap_or_default();
                    let row = renamed(&old_row, format!("{}.Value", route.topic));
                    let envelope = with_row(&value.schema, &row)
                        .name(format!("{}.Envelope", route.topic))
                        .build();
                    (value.schema.clone(), envelope, row)
                });
                let (envelope, row) = (envelope.clone(), row.clone());
                reschema(&mut value.value, &envelope);
                if let Some(env) = value.value.as_struct_mut() {
                    for side in ["before", "after"] {
                        if let Some(v) = env.get_mut(side) {
                            reschema(v, &row);
                        }
                    }
                }
                *value = Record {
                    schema: envelope,
                    value: std::mem::replace(&mut value.value, Value::Null),
                };
            }
        }
        event.topic = route.topic.clone();
        out.push(event);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use sluice_engine::config::AnchoredRegex;
    use sluice_engine::Op;

    #[test]
    fn tables_share_a_topic_with_unique_keys() {
        let s = customers();
        let mut r = Reroute::new(RerouteConfig {
            topic_regex: AnchoredRegex::new(r"dbserver1\.public\.(.*)").unwrap(),
            topic_replacement: "all.$1s".into(),
            key_enforce_uniqueness: true,
            key_field_name: "__dbz__physicalTableIdentifier".into(),
            key_field_regex: None,
            key_field_replacement: None,
        });
        let del = event(&s, Op::Delete, Some(row(&s, 7, None, None, "x")), None);
        let mut out = Vec::new();
        r.apply(del.clone(), &mut out).unwrap();
        r.apply(tombstone(&del), &mut out).unwrap();
        for e in &out {
            assert_eq!(&*e.topic, "all.customerss");
            let key = e.key.as_ref().unwrap();
            assert_eq!(key.schema.name(), Some("all.customerss.Key"));
            let k = key.value.as_struct().unwrap();
            assert_eq!(
                k.get("__dbz__physicalTableIdentifier"),
                Some(&Value::from("dbserver1.public.customers"))
            );
            assert_eq!(k.get("id"), Some(&Value::Int32(7)));
        }
        let v = out[0].value.as_ref().unwrap();
        assert_eq!(v.schema.name(), Some("all.customerss.Envelope"));
        let before = v
            .value
            .as_struct()
            .unwrap()
            .get("before")
            .unwrap()
            .as_struct()
            .unwrap();
        assert_eq!(before.schema().name(), Some("all.customerss.Value"));
        assert!(out[1].value.is_none());
    }
}
