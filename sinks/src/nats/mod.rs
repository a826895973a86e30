//! `nats`: events published to NATS JetStream, one message per event on the subject of its
//! topic, as Debezium Server's NATS JetStream sink publishes them (the value as the payload,
//! the event's headers as headers, tombstones left out). Each message carries a `Nats-Msg-Id`
//! derived from the event's position, so JetStream's duplicate window drops what a retry or a
//! restart sends again. A batch's messages are published one after the other without waiting,
//! then their acknowledgements are awaited in order; the batch is acknowledged once every
//! message was. A message not acknowledged (the server away, a timeout) is published again with
//! every message after it, after a backoff, until the server takes them: the queues fill and
//! the source waits; nothing is lost, and what was taken twice is dropped by its id.

mod config;
mod error;

use std::time::Duration;

use async_nats::jetstream::context::{PublishAckFuture, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, stream};
use async_nats::{ConnectErrorKind, ConnectOptions, HeaderMap};
use async_trait::async_trait;
use sluice_engine::{delivered, BuildContext, ChangeEvent, ComponentError, Delivery};
use sluice_engine::{Sink, SinkBatch};

pub use config::{NatsSinkConfig, Retention, Storage};

use crate::format::{EncodeError, Encoder};
use crate::replay_id::ReplayIds;
use crate::shown_url::shown;
use crate::skipped::skip_or_fail;
use error::NatsSinkError;

/// One message to publish.
struct Message {
    subject: async_nats::Subject,
    id: String,
    headers: Vec<(String, String)>,
    payload: bytes::Bytes,
}

/// The running sink.
pub struct NatsSink {
    name: String,
    config: NatsSinkConfig,
    /// The connection, opened on the pipeline's runtime at the first write.
    context: Option<(async_nats::Client, jetstream::Context)>,
    encoder: Encoder,
    /// The messages' `Nats-Msg-Id`s.
    ids: ReplayIds,
    /// The last topic's subject.
    subject: Option<(std::sync::Arc<str>, async_nats::Subject)>,
}

/// Why publishing did not go through.
enum Failure {
    /// Worth another attempt after a pause (the server away or slow).
    Again(String),
    /// The pipeline stops.
    Stop(ComponentError),
}

impl NatsSink {
    /// A sink for `config` (the servers are reached in [`Sink::health_check`]).
    pub fn open(config: &NatsSinkConfig, ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        config.validate().map_err(NatsSinkError::Config)?;
        let name = ctx.component.to_owned();
        let encoder = Encoder::open(&config.format, &name)?;
        Ok(NatsSink {
            name,
            config: config.clone(),
            context: None,
            encoder,
            ids: ReplayIds::default(),
            subject: None,
        })
    }

