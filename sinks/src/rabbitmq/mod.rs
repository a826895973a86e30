//! `rabbitmq`: events published to a RabbitMQ exchange over AMQP 0-9-1, as Debezium Server's
//! RabbitMQ sink publishes them (the exchange: `exchange`, else the event's topic; the routing
//! key per `routingKey.source`; the value as the body, `null.value` for a tombstone; the
//! event's headers as headers; `deliveryMode` 2, persistent). A batch's messages are published
//! one after the other on a channel in confirm mode, then their publisher confirms are awaited
//! in order; the batch is acknowledged once the broker confirmed every message (a persistent
//! message routed to a durable queue is confirmed once written to disk). A message not
//! confirmed (connection lost, `ackTimeout` passed, a nack) is published again, with every
//! message after it, after a backoff, until the broker takes it: the queues fill and the source
//! waits; nothing is lost, and a message may be delivered twice (as Debezium's).
//!
//! Unlike Debezium's, messages are published `mandatory` (a setting): a message no queue takes
//! stops the pipeline with the fix instead of being dropped by the broker.

mod config;
mod error;

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions,
};
use lapin::protocol::{AMQPErrorKind, AMQPHardError, AMQPSoftError};
use lapin::tcp::OwnedTLSConfig;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ErrorKind, Event,
    ExchangeKind,
};
use sluice_engine::{delivered, BuildContext, ChangeEvent, ComponentError, Delivery};
use sluice_engine::{Sink, SinkBatch};

pub use config::{ExchangeType, RabbitmqSinkConfig, RoutingKeySource};

use crate::format::{EncodeError, Encoder};
use crate::skipped::skip_or_fail;
use error::{DeclareFailed, RabbitmqSinkError};

/// One message to publish.
struct Message {
    exchange: String,
    routing_key: String,
    headers: FieldTable,
    body: Vec<u8>,
}

/// The running sink.
pub struct RabbitmqSink {
    name: String,
    config: RabbitmqSinkConfig,
    /// The connection and its confirm-mode channel, opened at the first write.
    link: Option<(Connection, Channel)>,
    /// Exchanges and queues declared (and bound) so far.
    declared: HashSet<(String, String)>,
    encoder: Encoder,
}

/// Why publishing did not go through.
enum Failure {
    /// Worth another attempt after a pause (the broker away, slow or blocked).
    Again(String),
    /// The message at this index was refused for good and skipped under the failure mode:
    /// the rest goes on at once on a new channel.
    Skipped(usize),
    /// The pipeline stops.
    Stop(ComponentError),
}

impl RabbitmqSink {
    /// A sink for `config` (the broker is reached in [`Sink::health_check`]).
    pub fn open(
        config: &RabbitmqSinkConfig,
        ctx: &BuildContext<'_>,
    ) -> Result<Self, ComponentError> {
        config.validate().map_err(RabbitmqSinkError::Config)?;
        let name = ctx.component.to_owned();
        let encoder = Encoder::open(&config.format, &name)?;
        Ok(RabbitmqSink {
            name,
            config: config.clone(),
            link: None,
            declared: HashSet::new(),
            encoder,
        })
    }

    /// The batch's messages, in order.
    async fn messages(&mut self, batch: &SinkBatch<'_>) -> Result<Vec<Message>, ComponentError> {
        let mut messages = Vec::with_capacity(batch.len());
        let (mut key, mut value) = (Vec::new(), Vec::new());
        for event in batch.iter() {
            match self.encoder.encode(event, &mut key, &mut value).await {
                Ok(()) => {}
                Err(EncodeError::Service(e)) => return Err(e),
                Err(EncodeError::Record(reason)) => {
                    self.failed(&event.topic, &reason)?;
                    continue;
                }
            }
            let exchange = match self.config.exchange.is_empty() {
                true => event.topic.to_string(),
                false => self.config.exchange.clone(),
            };
            let routing_key = match self.config.key_source() {
                RoutingKeySource::Static => self.config.routing_key.clone(),
                RoutingKeySource::Topic => event.topic.to_string(),
                RoutingKeySource::Key => String::from_utf8_lossy(&key).into_owned(),
            };
            if exchange.len() > 255 || routing_key.len() > 255 {
                let reason = "the exchange or routing key is over AMQP's 255 bytes";
                self.failed(&event.topic, reason)?;
                continue;
            }
            let body = match event.value.is_some() {
                true => std::mem::take(&mut value),
                false => self.config.null_value.clone().into_bytes(),
            };
            messages.push(Message {
                exchange,
                routing_key,
                headers: headers(event),
                body,
            });
        }
        Ok(messages)
    }

    /// An event that cannot be published, under `event.processing.failure.handling.mode`.
    fn failed(&self, topic: &str, reason: impl std::fmt::Display) -> Result<(), ComponentError> {
        let at = format!("topic `{topic}`");
        skip_or_fail(self.config.failure_mode, &self.name, &at, reason)
    }

