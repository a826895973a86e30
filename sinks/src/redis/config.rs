//! Configuration of the `redis` sink (Redis Streams), with Debezium Server's Redis sink property
//! names (`debezium.sink.redis.*` there, without the prefix here).

use serde::Deserialize;
use sluice_engine::config::Secret;
use sluice_engine::FailureMode;

use crate::format::FormatConfig;

/// The fields of a stream entry (`message.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageFormat {
    /// One field: the key is the field's name, the value its value (Debezium's default).
    #[default]
    Compact,
    /// Two fields, `key` and `value`.
    Extended,
}

/// `type: redis`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSinkConfig {
    /// `host:port` of the server.
    pub address: String,
    /// The ACL user (Redis 6+); without it, `password` is the default user's.
    #[serde(default)]
    pub user: Option<String>,
    /// The password (`${VAR}` or a file's content; never logged).
    #[serde(default)]
    pub password: Option<Secret>,
    /// TLS (rustls, the system's trust roots, or `ssl.truststore`).
    #[serde(rename = "ssl.enabled", default)]
    pub ssl_enabled: bool,
    /// A PEM file of the CA certificates the server's certificate is checked against
    /// (default: the system's roots).
    #[serde(rename = "ssl.truststore", default)]
    pub ssl_truststore: Option<std::path::PathBuf>,
    /// Entries sent in one `MULTI`/`EXEC` (default 500).
    #[serde(rename = "batch.size", default = "default_batch_size")]
    pub batch_size: usize,
    /// The first wait after a failed attempt, doubled up to `retry.max.delay.ms` (default 300).
    #[serde(rename = "retry.initial.delay.ms", default = "default_initial_delay")]
    pub retry_initial_delay_ms: u64,
    /// The longest wait between attempts (default 10000).
    #[serde(rename = "retry.max.delay.ms", default = "default_max_delay")]
    pub retry_max_delay_ms: u64,
    /// The field name written for an event without a key (default `default`).
    #[serde(rename = "null.key", default = "default_null")]
    pub null_key: String,
    /// The value written for a tombstone (default `default`).
    #[serde(rename = "null.value", default = "default_null")]
    pub null_value: String,
    /// `compact` (default, Debezium's): one field, the key its name and the value its value;
    /// `extended`: two fields, `key` and `value`.
    #[serde(rename = "message.format", default)]
    pub message_format: MessageFormat,
    /// Writing pauses while the server's used memory is above this share of its limit
    /// (`maxmemory`, else `memory.limit.mb`); 0 turns the guard off (default 85).
    #[serde(rename = "memory.threshold.percentage", default = "default_threshold")]
    pub memory_threshold_percentage: u8,
    /// The limit the guard uses when the server has no `maxmemory` (MB; 0: none, default).
    #[serde(rename = "memory.limit.mb", default)]
    pub memory_limit_mb: u64,
    /// After each `EXEC`, `WAIT` until every replica connected to the server has it.
    #[serde(rename = "wait.enabled", default)]
    pub wait_enabled: bool,
    /// How long one `WAIT` may take (default 1000 ms).
    #[serde(rename = "wait.timeout.ms", default = "default_wait_timeout")]
    pub wait_timeout_ms: u64,
    /// A `WAIT` that fewer replicas answered is tried again (else the batch is handed back to
    /// the sink's `retry`, and its entries may be written twice).
    #[serde(rename = "wait.retry.enabled", default)]
    pub wait_retry_enabled: bool,
    /// The pause before `WAIT` is tried again (default 1000 ms).
    #[serde(rename = "wait.retry.delay.ms", default = "default_wait_retry_delay")]
    pub wait_retry_delay_ms: u64,
    /// How long connecting may take (default 2000 ms).
    #[serde(rename = "connection.timeout.ms", default = "default_timeout")]
    pub connection_timeout_ms: u64,
    /// How long an answer may take (default 2000 ms).
    #[serde(rename = "socket.timeout.ms", default = "default_timeout")]
    pub socket_timeout_ms: u64,
    /// Sluice's own: each `XADD` trims its stream to about this many entries
    /// (`MAXLEN ~ n`); none by default.
    #[serde(rename = "stream.maxlen", default)]
    pub stream_maxlen: Option<u64>,
    /// An entry that cannot be encoded (its value does not fit the format) or written (over the
    /// server's `proto-max-bulk-len`, a stream key of another type): `fail` (default) stops the
    /// pipeline, `warn` logs and skips, `skip` skips.
    #[serde(rename = "event.processing.failure.handling.mode", default)]
    pub failure_mode: FailureMode,
    /// How keys and values are encoded (`format`, `schemas.enable`), read beside these.
    #[serde(skip)]
    pub format: FormatConfig,
}

fn default_batch_size() -> usize {
    500
}
fn default_initial_delay() -> u64 {
    300
}
fn default_max_delay() -> u64 {
    10_000
}
fn default_null() -> String {
    "default".to_owned()
}
fn default_threshold() -> u8 {
    85
}
fn default_wait_timeout() -> u64 {
    1000
}
fn default_wait_retry_delay() -> u64 {
    1000
}
fn default_timeout() -> u64 {
    2000
}

impl RedisSinkConfig {
    /// `(host, port)` of `address`.
    pub(super) fn host_port(&self) -> Result<(String, u16), String> {
        let (host, port) = self.address.rsplit_once(':').ok_or_else(|| {
            format!(
                "`address` is `{}`: write it as host:port, for example 127.0.0.1:6379",
                self.address
            )
        })?;
        let port = port.parse().map_err(|_| {
            format!(
                "`address` is `{}`: `{port}` is not a port number",
                self.address
            )
        })?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("`address` is `{}`: it names no host", self.address));
        }
        Ok((host.to_owned(), port))
    }

    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        self.host_port()?;
        if self.batch_size == 0 {
            return Err("`batch.size` must be at least 1".into());
        }
        if self.memory_threshold_percentage > 100 {
            return Err(format!(
                "`memory.threshold.percentage` is {}: use 0 (off) to 100",
                self.memory_threshold_percentage
            ));
        }
        if self.user.is_some() && self.password.is_none() {
            return Err("`user` is set without `password`: an ACL user logs in with both".into());
        }
        if self.ssl_truststore.is_some() && !self.ssl_enabled {
            return Err("`ssl.truststore` is only read with `ssl.enabled: true`".into());
        }
        if self.connection_timeout_ms == 0 || self.socket_timeout_ms == 0 {
            return Err(
                "`connection.timeout.ms` and `socket.timeout.ms` must be at least 1".into(),
            );
        }
        if self.retry_initial_delay_ms == 0 || self.retry_max_delay_ms < self.retry_initial_delay_ms
        {
            return Err(
                "`retry.initial.delay.ms` must be at least 1 and at most `retry.max.delay.ms`"
                    .into(),
            );
        }
        self.format.validate()
    }
}

sluice_engine::impl_component!(
    RedisSinkConfig,
    Sink,
    "redis",
    parts = FormatConfig => format,
    check = Self::validate,
    build = |c, ctx| super::RedisSink::open(c, ctx)?
);
