//! `http`: events POSTed to a URL (a webhook), one per request or a batch per request. A batch
//! is acknowledged once every request of it was answered 2xx, in order: requests of a batch go
//! one after the other, and a batch's requests are all answered before the next batch is sent.
//! Every request carries an `Idempotency-Key` derived from its events' positions, so a receiver
//! can drop the requests a retry or a restart sends again.

mod config;
mod error;

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use reqwest::StatusCode;
use sha2::{Digest, Sha256};

use crate::format::cloudevents::CloudEventsEncoder;
use crate::format::Format;
use crate::replay_id::{hex, ReplayIds};
pub(crate) use crate::shown_url::shown;
use crate::skipped::skip_or_fail;
use error::HttpSinkError;
use sluice_engine::codec::{JsonEncoder, JsonOptions};
use sluice_engine::{delivered, BuildContext, ChangeEvent, ComponentError, Delivery, FailureMode};
use sluice_engine::{Sink, SinkBatch};

pub use config::{CloudEventsMode, HttpSinkConfig, RequestMode};

/// The longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The running sink.
pub struct HttpSink {
    name: String,
    url: String,
    shown: String,
    method: reqwest::Method,
    mode: RequestMode,
    client: reqwest::Client,
    encoder: JsonEncoder,
    retries: u32,
    interval: Duration,
    failure_mode: FailureMode,
    /// The events' `Idempotency-Key`s.
    ids: ReplayIds,
    /// `format: cloudevents`: the values' encoder and the binding.
    cloudevents: Option<(CloudEventsEncoder, CloudEventsMode)>,
}

/// One request to send.
struct Request {
    body: Vec<u8>,
    headers: HeaderMap,
    /// Events in it (for messages).
    events: usize,
}

/// How one attempt ended.
enum Attempt {
    Done,
    /// Worth trying again, after this long if the receiver said.
    Again(String, Option<Duration>),
    Refused(String),
}

