//! `unwrap` (ExtractNewRecordState): replaces the Debezium envelope with the row it carries.

mod config;

use std::sync::Arc;

use sluice_engine::event::Header;
use sluice_engine::{
    ChangeEvent, ComponentError, Record, Schema, SchemaType, Struct, Transform, Value,
};

pub use config::{DeleteMode, FieldList, LegacyDeleteMode, UnwrapConfig};

use crate::envelope::{envelope, is_envelope, value_text, SchemaCache};

/// Where an added field's value comes from.
#[derive(Debug, Clone, Copy)]
enum FieldRef {
    Envelope(usize),
    Source(usize),
}

#[derive(Debug)]
struct Plan {
    schema: Arc<Schema>,
    fields: Vec<Option<FieldRef>>,
    headers: Vec<(Arc<str>, Option<FieldRef>)>,
}

/// The running unwrap transform.
#[derive(Debug)]
pub struct Unwrap {
    mode: DeleteMode,
    config: UnwrapConfig,
    plans: SchemaCache<Option<Plan>>,
}

/// The schema and location of `name` (`source.x`, an envelope field, else a source field).
fn resolve(envelope: &Schema, name: &str) -> Option<(FieldRef, Arc<Schema>)> {
    let source = envelope.field("source")?.schema.clone();
    let in_source = |f: &str| {
        let i = source.field_index(f)?;
        Some((FieldRef::Source(i), source.fields()[i].schema.clone()))
    };
    if let Some(f) = name.strip_prefix("source.") {
        return in_source(f);
    }
    match envelope.field_index(name) {
        Some(i) if !matches!(name, "before" | "after" | "source") => {
            Some((FieldRef::Envelope(i), envelope.fields()[i].schema.clone()))
        }
        _ => in_source(name),
    }
}

impl Unwrap {
    /// An unwrap for `config`.
    pub fn new(config: UnwrapConfig) -> Self {
        Unwrap {
            mode: config.mode(),
            config,
            plans: SchemaCache::default(),
        }
    }

    fn plan(config: &UnwrapConfig, rewrite: bool, schema: &Arc<Schema>) -> Option<Plan> {
        if !is_envelope(schema) {
            return None;
        }
        let row = schema.field("after")?.schema.clone();
        let mut b = row.to_builder().optional_if(false);
        if rewrite {
            b = b.field(
                format!("{}deleted", config.add_fields_prefix),
                Schema::primitive(SchemaType::String, true),
            );
        }
        let mut fields = Vec::new();
        for name in &config.add_fields.0 {
            let resolved = resolve(schema, name);
            let field_schema = resolved
                .as_ref()
                .map(|(_, s)| s.to_builder().optional().build())
                .unwrap_or_else(|| Schema::primitive(SchemaType::String, true));
            b = b.field(
                format!("{}{}", config.add_fields_prefix, name.replace('.', "_")),
                field_schema,
            );
            fields.push(resolved.map(|(r, _)| r));
        }
        let headers = config
            .add_headers
            .0
            .iter()
            .map(|name| {
                (
                    Arc::from(format!(
                        "{}{}",
                        config.add_headers_prefix,
                        name.replace('.', "_")
                    )),
                    resolve(schema, name).map(|(r, _)| r),
                )
            })
            .collect();
        Some(Plan {
            schema: b.build(),
            fields,
            headers,
        })
    }
}

fn lookup(env: &Struct, r: Option<FieldRef>) -> Value {
    match r {
        Some(FieldRef::Envelope(i)) => env.values().get(i).cloned().unwrap_or(Value::Null),
        Some(FieldRef::Source(i)) => env
            .get("source")
            .and_then(Value::as_struct)
            .and_then(|s| s.values().get(i).cloned())
            .unwrap_or(Value::Null),
        None => Value::Null,
    }
}

