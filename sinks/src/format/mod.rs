//! The formats layer every sink that writes keys and values uses: `format: json` (Kafka
//! Connect's JsonConverter, with or without schemas) or `format: avro` (Confluent's wire format
//! through a schema registry, behind the `avro` feature) or `format: cloudevents` (values as
//! Debezium's CloudEventsConverter writes them in JSON structured mode). A sink reads
//! [`FormatConfig`] beside its own keys (`sluice_engine::config::from_node_parts`) and encodes
//! with an [`Encoder`].

#[cfg(feature = "avro")]
pub mod avro;
pub mod cloudevents;

use serde::Deserialize;
use sluice_engine::codec::{JsonEncoder, JsonOptions};
use sluice_engine::config::Secret;
use sluice_engine::{ChangeEvent, ComponentError};

/// `format:` of keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Kafka Connect's JsonConverter.
    #[default]
    Json,
    /// Confluent's AvroConverter: the wire format with a registered schema id.
    Avro,
    /// Debezium's CloudEventsConverter, JSON structured mode (keys as `json`).
    Cloudevents,
}

/// How keys and values are encoded: the keys every such sink shares.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FormatConfig {
    /// `json` (default: Kafka Connect's JsonConverter), `avro` (Confluent's wire format: a zero
    /// byte, the registered schema's id, the Avro datum) or `cloudevents` (Debezium's
    /// CloudEventsConverter, JSON structured mode; keys as `json`).
    #[serde(default)]
    pub format: Format,
    /// JSON only: wrap key and value in `{"schema":..,"payload":..}` (JsonConverter's
    /// `schemas.enable`, default true).
    #[serde(rename = "schemas.enable", default = "default_true")]
    pub schemas_enable: bool,
    /// Avro only: the Confluent Schema Registry, `http://host:port` or `https://...`; checked at
    /// start.
    #[serde(rename = "schema.registry.url", default)]
    pub schema_registry_url: Option<String>,
    /// Avro only: `user:password` for the registry's basic authentication (Confluent's
    /// `basic.auth.user.info`; `${VAR}` reads it from the environment); never logged, and
    /// messages show the registry's URL without credentials.
    #[serde(rename = "basic.auth.user.info", default)]
    pub registry_user_info: Option<Secret>,
    /// Avro only: subject of key schemas: `TopicNameStrategy` (the default, `<topic>-key`),
    /// `RecordNameStrategy` (the record's full name) or `TopicRecordNameStrategy`
    /// (`<topic>-<record full name>`); Confluent's class names are accepted too.
    #[serde(rename = "key.subject.name.strategy", default)]
    pub key_subject_strategy: SubjectStrategy,
    /// Avro only: subject of value schemas, as `key.subject.name.strategy` (default
    /// `TopicNameStrategy`: `<topic>-value`).
    #[serde(rename = "value.subject.name.strategy", default)]
    pub value_subject_strategy: SubjectStrategy,
    /// Avro only: how record, namespace and field names Avro rejects are adjusted: `avro`
    /// (default: each rejected character becomes `_`), `avro_unicode` (`_uxxxx`, its code in
    /// hex) or `none` (kept; the serializer fails on an invalid name).
    #[serde(rename = "schema.name.adjustment.mode", default)]
    pub name_adjustment: NameAdjustment,
    /// CloudEvents only: write the `iodebezium*` extension attributes (Debezium's
    /// `extension.attributes.enable`, default true).
    #[serde(rename = "extension.attributes.enable", default = "default_true")]
    pub extension_attributes: bool,
}

impl Default for FormatConfig {
    fn default() -> Self {
        FormatConfig {
            format: Format::Json,
            schemas_enable: true,
            schema_registry_url: None,
            registry_user_info: None,
            key_subject_strategy: SubjectStrategy::default(),
            value_subject_strategy: SubjectStrategy::default(),
            name_adjustment: NameAdjustment::default(),
            extension_attributes: true,
        }
    }
}

fn default_true() -> bool {
    true
}

impl FormatConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.format == Format::Avro && self.schema_registry_url.is_none() {
            return Err(
                "`format: avro` needs `schema.registry.url` (for example `http://127.0.0.1:8081`)"
                    .into(),
            );
        }
        if cfg!(not(feature = "avro")) && self.format == Format::Avro {
            return Err(
                "`format: avro` needs the `avro` feature, which this build leaves out".into(),
            );
        }
        if let Some(url) = &self.schema_registry_url {
            if !url.starts_with("http://") && !url.starts_with("https://") {
                return Err(format!(
                    "`schema.registry.url` must start with http:// or https://, got `{url}`"
                ));
            }
        }
        Ok(())
    }
}

/// Subject name strategies of Confluent's serializers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubjectStrategy {
    /// `<topic>-key` / `<topic>-value`.
    #[default]
    TopicName,
    /// The record's full name.
    RecordName,
    /// `<topic>-<record full name>`.
    TopicRecordName,
}

