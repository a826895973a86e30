//! `outbox`: Debezium's Outbox Event Router. Each insert into an outbox table becomes an event on
//! the topic its routing column names (`outbox.event.<aggregatetype>`), keyed by the aggregate
//! id, its value the payload column (or a struct of the payload and the columns placed in the
//! envelope, or the payload's JSON expanded into a struct), with the event id as the `id` header
//! and the columns placed in headers. Deletes are dropped, updates too (logged, or fatal per
//! `table.op.invalid.behavior`), tombstones dropped; values that are not change events pass.
//!
//! One difference from Debezium 3.6: a value with envelope placements is named after its own
//! routing value (`….outbox.Customer.Value`); Debezium's router caches the schema by payload
//! schema, so every event sharing one gets the name of the first routed after a start.

mod config;
mod expand;

use std::collections::HashMap;
use std::sync::Arc;

use sluice_engine::config::AnchoredRegex;
use sluice_engine::event::Header;
use sluice_engine::{
    ChangeEvent, ComponentError, Op, Record, Schema, SchemaType, Struct, Transform, Value,
};

pub use config::{InvalidOp, Missing, NullPayload, OutboxConfig, Place, Placement};

/// The running router.
pub struct Outbox {
    config: OutboxConfig,
    placements: Vec<Placement>,
    regex: AnchoredRegex,
    /// Envelope schemas made so far, by (payload schema, routed value).
    envelopes: HashMap<(usize, String), Arc<Schema>>,
}

impl Outbox {
    /// A router for `config`.
    pub fn new(config: OutboxConfig) -> Result<Self, ComponentError> {
        let placements = config.placements().map_err(ComponentError::fatal)?;
        let regex = match &config.route_regex {
            Some(r) => r.clone(),
            None => AnchoredRegex::new(config::DEFAULT_REGEX).map_err(ComponentError::fatal)?,
        };
        Ok(Outbox {
            config,
            placements,
            regex,
            envelopes: HashMap::new(),
        })
    }

    /// The topic of routing value `value`, as Kafka's RegexRouter makes it.
    fn topic(&self, value: &str) -> String {
        let regex = self.regex.regex();
        match regex.captures(value) {
            Some(caps) => {
                let replacement = crate::envelope::java_replacement(
                    &self.config.route_replacement,
                    regex.captures_len(),
                );
                let mut out = String::new();
                caps.expand(&replacement, &mut out);
                out
            }
            None => value.to_owned(),
        }
    }

    /// The routed event of an outbox row `after` (its schema `row`).
    fn route(
        &mut self,
        event: &ChangeEvent,
        row: &Struct,
    ) -> Result<Option<ChangeEvent>, ComponentError> {
        let fail = |what: String| {
            ComponentError::fatal(format!("outbox: topic `{}`: {what}", event.topic))
        };
        let column = |name: &str| -> Option<(&Arc<Schema>, &Value)> {
            let i = row.schema().field_index(name)?;
            Some((&row.schema().fields()[i].schema, &row.values()[i]))
        };
        let routed = match column(&self.config.route_by) {
            Some((_, Value::String(s))) => s.to_string(),
            Some((_, Value::Null)) => {
                return Err(fail(format!(
                    "the routing column `{}` is null",
                    self.config.route_by
                )))
            }
            Some((_, other)) => text(other).ok_or_else(|| {
                fail(format!(
                    "the routing column `{}` is not a text",
                    self.config.route_by
                ))
            })?,
            None => {
                return Err(fail(format!(
                    "the row has no routing column `{}` (`route.by.field`)",
                    self.config.route_by
                )))
            }
        };
        let (payload_schema, payload) = column(&self.config.payload).ok_or_else(|| {
            fail(format!(
                "the row has no payload column `{}` (`table.field.event.payload`)",
                self.config.payload
            ))
        })?;
        let key = column(&self.config.event_key).map(|(schema, value)| Record {
            schema: schema.clone(),
            value: value.clone(),
        });
        let mut headers = event.headers.clone();
        if let Some((_, id)) = column(&self.config.event_id) {
            if let Some(t) = text(id) {
                headers.push(Header {
                    name: "id".into(),
                    value: t.into_bytes(),
                });
            }
        }
        let mut envelope_fields = Vec::new();
        for p in &self.placements {
            match (column(&p.column), p.place) {
                (None, _) if self.config.missing == Missing::Ignore => {}
                (None, _) => return Err(fail(format!("the row has no column `{}` to place (`table.fields.additional.placement`; `table.field.additional.missing: ignore` leaves it out)", p.column))),
                (Some((_, value)), Place::Header) => {
                    if let Some(t) = text(value) {
                        headers.push(Header { name: p.alias.as_str().into(), value: t.into_bytes() });
                    }
                }
                (Some((schema, value)), Place::Envelope) => envelope_fields.push((p.alias.clone(), schema.clone(), value.clone())),
            }
        }
        let empty = match payload {
            Value::Null => true,
            Value::String(s) => s.trim().is_empty(),
            _ => false,
        };
        let value = if empty && self.config.tombstone_on_empty {
            None
        } else {
            let (schema, value) = self.payload(payload_schema, payload).map_err(fail)?;
            Some(match envelope_fields.is_empty() {
                true => Record { schema, value },
                false => self
                    .envelope(row, &routed, schema, value, envelope_fields)
                    .map_err(fail)?,
            })
        };
        Ok(Some(ChangeEvent {
            topic: self.topic(&routed).into(),
            key,
            value,
            headers,
            position: event.position.clone(),
        }))
    }

