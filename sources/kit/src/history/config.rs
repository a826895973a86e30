//! `schema.history.internal.*`: where a source that keeps a schema history stores it, with
//! Debezium's property names (and the legacy `database.history.*` ones).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sluice_engine::config::Properties;

/// Prefix of the Kafka store's producer properties passed through.
pub const PRODUCER_PREFIX: &str = "schema.history.internal.producer.";
/// Prefix of the Kafka store's consumer properties passed through.
pub const CONSUMER_PREFIX: &str = "schema.history.internal.consumer.";

/// Which store keeps the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// A JSON-lines file (`io.debezium.storage.file.history.FileSchemaHistory`).
    File(PathBuf),
    /// A single-partition topic (`io.debezium.storage.kafka.history.KafkaSchemaHistory`).
    Kafka(KafkaHistorySettings),
    /// In memory, lost at every restart (`io.debezium.relational.history.MemorySchemaHistory`):
    /// for tests; a restart then needs `snapshot.mode: recovery` or a new snapshot.
    Memory,
}

/// Where the Kafka store reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaHistorySettings {
    /// `schema.history.internal.kafka.bootstrap.servers`.
    pub bootstrap_servers: String,
    /// `schema.history.internal.kafka.topic`.
    pub topic: String,
    /// `schema.history.internal.kafka.recovery.poll.interval.ms`.
    pub poll_interval_ms: u64,
    /// `schema.history.internal.kafka.recovery.attempts`.
    pub recovery_attempts: u32,
    /// `schema.history.internal.kafka.query.timeout.ms`.
    pub query_timeout_ms: u64,
    /// `schema.history.internal.kafka.create.timeout.ms`.
    pub create_timeout_ms: u64,
    /// `schema.history.internal.producer.*`, without the prefix.
    pub producer: Properties,
    /// `schema.history.internal.consumer.*`, without the prefix.
    pub consumer: Properties,
}

/// The `schema.history.internal.*` keys, for sources that keep a schema history (`mysql`,
/// `mariadb`, `sqlserver`, `db2`; the others refuse them). `schema.history.internal.producer.*`
/// and `schema.history.internal.consumer.*` pass librdkafka properties to the Kafka store's
/// clients.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryConfig {
    /// The store: `file`, `kafka`, `memory`, or Debezium's class names
    /// (`io.debezium.storage.file.history.FileSchemaHistory`,
    /// `io.debezium.storage.kafka.history.KafkaSchemaHistory`,
    /// `io.debezium.relational.history.MemorySchemaHistory`); default `kafka` when
    /// `schema.history.internal.kafka.topic` is set, else `file`.
    #[serde(
        rename = "schema.history.internal",
        alias = "database.history",
        default
    )]
    pub store: Option<String>,
    /// The file of the file store (default `<data_dir>/<source>-schema-history.jsonl`: `mysql-`
    /// for `mysql` and `mariadb`, `sqlserver-`, `db2-`): one record per line, synced before the
    /// change after it can be committed; a torn last line is skipped, any other unreadable line
    /// stops the start naming the file and line.
    #[serde(
        rename = "schema.history.internal.file.filename",
        alias = "database.history.file.filename",
        default
    )]
    pub file: Option<PathBuf>,
    /// The Kafka store's topic: exactly one partition (created when missing, with
    /// `retention.ms=-1`; a topic of more partitions is refused), one record per message,
    /// written with `acks=all` and idempotence.
    #[serde(
        rename = "schema.history.internal.kafka.topic",
        alias = "database.history.kafka.topic",
        default
    )]
    pub kafka_topic: Option<String>,
    /// The Kafka store's brokers.
    #[serde(
        rename = "schema.history.internal.kafka.bootstrap.servers",
        alias = "database.history.kafka.bootstrap.servers",
        default
    )]
    pub kafka_servers: Option<String>,
    /// How long one read of the topic waits during recovery (default 100 ms).
    #[serde(
        rename = "schema.history.internal.kafka.recovery.poll.interval.ms",
        default = "default_poll"
    )]
    pub kafka_poll_interval_ms: u64,
    /// Empty reads in a row after which recovery (reading up to the topic's end as it was at
    /// start) gives up (default 100).
    #[serde(
        rename = "schema.history.internal.kafka.recovery.attempts",
        default = "default_attempts"
    )]
    pub kafka_recovery_attempts: u32,
    /// How long a metadata query waits (default 3000 ms).
    #[serde(
        rename = "schema.history.internal.kafka.query.timeout.ms",
        default = "default_query"
    )]
    pub kafka_query_timeout_ms: u64,
    /// How long creating the topic waits (default 30000 ms).
    #[serde(
        rename = "schema.history.internal.kafka.create.timeout.ms",
        default = "default_create"
    )]
    pub kafka_create_timeout_ms: u64,
    /// Statements the source cannot read are logged and skipped instead of stopping it
    /// (default false).
    #[serde(rename = "schema.history.internal.skip.unparseable.ddl", default)]
    pub skip_unparseable_ddl: bool,
    /// Record only the captured tables' changes (default false: every table's, so that a table
    /// added to the include list later has its history; MySQL: also the snapshot's schema
    /// change events).
    #[serde(
        rename = "schema.history.internal.store.only.captured.tables.ddl",
        alias = "schema.history.internal.captured.tables.ddl",
        default
    )]
    pub only_captured_tables: bool,
    /// Record only the captured databases' (schemas') changes (default false; MySQL: also the
    /// snapshot's schema change events).
    #[serde(
        rename = "schema.history.internal.store.only.captured.databases.ddl",
        default
    )]
    pub only_captured_databases: bool,
    /// `schema.history.internal.producer.*` (set by the kit's reader).
    #[serde(skip)]
    pub producer: Properties,
    /// `schema.history.internal.consumer.*` (set by the kit's reader).
    #[serde(skip)]
    pub consumer: Properties,
}

