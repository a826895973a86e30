//! Confluent's Avro wire format: a zero byte, the registered schema's id (4 bytes, big-endian),
//! then the Avro binary datum. Schemas are derived from the events' Connect schemas
//! ([`schema`]), checked by apache-avro, and registered through schema_registry_converter under
//! the subject the configured strategy names. A changed table (a column added or dropped)
//! derives a new schema, which registers as a new version of the subject.

pub mod datum;
mod error;
pub mod schema;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use schema_registry_converter::async_impl::schema_registry::{post_schema, SrSettings};
use schema_registry_converter::error::SRCError;
use schema_registry_converter::schema_registry_common::{SchemaType as SrType, SuppliedSchema};
use sluice_engine::event::{Record, Schema};
use sluice_engine::ComponentError;

use super::{EncodeError, FormatConfig, NameAdjustment, SubjectStrategy, UnencodableRecord};
use error::AvroFormatError;

/// Cached schemas per (schema identity, topic, key or value) before the cache is cleared (a
/// transform that builds new schema objects per event must not grow memory).
const MAX_CACHED: usize = 10_000;

/// Registry calls time out after this long (the write is retried by the runtime).
const REGISTRY_TIMEOUT: Duration = Duration::from_secs(30);

/// A schema object's address, the topic, and whether it is a key.
type Identity = (usize, Arc<str>, bool);

/// Encodes keys and values as Confluent Avro.
pub struct AvroEncoder {
    sink: String,
    registry: SrSettings,
    url: String,
    adjust: NameAdjustment,
    key_strategy: SubjectStrategy,
    value_strategy: SubjectStrategy,
    /// By the schema object's address (the `Arc` is kept, so the address stays unique).
    by_identity: HashMap<Identity, (Arc<Schema>, u32)>,
    /// By subject and schema text, for schemas built anew per event.
    by_text: HashMap<(String, String), u32>,
}

impl AvroEncoder {
    /// An encoder registering with `schema.registry.url`.
    pub fn new(config: &FormatConfig, sink: &str) -> Result<Self, ComponentError> {
        let url = config.schema_registry_url.clone().ok_or_else(|| {
            AvroFormatError::Config("`format: avro` needs `schema.registry.url`".to_owned())
        })?;
        let tls = crate::tls::client_config()?;
        let mut builder = SrSettings::new_builder(url.trim_end_matches('/').to_owned());
        builder.set_timeout(REGISTRY_TIMEOUT);
        if let Some(info) = &config.registry_user_info {
            let (user, password) = info.expose().split_once(':').unwrap_or((info.expose(), ""));
            builder.set_basic_authorization(user, Some(password));
        }
        // Messages show the address without credentials in it.
        let url = shown(&url);
        let registry = builder
            .build_with(reqwest::Client::builder().tls_backend_preconfigured(tls))
            .map_err(|source| AvroFormatError::Client {
                sink: sink.to_owned(),
                url: url.clone(),
                source,
            })?;
        Ok(AvroEncoder {
            sink: sink.to_owned(),
            registry,
            url,
            adjust: config.name_adjustment,
            key_strategy: config.key_subject_strategy,
            value_strategy: config.value_subject_strategy,
            by_identity: HashMap::new(),
            by_text: HashMap::new(),
        })
    }

    /// Checks at startup that the registry answers (`GET /subjects`).
    pub async fn check(&self) -> Result<(), ComponentError> {
        schema_registry_converter::async_impl::schema_registry::get_all_subjects(&self.registry)
            .await
            .map(|_| ())
            .map_err(|e| {
                registry_error(
                    &self.sink,
                    &self.url,
                    "cannot reach the schema registry",
                    &e,
                )
            })
    }

