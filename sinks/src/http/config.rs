//! Configuration of the `http` sink (a webhook), with Debezium Server's HTTP sink names where
//! it has them (`url`, `timeout.ms`, `retries`, `retry.interval.ms`).

use std::collections::BTreeMap;

use serde::Deserialize;
use sluice_engine::config::Secret;
use sluice_engine::FailureMode;

use crate::format::FormatConfig;

/// How events are put into requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestMode {
    /// One request per event, its body the value (as Debezium Server's HTTP sink); the key and
    /// topic travel in headers. A tombstone is a request with an empty body.
    #[default]
    Event,
    /// One request per batch: `application/x-ndjson`, one `{"topic","key","value"}` line per event.
    Ndjson,
    /// One request per batch: a JSON array of `{"topic","key","value"}` objects.
    Array,
}

/// The CloudEvents HTTP binding of `format: cloudevents`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CloudEventsMode {
    /// The whole event as the body, `application/cloudevents+json`.
    #[default]
    Structured,
    /// The attributes as `ce-*` headers, `data` as the body.
    Binary,
}

/// `type: http`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSinkConfig {
    /// Where requests go: `http://` or `https://` (TLS by rustls, the system's roots);
    /// credentials in it are never shown in messages or logs.
    pub url: String,
    /// `POST` (default) or `PUT`.
    #[serde(default = "default_method")]
    pub method: String,
    /// `event` (default): one request per event, its body the value (as Debezium Server's HTTP
    /// sink), with headers `X-Sluice-Topic`, `X-Sluice-Key` (the key's JSON, base64) and, for a
    /// tombstone, `X-Sluice-Tombstone: true` and an empty body; `ndjson`: one request per batch,
    /// `application/x-ndjson`, a `{"topic","key","value"}` line per event; `array`: the same
    /// objects as one JSON array (`application/json`).
    #[serde(rename = "request.mode", default)]
    pub mode: RequestMode,
    /// Headers sent with every request (values may come from `${VAR}`; never logged).
    #[serde(default)]
    pub headers: BTreeMap<String, Secret>,
    /// How long one request may take, connecting included (default 60000 ms).
    #[serde(rename = "timeout.ms", default = "default_timeout")]
    pub timeout_ms: u64,
    /// Attempts after the first for a request that failed in a way that may pass (connection
    /// errors, 408, 429, 5xx) before the batch is handed back to the pipeline's retry
    /// (default 5).
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// Wait before the first retry, doubled after each (default 1000 ms; a `Retry-After`
    /// answer is honoured instead, up to 60 s).
    #[serde(rename = "retry.interval.ms", default = "default_interval")]
    pub retry_interval_ms: u64,
    /// A request the receiver refuses (4xx other than 408 and 429): `fail` (default) stops the
    /// pipeline with the status and the receiver's answer, `warn` logs and skips its events,
    /// `skip` skips them.
    #[serde(rename = "event.processing.failure.handling.mode", default)]
    pub failure_mode: FailureMode,
    /// `format: cloudevents`: `structured` (default) sends the event as the body
    /// (`application/cloudevents+json`), `binary` its attributes as `ce-*` headers and `data` as
    /// the body (`request.mode: event` only). With `request.mode: array` a batch is one
    /// `application/cloudevents-batch+json` array, tombstones left out; `ndjson` is refused.
    #[serde(rename = "cloudevents.mode", default)]
    pub cloudevents_mode: CloudEventsMode,
    /// How keys and values are encoded (`format: json` or `cloudevents`, `schemas.enable`), read
    /// beside these.
    #[serde(skip)]
    pub format: FormatConfig,
}

fn default_method() -> String {
    "POST".to_owned()
}
fn default_timeout() -> u64 {
    60_000
}
fn default_retries() -> u32 {
    5
}
fn default_interval() -> u64 {
    1000
}

impl HttpSinkConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        if !self.url.starts_with("http://") && !self.url.starts_with("https://") {
            return Err(format!(
                "`url` must start with http:// or https://, got `{}`",
                super::shown(&self.url)
            ));
        }
        if !matches!(self.method.as_str(), "POST" | "PUT") {
            return Err(format!("`method` is `{}`: use POST or PUT", self.method));
        }
        if self.timeout_ms == 0 {
            return Err("`timeout.ms` must be at least 1".into());
        }
        use crate::format::Format;
        match (self.format.format, self.mode, self.cloudevents_mode) {
            (Format::Avro, _, _) => {
                return Err(
                    "the http sink writes `format: json` or `cloudevents`; Avro over HTTP is not supported"
                        .into(),
                )
            }
            (Format::Cloudevents, RequestMode::Ndjson, _) => {
                return Err("`format: cloudevents` batches go as a JSON array (`application/cloudevents-batch+json`): set `request.mode: array`, or `event`".into())
            }
            (Format::Cloudevents, RequestMode::Array, CloudEventsMode::Binary) => {
                return Err("`cloudevents.mode: binary` sends one event per request: set `request.mode: event`".into())
            }
            _ => {}
        }
        for name in self.headers.keys() {
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(format!("`headers`: `{name}` is not a valid header name"));
            }
        }
        self.format.validate()
    }
}

sluice_engine::impl_component!(
    HttpSinkConfig,
    Sink,
    "http",
    parts = FormatConfig => format,
    check = Self::validate,
    build = |c, ctx| super::HttpSink::open(c, ctx)?
);