    /// The channel, connecting first when there is none.
    async fn channel(&mut self) -> Result<Channel, Failure> {
        if let Some((connection, channel)) = &self.link {
            if connection.status().connected() && channel.status().connected() {
                return Ok(channel.clone());
            }
        }
        self.drop_link().await;
        let (connection, channel) = connect(&self.config).await.map_err(|e| {
            let line = connect_error(&self.config, &e);
            match refused(&e) {
                Some(_) => Failure::Stop(ComponentError::from(RabbitmqSinkError::Connect {
                    sink: self.name.clone(),
                    message: line,
                    source: e,
                })),
                None => Failure::Again(line),
            }
        })?;
        watch(&connection, &self.name);
        self.link = Some((connection, channel.clone()));
        Ok(channel)
    }

    async fn drop_link(&mut self) {
        if let Some((connection, _)) = self.link.take() {
            connection.close(200, "reconnecting".into()).await.ok();
        }
    }

    /// Declares what the message needs once (`autoCreateExchange`, `autoCreateRoutingKey`).
    async fn declared(&mut self, channel: &Channel, m: &Message) -> Result<(), Failure> {
        let wanted = (m.exchange.clone(), m.routing_key.clone());
        if !(self.config.auto_create_exchange || self.config.auto_create_routing_key)
            || self.declared.contains(&wanted)
        {
            return Ok(());
        }
        declare(channel, &self.config, &m.exchange, Some(&m.routing_key))
            .await
            .map_err(|e| Failure::Stop(e.of(&self.name).into()))?;
        self.declared.insert(wanted);
        Ok(())
    }

    /// Publishes `messages[from..]` and awaits their confirms in order; returns how many were
    /// confirmed before a failure.
    async fn attempt(&mut self, messages: &[Message], from: usize) -> (usize, Option<Failure>) {
        let channel = match self.channel().await {
            Ok(c) => c,
            Err(f) => return (from, Some(f)),
        };
        let timeout = Duration::from_millis(self.config.ack_timeout_ms);
        let mut pending = Vec::new();
        let mut failure = None;
        for (i, m) in messages.iter().enumerate().skip(from) {
            if let Err(f) = self.declared(&channel, m).await {
                failure = Some(f);
                break;
            }
            let properties = BasicProperties::default()
                .with_delivery_mode(self.config.delivery_mode)
                .with_headers(m.headers.clone());
            let options = BasicPublishOptions {
                mandatory: self.config.mandatory,
                ..Default::default()
            };
            let publish = channel.basic_publish(
                ShortString::from(m.exchange.as_str()),
                ShortString::from(m.routing_key.as_str()),
                options,
                &m.body,
                properties,
            );
            match tokio::time::timeout(timeout, publish).await {
                Ok(Ok(confirm)) => pending.push((i, confirm)),
                Ok(Err(e)) => {
                    failure = Some(Failure::Again(format!("publishing: {e}")));
                    break;
                }
                Err(_) => {
                    failure = Some(Failure::Again(blocked(timeout)));
                    break;
                }
            }
        }
        let mut done = from;
        for (i, confirm) in pending {
            let outcome = match tokio::time::timeout(timeout, confirm).await {
                Ok(outcome) => outcome,
                Err(_) => return (done, Some(Failure::Again(blocked(timeout)))),
            };
            match outcome {
                Ok(Confirmation::Ack(None)) | Ok(Confirmation::NotRequested) => done = i + 1,
                Ok(Confirmation::Ack(Some(returned))) => {
                    return (
                        done,
                        Some(Failure::Stop(
                            self.unroutable(&messages[i], &returned.reply_text),
                        )),
                    );
                }
                Ok(Confirmation::Nack(_)) => {
                    let why = "the broker could not take a message (nack)".to_owned();
                    return (done, Some(Failure::Again(why)));
                }
                Err(e) => return (done, Some(self.rejected(&messages[i], i, &e))),
            }
        }
        match failure {
            Some(f) => (done, Some(f)),
            None => (messages.len(), None),
        }
    }

    /// A message the broker returned: no queue is bound for its routing key.
    fn unroutable(&self, m: &Message, reply: &ShortString) -> ComponentError {
        ComponentError::from(RabbitmqSinkError::Unroutable {
            sink: self.name.clone(),
            exchange: m.exchange.clone(),
            key: m.routing_key.clone(),
            at: self.config.shown(),
            reply: reply.to_string(),
        })
    }