impl Transform for Unwrap {
    fn apply(
        &mut self,
        mut event: ChangeEvent,
        out: &mut Vec<ChangeEvent>,
    ) -> Result<(), ComponentError> {
        let mode = self.mode;
        if event.value.is_none() {
            if matches!(
                mode,
                DeleteMode::Tombstone | DeleteMode::RewriteWithTombstone
            ) {
                out.push(event);
            }
            return Ok(());
        }
        let Some(env) = envelope(&event) else {
            out.push(event);
            return Ok(());
        };
        let op = env.get("op").and_then(Value::as_str).unwrap_or_default();
        let delete = op == "d";
        let row_side = if delete { "before" } else { "after" };
        let row = env.get(row_side).and_then(Value::as_struct).cloned();
        if delete {
            match mode {
                DeleteMode::Drop | DeleteMode::Tombstone => return Ok(()),
                DeleteMode::DeleteToTombstone => {
                    event.value = None;
                    out.push(event);
                    return Ok(());
                }
                DeleteMode::Rewrite | DeleteMode::RewriteWithTombstone => {}
            }
        }
        let Some(row) = row else {
            // Truncates and other records without a row have nothing to unwrap.
            return Ok(());
        };
        let rewrite = matches!(mode, DeleteMode::Rewrite | DeleteMode::RewriteWithTombstone);
        let Some(schema) = event.value.as_ref().map(|r| r.schema.clone()) else {
            return Ok(());
        };
        let config = &self.config;
        let Some(plan) = self
            .plans
            .get_or_insert(&schema, || Self::plan(config, rewrite, &schema))
        else {
            out.push(event);
            return Ok(());
        };
        let mut values = row.into_parts().1;
        if rewrite {
            values.push(Value::from(if delete { "true" } else { "false" }));
        }
        for r in &plan.fields {
            values.push(lookup(env, *r));
        }
        let mut headers = Vec::with_capacity(plan.headers.len());
        for (name, r) in &plan.headers {
            if let Some(text) = value_text(&lookup(env, *r)) {
                headers.push(Header {
                    name: name.clone(),
                    value: text.into_bytes(),
                });
            }
        }
        let value =
            Struct::from_values(plan.schema.clone(), values).map_or(Value::Null, Value::Struct);
        event.headers.extend(headers);
        event.value = Some(Record {
            schema: plan.schema.clone(),
            value,
        });
        out.push(event);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use sluice_engine::Op;

    fn unwrap(yaml_mode: Option<DeleteMode>, fields: &[&str], headers: &[&str]) -> Unwrap {
        Unwrap::new(UnwrapConfig {
            mode: yaml_mode,
            legacy_mode: None,
            drop_tombstones: None,
            add_fields: config::FieldList(fields.iter().map(|s| s.to_string()).collect()),
            add_fields_prefix: "__".into(),
            add_headers: config::FieldList(headers.iter().map(|s| s.to_string()).collect()),
            add_headers_prefix: "__".into(),
        })
    }

    fn stream(s: &sluice_engine::event::EnvelopeSchema) -> Vec<ChangeEvent> {
        let before = row(s, 1, Some("Anne"), None, "old");
        let del = event(s, Op::Delete, Some(before.clone()), None);
        vec![
            event(
                s,
                Op::Create,
                None,
                Some(row(s, 1, Some("Anne"), None, "new")),
            ),
            event(
                s,
                Op::Update,
                Some(before.clone()),
                Some(row(s, 1, Some("Anne"), None, "old")),
            ),
            del.clone(),
            tombstone(&del),
        ]
    }

    fn run(u: &mut Unwrap, events: Vec<ChangeEvent>) -> Vec<ChangeEvent> {
        let mut out = Vec::new();
        for e in events {
            u.apply(e, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn each_mode_handles_deletes_and_tombstones() {
        let s = customers();
        let kinds = |out: &[ChangeEvent]| -> Vec<&'static str> {
            out.iter()
                .map(|e| match &e.value {
                    None => "null",
                    Some(r)
                        if r.value.as_struct().and_then(|v| v.get("__deleted"))
                            == Some(&Value::from("true")) =>
                    {
                        "deleted"
                    }
                    Some(_) => "row",
                })
                .collect()
        };
        let cases = [
            (DeleteMode::Drop, vec!["row", "row"]),
            (DeleteMode::Tombstone, vec!["row", "row", "null"]),
            (DeleteMode::Rewrite, vec!["row", "row", "deleted"]),
            (
                DeleteMode::RewriteWithTombstone,
                vec!["row", "row", "deleted", "null"],
            ),
            (DeleteMode::DeleteToTombstone, vec!["row", "row", "null"]),
        ];
        for (mode, expected) in cases {
            let out = run(&mut unwrap(Some(mode), &[], &[]), stream(&s));
            assert_eq!(kinds(&out), expected, "{mode:?}");
        }
    }

    #[test]
    fn added_fields_and_headers_come_from_the_envelope_and_source() {
        let s = customers();
        let out = run(
            &mut unwrap(
                Some(DeleteMode::Rewrite),
                &["op", "table", "source.lsn"],
                &["op", "db"],
            ),
            stream(&s),
        );
        let v = out[2].value.as_ref().unwrap();
        let names: Vec<&str> = v.schema.fields().iter().map(|f| &*f.name).collect();
        assert_eq!(
            names,
            [
                "id",
                "name",
                "ssn",
                "status",
                "__deleted",
                "__op",
                "__table",
                "__source_lsn"
            ]
        );
        assert!(!v.schema.is_optional());
        let row = v.value.as_struct().unwrap();
        assert_eq!(row.get("__op"), Some(&Value::from("d")));
        assert_eq!(row.get("__table"), Some(&Value::from("customers")));
        assert_eq!(row.get("__source_lsn"), Some(&Value::Int64(42)));
        assert_eq!(
            row.get("status"),
            Some(&Value::from("old")),
            "a delete carries `before`"
        );
        let headers: Vec<(&str, &[u8])> = out[0]
            .headers
            .iter()
            .map(|h| (&*h.name, &h.value[..]))
            .collect();
        assert_eq!(headers, [("__op", &b"c"[..]), ("__db", &b"inventory"[..])]);
    }

    #[test]
    fn legacy_properties_map_to_the_new_mode() {
        let mut c = unwrap(None, &[], &[]).config;
        assert_eq!(c.mode(), DeleteMode::Tombstone);
        c.legacy_mode = Some(LegacyDeleteMode::Rewrite);
        c.drop_tombstones = Some(false);
        assert_eq!(c.mode(), DeleteMode::RewriteWithTombstone);
        c.drop_tombstones = Some(true);
        assert_eq!(c.mode(), DeleteMode::Rewrite);
        c.legacy_mode = None;
        assert_eq!(c.mode(), DeleteMode::Drop);
    }
}
