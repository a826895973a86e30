//! Configuration of the `kafka` sink.

use std::collections::BTreeMap;

use serde::Deserialize;
use sluice_engine::config::{AnchoredRegex, DurationSpec, Properties, Secret};

/// `type: kafka`: one Kafka record per event, key and value encoded by `format`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSinkConfig {
    /// `host:port[,host:port...]` of the brokers (may also be given in `producer`).
    #[serde(rename = "bootstrap.servers", default)]
    pub bootstrap_servers: Option<String>,
    /// librdkafka producer properties, passed through unchanged (`linger.ms`, `compression.type`,
    /// `security.protocol`, `sasl.*`, `ssl.*`, ...). They override Sluice's defaults.
    #[serde(default)]
    pub producer: Properties,
    /// How keys and values are encoded.
    #[serde(default)]
    pub format: Format,
    /// JSON only: wrap key and value in `{"schema":..,"payload":..}` (JsonConverter's
    /// `schemas.enable`, default true).
    #[serde(rename = "schemas.enable", default = "default_true")]
    pub schemas_enable: bool,
    /// Extra headers added to every record: `op`, `table` (`schema.table`), `position` (the
    /// source position). The events' own headers are always sent.
    #[serde(default)]
    pub headers: Vec<HeaderField>,
    /// Topics are created when missing, as Kafka Connect's `topic.creation.*` does.
    #[serde(rename = "topic.creation", default)]
    pub topic_creation: TopicCreation,
    /// What to do with a record the broker rejects for good (too large, invalid): `fail` stops
    /// the pipeline, `warn` logs and skips it, `skip` skips it silently.
    #[serde(rename = "event.processing.failure.handling.mode", default)]
    pub failure_mode: FailureMode,
    /// How long the startup check waits for the brokers' metadata (default 10s).
    #[serde(rename = "connect.timeout", default = "default_connect_timeout")]
    pub connect_timeout: DurationSpec,
    /// Avro only: the Confluent Schema Registry, `http://host:port`.
    #[serde(rename = "schema.registry.url", default)]
    pub schema_registry_url: Option<String>,
    /// Avro only: `user:password` for the registry's basic authentication (Confluent's
    /// `basic.auth.user.info`); never logged.
    #[serde(rename = "basic.auth.user.info", default)]
    pub registry_user_info: Option<Secret>,
    /// Avro only: subject of key schemas (`TopicNameStrategy`, `RecordNameStrategy`,
    /// `TopicRecordNameStrategy`; Confluent's class names are accepted too).
    #[serde(rename = "key.subject.name.strategy", default)]
    pub key_subject_strategy: SubjectStrategy,
    /// Avro only: subject of value schemas.
    #[serde(rename = "value.subject.name.strategy", default)]
    pub value_subject_strategy: SubjectStrategy,
    /// Avro only: how names Avro rejects are adjusted (`avro`, `avro_unicode`, `none`).
    #[serde(rename = "schema.name.adjustment.mode", default)]
    pub name_adjustment: NameAdjustment,
}

fn default_true() -> bool {
    true
}

fn default_connect_timeout() -> DurationSpec {
    DurationSpec(std::time::Duration::from_secs(10))
}

/// `format:` of keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Kafka Connect's JsonConverter.
    #[default]
    Json,
    /// Confluent's AvroConverter: the wire format with a registered schema id.
    Avro,
}

/// Extra header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeaderField {
    /// The envelope's `op` (`c`, `u`, `d`, `r`, `t`, `m`).
    Op,
    /// `schema.table` from the envelope's `source` block.
    Table,
    /// The source position the event carries.
    Position,
}

impl HeaderField {
    /// The header name.
    pub fn name(self) -> &'static str {
        match self {
            HeaderField::Op => "op",
            HeaderField::Table => "table",
            HeaderField::Position => "position",
        }
    }
}

/// `event.processing.failure.handling.mode` (a rejected record: its topic, key and the broker's
/// reason are logged with `warn`).
pub use sluice_engine::FailureMode;

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

/// `topic.creation`: Kafka Connect's topic creation, as one block.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicCreation {
    /// Create missing topics (default true).
    #[serde(default = "default_true")]
    pub enable: bool,
    /// Partitions of topics no group matches (default 1).
    #[serde(default = "default_partitions")]
    pub partitions: i32,
    /// Replication factor of topics no group matches (default -1: the broker's default).
    #[serde(rename = "replication.factor", default = "default_replication")]
    pub replication_factor: i32,
    /// Topic configs of every created topic (`cleanup.policy`, `retention.ms`, ...).
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// Groups tried in order; the first whose `include` matches a topic (and `exclude` does
    /// not) gives its settings.
    #[serde(default)]
    pub groups: Vec<TopicGroup>,
}

impl Default for TopicCreation {
    fn default() -> Self {
        TopicCreation {
            enable: true,
            partitions: default_partitions(),
            replication_factor: default_replication(),
            config: BTreeMap::new(),
            groups: Vec::new(),
        }
    }
}

/// The partitions, replication factor and configs of one new topic.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicSettings {
    /// Partitions.
    pub partitions: i32,
    /// Replication factor (-1: the broker's default).
    pub replication_factor: i32,
    /// Topic configs.
    pub config: BTreeMap<String, String>,
}

