//! `redis`: events appended to Redis Streams, one stream per topic, as Debezium Server's Redis
//! sink writes them (`XADD <topic> * <key> <value>`, or the fields `key` and `value` with
//! `message.format: extended`). A batch goes in `MULTI`/`EXEC` blocks of `batch.size` entries and
//! is acknowledged once every block was answered (and, with `wait.enabled`, every replica has
//! it). A block the server could not take (the connection lost, out of memory, loading) is sent
//! again after a backoff until it is taken: a slow or stopped server slows the pipeline, it
//! loses nothing. A block whose `EXEC` was sent but not answered may have been applied: it is
//! sent again, so an entry can appear twice (at least once, as Debezium's).

mod config;

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError};
use sluice_engine::{delivered, BuildContext, ChangeEvent, ComponentError, Delivery};
use sluice_engine::{Sink, SinkBatch};

pub use config::{MessageFormat, RedisSinkConfig};

use crate::format::{EncodeError, Encoder};
use crate::skipped::skip_or_fail;

/// The longest field Redis takes when the server does not say (`proto-max-bulk-len`).
const DEFAULT_MAX_BULK: u64 = 512 * 1024 * 1024;

/// One stream entry.
struct Entry {
    stream: String,
    fields: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Why an attempt did not go through.
enum Failure {
    /// Worth another attempt after a pause (the server is away, full or busy).
    Again(String),
    /// The pipeline stops (wrong credentials, a missing permission).
    Stop(ComponentError),
}

/// The running sink.
pub struct RedisSink {
    name: String,
    config: RedisSinkConfig,
    client: Client,
    connection: Option<MultiplexedConnection>,
    /// The longest field the server takes (read once connected).
    max_bulk: u64,
    encoder: Encoder,
    /// When the memory guard last found the server under its threshold: it asks again after
    /// `MEMORY_RECHECK` (an `INFO` per block would halve the throughput).
    memory_ok_at: Option<std::time::Instant>,
}

/// How long a memory guard's "under the threshold" holds.
const MEMORY_RECHECK: Duration = Duration::from_millis(250);

/// Doubling waits from `first` up to `max`.
struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    fn pause(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(self.max);
        now
    }
}

impl RedisSink {
    /// A client for `config`; the server is reached once (connection, login, `PING`) so that a
    /// wrong address or login stops the start with the fix.
    pub fn open(config: &RedisSinkConfig, ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        config.validate().map_err(ComponentError::fatal)?;
        let name = ctx.component.to_owned();
        let client = client(config).map_err(|e| {
            ComponentError::fatal(format!("sink `{name}`: {}", describe(&e, config)))
        })?;
        let check = (client.clone(), connection_config(config), config.clone());
        let sink = name.clone();
        crate::block_on_side_thread(async move {
            let (client, settings, config) = check;
            let mut conn = client
                .get_multiplexed_async_connection_with_config(&settings)
                .await
                .map_err(|e| {
                    ComponentError::fatal(format!("sink `{sink}`: {}", describe(&e, &config)))
                })?;
            redis::cmd("PING")
                .query_async::<()>(&mut conn)
                .await
                .map_err(|e| {
                    ComponentError::fatal(format!("sink `{sink}`: {}", describe(&e, &config)))
                })
        })?;
        let encoder = Encoder::open(&config.format, &name)?;
        tracing::info!(sink = %name, address = %config.address, "Connected to Redis.");
        Ok(RedisSink {
            name,
            config: config.clone(),
            client,
            connection: None,
            max_bulk: DEFAULT_MAX_BULK,
            encoder,
            memory_ok_at: None,
        })
    }