impl HttpSink {
    /// A client for `config`.
    pub fn open(config: &HttpSinkConfig, ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let sink = ctx.component.to_owned();
            let header = name.clone();
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|source| {
                HttpSinkError::HeaderName {
                    sink: sink.clone(),
                    header: header.clone(),
                    source,
                }
            })?;
            let mut value = HeaderValue::from_str(value.expose())
                .map_err(|_| HttpSinkError::HeaderValue { sink, header })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(crate::tls::client_config()?)
            .default_headers(headers)
            .timeout(Duration::from_millis(config.timeout_ms))
            .build()
            .map_err(|source| HttpSinkError::Client {
                sink: ctx.component.to_owned(),
                source,
            })?;
        let method = reqwest::Method::from_bytes(config.method.as_bytes()).map_err(|source| {
            HttpSinkError::Method {
                sink: ctx.component.to_owned(),
                method: config.method.clone(),
                source: Box::new(source),
            }
        })?;
        Ok(HttpSink {
            name: ctx.component.to_owned(),
            url: config.url.clone(),
            shown: shown(&config.url),
            method,
            mode: config.mode,
            client,
            encoder: JsonEncoder::new(JsonOptions {
                schemas_enable: config.format.schemas_enable,
            }),
            retries: config.retries,
            interval: Duration::from_millis(config.retry_interval_ms.max(1)),
            failure_mode: config.failure_mode,
            ids: ReplayIds::default(),
            cloudevents: (config.format.format == Format::Cloudevents).then(|| {
                (
                    CloudEventsEncoder::new(
                        config.format.schemas_enable,
                        config.format.extension_attributes,
                    ),
                    config.cloudevents_mode,
                )
            }),
        })
    }

    /// The requests of a batch, in order.
    fn requests(&mut self, batch: &SinkBatch<'_>) -> Result<Vec<Request>, ComponentError> {
        if self.mode == RequestMode::Event {
            let mut requests = Vec::with_capacity(batch.len());
            for event in batch.iter() {
                if let Some(r) = self.event_request(event)? {
                    requests.push(r);
                }
            }
            return Ok(requests);
        }
        let array = self.mode == RequestMode::Array;
        let mut body = Vec::new();
        let mut digest = Sha256::new();
        let mut events = 0;
        body.extend_from_slice(if array { b"[" } else { b"" });
        for event in batch.iter() {
            let mut line = Vec::new();
            match &mut self.cloudevents {
                // A CloudEvents batch holds events only: tombstones are left out.
                Some(_) if event.value.is_none() => continue,
                Some((ce, _)) => {
                    if let Err(reason) = ce.encode_value(event, &mut line) {
                        self.unencodable(&reason)?;
                        continue;
                    }
                    line.push(b'\n');
                }
                // A line ends in `\n`: NDJSON's separator, whitespace in an array.
                None => self.encoder.encode_line(event, false, &mut line),
            }
            if array && events > 0 {
                body.push(b',');
            }
            body.extend_from_slice(&line);
            digest.update(self.ids.digest(event));
            events += 1;
        }
        if events == 0 {
            // A batch that only moves the position: nothing to send.
            return Ok(Vec::new());
        }
        if array {
            body.push(b']');
        }
        let kind = match (array, self.cloudevents.is_some()) {
            (true, true) => "application/cloudevents-batch+json",
            (true, false) => "application/json",
            (false, _) => "application/x-ndjson",
        };
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(kind));
        insert(
            &mut headers,
            "idempotency-key",
            &hex(&digest.finalize()[..16]),
        );
        Ok(vec![Request {
            body,
            headers,
            events,
        }])
    }

    /// A value `format: cloudevents` cannot write, under the failure mode.
    fn unencodable(&self, reason: impl std::fmt::Display) -> Result<(), ComponentError> {
        skip_or_fail(self.failure_mode, &self.name, "", reason)
    }

    /// One event's request: the value as the body, key and topic in headers (`None`: an event
    /// `format: cloudevents` skipped under the failure mode).
    fn event_request(&mut self, event: &ChangeEvent) -> Result<Option<Request>, ComponentError> {
        let mut body = Vec::new();
        let mut headers = HeaderMap::new();
        let mut kind = "application/json".to_owned();
        match &mut self.cloudevents {
            None => {
                if event.value.is_some() {
                    self.encoder.encode_record(event.value.as_ref(), &mut body);
                }
            }
            Some((ce, CloudEventsMode::Structured)) => match ce.encode_value(event, &mut body) {
                Ok(()) if event.value.is_some() => kind = "application/cloudevents+json".into(),
                Ok(()) => {}
                Err(reason) => return self.unencodable(&reason).map(|()| None),
            },
            Some((ce, CloudEventsMode::Binary)) => match ce.encode_binary(event) {
                Ok(Some(binary)) => {
                    for (name, text) in &binary.attributes {
                        let name = HeaderName::from_bytes(format!("ce-{name}").as_bytes());
                        if let (Ok(name), Ok(value)) = (name, HeaderValue::from_str(text)) {
                            headers.insert(name, value);
                        }
                    }
                    kind = binary.content_type;
                    body = binary.data;
                }
                Ok(None) => {}
                Err(reason) => return self.unencodable(&reason).map(|()| None),
            },
        }
        if let Ok(kind) = HeaderValue::from_str(&kind) {
            headers.insert(CONTENT_TYPE, kind);
        }
        insert(&mut headers, "idempotency-key", &self.ids.id(event));
        insert(&mut headers, "x-sluice-topic", &event.topic);
        if event.key.is_some() {
            let mut key = Vec::new();
            self.encoder.encode_record(event.key.as_ref(), &mut key);
            insert(&mut headers, "x-sluice-key", &base64_of(&key));
        }
        if event.value.is_none() {
            insert(&mut headers, "x-sluice-tombstone", "true");
        }
        Ok(Some(Request {
            body,
            headers,
            events: 1,
        }))
    }

    async fn attempt(&self, request: &Request) -> Attempt {
        let sent = self
            .client
            .request(self.method.clone(), &self.url)
            .headers(request.headers.clone())
            .body(request.body.clone())
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            // The error's text can name the URL: show it without credentials.
            Err(e) => {
                let what = if e.is_timeout() {
                    "timed out"
                } else {
                    "failed"
                };
                return Attempt::Again(format!("the request {what} ({})", error_kind(&e)), None);
            }
        };
        let status = response.status();
        if status.is_success() {
            return Attempt::Done;
        }
        let after = retry_after(response.headers());
        let text = response.text().await.unwrap_or_default();
        let text: String = text.chars().take(200).collect();
        let said = format!("{status}: {}", text.trim());
        if status == StatusCode::REQUEST_TIMEOUT
            || status == StatusCode::TOO_MANY_REQUESTS
            || status.is_server_error()
        {
            Attempt::Again(said, after)
        } else {
            Attempt::Refused(said)
        }
    }

    /// Sends one request until it is answered 2xx, refused, or out of retries.
    async fn send(&self, request: &Request) -> Result<(), ComponentError> {
        let mut wait = self.interval;
        let mut attempt = 0;
        loop {
            match self.attempt(request).await {
                Attempt::Done => return Ok(()),
                Attempt::Refused(said) => return self.refused(request, &said),
                Attempt::Again(said, after) => {
                    if attempt >= self.retries {
                        return Err(ComponentError::from(HttpSinkError::Unavailable {
                            sink: self.name.clone(),
                            url: self.shown.clone(),
                            said,
                            times: attempt + 1,
                        }));
                    }
                    let pause = after.unwrap_or(wait).min(MAX_RETRY_AFTER);
                    tracing::warn!(sink = %self.name, url = %self.shown, answer = %said, retry_in_ms = pause.as_millis() as u64, "HTTP request failed; retrying.");
                    tokio::time::sleep(pause).await;
                    wait = (wait * 2).min(MAX_RETRY_AFTER);
                    attempt += 1;
                }
            }
        }
    }

    fn refused(&self, request: &Request, said: &str) -> Result<(), ComponentError> {
        match self.failure_mode {
            FailureMode::Fail => Err(ComponentError::from(HttpSinkError::Refused {
                sink: self.name.clone(),
                url: self.shown.clone(),
                events: request.events,
                said: said.to_owned(),
            })),
            FailureMode::Warn => {
                tracing::warn!(sink = %self.name, url = %self.shown, answer = %said, events = request.events, "Skipped events the receiver refused (event.processing.failure.handling.mode: warn).");
                Ok(())
            }
            FailureMode::Skip => Ok(()),
        }
    }
}

fn insert(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        headers.insert(name, v);
    }
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The kind of a transport error, without its text (which can hold the URL).
fn error_kind(e: &reqwest::Error) -> &'static str {
    if e.is_connect() {
        "cannot connect"
    } else if e.is_timeout() {
        "timeout"
    } else if e.is_body() || e.is_decode() {
        "bad response"
    } else {
        "transport error"
    }
}

/// `Retry-After` in seconds (the HTTP-date form is not honoured: the backoff applies).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

#[async_trait]
impl Sink for HttpSink {
    async fn write(&mut self, batch: &SinkBatch<'_>) -> Result<Delivery, ComponentError> {
        // Sent here, not in the delivery: a batch's requests are all answered before the next
        // batch's are sent, so the receiver sees events in order.
        for request in self.requests(batch)? {
            self.send(&request).await?;
        }
        Ok(delivered())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_credentials_and_retry_after_is_read() {
        assert_eq!(shown("https://u:p@h:1/x"), "https://***@h:1/x");
        assert_eq!(shown("http://h/x"), "http://h/x");
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_static(" 3 "));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), None);
    }
}