    /// A message whose channel the broker closed.
    fn rejected(&self, m: &Message, index: usize, e: &lapin::Error) -> Failure {
        let ErrorKind::ProtocolError(amqp) = e.kind() else {
            return Failure::Again(format!("exchange `{}`: {e}", m.exchange));
        };
        let text = amqp.get_message().as_str();
        let at = self.config.shown();
        let stop = |message: String| {
            Failure::Stop(ComponentError::from(RabbitmqSinkError::Rejected {
                sink: self.name.clone(),
                message,
            }))
        };
        match amqp.kind() {
            AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND) => stop(format!(
                "exchange `{}` does not exist at {at} ({text}): declare it, or set `autoCreateExchange: true`",
                m.exchange
            )),
            AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED) => {
                let (user, vhost) = self.config.user_and_vhost();
                stop(format!(
                    "user `{user}` may not publish to exchange `{}` at {at} ({text}): grant it write permission (`rabbitmqctl set_permissions -p {vhost} {user} <configure> <write> <read>`)",
                    m.exchange
                ))
            }
            AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED) if text.contains("message size") => {
                let reason = format!("the broker refused a message of {} bytes ({text}); raise `max_message_size` on the broker", m.body.len());
                match self.failed(&m.exchange, &reason) {
                    Ok(()) => Failure::Skipped(index),
                    Err(e) => Failure::Stop(e),
                }
            }
            _ => Failure::Again(format!("exchange `{}`: {e}", m.exchange)),
        }
    }

    /// Publishes `messages` until every one is confirmed.
    async fn send(&mut self, messages: &[Message]) -> Result<(), ComponentError> {
        let mut pause = Duration::from_millis(self.config.retry_initial_ms);
        let max = Duration::from_millis(self.config.retry_max_ms);
        let mut from = 0;
        loop {
            let (done, failure) = self.attempt(messages, from).await;
            from = done;
            match failure {
                None => return Ok(()),
                Some(Failure::Stop(e)) => return Err(e),
                Some(Failure::Skipped(index)) => {
                    from = index + 1;
                    self.drop_link().await;
                }
                Some(Failure::Again(why)) => {
                    tracing::warn!(sink = %self.name, broker = %self.config.shown(), reason = %why, confirmed = done, of = messages.len(), retry_in_ms = pause.as_millis() as u64, "RabbitMQ did not confirm every message; publishing the rest again.");
                    self.drop_link().await;
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(max);
                }
            }
        }
    }
}

/// What a publish that takes longer than `ackTimeout` says.
fn blocked(timeout: Duration) -> String {
    format!(
        "no confirm within ackTimeout ({} ms): the broker is away, slow, or blocking publishers (a memory or disk alarm)",
        timeout.as_millis()
    )
}

/// The event's headers as AMQP headers (their bytes as long strings).
fn headers(event: &ChangeEvent) -> FieldTable {
    let mut table = FieldTable::default();
    for h in &event.headers {
        if let Ok(name) = ShortString::try_new(h.name.to_string()) {
            table.insert(
                name,
                AMQPValue::LongString(LongString::from(h.value.to_vec())),
            );
        }
    }
    table
}

/// The exchange when it does not depend on the event (`exchange` set).
fn static_exchange(config: &RabbitmqSinkConfig) -> Option<String> {
    (!config.exchange.is_empty()).then(|| config.exchange.clone())
}

/// The routing key when it does not depend on the event.
fn static_key(config: &RabbitmqSinkConfig) -> Option<String> {
    (config.key_source() == RoutingKeySource::Static).then(|| config.routing_key.clone())
}

/// A connection and a channel in confirm mode.
async fn connect(config: &RabbitmqSinkConfig) -> Result<(Connection, Channel), lapin::Error> {
    let properties = ConnectionProperties::default().with_connection_name("sluice".into());
    let tls = OwnedTLSConfig {
        identity: None,
        cert_chain: match &config.trust_store {
            Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
                lapin::Error::from(ErrorKind::IOError(std::sync::Arc::new(
                    std::io::Error::new(
                        e.kind(),
                        format!(
                            "reading `connection.ssl.trust.store` {}: {e}",
                            path.display()
                        ),
                    ),
                )))
            })?),
            None => None,
        },
    };
    let runtime = lapin::runtime::default_runtime()?;
    let uri = config.uri();
    let connecting = Connection::connect_with_config(&uri, properties, tls, runtime);
    let connection = tokio::time::timeout(
        Duration::from_millis(config.connection_timeout_ms),
        connecting,
    )
    .await
    .map_err(|_| {
        lapin::Error::from(ErrorKind::IOError(std::sync::Arc::new(
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connecting timed out (connection.connection.timeout)",
            ),
        )))
    })??;
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    Ok((connection, channel))
}

