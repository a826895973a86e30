//! Topics created when missing, through the admin API (brokers often have auto-create off).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;
use sluice_engine::ComponentError;

use super::client::client_config;
use super::config::{KafkaSinkConfig, TopicCreation};
use super::error::KafkaSinkError;

/// How long the broker may take to create topics.
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);

/// The topics known to exist, and how to create the others.
pub(super) struct Topics {
    sink: String,
    creation: TopicCreation,
    admin: Option<AdminClient<DefaultClientContext>>,
    known: Arc<Mutex<HashSet<String>>>,
}

/// Removes topics from the known set once a delivery says they are gone.
pub(super) struct Forgetter(Arc<Mutex<HashSet<String>>>);

impl Forgetter {
    /// Forgets `topics`, so the next write creates them again.
    pub(super) fn forget(&self, topics: Vec<String>) {
        if topics.is_empty() {
            return;
        }
        if let Ok(mut known) = self.0.lock() {
            for t in topics {
                known.remove(&t);
            }
        }
    }
}

impl Topics {
    /// Knows no topic until [`Self::learn`] is told the broker's.
    pub(super) fn new(
        config: &KafkaSinkConfig,
        client_id: &str,
        sink: &str,
    ) -> Result<Self, ComponentError> {
        let admin = if config.topic_creation.enable {
            let admin = client_config(config, &format!("{client_id}-admin"))
                .create()
                .map_err(|source| KafkaSinkError::Admin {
                    sink: sink.to_owned(),
                    source,
                })?;
            Some(admin)
        } else {
            None
        };
        Ok(Topics {
            sink: sink.to_owned(),
            creation: config.topic_creation.clone(),
            admin,
            known: Arc::new(Mutex::new(HashSet::new())),
        })
    }

    /// Topics the broker listed exist.
    pub(super) fn learn(&self, existing: impl Iterator<Item = String>) {
        (self.known.lock().unwrap_or_else(|p| p.into_inner())).extend(existing);
    }

    /// A handle that forgets topics.
    pub(super) fn forgetter(&self) -> Forgetter {
        Forgetter(self.known.clone())
    }

    /// Creates the topics among `topics` that are not known to exist.
    pub(super) async fn ensure<'a>(
        &mut self,
        topics: impl Iterator<Item = &'a str>,
    ) -> Result<(), ComponentError> {
        let Some(admin) = &self.admin else {
            return Ok(());
        };
        let missing: Vec<String> = {
            let known = self
                .known
                .lock()
                .map_err(|_| ComponentError::fatal("the topic set lock was poisoned"))?;
            let mut missing: Vec<String> = Vec::new();
            for t in topics {
                if !known.contains(t) && !missing.iter().any(|m| m == t) {
                    missing.push(t.to_owned());
                }
            }
            missing
        };
        if missing.is_empty() {
            return Ok(());
        }
        let settings: Vec<_> = missing
            .iter()
            .map(|t| self.creation.settings_for(t))
            .collect();
        let new_topics: Vec<NewTopic<'_>> = missing
            .iter()
            .zip(&settings)
            .map(|(t, s)| {
                s.config.iter().fold(
                    NewTopic::new(
                        t,
                        s.partitions,
                        TopicReplication::Fixed(s.replication_factor),
                    ),
                    |n, (k, v)| n.set(k, v),
                )
            })
            .collect();
        let options = AdminOptions::new().operation_timeout(Some(CREATE_TIMEOUT));
        let results = admin
            .create_topics(&new_topics, &options)
            .await
            .map_err(|source| KafkaSinkError::CreateTopics {
                sink: self.sink.clone(),
                topics: missing.join(", "),
                source,
            })?;
        let mut created = Vec::new();
        for result in results {
            match result {
                Ok(topic) => created.push(topic),
                Err((topic, RDKafkaErrorCode::TopicAlreadyExists)) => created.push(topic),
                Err((topic, code)) => {
                    let sink = self.sink.clone();
                    return Err(KafkaSinkError::TopicRefused { sink, topic, code }.into());
                }
            }
        }
        tracing::info!(sink = %self.sink, topics = %created.join(", "), "Created Kafka topics.");
        if let Ok(mut known) = self.known.lock() {
            known.extend(created);
        }
        Ok(())
    }
}