    /// Appends the wire format of `record` (a key when `is_key`) for `topic`.
    pub async fn encode(
        &mut self,
        topic: &Arc<str>,
        record: &Record,
        is_key: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        let id = self
            .schema_id(topic, &record.schema, is_key)
            .await
            .map_err(EncodeError::Service)?;
        out.push(0);
        out.extend_from_slice(&id.to_be_bytes());
        datum::encode(&record.schema, &record.value, out).map_err(|source| {
            EncodeError::Record(UnencodableRecord::Avro {
                part: if is_key { "key" } else { "value" },
                topic: topic.to_string(),
                source,
            })
        })
    }

    async fn schema_id(
        &mut self,
        topic: &Arc<str>,
        schema: &Arc<Schema>,
        is_key: bool,
    ) -> Result<u32, ComponentError> {
        let identity = (Arc::as_ptr(schema) as usize, topic.clone(), is_key);
        if let Some((_, id)) = self.by_identity.get(&identity) {
            return Ok(*id);
        }
        let derived = schema::derive(schema, self.adjust);
        let strategy = if is_key {
            self.key_strategy
        } else {
            self.value_strategy
        };
        let subject = subject(strategy, topic, is_key, &derived);
        let text_key = (subject, derived.json);
        let id = match self.by_text.get(&text_key) {
            Some(id) => *id,
            None => {
                let (subject, json) = &text_key;
                // apache-avro must accept it, or the registry (and every consumer) would not.
                apache_avro::Schema::parse_str(json).map_err(|e| AvroFormatError::Schema {
                    sink: self.sink.clone(),
                    topic: topic.to_string(),
                    source: Box::new(e),
                })?;
                let supplied =
                    SuppliedSchema::new(derived.full_name.clone(), SrType::Avro, json.clone());
                let registered = post_schema(&self.registry, subject.clone(), supplied)
                    .await
                    .map_err(|e| {
                        registry_error(
                            &self.sink,
                            &self.url,
                            &format!("registering subject `{subject}` failed"),
                            &e,
                        )
                    })?;
                tracing::info!(sink = %self.sink, subject, id = registered.id, "Registered an Avro schema.");
                if self.by_text.len() >= MAX_CACHED {
                    self.by_text.clear();
                }
                self.by_text.insert(text_key.clone(), registered.id);
                registered.id
            }
        };
        if self.by_identity.len() >= MAX_CACHED {
            self.by_identity.clear();
        }
        self.by_identity.insert(identity, (schema.clone(), id));
        Ok(id)
    }
}

/// A URL without the `user:password@` part.
fn shown(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// Whether the registry's answer says the credentials were refused (401, 403). Addresses are
/// left out first: a port such as `40193` is not a status.
fn refused_credentials(error: &str, cause: &str) -> bool {
    let addresses = regex::Regex::new(r"https?://[^\s)]+").ok();
    [error, cause].iter().any(|t| {
        let t = addresses
            .as_ref()
            .map_or_else(|| (*t).to_owned(), |r| r.replace_all(t, "").into_owned());
        t.contains("401") || t.contains("403") || t.contains("nauthorized")
    })
}

fn registry_error(sink: &str, url: &str, what: &str, e: &SRCError) -> ComponentError {
    let cause = e.cause.as_deref().unwrap_or_default();
    let check = if refused_credentials(&e.error, cause) {
        "check `basic.auth.user.info`"
    } else {
        "check `schema.registry.url`"
    };
    AvroFormatError::Registry {
        sink: sink.to_owned(),
        url: url.to_owned(),
        what: what.to_owned(),
        check,
        source: e.clone(),
    }
    .into()
}

/// The subject a strategy names.
pub fn subject(
    strategy: SubjectStrategy,
    topic: &str,
    is_key: bool,
    derived: &schema::Derived,
) -> String {
    let record = || {
        derived.full_name.clone().unwrap_or_else(|| {
            // Primitive schemas are named by their Avro type, as Confluent does.
            derived.json.trim_matches('"').to_owned()
        })
    };
    match strategy {
        SubjectStrategy::TopicName => {
            format!("{topic}-{}", if is_key { "key" } else { "value" })
        }
        SubjectStrategy::RecordName => record(),
        SubjectStrategy::TopicRecordName => format!("{topic}-{}", record()),
    }
}