fn default_poll() -> u64 {
    100
}
fn default_attempts() -> u32 {
    100
}
fn default_query() -> u64 {
    3000
}
fn default_create() -> u64 {
    30_000
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            store: None,
            file: None,
            kafka_topic: None,
            kafka_servers: None,
            kafka_poll_interval_ms: default_poll(),
            kafka_recovery_attempts: default_attempts(),
            kafka_query_timeout_ms: default_query(),
            kafka_create_timeout_ms: default_create(),
            skip_unparseable_ddl: false,
            only_captured_tables: false,
            only_captured_databases: false,
            producer: Properties::default(),
            consumer: Properties::default(),
        }
    }
}

impl HistoryConfig {
    /// The store these keys name; a source without a file set keeps its history in
    /// `<data_dir>/<file_name>`. `Err` is the configuration error.
    pub fn store(&self, data_dir: &Path, file_name: &str) -> Result<StoreKind, String> {
        let kind = match self.store.as_deref() {
            Some(class) => short_name(class)?,
            None if self.kafka_topic.is_some() => "kafka",
            None => "file",
        };
        match kind {
            "file" => Ok(StoreKind::File(
                self.file
                    .clone()
                    .unwrap_or_else(|| data_dir.join(file_name)),
            )),
            "memory" => Ok(StoreKind::Memory),
            _ => {
                let topic = self.kafka_topic.clone().ok_or(
                    "the kafka schema history needs `schema.history.internal.kafka.topic`",
                )?;
                let servers = self
                    .kafka_servers
                    .clone()
                    .filter(|s| !s.trim().is_empty())
                    .ok_or(
                    "the kafka schema history needs `schema.history.internal.kafka.bootstrap.servers`",
                )?;
                Ok(StoreKind::Kafka(KafkaHistorySettings {
                    bootstrap_servers: servers,
                    topic,
                    poll_interval_ms: self.kafka_poll_interval_ms.max(1),
                    recovery_attempts: self.kafka_recovery_attempts.max(1),
                    query_timeout_ms: self.kafka_query_timeout_ms.max(1),
                    create_timeout_ms: self.kafka_create_timeout_ms.max(1),
                    producer: self.producer.clone(),
                    consumer: self.consumer.clone(),
                }))
            }
        }
    }
}

/// `file`, `kafka` or `memory` for a store name or Debezium class name.
fn short_name(class: &str) -> Result<&'static str, String> {
    match class.trim() {
        "file" | "io.debezium.storage.file.history.FileSchemaHistory" => Ok("file"),
        "kafka" | "io.debezium.storage.kafka.history.KafkaSchemaHistory" => Ok("kafka"),
        "memory" | "io.debezium.relational.history.MemorySchemaHistory" => Ok("memory"),
        other => Err(format!(
            "`schema.history.internal`: `{other}` is not a store Sluice has: use file, kafka or memory (or their Debezium class names)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_follows_debeziums_names_and_defaults() {
        let dir = Path::new("/data");
        let config = HistoryConfig::default();
        assert_eq!(
            config.store(dir, "h.jsonl"),
            Ok(StoreKind::File(dir.join("h.jsonl")))
        );
        let kafka = HistoryConfig {
            kafka_topic: Some("history".into()),
            ..HistoryConfig::default()
        };
        assert!(kafka
            .store(dir, "h")
            .unwrap_err()
            .contains("schema.history.internal.kafka.bootstrap.servers"));
        let kafka = HistoryConfig {
            kafka_servers: Some("b:9092".into()),
            ..kafka
        };
        assert!(
            matches!(kafka.store(dir, "h"), Ok(StoreKind::Kafka(s)) if s.topic == "history" && s.poll_interval_ms == 100)
        );
        let file = HistoryConfig {
            store: Some("io.debezium.storage.file.history.FileSchemaHistory".into()),
            file: Some("/x/dbhistory.dat".into()),
            ..HistoryConfig::default()
        };
        assert_eq!(
            file.store(dir, "h"),
            Ok(StoreKind::File("/x/dbhistory.dat".into()))
        );
        let bad = HistoryConfig {
            store: Some("io.debezium.storage.redis.history.RedisSchemaHistory".into()),
            ..HistoryConfig::default()
        };
        assert!(bad
            .store(dir, "h")
            .unwrap_err()
            .contains("use file, kafka or memory"));
    }
}
