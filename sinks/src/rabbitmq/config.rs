//! Configuration of the `rabbitmq` sink (AMQP 0-9-1), with Debezium Server's RabbitMQ sink
//! property names (`debezium.sink.rabbitmq.*` there, without the prefix here; the connection's
//! as its `connection.*` pass-through to the Java client names them).

use serde::Deserialize;
use sluice_engine::config::Secret;
use sluice_engine::FailureMode;

use crate::format::FormatConfig;

/// Where a message's routing key comes from (`routingKey.source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoutingKeySource {
    /// `routingKey`.
    #[default]
    Static,
    /// The event's topic.
    Topic,
    /// The event's key, encoded (empty for an event without a key).
    Key,
}

/// The kind of exchange `autoCreateExchange` declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExchangeType {
    /// Routing keys matched against binding patterns.
    #[default]
    Topic,
    /// Routing keys equal to binding keys.
    Direct,
    /// Every bound queue.
    Fanout,
    /// Headers matched.
    Headers,
}

/// `type: rabbitmq`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RabbitmqSinkConfig {
    /// An `amqp://user:password@host:port/vhost` URI (`amqps://` for TLS), instead of the parts.
    #[serde(rename = "connection.uri", default)]
    pub uri: Option<Secret>,
    /// The broker's host.
    #[serde(rename = "connection.host", default = "default_host")]
    pub host: String,
    /// Its port (default 5672, 5671 with `ssl`).
    #[serde(rename = "connection.port", default)]
    pub port: Option<u16>,
    /// The login.
    #[serde(rename = "connection.username", default = "default_guest")]
    pub username: String,
    /// Its password (never logged).
    #[serde(rename = "connection.password", default = "default_password")]
    pub password: Secret,
    /// The virtual host.
    #[serde(rename = "connection.virtual.host", default = "default_vhost")]
    pub virtual_host: String,
    /// TLS (`amqps`), checked against the system's roots or `connection.ssl.trust.store`.
    #[serde(rename = "connection.ssl.enabled", default)]
    pub ssl: bool,
    /// A PEM file of CA certificates (Java's client reads a JKS trust store here).
    #[serde(rename = "connection.ssl.trust.store", default)]
    pub trust_store: Option<std::path::PathBuf>,
    /// How long connecting may take, ms (the Java client's default, 60000).
    #[serde(
        rename = "connection.connection.timeout",
        default = "default_connect_timeout"
    )]
    pub connection_timeout_ms: u64,
    /// The heartbeat asked for, seconds (60).
    #[serde(
        rename = "connection.connection.heartbeat",
        default = "default_heartbeat"
    )]
    pub heartbeat_s: u16,
    /// The exchange; empty (the default): the event's topic, as Debezium's.
    #[serde(default)]
    pub exchange: String,
    /// Sluice's own: declare the exchange at start (durable) when missing.
    #[serde(rename = "autoCreateExchange", default)]
    pub auto_create_exchange: bool,
    /// Sluice's own: the kind of exchange declared (`topic`).
    #[serde(rename = "exchangeType", default)]
    pub exchange_type: ExchangeType,
    /// The routing key of `routingKey.source: static`.
    #[serde(rename = "routingKey", default)]
    pub routing_key: String,
    /// Where the routing key comes from: `static` (`routingKey`), `topic` (the event's topic) or
    /// `key` (the event's key, encoded; empty for an event without a key).
    #[serde(rename = "routingKey.source", default)]
    pub routing_key_source: RoutingKeySource,
    /// Deprecated by Debezium (3.6 ignores it); `true` here means `routingKey.source: topic`,
    /// as it did up to Debezium 3.5.
    #[serde(rename = "routingKeyFromTopicName", default)]
    pub routing_key_from_topic_name: bool,
    /// Declare a queue named after the routing key; unlike Debezium's, Sluice also binds it to
    /// the exchange with that key, so that the messages reach it.
    #[serde(rename = "autoCreateRoutingKey", default)]
    pub auto_create_routing_key: bool,
    /// Whether that queue is durable (true).
    #[serde(rename = "routingKeyDurable", default = "default_true")]
    pub routing_key_durable: bool,
    /// 2 (the default): persistent messages; 1: transient.
    #[serde(rename = "deliveryMode", default = "default_delivery_mode")]
    pub delivery_mode: u8,
    /// How long a message's publisher confirm may take before it is published again, ms (30000).
    #[serde(rename = "ackTimeout", default = "default_ack_timeout")]
    pub ack_timeout_ms: u64,
    /// The body of a tombstone (`default`, as Debezium's).
    #[serde(rename = "null.value", default = "default_null")]
    pub null_value: String,
    /// Sluice's own: publish `mandatory`, so that a message no queue takes stops the pipeline
    /// instead of being dropped by the broker (true; Debezium's publishes are not mandatory).
    #[serde(default = "default_true")]
    pub mandatory: bool,
    /// The first wait after a failed attempt, doubled up to `retry.max.delay.ms`.
    #[serde(rename = "retry.initial.delay.ms", default = "default_retry")]
    pub retry_initial_ms: u64,
    /// The longest wait between attempts.
    #[serde(rename = "retry.max.delay.ms", default = "default_retry_max")]
    pub retry_max_ms: u64,
    /// A message the broker refuses as too large (`max_message_size`), an exchange or routing
    /// key over AMQP's 255 bytes, or one an encoder refuses: `fail` (default), `warn`, `skip`.
    #[serde(rename = "event.processing.failure.handling.mode", default)]
    pub failure_mode: FailureMode,
    /// How keys and values are encoded (`format`, `schemas.enable`), read beside these.
    #[serde(skip)]
    pub format: FormatConfig,
}

