//! Configuration of the `nats` sink (NATS JetStream), with Debezium Server's NATS JetStream
//! sink property names (`debezium.sink.nats-jetstream.*` there, without the prefix here).

use serde::Deserialize;
use sluice_engine::config::Secret;
use sluice_engine::FailureMode;

use crate::format::FormatConfig;

/// Where a created stream keeps its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Storage {
    /// On disk (Sluice's default: Debezium's is `memory`, which a server restart empties).
    #[default]
    File,
    /// In memory.
    Memory,
}

/// How long a created stream keeps messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Retention {
    /// Until a limit (count, bytes, age) is reached (JetStream's default).
    #[default]
    Limits,
    /// While a consumer has not acknowledged them.
    Interest,
    /// Until the first consumer acknowledges them.
    Workqueue,
}

/// `type: nats`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsSinkConfig {
    /// The servers, `nats://host:port` (`tls://` for TLS), comma-separated; credentials in it
    /// are never shown.
    pub url: String,
    /// The subject of an event's message: `${topic}` (default) stands for its topic, also
    /// within a template (`cdc.${topic}`).
    #[serde(default = "default_subject")]
    pub subject: String,
    /// The stream `create-stream` makes (default `DebeziumStream`).
    #[serde(rename = "stream-name", default = "default_stream_name")]
    pub stream_name: String,
    /// Create the stream at start when missing (default false: it must exist).
    #[serde(rename = "create-stream", default)]
    pub create_stream: bool,
    /// The created stream's subjects, comma-separated (default `*.*.*`, Debezium's).
    #[serde(default = "default_subjects")]
    pub subjects: String,
    /// The created stream's storage: `file` (default) or `memory` (Debezium's default, which a
    /// server restart empties).
    #[serde(default)]
    pub storage: Storage,
    /// The created stream's retention (`limits`, `interest`, `workqueue`).
    #[serde(default)]
    pub retention: Retention,
    /// The created stream's duplicate window: a message whose `Nats-Msg-Id` it saw within
    /// this long is dropped (default 120000 ms, JetStream's).
    #[serde(rename = "duplicate-window.ms", default = "default_duplicate_window")]
    pub duplicate_window_ms: u64,
    /// A token (`--auth` on the server). One way to log in at most: `auth.token`, `auth.user`
    /// with `auth.password`, `auth.seed` (with `auth.jwt`) or `auth.credentials.file`.
    #[serde(rename = "auth.token", default)]
    pub token: Option<Secret>,
    /// A user and password.
    #[serde(rename = "auth.user", default)]
    pub user: Option<String>,
    /// The password of `auth.user` (never logged).
    #[serde(rename = "auth.password", default)]
    pub password: Option<Secret>,
    /// An NKey seed (`SU...`); with `auth.jwt`, the user's JWT signed by it.
    #[serde(rename = "auth.seed", default)]
    pub seed: Option<Secret>,
    /// The user's JWT, signed by the NKey of `auth.seed` (never logged).
    #[serde(rename = "auth.jwt", default)]
    pub jwt: Option<Secret>,
    /// A credentials file (`.creds`: a JWT and its seed).
    #[serde(rename = "auth.credentials.file", default)]
    pub credentials_file: Option<std::path::PathBuf>,
    /// Require TLS (also implied by a `tls://` URL).
    #[serde(rename = "tls.required", default)]
    pub tls_required: bool,
    /// A PEM file of the CA certificates the server's certificate is checked against
    /// (default: the system's roots).
    #[serde(rename = "tls.ca.file", default)]
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// How long a message's acknowledgement may take before it is sent again (default 5000).
    #[serde(rename = "async.timeout.ms", default = "default_ack_timeout")]
    pub ack_timeout_ms: u64,
    /// The first wait after a failed attempt, doubled up to `sync.retry.max.interval.ms`
    /// (default 1000).
    #[serde(rename = "sync.retry.interval.ms", default = "default_retry_interval")]
    pub retry_interval_ms: u64,
    /// The longest wait between attempts (default 60000).
    #[serde(rename = "sync.retry.max.interval.ms", default = "default_retry_max")]
    pub retry_max_interval_ms: u64,
    /// How long connecting may take (default 5000 ms).
    #[serde(rename = "connection.timeout.ms", default = "default_ack_timeout")]
    pub connection_timeout_ms: u64,
    /// A message over the server's `max_payload`, or one an encoder refuses: `fail`
    /// (default) stops the pipeline, `warn` logs and skips, `skip` skips.
    #[serde(rename = "event.processing.failure.handling.mode", default)]
    pub failure_mode: FailureMode,
    /// How values are encoded (`format`, `schemas.enable`), read beside these.
    #[serde(skip)]
    pub format: FormatConfig,
}

