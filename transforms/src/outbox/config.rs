//! Configuration of the `outbox` transform, with the property names of Debezium's Outbox Event
//! Router (`io.debezium.transforms.outbox.EventRouter`).

use serde::Deserialize;
use sluice_engine::config::AnchoredRegex;

/// What an update of an outbox row does (`table.op.invalid.behavior`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InvalidOp {
    /// Logged as a warning, dropped.
    #[default]
    Warn,
    /// Logged as an error, dropped.
    Error,
    /// Stops the pipeline.
    Fatal,
}

/// A placed column that is missing (`table.field.additional.missing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Missing {
    /// Stops the pipeline.
    #[default]
    Error,
    /// Left out.
    Ignore,
}

/// A null payload with `table.expand.json.payload` (`table.json.payload.null.behavior`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NullPayload {
    /// Kept as it is, with the column's schema.
    #[default]
    Ignore,
    /// An optional bytes schema.
    OptionalBytes,
}

/// Where an additional column goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A header of the event.
    Header,
    /// A field beside `payload` in the value.
    Envelope,
}

/// One entry of `table.fields.additional.placement`: `column:header|envelope[:alias]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub column: String,
    pub place: Place,
    pub alias: String,
}

/// `type: outbox` (Debezium's Outbox Event Router, `io.debezium.transforms.outbox.EventRouter`):
/// each insert (or snapshot read) of an outbox table becomes an event on the topic its routing
/// column names, keyed by the aggregate id, its value the payload; deletes and tombstones are
/// dropped, updates per `table.op.invalid.behavior`. Not offered: `partition` placement and
/// `table.field.event.timestamp` (Sluice's events carry no Kafka partition or record
/// timestamp: refused with that reason), tracing. One difference from Debezium 3.6: a value
/// with envelope placements is named after its own routing value (Debezium reuses the first
/// routed name for every event with the same payload schema).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboxConfig {
    /// The column of the event's id, sent as the `id` header (default `id`).
    #[serde(rename = "table.field.event.id", default = "default_id")]
    pub event_id: String,
    /// The column of the event's key (default `aggregateid`).
    #[serde(rename = "table.field.event.key", default = "default_key")]
    pub event_key: String,
    /// The column of the event's type (default `type`); as in Debezium, only a placement
    /// puts it in the event.
    #[serde(rename = "table.field.event.type", default = "default_type")]
    pub event_type: String,
    /// The column of the payload (default `payload`).
    #[serde(rename = "table.field.event.payload", default = "default_payload")]
    pub payload: String,
    /// Debezium's record timestamp column: Sluice's events carry no record timestamp, so it is
    /// refused rather than ignored.
    #[serde(rename = "table.field.event.timestamp", default)]
    pub timestamp: Option<String>,
    /// `column:header|envelope[:alias]`, comma-separated.
    #[serde(rename = "table.fields.additional.placement", default)]
    pub placement: Option<String>,
    /// A placed column that is missing from the row: `error` stops the pipeline, `ignore`
    /// leaves it out.
    #[serde(rename = "table.field.additional.missing", default)]
    pub missing: Missing,
    /// An update of the outbox table (deletes are dropped in any case): `warn` (default) drops
    /// it with a warning, `error` drops it logged as an error, `fatal` stops the pipeline.
    #[serde(rename = "table.op.invalid.behavior", default)]
    pub invalid_op: InvalidOp,
    /// Parse a JSON text payload into a struct with an inferred schema.
    #[serde(rename = "table.expand.json.payload", default)]
    pub expand_json: bool,
    /// With `table.expand.json.payload`, a JSON `null` payload: `ignore` keeps it as it is,
    /// with the column's schema; `optional_bytes` gives it an optional bytes schema.
    #[serde(rename = "table.json.payload.null.behavior", default)]
    pub null_payload: NullPayload,
    /// The column whose value routes the event (default `aggregatetype`).
    #[serde(rename = "route.by.field", default = "default_route_by")]
    pub route_by: String,
    /// Matched against the routing value, whole (default `(?<routedByValue>.*)`).
    #[serde(rename = "route.topic.regex", default)]
    pub route_regex: Option<AnchoredRegex>,
    /// The topic (default `outbox.event.${routedByValue}`).
    #[serde(rename = "route.topic.replacement", default = "default_replacement")]
    pub route_replacement: String,
    /// An empty payload becomes a tombstone (default false).
    #[serde(rename = "route.tombstone.on.empty.payload", default)]
    pub tombstone_on_empty: bool,
}

fn default_id() -> String {
    "id".into()
}
fn default_key() -> String {
    "aggregateid".into()
}
fn default_type() -> String {
    "type".into()
}
fn default_payload() -> String {
    "payload".into()
}
fn default_route_by() -> String {
    "aggregatetype".into()
}
/// Debezium's default `route.topic.regex`.
pub(super) const DEFAULT_REGEX: &str = "(?<routedByValue>.*)";
fn default_replacement() -> String {
    "outbox.event.${routedByValue}".into()
}

impl OutboxConfig {
    /// The placements, parsed.
    pub fn placements(&self) -> Result<Vec<Placement>, String> {
        let Some(text) = &self.placement else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let parts: Vec<&str> = entry.split(':').map(str::trim).collect();
            let (column, place) = match parts.as_slice() {
                [c, p] | [c, p, _] => (*c, *p),
                _ => {
                    return Err(format!(
                        "`table.fields.additional.placement`: `{entry}` is not `column:header|envelope[:alias]`"
                    ))
                }
            };
            let place = match place {
                "header" => Place::Header,
                "envelope" => Place::Envelope,
                "partition" => return Err(format!(
                    "`table.fields.additional.placement`: `{entry}`: Sluice's events carry no Kafka partition (the kafka sink picks it from the key); place the column in a header or the envelope"
                )),
                other => return Err(format!(
                    "`table.fields.additional.placement`: `{entry}`: `{other}` is not `header` or `envelope`"
                )),
            };
            out.push(Placement {
                column: column.to_owned(),
                place,
                alias: parts.get(2).unwrap_or(&column).to_string(),
            });
        }
        Ok(out)
    }

    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.timestamp.is_some() {
            return Err("`table.field.event.timestamp`: Sluice's events carry no record timestamp to set (Kafka records get the producer's time); leave it out, or place the column in a header".into());
        }
        self.placements().map(|_| ())
    }
}

sluice_engine::impl_component!(
    OutboxConfig,
    Transform,
    "outbox",
    check = Self::validate,
    build = |c, _ctx| super::Outbox::new(c.clone())?
);