fn default_host() -> String {
    "localhost".to_owned()
}
fn default_guest() -> String {
    "guest".to_owned()
}
fn default_password() -> Secret {
    Secret::from("guest".to_owned())
}
fn default_vhost() -> String {
    "/".to_owned()
}
fn default_connect_timeout() -> u64 {
    60_000
}
fn default_heartbeat() -> u16 {
    60
}
fn default_true() -> bool {
    true
}
fn default_delivery_mode() -> u8 {
    2
}
fn default_ack_timeout() -> u64 {
    30_000
}
fn default_null() -> String {
    "default".to_owned()
}
fn default_retry() -> u64 {
    300
}
fn default_retry_max() -> u64 {
    10_000
}

impl RabbitmqSinkConfig {
    /// Where the routing key comes from, `routingKeyFromTopicName` read as Debezium 3.5 did.
    pub(super) fn key_source(&self) -> RoutingKeySource {
        if self.routing_key_from_topic_name && self.routing_key_source == RoutingKeySource::Static {
            RoutingKeySource::Topic
        } else {
            self.routing_key_source
        }
    }

    /// The URI connected to (with the password: never shown).
    pub(super) fn uri(&self) -> String {
        if let Some(uri) = &self.uri {
            return uri.expose().to_owned();
        }
        let scheme = if self.ssl { "amqps" } else { "amqp" };
        let port = self.port.unwrap_or(if self.ssl { 5671 } else { 5672 });
        format!(
            "{scheme}://{}:{}@{}:{port}/{}?heartbeat={}&connection_timeout={}",
            encode(&self.username),
            encode(self.password.expose()),
            self.host,
            encode(&self.virtual_host),
            self.heartbeat_s,
            self.connection_timeout_ms
        )
    }

    /// The user and virtual host logged in with (from `connection.uri` when set).
    pub(super) fn user_and_vhost(&self) -> (String, String) {
        match self
            .uri
            .as_ref()
            .and_then(|u| u.expose().parse::<lapin::uri::AMQPUri>().ok())
        {
            Some(uri) => (uri.authority.userinfo.username, uri.vhost),
            None => (self.username.clone(), self.virtual_host.clone()),
        }
    }

