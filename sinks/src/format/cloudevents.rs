//! `format: cloudevents`: values as Debezium's `CloudEventsConverter` writes them in JSON
//! structured mode (`serializer.type: json`, `data.serializer.type: json`): `id`, `source`,
//! `specversion`, `type`, `time`, `datacontenttype`, the `iodebezium*` extension attributes
//! (`iodebeziumop`, then every field of the `source` block, then the transaction's), and `data`,
//! the `before` and `after` images under a struct schema named
//! `io.debezium.connector.<connector>.Data` (with or without the schema: `schemas.enable`). Keys
//! are JsonConverter's. A tombstone stays a tombstone; a value that is not a change event
//! envelope (a heartbeat, a schema change) is a per-event failure.

use std::sync::Arc;

use sluice_engine::codec::json::write_string;
use sluice_engine::codec::{JsonEncoder, JsonOptions};
use sluice_engine::{ChangeEvent, Record, Schema, Struct, Value};

/// A CloudEvent in the binary HTTP binding.
pub struct Binary {
    /// Attribute names (without the `ce-` prefix) and their text.
    pub attributes: Vec<(String, String)>,
    /// `datacontenttype`.
    pub content_type: String,
    /// The `data` JSON.
    pub data: Vec<u8>,
}

/// Why an event's value cannot be a CloudEvent: a per-event failure, handled by
/// `event.processing.failure.handling.mode`.
#[derive(Debug, thiserror::Error)]
pub enum CloudEventsError {
    /// The value is not a data change event's envelope.
    #[error("topic `{topic}`: `format: cloudevents` writes data change events only, and this value is not one (a heartbeat, a schema change or transaction metadata): send such topics to a sink with `format: json`")]
    NotAnEnvelope {
        /// The event's topic.
        topic: String,
    },
    /// The `source` block has no `ts_ms`.
    #[error("topic `{topic}`: the source block has no `ts_ms` for the CloudEvent's `time`")]
    NoTimestamp {
        /// The event's topic.
        topic: String,
    },
    /// A `source` field's type cannot be an attribute.
    #[error("topic `{topic}`: the source field behind `{attribute}` is of a type a CloudEvents attribute cannot hold")]
    Attribute {
        /// The event's topic.
        topic: String,
        /// The attribute's name.
        attribute: String,
    },
    /// The envelope's schema lacks `before` or `after`.
    #[error("topic `{topic}`: the envelope has no `{field}` field")]
    NoImage {
        /// The event's topic.
        topic: String,
        /// `before` or `after`.
        field: &'static str,
    },
    /// The `data` struct does not fit its schema.
    #[error("topic `{topic}`: the data struct does not fit its schema")]
    DataMisfit {
        /// The event's topic.
        topic: String,
    },
    /// The attributes written could not be read back for the binary binding.
    #[error("topic `{topic}`: a CloudEvent's attributes: {source}")]
    Attributes {
        /// The event's topic.
        topic: String,
        /// serde_json's error.
        #[source]
        source: serde_json::Error,
    },
}

/// Encodes values as CloudEvents.
pub struct CloudEventsEncoder {
    data: JsonEncoder,
    extensions: bool,
    /// The last envelope schema seen and the `data` schema made from it.
    schemas: Option<(Arc<Schema>, Arc<Schema>)>,
}

impl CloudEventsEncoder {
    /// An encoder; `schemas_enable` puts the schema of `data` beside its payload,
    /// `extensions` writes the `iodebezium*` attributes (`extension.attributes.enable`).
    pub fn new(schemas_enable: bool, extensions: bool) -> Self {
        CloudEventsEncoder {
            data: JsonEncoder::new(JsonOptions { schemas_enable }),
            extensions,
            schemas: None,
        }
    }

    /// Appends the CloudEvent of the event's value to `out` (nothing for a tombstone); an
    /// error says why it is not one.
    pub fn encode_value(
        &mut self,
        event: &ChangeEvent,
        out: &mut Vec<u8>,
    ) -> Result<(), CloudEventsError> {
        self.encode(event, out).map(|_| ())
    }

