//! Configuration of the Kafka offset store (`offsets: {store: kafka, ...}`): its keys beside the
//! engine's (`store`, `flush_interval`) in the pipeline's `offsets` block.

use serde::Deserialize;
use sluice_engine::config::{
    ConfigError, NodeDeserializer, OffsetsConfig, Properties, OFFSETS_KEYS,
};

/// The Kafka store's keys.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaOffsetsConfig {
    /// The brokers (required).
    #[serde(rename = "bootstrap.servers", default)]
    pub bootstrap_servers: Option<String>,
    /// The compacted topic (default `sluice-offsets`; one record per pipeline name).
    #[serde(default = "default_topic")]
    pub topic: String,
    /// The topic's replication factor when it is created (default -1: the broker's).
    #[serde(rename = "replication.factor", default = "default_replication")]
    pub replication_factor: i32,
    /// librdkafka client properties (security, timeouts).
    #[serde(default)]
    pub properties: Properties,
}

fn default_topic() -> String {
    "sluice-offsets".to_owned()
}

fn default_replication() -> i32 {
    -1
}

impl KafkaOffsetsConfig {
    /// Reads the store's keys from the `offsets` block; errors are located in the file.
    pub fn read(offsets: &OffsetsConfig) -> Result<Self, ConfigError> {
        let Some(node) = &offsets.node else {
            return Err(ConfigError {
                loc: None,
                path: vec!["offsets".into()],
                message: "`store: kafka` needs `bootstrap.servers` (for example `127.0.0.1:9092`)"
                    .into(),
            });
        };
        let config =
            KafkaOffsetsConfig::deserialize(NodeDeserializer::skipping(node, &OFFSETS_KEYS))
                .map_err(|e| e.with_path("offsets"))?;
        if config
            .bootstrap_servers
            .as_deref()
            .is_none_or(|s| s.trim().is_empty())
        {
            return Err(ConfigError::at(
                node.loc,
                "`store: kafka` needs `bootstrap.servers` (for example `127.0.0.1:9092`)",
            )
            .with_path("offsets"));
        }
        Ok(config)
    }
}