    /// The broker as messages show it: `host:port/vhost`, no credentials.
    pub(super) fn shown(&self) -> String {
        match &self.uri {
            Some(uri) => crate::shown_url::shown(uri.expose()),
            None => format!(
                "{}:{}{}{}",
                self.host,
                self.port.unwrap_or(if self.ssl { 5671 } else { 5672 }),
                if self.virtual_host.starts_with('/') {
                    ""
                } else {
                    "/"
                },
                self.virtual_host
            ),
        }
    }

    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(uri) = &self.uri {
            if let Err(e) = uri.expose().parse::<lapin::uri::AMQPUri>() {
                return Err(format!(
                    "`connection.uri` is not an AMQP URI ({e}): write it as amqp://user:password@host:5672/vhost"
                ));
            }
        }
        if self.host.is_empty() {
            return Err("`connection.host` is empty".into());
        }
        if !matches!(self.delivery_mode, 1 | 2) {
            return Err(format!(
                "`deliveryMode` {}: 1 (transient) or 2 (persistent)",
                self.delivery_mode
            ));
        }
        if self.key_source() == RoutingKeySource::Static
            && self.routing_key.is_empty()
            && self.auto_create_routing_key
        {
            return Err("`autoCreateRoutingKey` needs a `routingKey` (or `routingKey.source: topic`) to name the queue".into());
        }
        if self.exchange.len() > 255 || self.routing_key.len() > 255 {
            return Err("`exchange` and `routingKey` have at most 255 bytes".into());
        }
        if self.ack_timeout_ms == 0 || self.connection_timeout_ms == 0 {
            return Err(
                "`ackTimeout` and `connection.connection.timeout` must be at least 1".into(),
            );
        }
        if self.retry_initial_ms == 0 || self.retry_max_ms < self.retry_initial_ms {
            return Err(
                "`retry.initial.delay.ms` must be at least 1 and at most `retry.max.delay.ms`"
                    .into(),
            );
        }
        self.format.validate()
    }
}

/// Percent-encodes what a URI part cannot hold as is.
fn encode(part: &str) -> String {
    part.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

sluice_engine::impl_component!(
    RabbitmqSinkConfig,
    Sink,
    "rabbitmq",
    parts = FormatConfig => format,
    check = Self::validate,
    build = |c, ctx| super::RabbitmqSink::open(c, ctx)?
);

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: serde_json::Value) -> RabbitmqSinkConfig {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn the_uri_encodes_its_parts_and_is_shown_without_them() {
        let c = config(
            serde_json::json!({"connection.username": "app", "connection.password": "p@ss/w"}),
        );
        assert_eq!(
            c.uri(),
            "amqp://app:p%40ss%2Fw@localhost:5672/%2F?heartbeat=60&connection_timeout=60000"
        );
        assert!(c.uri().parse::<lapin::uri::AMQPUri>().is_ok());
        assert_eq!(c.shown(), "localhost:5672/");
        let c = config(serde_json::json!({"connection.uri": "amqp://u:secret@h:1/v"}));
        assert_eq!(c.shown(), "amqp://***@h:1/v");
    }

    #[test]
    fn routing_key_from_topic_name_means_the_topic_as_in_debezium_3_5() {
        assert_eq!(
            config(serde_json::json!({"routingKeyFromTopicName": true})).key_source(),
            RoutingKeySource::Topic
        );
        assert_eq!(
            config(serde_json::json!({"routingKey.source": "key"})).key_source(),
            RoutingKeySource::Key
        );
        assert!(config(serde_json::json!({"deliveryMode": 3}))
            .validate()
            .is_err());
        assert!(config(serde_json::json!({"autoCreateRoutingKey": true}))
            .validate()
            .is_err());
    }
}