/// Logs the broker blocking and unblocking the connection (memory or disk alarms).
fn watch(connection: &Connection, sink: &str) {
    let mut events = connection.events_listener();
    let sink = sink.to_owned();
    tokio::spawn(async move {
        while let Some(event) = events.next().await {
            match event {
                Event::ConnectionBlocked(reason) => {
                    tracing::warn!(sink = %sink, reason = %reason, "RabbitMQ blocks publishing (a resource alarm); waiting.")
                }
                Event::ConnectionUnblocked => {
                    tracing::info!(sink = %sink, "RabbitMQ takes publishing again.")
                }
                _ => {}
            }
        }
    });
}

/// What the broker refused at the connection's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// The login (ACCESS_REFUSED).
    Login,
    /// The virtual host (NOT_ALLOWED).
    VirtualHost,
}

/// Whether the broker refused the login or the virtual host.
fn refused(e: &lapin::Error) -> Option<Refusal> {
    let ErrorKind::ProtocolError(amqp) = e.kind() else {
        return None;
    };
    match amqp.kind() {
        AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED) => Some(Refusal::Login),
        AMQPErrorKind::Hard(AMQPHardError::NOTALLOWED) => Some(Refusal::VirtualHost),
        _ => None,
    }
}

/// A connection's failure as one line with the fix.
fn connect_error(config: &RabbitmqSinkConfig, e: &lapin::Error) -> String {
    let at = config.shown();
    let (user, vhost) = config.user_and_vhost();
    match refused(e) {
        Some(Refusal::Login) => format!(
            "RabbitMQ at {at} refused the login of user `{user}`: check `connection.username` and `connection.password`"
        ),
        Some(Refusal::VirtualHost) => format!(
            "RabbitMQ at {at} does not let user `{user}` use virtual host `{vhost}`: check `connection.virtual.host`, or grant it (`rabbitmqctl set_permissions -p {vhost} {user} '.*' '.*' '.*'`)"
        ),
        None => format!(
            "cannot reach RabbitMQ at {at} ({e}): check `connection.host`, `connection.port` and that the broker is running"
        ),
    }
}

/// Declares `exchange` (`autoCreateExchange`) and a queue named `key` bound to it with that key
/// (`autoCreateRoutingKey`).
async fn declare(
    channel: &Channel,
    config: &RabbitmqSinkConfig,
    exchange: &str,
    key: Option<&str>,
) -> Result<(), DeclareFailed> {
    let failed = |what: String| {
        let at = config.shown();
        move |source| DeclareFailed { what, at, source }
    };
    if config.auto_create_exchange {
        let kind = match config.exchange_type {
            ExchangeType::Topic => ExchangeKind::Topic,
            ExchangeType::Direct => ExchangeKind::Direct,
            ExchangeType::Fanout => ExchangeKind::Fanout,
            ExchangeType::Headers => ExchangeKind::Headers,
        };
        let options = ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        };
        channel
            .exchange_declare(exchange.into(), kind, options, FieldTable::default())
            .await
            .map_err(failed(format!("declare exchange `{exchange}`")))?;
    }
    let Some(key) = key.filter(|k| config.auto_create_routing_key && !k.is_empty()) else {
        return Ok(());
    };
    let options = QueueDeclareOptions {
        durable: config.routing_key_durable,
        ..Default::default()
    };
    channel
        .queue_declare(key.into(), options, FieldTable::default())
        .await
        .map_err(failed(format!("declare queue `{key}`")))?;
    channel
        .queue_bind(
            key.into(),
            exchange.into(),
            key.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(failed(format!(
            "bind queue `{key}` to exchange `{exchange}`"
        )))
}

#[async_trait]
impl Sink for RabbitmqSink {
    /// The broker reached (login, virtual host, channel, the declarations asked for), the
    /// connection kept for the writes; then the format's services.
    async fn health_check(&mut self) -> Result<(), ComponentError> {
        let (connection, channel) =
            connect(&self.config)
                .await
                .map_err(|e| RabbitmqSinkError::Connect {
                    sink: self.name.clone(),
                    message: connect_error(&self.config, &e),
                    source: e,
                })?;
        watch(&connection, &self.name);
        self.link = Some((connection, channel.clone()));
        if let Some(exchange) = static_exchange(&self.config) {
            let key = static_key(&self.config);
            declare(&channel, &self.config, &exchange, key.as_deref())
                .await
                .map_err(|e| e.of(&self.name))?;
        }
        tracing::info!(sink = %self.name, broker = %self.config.shown(), "Connected to RabbitMQ.");
        self.encoder.health_check().await
    }

    async fn write(&mut self, batch: &SinkBatch<'_>) -> Result<Delivery, ComponentError> {
        use tracing::Instrument;
        let span = tracing::debug_span!("rabbitmq", sink = %self.name, events = batch.len());
        async {
            let messages = self.messages(batch).await?;
            self.send(&messages).await?;
            Ok(delivered())
        }
        .instrument(span)
        .await
    }

    async fn close(&mut self) -> Result<(), ComponentError> {
        self.drop_link().await;
        Ok(())
    }
}