    /// The batch's entries, in order; an event that cannot be encoded follows the failure mode.
    async fn entries(&mut self, batch: &SinkBatch<'_>) -> Result<Vec<Entry>, ComponentError> {
        let mut entries = Vec::with_capacity(batch.len());
        let (mut key, mut value) = (Vec::new(), Vec::new());
        for event in batch.iter() {
            match self.encoder.encode(event, &mut key, &mut value).await {
                Ok(()) => {}
                Err(EncodeError::Service(e)) => return Err(e),
                Err(EncodeError::Record(reason)) => {
                    self.failed(event, &reason)?;
                    continue;
                }
            }
            let key = match event.key.is_some() {
                true => std::mem::take(&mut key),
                false => self.config.null_key.clone().into_bytes(),
            };
            let value = match event.value.is_some() {
                true => std::mem::take(&mut value),
                false => self.config.null_value.clone().into_bytes(),
            };
            let longest = key.len().max(value.len()) as u64;
            if longest > self.max_bulk {
                let reason = format!(
                    "an entry of {longest} bytes is over the server's `proto-max-bulk-len` ({} bytes); raise it on the server",
                    self.max_bulk
                );
                self.failed(event, &reason)?;
                continue;
            }
            let fields = match self.config.message_format {
                MessageFormat::Compact => vec![(key, value)],
                MessageFormat::Extended => vec![(b"key".to_vec(), key), (b"value".to_vec(), value)],
            };
            entries.push(Entry {
                stream: event.topic.to_string(),
                fields,
            });
        }
        Ok(entries)
    }

    /// An event that cannot be written, under `event.processing.failure.handling.mode`.
    fn failed(&self, event: &ChangeEvent, reason: &str) -> Result<(), ComponentError> {
        let at = format!("stream `{}`", event.topic);
        skip_or_fail(self.config.failure_mode, &self.name, &at, reason)
    }

    /// The connection, opened when there is none.
    async fn connection(&mut self) -> Result<MultiplexedConnection, Failure> {
        if let Some(conn) = &self.connection {
            return Ok(conn.clone());
        }
        let mut conn = self
            .client
            .get_multiplexed_async_connection_with_config(&connection_config(&self.config))
            .await
            .map_err(|e| self.classify(&e))?;
        // The server's limit on one field, when the user may read it.
        let limit: Option<(String, String)> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("proto-max-bulk-len")
            .query_async(&mut conn)
            .await
            .ok()
            .flatten();
        self.max_bulk = limit
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(DEFAULT_MAX_BULK);
        self.connection = Some(conn.clone());
        Ok(conn)
    }

    /// A Redis error as a stop or another attempt.
    fn classify(&self, e: &RedisError) -> Failure {
        let stop = codes(e)
            .iter()
            .any(|c| matches!(c.as_str(), "NOAUTH" | "WRONGPASS" | "NOPERM"))
            || e.kind() == redis::ErrorKind::AuthenticationFailed;
        if stop {
            return Failure::Stop(ComponentError::fatal(format!(
                "sink `{}`: {}",
                self.name,
                describe(e, &self.config)
            )));
        }
        Failure::Again(describe(e, &self.config))
    }