    /// The CloudEvent in the binary HTTP binding: its attributes (`id`, `source`, ..., the
    /// extensions; `datacontenttype` as the content type, null attributes left out) as
    /// `(name, text)` pairs, and the `data` JSON as the body. `None` for a tombstone.
    pub fn encode_binary(
        &mut self,
        event: &ChangeEvent,
    ) -> Result<Option<Binary>, CloudEventsError> {
        let mut whole = Vec::new();
        let Some(data_at) = self.encode(event, &mut whole)? else {
            return Ok(None);
        };
        let mut head = whole[..data_at - b",\"data\":".len()].to_vec();
        head.push(b'}');
        let attributes: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&head)
            .map_err(|source| CloudEventsError::Attributes {
                topic: event.topic.to_string(),
                source,
            })?;
        let mut binary = Binary {
            attributes: Vec::new(),
            content_type: "application/json".to_owned(),
            data: whole[data_at..whole.len() - 1].to_vec(),
        };
        for (name, value) in attributes {
            let text = match value {
                serde_json::Value::Null => continue,
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            match name.as_str() {
                "datacontenttype" => binary.content_type = text,
                _ => binary.attributes.push((name, text)),
            }
        }
        Ok(Some(binary))
    }

    /// Appends the CloudEvent; returns where its `data` starts in `out` (`None`: a tombstone).
    fn encode(
        &mut self,
        event: &ChangeEvent,
        out: &mut Vec<u8>,
    ) -> Result<Option<usize>, CloudEventsError> {
        let Some(record) = &event.value else {
            return Ok(None);
        };
        let topic = || event.topic.to_string();
        let not_envelope = || CloudEventsError::NotAnEnvelope { topic: topic() };
        let envelope = record.value.as_struct().ok_or_else(not_envelope)?;
        let op = envelope
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(not_envelope)?;
        let source = match envelope.get("source") {
            Some(Value::Struct(s)) => s,
            _ => return Err(not_envelope()),
        };
        let text = |name: &str| source_text(source, name);
        let connector = text("connector");
        let name = text("name");
        out.extend_from_slice(b"{\"id\":");
        write_string(&ce_id(&connector, source, event), out);
        out.extend_from_slice(b",\"source\":");
        write_string(&format!("/debezium/{connector}/{name}"), out);
        out.extend_from_slice(b",\"specversion\":\"1.0\",\"type\":");
        write_string(
            &format!("io.debezium.connector.{connector}.DataChangeEvent"),
            out,
        );
        out.extend_from_slice(b",\"time\":");
        let ts = match source.get("ts_ms") {
            Some(Value::Int64(ms)) => *ms,
            _ => return Err(CloudEventsError::NoTimestamp { topic: topic() }),
        };
        write_string(&iso_millis(ts), out);
        out.extend_from_slice(b",\"datacontenttype\":\"application/json\"");
        if self.extensions {
            extension_attributes(op, source, envelope.get("transaction"), out).map_err(
                |attribute| CloudEventsError::Attribute {
                    topic: topic(),
                    attribute,
                },
            )?;
        }
        out.extend_from_slice(b",\"data\":");
        let data_at = out.len();
        let data = self.data_record(&record.schema, envelope, &connector, &event.topic)?;
        self.data.encode_record(Some(&data), out);
        out.push(b'}');
        Ok(Some(data_at))
    }

    /// `data`: the `before` and `after` of the envelope, under the `Data` struct schema.
    fn data_record(
        &mut self,
        schema: &Arc<Schema>,
        envelope: &Struct,
        connector: &str,
        topic: &str,
    ) -> Result<Record, CloudEventsError> {
        let data_schema = match &self.schemas {
            Some((seen, data)) if Arc::ptr_eq(seen, schema) => data.clone(),
            _ => {
                let field = |field: &'static str| {
                    schema
                        .field(field)
                        .map(|f| f.schema.clone())
                        .ok_or_else(|| CloudEventsError::NoImage {
                            topic: topic.to_owned(),
                            field,
                        })
                };
                let data = Schema::struct_builder()
                    .name(format!("io.debezium.connector.{connector}.Data"))
                    .field("before", field("before")?)
                    .field("after", field("after")?)
                    .build();
                self.schemas = Some((schema.clone(), data.clone()));
                data
            }
        };
        let image = |name: &str| envelope.get(name).cloned().unwrap_or(Value::Null);
        let value = Struct::from_values(data_schema.clone(), vec![image("before"), image("after")])
            .ok_or_else(|| CloudEventsError::DataMisfit {
                topic: topic.to_owned(),
            })?;
        Ok(Record {
            schema: data_schema,
            value: Value::Struct(value),
        })
    }
}