fn default_partitions() -> i32 {
    1
}

fn default_replication() -> i32 {
    -1
}

/// One `topic.creation.groups` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicGroup {
    /// Anchored regexes on topic names, comma-separated.
    pub include: AnchoredRegex,
    /// Topics left to later groups or the default.
    #[serde(default)]
    pub exclude: Option<AnchoredRegex>,
    /// Partitions (default: the default settings').
    #[serde(default)]
    pub partitions: Option<i32>,
    /// Replication factor (default: the default settings').
    #[serde(rename = "replication.factor", default)]
    pub replication_factor: Option<i32>,
    /// Topic configs, over the default settings'.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

impl TopicCreation {
    /// The settings of a new topic.
    pub fn settings_for(&self, topic: &str) -> TopicSettings {
        let group = self.groups.iter().find(|g| {
            g.include.is_match(topic) && !g.exclude.as_ref().is_some_and(|e| e.is_match(topic))
        });
        let mut settings = TopicSettings {
            partitions: self.partitions,
            replication_factor: self.replication_factor,
            config: self.config.clone(),
        };
        if let Some(group) = group {
            if let Some(p) = group.partitions {
                settings.partitions = p;
            }
            if let Some(r) = group.replication_factor {
                settings.replication_factor = r;
            }
            settings
                .config
                .extend(group.config.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        settings
    }
}

impl KafkaSinkConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        let servers = self
            .bootstrap_servers
            .as_deref()
            .or(self.producer.get("bootstrap.servers").map(String::as_str));
        if servers.is_none_or(|s| s.trim().is_empty()) {
            return Err("`bootstrap.servers` is required (for example `127.0.0.1:9092`)".into());
        }
        if self.format == Format::Avro && self.schema_registry_url.is_none() {
            return Err(
                "`format: avro` needs `schema.registry.url` (for example `http://127.0.0.1:8081`)"
                    .into(),
            );
        }
        if let Some(url) = &self.schema_registry_url {
            if !url.starts_with("http://") && !url.starts_with("https://") {
                return Err(format!(
                    "`schema.registry.url` must start with http:// or https://, got `{url}`"
                ));
            }
        }
        let tc = &self.topic_creation;
        for (what, p, r) in
            std::iter::once(("default", Some(tc.partitions), Some(tc.replication_factor))).chain(
                tc.groups
                    .iter()
                    .map(|g| ("group", g.partitions, g.replication_factor)),
            )
        {
            if p.is_some_and(|p| p < 1) {
                return Err(format!(
                    "`topic.creation` {what}: `partitions` must be at least 1"
                ));
            }
            if r.is_some_and(|r| r < 1 && r != -1) {
                return Err(format!(
                    "`topic.creation` {what}: `replication.factor` must be at least 1, or -1 for the broker's default"
                ));
            }
        }
        for key in ["key.serializer", "value.serializer", "transactional.id"] {
            if self.producer.contains_key(key) {
                return Err(format!("`producer.{key}` is not supported: Sluice encodes records itself (`format`) and does not produce in transactions"));
            }
        }
        Ok(())
    }

    /// The brokers.
    pub fn servers(&self) -> &str {
        self.bootstrap_servers
            .as_deref()
            .or(self.producer.get("bootstrap.servers").map(String::as_str))
            .unwrap_or_default()
    }
}

impl sluice_engine::registry::Component for KafkaSinkConfig {
    type Built = Box<dyn sluice_engine::Sink>;
    const KIND: &'static str = "kafka";
    fn from_node(
        node: &sluice_engine::config::Node,
        skip: &[&str],
    ) -> Result<Self, sluice_engine::config::ConfigError> {
        sluice_engine::registry::read_checked(node, skip, Self::validate)
    }
    fn build(
        &self,
        ctx: &sluice_engine::BuildContext<'_>,
    ) -> Result<Self::Built, sluice_engine::ComponentError> {
        Ok(Box::new(super::KafkaSink::open(self, ctx)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(include: &str, partitions: i32, policy: &str) -> TopicGroup {
        TopicGroup {
            include: AnchoredRegex::new(include).unwrap_or_else(|e| panic!("{e}")),
            exclude: None,
            partitions: Some(partitions),
            replication_factor: None,
            config: [("cleanup.policy".to_owned(), policy.to_owned())].into(),
        }
    }

    #[test]
    fn the_first_matching_group_gives_the_settings() {
        let tc = TopicCreation {
            enable: true,
            partitions: 2,
            replication_factor: 1,
            config: [("retention.ms".to_owned(), "1000".to_owned())].into(),
            groups: vec![
                group("app\\.public\\..*", 6, "compact"),
                group("app\\..*", 3, "delete"),
            ],
        };
        let s = tc.settings_for("app.public.orders");
        assert_eq!(s.partitions, 6);
        assert_eq!(s.replication_factor, 1);
        assert_eq!(
            s.config.get("cleanup.policy").map(String::as_str),
            Some("compact")
        );
        assert_eq!(
            s.config.get("retention.ms").map(String::as_str),
            Some("1000")
        );
        assert_eq!(tc.settings_for("app.other.t").partitions, 3);
        let d = tc.settings_for("other");
        assert_eq!(d.partitions, 2);
        assert!(!d.config.contains_key("cleanup.policy"));
    }
}