    /// Whether the server's used memory is under `memory.threshold.percentage` of its limit.
    async fn memory_ok(&self, conn: &mut MultiplexedConnection) -> Result<bool, RedisError> {
        let threshold = u64::from(self.config.memory_threshold_percentage);
        if threshold == 0 {
            return Ok(true);
        }
        let info: String = redis::cmd("INFO").arg("memory").query_async(conn).await?;
        let field = |name: &str| -> u64 {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        let used = field("used_memory");
        let limit = match field("maxmemory") {
            0 => self.config.memory_limit_mb.saturating_mul(1024 * 1024),
            max => max,
        };
        Ok(limit == 0 || used.saturating_mul(100) < limit.saturating_mul(threshold))
    }

    /// One attempt at a block: `MULTI`, an `XADD` per entry, `EXEC`, then `WAIT` if asked.
    async fn attempt(&mut self, block: &[Entry]) -> Result<(), Failure> {
        let mut conn = self.connection().await?;
        let fresh = self
            .memory_ok_at
            .is_some_and(|at| at.elapsed() < MEMORY_RECHECK);
        match if fresh {
            Ok(true)
        } else {
            self.memory_ok(&mut conn).await
        } {
            Ok(true) => {
                if !fresh {
                    self.memory_ok_at = Some(std::time::Instant::now());
                }
            }
            Ok(false) => {
                self.memory_ok_at = None;
                return Err(Failure::Again(format!(
                    "the server's used memory is above {}% of its limit (`memory.threshold.percentage`)",
                    self.config.memory_threshold_percentage
                )));
            }
            Err(e) => return Err(self.dropped(&e)),
        }
        let mut pipe = redis::pipe();
        pipe.atomic().ignore_errors();
        for entry in block {
            let cmd = pipe.cmd("XADD").arg(&entry.stream);
            if let Some(n) = self.config.stream_maxlen {
                cmd.arg("MAXLEN").arg("~").arg(n);
            }
            cmd.arg("*");
            for (field, value) in &entry.fields {
                cmd.arg(field).arg(value);
            }
        }
        let replies: Vec<redis::RedisResult<redis::Value>> = pipe
            .query_async(&mut conn)
            .await
            .map_err(|e| self.dropped(&e))?;
        for (entry, reply) in block.iter().zip(&replies) {
            if let Err(e) = reply {
                // `EXEC` ran the others: this one alone failed (a key of another type).
                let reason = format!("`XADD` failed: {}", describe(e, &self.config));
                self.failed_entry(entry, &reason).map_err(Failure::Stop)?;
            }
        }
        if self.config.wait_enabled {
            self.wait(&mut conn).await?;
        }
        Ok(())
    }

    /// An entry the server refused, under `event.processing.failure.handling.mode`.
    fn failed_entry(&self, entry: &Entry, reason: &str) -> Result<(), ComponentError> {
        let at = format!("stream `{}`", entry.stream);
        skip_or_fail(self.config.failure_mode, &self.name, &at, reason)
    }

    /// An error of a command: the connection is opened again for the next attempt unless
    /// the error says the login or a permission is wrong.
    fn dropped(&mut self, e: &RedisError) -> Failure {
        let failure = self.classify(e);
        if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() {
            self.connection = None;
        }
        failure
    }

    /// `WAIT` for every replica connected to the server (`wait.enabled`).
    async fn wait(&mut self, conn: &mut MultiplexedConnection) -> Result<(), Failure> {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(conn)
            .await
            .map_err(|e| self.dropped(&e))?;
        let replicas: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("connected_slaves:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        loop {
            let acked: u64 = redis::cmd("WAIT")
                .arg(replicas)
                .arg(self.config.wait_timeout_ms)
                .query_async(conn)
                .await
                .map_err(|e| self.dropped(&e))?;
            if acked >= replicas {
                return Ok(());
            }
            if !self.config.wait_retry_enabled {
                return Err(Failure::Stop(ComponentError::retryable(format!(
                    "sink `{}`: {acked} of {replicas} replicas confirmed the entries within `wait.timeout.ms` ({} ms); the batch is sent again (set `wait.retry.enabled: true` to wait longer instead)",
                    self.name, self.config.wait_timeout_ms
                ))));
            }
            tracing::warn!(sink = %self.name, acked, replicas, "Not every replica confirmed the entries; waiting again.");
            tokio::time::sleep(Duration::from_millis(self.config.wait_retry_delay_ms)).await;
        }
    }

    /// Sends a block until the server takes it.
    async fn send(&mut self, block: &[Entry]) -> Result<(), ComponentError> {
        let mut backoff = Backoff {
            next: Duration::from_millis(self.config.retry_initial_delay_ms),
            max: Duration::from_millis(self.config.retry_max_delay_ms),
        };
        loop {
            match self.attempt(block).await {
                Ok(()) => return Ok(()),
                Err(Failure::Stop(e)) => return Err(e),
                Err(Failure::Again(why)) => {
                    let pause = backoff.pause();
                    tracing::warn!(sink = %self.name, address = %self.config.address, reason = %why, retry_in_ms = pause.as_millis() as u64, "Redis did not take the entries; trying again.");
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
}

/// The client of `config` (TLS with `ssl.enabled`).
fn client(config: &RedisSinkConfig) -> Result<Client, RedisError> {
    use redis::{ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo};
    let (host, port) = config
        .host_port()
        .map_err(|e| RedisError::from((redis::ErrorKind::InvalidClientConfig, "address", e)))?;
    let addr = match config.ssl_enabled {
        false => ConnectionAddr::Tcp(host, port),
        true => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                tls_params: None,
            }
        }
    };
    let mut login = RedisConnectionInfo::default();
    if let Some(user) = &config.user {
        login = login.set_username(user);
    }
    if let Some(password) = &config.password {
        login = login.set_password(password.expose());
    }
    let info = addr.into_connection_info()?.set_redis_settings(login);
    match &config.ssl_truststore {
        Some(path) if config.ssl_enabled => {
            let pem = std::fs::read(path).map_err(|e| {
                RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "ssl.truststore",
                    format!("cannot read `{}`: {e}", path.display()),
                ))
            })?;
            Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem),
                },
            )
        }
        _ => Client::open(info),
    }
}