/// A source field as Java's string concatenation prints it (`null` for none).
fn source_text(source: &Struct, name: &str) -> String {
    match source.get(name) {
        None | Some(Value::Null) => "null".to_owned(),
        Some(Value::String(s)) => s.to_string(),
        Some(Value::Int64(n)) => n.to_string(),
        Some(Value::Int32(n)) => n.to_string(),
        Some(Value::Int16(n)) => n.to_string(),
        Some(Value::Int8(n)) => n.to_string(),
        Some(Value::Boolean(b)) => b.to_string(),
        Some(other) => format!("{other:?}"),
    }
}

/// The CloudEvent's `id`, as each Debezium connector's `CloudEventsMaker` makes it; Sluice's
/// own connectors (SQLite, datagen) use their name and the event's position.
fn ce_id(connector: &str, source: &Struct, event: &ChangeEvent) -> String {
    let t = |name: &str| source_text(source, name);
    match connector {
        "postgresql" => format!(
            "name:{};lsn:{};txId:{};sequence:{}",
            t("name"),
            t("lsn"),
            t("txId"),
            t("sequence")
        ),
        "mysql" | "mariadb" => format!("name:{};file:{};pos:{}", t("name"), t("file"), t("pos")),
        "sqlserver" => format!(
            "name:{};change_lsn:{};commit_lsn:{};event_serial_no:{}",
            t("name"),
            t("change_lsn"),
            t("commit_lsn"),
            t("event_serial_no")
        ),
        "db2" => format!(
            "name:{};change_lsn:{};commit_lsn:{}",
            t("name"),
            t("change_lsn"),
            t("commit_lsn")
        ),
        _ => format!("name:{};position:{}", t("name"), event.position),
    }
}

/// `,"iodebeziumop":..` then `iodebezium<field>` of every source field (characters other than
/// ASCII letters and digits left out of the name) and the transaction's id and orders; an
/// error names the attribute whose value no attribute can hold.
fn extension_attributes(
    op: &str,
    source: &Struct,
    transaction: Option<&Value>,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    out.extend_from_slice(b",\"iodebeziumop\":");
    write_string(op, out);
    for (field, value) in source.schema().fields().iter().zip(source.values()) {
        let name: String = field
            .name
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect();
        attribute(&format!("iodebezium{name}"), value, out)?;
    }
    let tx = match transaction {
        Some(Value::Struct(t)) => Some(t),
        _ => None,
    };
    for (attr, field) in [
        ("iodebeziumtxid", "id"),
        ("iodebeziumtxtotalorder", "total_order"),
        ("iodebeziumtxdatacollectionorder", "data_collection_order"),
    ] {
        let value = tx.and_then(|t| t.get(field)).unwrap_or(&Value::Null);
        attribute(attr, value, out)?;
    }
    Ok(())
}

/// One attribute: 64-bit integers as strings (CloudEvents has no 64-bit integer), smaller ones
/// as numbers, booleans, strings, nulls; anything else cannot be an attribute (the error is
/// the attribute's name).
fn attribute(name: &str, value: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    out.push(b',');
    write_string(name, out);
    out.push(b':');
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::String(s) => write_string(s, out),
        Value::Int64(n) => write_string(&n.to_string(), out),
        Value::Int32(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::Int16(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::Int8(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        _ => return Err(name.to_owned()),
    }
    Ok(())
}

/// Epoch milliseconds as `yyyy-MM-ddTHH:mm:ss.SSSZ` (UTC), as Debezium's `SimpleDateFormat`.
fn iso_millis(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (year, month, day) = sluice_engine::event::calendar::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::iso_millis;

    #[test]
    fn times_are_utc_with_milliseconds() {
        assert_eq!(iso_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_millis(1_796_400_502_447), "2026-12-04T16:08:22.447Z");
        assert_eq!(iso_millis(951_782_400_001), "2000-02-29T00:00:00.001Z");
        assert_eq!(iso_millis(-1), "1969-12-31T23:59:59.999Z");
    }
}