    /// The batch's messages, in order (tombstones left out, as Debezium's).
    async fn messages(&mut self, batch: &SinkBatch<'_>) -> Result<Vec<Message>, ComponentError> {
        let mut messages = Vec::with_capacity(batch.len());
        let (mut key, mut value) = (Vec::new(), Vec::new());
        for event in batch.iter().filter(|e| e.value.is_some()) {
            let id = self.ids.id(event);
            match self.encoder.encode(event, &mut key, &mut value).await {
                Ok(()) => {}
                Err(EncodeError::Service(e)) => return Err(e),
                Err(EncodeError::Record(reason)) => {
                    self.failed(event, &reason)?;
                    continue;
                }
            }
            let headers = event
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_string(),
                        String::from_utf8_lossy(&h.value).into_owned(),
                    )
                })
                .collect();
            // Consecutive events mostly share a topic: its subject made once.
            let subject = match &self.subject {
                Some((topic, subject)) if *topic == event.topic => subject.clone(),
                _ => {
                    let subject = async_nats::Subject::from(self.config.subject_of(&event.topic));
                    self.subject = Some((event.topic.clone(), subject.clone()));
                    subject
                }
            };
            messages.push(Message {
                subject,
                id,
                headers,
                payload: bytes::Bytes::from(std::mem::take(&mut value)),
            });
        }
        Ok(messages)
    }

    /// An event that cannot be published, under `event.processing.failure.handling.mode`.
    fn failed(
        &self,
        event: &ChangeEvent,
        reason: impl std::fmt::Display,
    ) -> Result<(), ComponentError> {
        let at = format!("topic `{}`", event.topic);
        skip_or_fail(self.config.failure_mode, &self.name, &at, reason)
    }

    async fn context(&mut self) -> Result<jetstream::Context, Failure> {
        if let Some((_, context)) = &self.context {
            return Ok(context.clone());
        }
        let client = connect(&self.config).await.map_err(|e| match e.kind() {
            ConnectErrorKind::Authentication | ConnectErrorKind::AuthorizationViolation => {
                Failure::Stop(ComponentError::from(NatsSinkError::Connect {
                    sink: self.name.clone(),
                    message: connect_error(&self.config, &e),
                    source: e,
                }))
            }
            _ => Failure::Again(e.to_string()),
        })?;
        Ok(self.keep(client))
    }

    /// Keeps `client` and its JetStream context for the writes.
    fn keep(&mut self, client: async_nats::Client) -> jetstream::Context {
        let context = jetstream::ContextBuilder::new()
            .ack_timeout(Duration::from_millis(self.config.ack_timeout_ms))
            .build(client.clone());
        self.context = Some((client, context.clone()));
        context
    }

    /// Publishes `messages[from..]` and awaits their acknowledgements in order; returns how
    /// many were acknowledged before a failure.
    async fn attempt(&mut self, messages: &[Message], from: usize) -> (usize, Option<Failure>) {
        let context = match self.context().await {
            Ok(c) => c,
            Err(f) => return (from, Some(f)),
        };
        let max_payload = self
            .context
            .as_ref()
            .map_or(usize::MAX, |(c, _)| c.max_payload());
        let mut pending: Vec<(usize, PublishAckFuture)> = Vec::new();
        let mut failure = None;
        for (i, m) in messages.iter().enumerate().skip(from) {
            let size = m.payload.len()
                + m.headers
                    .iter()
                    .map(|(k, v)| k.len() + v.len() + 4)
                    .sum::<usize>();
            if size > max_payload {
                let reason = format!("a message of {size} bytes is over the server's `max_payload` ({max_payload} bytes); raise it on the server");
                if let Err(e) = self.refused(m, &reason) {
                    failure = Some(Failure::Stop(e));
                    break;
                }
                continue;
            }
            let mut headers = HeaderMap::new();
            for (k, v) in &m.headers {
                headers.insert(k.as_str(), v.as_str());
            }
            let publish = PublishMessage::build()
                .payload(m.payload.clone())
                .headers(headers)
                .message_id(&m.id);
            match context.send_publish(m.subject.clone(), publish).await {
                Ok(ack) => pending.push((i, ack)),
                Err(e) => {
                    failure = Some(Failure::Again(format!(
                        "publishing to `{}`: {e}",
                        m.subject
                    )));
                    break;
                }
            }
        }
        let mut done = from;
        for (i, ack) in pending {
            match ack.await {
                Ok(_) => done = i + 1,
                Err(e) if e.kind() == PublishErrorKind::StreamNotFound => {
                    return (
                        done,
                        Some(self.no_stream(&context, &messages[i].subject).await),
                    );
                }
                Err(e) => {
                    return (
                        done,
                        Some(Failure::Again(format!("`{}`: {e}", messages[i].subject))),
                    );
                }
            }
        }
        match failure {
            Some(f) => (done, Some(f)),
            None => (messages.len(), None),
        }
    }

    /// A message no stream answered: the pipeline stops when no stream takes its subject
    /// (else the server was busy: another attempt).
    async fn no_stream(&self, context: &jetstream::Context, subject: &str) -> Failure {
        match context.stream_by_subject(subject).await {
            Err(e) if e.to_string().contains("not found") => {
                Failure::Stop(ComponentError::from(NatsSinkError::NoStream {
                    sink: self.name.clone(),
                    subject: subject.to_owned(),
                    at: shown(&self.config.url),
                }))
            }
            _ => Failure::Again(format!("no stream answered for `{subject}`")),
        }
    }

    /// A message the server cannot take, under the failure mode.
    fn refused(&self, m: &Message, reason: &str) -> Result<(), ComponentError> {
        let at = format!("subject `{}`", m.subject);
        skip_or_fail(self.config.failure_mode, &self.name, &at, reason)
    }

    /// Publishes `messages` until every one is acknowledged.
    async fn send(&mut self, messages: &[Message]) -> Result<(), ComponentError> {
        let mut pause = Duration::from_millis(self.config.retry_interval_ms);
        let max = Duration::from_millis(self.config.retry_max_interval_ms);
        let mut from = 0;
        loop {
            let (done, failure) = self.attempt(messages, from).await;
            from = done;
            match failure {
                None => return Ok(()),
                Some(Failure::Stop(e)) => return Err(e),
                Some(Failure::Again(why)) => {
                    tracing::warn!(sink = %self.name, url = %shown(&self.config.url), reason = %why, acknowledged = done, of = messages.len(), retry_in_ms = pause.as_millis() as u64, "NATS did not acknowledge every message; publishing the rest again.");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(max);
                }
            }
        }
    }
}