impl<'de> Deserialize<'de> for SubjectStrategy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let short = text.rsplit('.').next().unwrap_or(&text);
        match short {
            "TopicNameStrategy" => Ok(SubjectStrategy::TopicName),
            "RecordNameStrategy" => Ok(SubjectStrategy::RecordName),
            "TopicRecordNameStrategy" => Ok(SubjectStrategy::TopicRecordName),
            _ => Err(serde::de::Error::custom(format!(
                "unknown subject name strategy `{text}`: expected TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy"
            ))),
        }
    }
}

/// `schema.name.adjustment.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NameAdjustment {
    /// Characters Avro rejects become `_`.
    #[default]
    Avro,
    /// Characters Avro rejects become `_uxxxx`.
    AvroUnicode,
    /// Names are kept (the serializer fails on an invalid one).
    None,
}

/// Why an event could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// The event does not fit its own schema: a per-event failure, handled by
    /// `event.processing.failure.handling.mode`.
    #[error(transparent)]
    Record(#[from] UnencodableRecord),
    /// The format's service (the schema registry) refused or could not be reached.
    #[error(transparent)]
    Service(ComponentError),
}

/// An event the format cannot write, whatever the service says: a per-event failure.
#[derive(Debug, thiserror::Error)]
pub enum UnencodableRecord {
    /// Not a CloudEvent (`format: cloudevents`).
    #[error(transparent)]
    CloudEvents(#[from] cloudevents::CloudEventsError),
    /// The value does not fit the Avro schema derived from its own (`format: avro`).
    #[cfg(feature = "avro")]
    #[error("cannot encode a {part} of topic `{topic}` as Avro: {source}")]
    Avro {
        /// `key` or `value`.
        part: &'static str,
        /// The event's topic.
        topic: String,
        /// Where the datum and its schema disagree.
        #[source]
        source: avro::datum::DatumError,
    },
}

/// Encodes events' keys and values in the configured format.
pub struct Encoder {
    inner: Inner,
}

enum Inner {
    Json(JsonEncoder),
    CloudEvents {
        key: JsonEncoder,
        value: Box<cloudevents::CloudEventsEncoder>,
    },
    #[cfg(feature = "avro")]
    Avro(Box<avro::AvroEncoder>),
}

impl Encoder {
    /// An encoder for the sink named `sink` (an Avro one reaches its registry in
    /// [`Self::health_check`]).
    pub fn open(config: &FormatConfig, sink: &str) -> Result<Self, ComponentError> {
        let inner = match config.format {
            Format::Json => Inner::Json(JsonEncoder::new(JsonOptions {
                schemas_enable: config.schemas_enable,
            })),
            Format::Cloudevents => Inner::CloudEvents {
                key: JsonEncoder::new(JsonOptions {
                    schemas_enable: config.schemas_enable,
                }),
                value: Box::new(cloudevents::CloudEventsEncoder::new(
                    config.schemas_enable,
                    config.extension_attributes,
                )),
            },
            #[cfg(feature = "avro")]
            Format::Avro => {
                Inner::Avro(Box::new(avro::AvroEncoder::new(config, sink)?))
            }
            #[cfg(not(feature = "avro"))]
            Format::Avro => {
                return Err(ComponentError::fatal(format!(
                    "sink `{sink}`: `format: avro` needs the `avro` feature, which this build leaves out"
                )))
            }
        };
        Ok(Encoder { inner })
    }

    /// Reaches the services the format needs (an Avro schema registry), for the sink's
    /// health check.
    pub async fn health_check(&self) -> Result<(), ComponentError> {
        match &self.inner {
            #[cfg(feature = "avro")]
            Inner::Avro(avro) => avro.check().await,
            _ => Ok(()),
        }
    }

    /// Encodes the event's key into `key` and its value into `value` (each left empty when
    /// the event has none: no key, a tombstone).
    pub async fn encode(
        &mut self,
        event: &ChangeEvent,
        key: &mut Vec<u8>,
        value: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        key.clear();
        value.clear();
        match &mut self.inner {
            Inner::Json(json) => {
                if event.key.is_some() {
                    json.encode_record(event.key.as_ref(), key);
                }
                if event.value.is_some() {
                    json.encode_record(event.value.as_ref(), value);
                }
                Ok(())
            }
            Inner::CloudEvents { key: k, value: v } => {
                if event.key.is_some() {
                    k.encode_record(event.key.as_ref(), key);
                }
                v.encode_value(event, value)
                    .map_err(|e| EncodeError::Record(e.into()))
            }
            #[cfg(feature = "avro")]
            Inner::Avro(avro) => {
                if let Some(k) = &event.key {
                    avro.encode(&event.topic, k, true, key).await?;
                }
                if let Some(v) = &event.value {
                    avro.encode(&event.topic, v, false, value).await?;
                }
                Ok(())
            }
        }
    }
}