/// The prefix of the subjects the sink's replies come on (4 tokens and more, so that the
/// default `*.*.*` does not take them, as it would take the client's default `_INBOX.a.b`).
pub(super) const INBOX: &str = "_INBOX.sluice";
/// A reply subject, to find the streams that would take replies.
pub(super) const INBOX_PROBE: &str = "_INBOX.sluice.probe.1";

/// Whether the subject filter `filter` (`*` one token, `>` the rest) takes `subject`.
pub(super) fn takes(filter: &str, subject: &str) -> bool {
    let mut tokens = subject.split('.');
    for part in filter.split('.') {
        match (part, tokens.next()) {
            (">", Some(_)) => return true,
            (_, None) => return false,
            ("*", Some(_)) => {}
            (p, Some(t)) if p == t => {}
            _ => return false,
        }
    }
    tokens.next().is_none()
}

fn default_subject() -> String {
    "${topic}".to_owned()
}
fn default_stream_name() -> String {
    "DebeziumStream".to_owned()
}
fn default_subjects() -> String {
    "*.*.*".to_owned()
}
fn default_duplicate_window() -> u64 {
    120_000
}
fn default_ack_timeout() -> u64 {
    5000
}
fn default_retry_interval() -> u64 {
    1000
}
fn default_retry_max() -> u64 {
    60_000
}

impl NatsSinkConfig {
    /// The servers of `url`.
    pub(super) fn servers(&self) -> Vec<String> {
        self.url
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// The created stream's subjects.
    pub(super) fn stream_subjects(&self) -> Vec<String> {
        self.subjects
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// The subject of an event of `topic`.
    pub(super) fn subject_of(&self, topic: &str) -> String {
        self.subject.replace("${topic}", topic)
    }

    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        let servers = self.servers();
        if servers.is_empty() {
            return Err("`url` names no server: write it as nats://host:4222".into());
        }
        for s in &servers {
            if s.parse::<async_nats::ServerAddr>().is_err() {
                return Err(format!(
                    "`url`: `{s}` is not a NATS server address; write it as nats://host:4222"
                ));
            }
        }
        let logins = [
            self.token.is_some(),
            self.user.is_some() || self.password.is_some(),
            self.seed.is_some() || self.jwt.is_some(),
            self.credentials_file.is_some(),
        ];
        if logins.iter().filter(|l| **l).count() > 1 {
            return Err("set one way to log in: `auth.token`, `auth.user`/`auth.password`, `auth.seed` (with `auth.jwt`) or `auth.credentials.file`".into());
        }
        if self.user.is_some() != self.password.is_some() {
            return Err("`auth.user` and `auth.password` go together".into());
        }
        if self.jwt.is_some() && self.seed.is_none() {
            return Err("`auth.jwt` needs `auth.seed`, the NKey seed that signs with it".into());
        }
        if self.create_stream
            && (self.stream_name.is_empty()
                || self.stream_name.contains(['.', ' ', '*', '>', '\t']))
        {
            return Err(format!(
                "`stream-name` `{}`: a stream name has no spaces, dots, `*` or `>`",
                self.stream_name
            ));
        }
        if self.create_stream {
            if let Some(filter) = self
                .stream_subjects()
                .into_iter()
                .find(|f| takes(f, INBOX_PROBE))
            {
                return Err(format!(
                    "`subjects`: `{filter}` also takes the replies JetStream sends the sink ({INBOX}.…), which the stream would store as messages: narrow it (`<topic.prefix>.>`)"
                ));
            }
        }
        if self.ack_timeout_ms == 0 || self.connection_timeout_ms == 0 {
            return Err("`async.timeout.ms` and `connection.timeout.ms` must be at least 1".into());
        }
        if self.retry_interval_ms == 0 || self.retry_max_interval_ms < self.retry_interval_ms {
            return Err("`sync.retry.interval.ms` must be at least 1 and at most `sync.retry.max.interval.ms`".into());
        }
        self.format.validate()
    }
}

sluice_engine::impl_component!(
    NatsSinkConfig,
    Sink,
    "nats",
    parts = FormatConfig => format,
    check = Self::validate,
    build = |c, ctx| super::NatsSink::open(c, ctx)?
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_filters_match_as_nats_matches_them() {
        assert!(takes("*.*.*", "a.b.c"));
        assert!(!takes("*.*.*", "a.b"));
        assert!(!takes("*.*.*", INBOX_PROBE));
        assert!(takes(">", INBOX_PROBE));
        assert!(takes("_INBOX.>", INBOX_PROBE));
        assert!(takes("*.*.*.*", INBOX_PROBE));
        assert!(takes("inv.>", "inv.main.t"));
        assert!(!takes("inv.>", "inv"));
        assert!(!takes("inv.*", "inv.main.t"));
        assert!(takes("inv.main.t", "inv.main.t"));
    }
}