    /// The payload's schema and value, its JSON expanded when asked.
    fn payload(&self, schema: &Arc<Schema>, value: &Value) -> Result<(Arc<Schema>, Value), String> {
        if !self.config.expand_json {
            return Ok((schema.clone(), value.clone()));
        }
        match value {
            Value::Null if self.config.null_payload == NullPayload::OptionalBytes => {
                Ok((Schema::primitive(SchemaType::Bytes, true), Value::Null))
            }
            Value::String(s) if s.trim_start().starts_with(['{', '[']) => {
                let json: serde_json::Value =
                    serde_json::from_str(s).map_err(|e| format!("the payload is not JSON: {e}"))?;
                expand::expand(&json, &self.config.payload)
            }
            Value::String(_) => {
                tracing::warn!(column = %self.config.payload, "The outbox payload is not a JSON object or array; it is left as it is (table.expand.json.payload).");
                Ok((schema.clone(), value.clone()))
            }
            _ => Ok((schema.clone(), value.clone())),
        }
    }

    /// The value with envelope placements: `{payload, <aliases>}`, named after the row's schema
    /// with the routing value before `.Value`.
    fn envelope(
        &mut self,
        row: &Struct,
        routed: &str,
        payload_schema: Arc<Schema>,
        payload: Value,
        fields: Vec<(String, Arc<Schema>, Value)>,
    ) -> Result<Record, String> {
        let cache_key = (Arc::as_ptr(&payload_schema) as usize, routed.to_owned());
        let schema = match self.envelopes.get(&cache_key) {
            Some(s) if s.fields().len() == fields.len() + 1 => s.clone(),
            _ => {
                let base = row.schema().name().unwrap_or("outbox");
                let base = base.strip_suffix(".Value").unwrap_or(base);
                let mut builder = Schema::struct_builder()
                    .name(format!("{base}.{routed}.Value"))
                    .field(self.config.payload.as_str(), payload_schema.clone());
                for (alias, schema, _) in &fields {
                    builder = builder.field(alias.as_str(), schema.clone());
                }
                let schema = builder.build();
                self.envelopes.insert(cache_key, schema.clone());
                schema
            }
        };
        let mut values = vec![payload];
        values.extend(fields.into_iter().map(|(_, _, v)| v));
        let value = Struct::from_values(schema.clone(), values)
            .ok_or("the envelope does not fit its schema")?;
        Ok(Record {
            schema,
            value: Value::Struct(value),
        })
    }
}

/// A column value as header text (`None` for null).
fn text(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => return None,
        Value::String(s) => s.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Int8(n) => n.to_string(),
        Value::Int16(n) => n.to_string(),
        Value::Int32(n) => n.to_string(),
        Value::Int64(n) => n.to_string(),
        Value::Float32(n) => n.to_string(),
        Value::Float64(n) => n.to_string(),
        other => format!("{other:?}"),
    })
}

impl Transform for Outbox {
    fn apply(
        &mut self,
        event: ChangeEvent,
        out: &mut Vec<ChangeEvent>,
    ) -> Result<(), ComponentError> {
        let Some(value) = &event.value else {
            return Ok(()); // a tombstone of the outbox table
        };
        let (Some(op), Some(envelope)) = (event.op(), value.value.as_struct()) else {
            out.push(event); // not a change event: a heartbeat, a schema change
            return Ok(());
        };
        match op {
            Op::Create | Op::Read => {}
            Op::Delete => return Ok(()),
            Op::Update => {
                let what = format!(
                    "an update of the outbox table (topic `{}`): outbox rows are only inserted",
                    event.topic
                );
                return match self.config.invalid_op {
                    InvalidOp::Warn => {
                        tracing::warn!("Dropped {what}.");
                        Ok(())
                    }
                    InvalidOp::Error => {
                        tracing::error!("Dropped {what}.");
                        Ok(())
                    }
                    InvalidOp::Fatal => Err(ComponentError::fatal(format!(
                        "outbox: {what} (`table.op.invalid.behavior: fatal`)"
                    ))),
                };
            }
            _ => {
                out.push(event);
                return Ok(());
            }
        }
        let row = match envelope.get("after") {
            Some(Value::Struct(row)) => row.clone(),
            _ => {
                return Err(ComponentError::fatal(format!(
                    "outbox: topic `{}`: an insert without an `after` row",
                    event.topic
                )))
            }
        };
        if let Some(routed) = self.route(&event, &row)? {
            out.push(routed);
        }
        Ok(())
    }
}