/// A connection as `config` says (login, TLS, timeouts; reconnecting without end).
async fn connect(config: &NatsSinkConfig) -> Result<async_nats::Client, async_nats::ConnectError> {
    let mut options = ConnectOptions::new()
        .name("sluice")
        .connection_timeout(Duration::from_millis(config.connection_timeout_ms))
        .max_reconnects(None)
        .custom_inbox_prefix(config::INBOX)
        .require_tls(config.tls_required);
    if let Some(token) = &config.token {
        options = options.token(token.expose().to_owned());
    }
    if let (Some(user), Some(password)) = (&config.user, &config.password) {
        options = options.user_and_password(user.clone(), password.expose().to_owned());
    }
    match (&config.jwt, &config.seed) {
        (Some(jwt), Some(seed)) => {
            let creds = format!(
                "-----BEGIN NATS USER JWT-----\n{}\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
                jwt.expose(),
                seed.expose()
            );
            options = options.credentials(&creds).map_err(|e| {
                async_nats::ConnectError::with_source(ConnectErrorKind::Authentication, e)
            })?;
        }
        (None, Some(seed)) => options = options.nkey(seed.expose().to_owned()),
        _ => {}
    }
    if let Some(path) = &config.credentials_file {
        options = options.credentials_file(path).await.map_err(|e| {
            async_nats::ConnectError::with_source(ConnectErrorKind::Authentication, e)
        })?;
    }
    if let Some(ca) = &config.tls_ca_file {
        options = options.add_root_certificates(ca.clone());
    }
    options.connect(config.servers()).await
}

/// A connection's failure as one line with the fix.
fn connect_error(config: &NatsSinkConfig, e: &async_nats::ConnectError) -> String {
    let at = shown(&config.url);
    match e.kind() {
        ConnectErrorKind::Authentication | ConnectErrorKind::AuthorizationViolation => format!(
            "NATS at {at} refused the login ({e}): check `auth.token`, `auth.user`/`auth.password`, `auth.seed`/`auth.jwt` or `auth.credentials.file`"
        ),
        ConnectErrorKind::Tls => format!(
            "TLS with NATS at {at} failed ({e}): check `tls.ca.file` and the server's certificate"
        ),
        _ => format!(
            "cannot reach NATS at {at} ({e}): check `url` and that the server is running"
        ),
    }
}

/// Creates the stream `create-stream` asks for, or checks the one there.
async fn create_stream(
    context: &jetstream::Context,
    config: &NatsSinkConfig,
) -> Result<(), async_nats::jetstream::context::CreateStreamError> {
    let settings = stream::Config {
        name: config.stream_name.clone(),
        description: Some("Change events from Sluice".into()),
        subjects: config.stream_subjects(),
        storage: match config.storage {
            Storage::File => stream::StorageType::File,
            Storage::Memory => stream::StorageType::Memory,
        },
        retention: match config.retention {
            Retention::Limits => stream::RetentionPolicy::Limits,
            Retention::Interest => stream::RetentionPolicy::Interest,
            Retention::Workqueue => stream::RetentionPolicy::WorkQueue,
        },
        duplicate_window: Duration::from_millis(config.duplicate_window_ms),
        ..Default::default()
    };
    context.get_or_create_stream(settings).await.map(|_| ())
}

#[async_trait]
impl Sink for NatsSink {
    async fn write(&mut self, batch: &SinkBatch<'_>) -> Result<Delivery, ComponentError> {
        use tracing::Instrument;
        let span = tracing::debug_span!("nats", sink = %self.name, events = batch.len());
        async {
            let messages = self.messages(batch).await?;
            self.send(&messages).await?;
            Ok(delivered())
        }
        .instrument(span)
        .await
    }

    /// The servers reached (login, the stream created when asked, no stream taking the
    /// replies), the connection kept for the writes; then the format's services.
    async fn health_check(&mut self) -> Result<(), ComponentError> {
        let client = connect(&self.config)
            .await
            .map_err(|e| NatsSinkError::Connect {
                sink: self.name.clone(),
                message: connect_error(&self.config, &e),
                source: e,
            })?;
        let context = self.keep(client);
        if self.config.create_stream {
            create_stream(&context, &self.config).await.map_err(|e| {
                NatsSinkError::CreateStream {
                    sink: self.name.clone(),
                    stream: self.config.stream_name.clone(),
                    at: shown(&self.config.url),
                    source: e,
                }
            })?;
        }
        // A stream taking the replies would store every acknowledgement as a message.
        if let Ok(stream) = context.stream_by_subject(config::INBOX_PROBE).await {
            return Err(ComponentError::from(NatsSinkError::InboxTaken {
                sink: self.name.clone(),
                stream,
                inbox: config::INBOX,
            }));
        }
        tracing::info!(sink = %self.name, url = %shown(&self.config.url), "Connected to NATS.");
        self.encoder.health_check().await
    }

    async fn close(&mut self) -> Result<(), ComponentError> {
        if let Some((client, _)) = self.context.take() {
            client.drain().await.ok();
        }
        Ok(())
    }
}
