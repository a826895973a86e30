//! Configuration of the `kafka` sink.

use std::collections::BTreeMap;

use serde::Deserialize;
use sluice_engine::config::{AnchoredRegex, DurationSpec, Properties};

use crate::format::FormatConfig;

/// `type: kafka`: one Kafka record per event, key and value encoded by `format`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSinkConfig {
    /// `host:port[,host:port...]` of the brokers; required, here or as
    /// `producer.bootstrap.servers`. Checked at start within `connect.timeout`: a host that does
    /// not resolve or refused credentials stop it with one line, brokers away are retried.
    #[serde(rename = "bootstrap.servers", default)]
    pub bootstrap_servers: Option<String>,
    /// librdkafka producer properties, passed through unchanged (`linger.ms`, `compression.type`,
    /// `acks`, `security.protocol`, `sasl.*`, `ssl.*`, `message.timeout.ms`, ...). They override
    /// Sluice's defaults (`enable.idempotence=true`, `partitioner=murmur2_random`,
    /// `queue.buffering.max.kbytes=65536`); `key.serializer`, `value.serializer` and
    /// `transactional.id` are refused.
    #[serde(default)]
    pub producer: Properties,
    /// Extra headers added to every record: `op`, `table` (`schema.table`), `position` (the
    /// source position). The events' own headers are always sent.
    #[serde(default)]
    pub headers: Vec<HeaderField>,
    /// Topics are created when missing, as Kafka Connect's `topic.creation.*` does.
    #[serde(rename = "topic.creation", default)]
    pub topic_creation: TopicCreation,
    /// What to do with a record the broker or the encoder rejects for good (too large, invalid,
    /// not encodable): `fail` stops the pipeline, naming its topic (and key), `warn` logs and
    /// skips it, `skip` skips it silently.
    #[serde(rename = "event.processing.failure.handling.mode", default)]
    pub failure_mode: FailureMode,
    /// How long the startup check waits for the brokers' metadata (default 10s).
    #[serde(rename = "connect.timeout", default = "default_connect_timeout")]
    pub connect_timeout: DurationSpec,
    /// How keys and values are encoded (`format`, `schemas.enable`, the schema registry),
    /// read beside these keys.
    #[serde(skip)]
    pub format: FormatConfig,
}

fn default_true() -> bool {
    true
}

fn default_connect_timeout() -> DurationSpec {
    DurationSpec(std::time::Duration::from_secs(10))
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

/// `topic.creation`: Kafka Connect's topic creation, as one block.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicCreation {
    /// Create missing topics through the admin API, as Kafka Connect's `topic.creation.*` does
    /// (default true; brokers often have auto-create off).
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
    /// Groups tried in order, each `{include, exclude, partitions, replication.factor, config}`:
    /// the first whose `include` regex matches a topic (and `exclude` does not) gives its
    /// `partitions` and `replication.factor` (unset: the defaults above) and its `config` over
    /// `topic.creation.config`.
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
    /// An anchored regex on topic names (alternatives with `|`).
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
        self.format.validate()?;
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

sluice_engine::impl_component!(
    KafkaSinkConfig,
    Sink,
    "kafka",
    parts = FormatConfig => format,
    check = Self::validate,
    build = |c, ctx| super::KafkaSink::open(c, ctx)?
);

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