fn connection_config(config: &RedisSinkConfig) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(config.connection_timeout_ms)))
        .set_response_timeout(Some(Duration::from_millis(config.socket_timeout_ms)))
}

/// The server's error codes in `e`: its own, and those of the commands of an aborted
/// transaction (`EXECABORT` after a command was refused while queued: `NOPERM`, `OOM`).
fn codes(e: &RedisError) -> Vec<String> {
    let mut codes: Vec<String> = e.code().map(str::to_owned).into_iter().collect();
    if let Some(errors) = e.clone().into_server_errors() {
        codes.extend(errors.iter().map(|(_, s)| s.code().to_owned()));
    }
    codes
}

/// One line saying what went wrong and what to check; the password is never in it (Redis's
/// errors do not repeat it).
fn describe(e: &RedisError, config: &RedisSinkConfig) -> String {
    let at = &config.address;
    let codes = codes(e);
    let has = |code: &str| codes.iter().any(|c| c == code);
    if has("WRONGPASS") || has("NOAUTH") || e.kind() == redis::ErrorKind::AuthenticationFailed {
        let who = config.user.as_deref().unwrap_or("default");
        return format!(
            "Redis at {at} refused the login of user `{who}` ({e}): check `user` and `password`"
        );
    }
    if has("NOPERM") {
        let who = config.user.as_deref().unwrap_or("default");
        return format!("Redis at {at} does not let user `{who}` run a command the sink needs ({e}): grant it `+xadd +multi +exec +ping +info` (and `+wait` with `wait.enabled`) on the streams' keys");
    }
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
        return format!(
            "cannot reach Redis at {at} ({e}): check `address` and that the server runs{}",
            if config.ssl_enabled { " with TLS" } else { "" }
        );
    }
    format!("Redis at {at}: {e}")
}

#[async_trait]
impl Sink for RedisSink {
    async fn write(&mut self, batch: &SinkBatch<'_>) -> Result<Delivery, ComponentError> {
        use tracing::Instrument;
        let span = tracing::debug_span!("redis", sink = %self.name, events = batch.len());
        async {
            let entries = self.entries(batch).await?;
            let size = self.config.batch_size;
            for block in entries.chunks(size) {
                self.send(block).await?;
            }
            Ok(delivered())
        }
        .instrument(span)
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_limit() {
        let mut b = Backoff {
            next: Duration::from_millis(300),
            max: Duration::from_millis(1000),
        };
        let waits: Vec<u128> = (0..4).map(|_| b.pause().as_millis()).collect();
        assert_eq!(waits, [300, 600, 1000, 1000]);
    }
}
