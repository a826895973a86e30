//! `redis`: events appended to Redis Streams, one stream per topic, as Debezium Server's Redis
//! sink writes them (`XADD <topic> * <key> <value>`, or the fields `key` and `value` with
//! `message.format: extended`). A batch goes in `MULTI`/`EXEC` blocks of `batch.size` entries,
//! all sent at once on the connection (Redis runs them in order; with `appendfsync always` one
//! write to disk serves many), and is acknowledged once every block was answered (and, with
//! `wait.enabled`, every replica has it). Batches go out one after another while the next is
//! encoded (`crate::ordered`). Blocks the server could not take (the connection lost, out of
//! memory, loading) are sent again, from the first not taken, after a backoff until they are
//! taken: a slow or stopped server slows the pipeline, it loses nothing. A block whose `EXEC` was
//! sent but not answered may have been applied, and so may the blocks after one that failed:
//! they are sent again, so an entry can appear twice (at least once, as Debezium's). After a
//! failure the rest goes one block at a time; on the first attempt, a block the server refused
//! (out of memory, loading) while it took a later one of the same batch puts that later one
//! before the refused one's retry as well as after it.

mod config;
mod error;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError};
use sluice_engine::{BuildContext, ChangeEvent, ComponentError, Delivery};
use sluice_engine::{Sink, SinkBatch};

pub use config::{MessageFormat, RedisSinkConfig};

use crate::format::{EncodeError, Encoder};
use crate::ordered::Ordered;
use crate::skipped::skip_or_fail;
use error::RedisSinkError;

/// The longest field Redis takes when the server does not say (`proto-max-bulk-len`).
const DEFAULT_MAX_BULK: u64 = 512 * 1024 * 1024;

/// One stream entry.
struct Entry {
    stream: Arc<str>,
    fields: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Why an attempt did not go through.
enum Failure {
    /// Worth another attempt after a pause (the server is away, full or busy).
    Again(String),
    /// The pipeline stops (wrong credentials, a missing permission).
    Stop(ComponentError),
}

/// The running sink: it encodes batches; its writer sends them.
pub struct RedisSink {
    name: String,
    config: RedisSinkConfig,
    encoder: Encoder,
    /// The longest field the server takes (read by the writer once connected).
    max_bulk: Arc<AtomicU64>,
    writer: Arc<tokio::sync::Mutex<Writer>>,
    ordered: Ordered,
}

/// What sends the entries, one block after another, shared by the deliveries.
struct Writer {
    name: String,
    config: RedisSinkConfig,
    client: Client,
    connection: Option<MultiplexedConnection>,
    max_bulk: Arc<AtomicU64>,
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
    /// A client for `config` (the server is reached in [`Sink::health_check`]).
    pub fn open(config: &RedisSinkConfig, ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        config.validate().map_err(RedisSinkError::Config)?;
        let name = ctx.component.to_owned();
        let client = client(config).map_err(|source| RedisSinkError::Start {
            sink: name.clone(),
            message: describe(&source, config),
            source,
        })?;
        let encoder = Encoder::open(&config.format, &name)?;
        let max_bulk = Arc::new(AtomicU64::new(DEFAULT_MAX_BULK));
        let writer = Writer {
            name: name.clone(),
            config: config.clone(),
            client,
            connection: None,
            max_bulk: Arc::clone(&max_bulk),
            memory_ok_at: None,
        };
        Ok(RedisSink {
            name,
            config: config.clone(),
            encoder,
            max_bulk,
            writer: Arc::new(tokio::sync::Mutex::new(writer)),
            ordered: Ordered::default(),
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
            let max_bulk = self.max_bulk.load(Ordering::Relaxed);
            if longest > max_bulk {
                let reason = format!(
                    "an entry of {longest} bytes is over the server's `proto-max-bulk-len` ({max_bulk} bytes); raise it on the server"
                );
                self.failed(event, &reason)?;
                continue;
            }
            let fields = match self.config.message_format {
                MessageFormat::Compact => vec![(key, value)],
                MessageFormat::Extended => vec![(b"key".to_vec(), key), (b"value".to_vec(), value)],
            };
            entries.push(Entry {
                stream: Arc::clone(&event.topic),
                fields,
            });
        }
        Ok(entries)
    }

    /// An event that cannot be written, under `event.processing.failure.handling.mode`.
    fn failed(
        &self,
        event: &ChangeEvent,
        reason: impl std::fmt::Display,
    ) -> Result<(), ComponentError> {
        let at = format!("stream `{}`", event.topic);
        skip_or_fail(self.config.failure_mode, &self.name, &at, reason)
    }
}

impl Writer {
    /// The connection, opened when there is none.
    async fn connection(&mut self) -> Result<MultiplexedConnection, Failure> {
        if let Some(conn) = &self.connection {
            return Ok(conn.clone());
        }
        self.open().await.map_err(|e| self.classify(&e))
    }

    /// Opens the connection (login included), learns the server's limit on one field, and
    /// keeps it.
    async fn open(&mut self) -> Result<MultiplexedConnection, RedisError> {
        let mut conn = self
            .client
            .get_multiplexed_async_connection_with_config(&connection_config(&self.config))
            .await?;
        // The server's limit on one field, when the user may read it.
        let limit: Option<(String, String)> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("proto-max-bulk-len")
            .query_async(&mut conn)
            .await
            .ok()
            .flatten();
        let max_bulk = limit
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(DEFAULT_MAX_BULK);
        self.max_bulk.store(max_bulk, Ordering::Relaxed);
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
            return Failure::Stop(ComponentError::from(RedisSinkError::Refused {
                sink: self.name.clone(),
                message: describe(e, &self.config),
                source: e.clone(),
            }));
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

    /// One attempt at `blocks`: each `MULTI`, an `XADD` per entry, `EXEC`, all sent at once on
    /// the connection (Redis runs them in order, and one `appendfsync` write serves many), then
    /// `WAIT` if asked. How many blocks from the first were taken, and why the next was not.
    async fn attempt(&mut self, blocks: &[&[Entry]]) -> (usize, Option<Failure>) {
        let conn = match self.connection().await {
            Ok(conn) => conn,
            Err(f) => return (0, Some(f)),
        };
        if let Err(f) = self.memory_guard(&mut conn.clone()).await {
            return (0, Some(f));
        }
        let pipes: Vec<redis::Pipeline> = blocks.iter().map(|b| self.pipe(b)).collect();
        let sent = pipes.iter().map(|pipe| {
            let mut conn = conn.clone();
            async move {
                pipe.query_async::<Vec<redis::RedisResult<redis::Value>>>(&mut conn)
                    .await
            }
        });
        let answers = futures_util::future::join_all(sent).await;
        for (taken, (block, answer)) in blocks.iter().zip(answers).enumerate() {
            let replies = match answer {
                Ok(replies) => replies,
                Err(e) => return (taken, Some(self.dropped(&e))),
            };
            for (entry, reply) in block.iter().zip(&replies) {
                if let Err(e) = reply {
                    // `EXEC` ran the others: this one alone failed (a key of another type).
                    let reason = format!("`XADD` failed: {}", describe(e, &self.config));
                    if let Err(e) = self.failed_entry(entry, &reason) {
                        return (taken, Some(Failure::Stop(e)));
                    }
                }
            }
        }
        if self.config.wait_enabled {
            if let Err(f) = self.wait(&mut conn.clone()).await {
                // Every block is on the primary; the replicas are asked again with all of them.
                return (0, Some(f));
            }
        }
        (blocks.len(), None)
    }

    /// `MULTI`, an `XADD` per entry, `EXEC`.
    fn pipe(&self, block: &[Entry]) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        pipe.atomic().ignore_errors();
        for entry in block {
            let cmd = pipe.cmd("XADD").arg(entry.stream.as_ref());
            if let Some(n) = self.config.stream_maxlen {
                cmd.arg("MAXLEN").arg("~").arg(n);
            }
            cmd.arg("*");
            for (field, value) in &entry.fields {
                cmd.arg(field).arg(value);
            }
        }
        pipe
    }

    /// The memory guard: `Again` while the server's used memory is above the threshold.
    async fn memory_guard(&mut self, conn: &mut MultiplexedConnection) -> Result<(), Failure> {
        let fresh = self
            .memory_ok_at
            .is_some_and(|at| at.elapsed() < MEMORY_RECHECK);
        if fresh {
            return Ok(());
        }
        match self.memory_ok(conn).await {
            Ok(true) => {
                self.memory_ok_at = Some(std::time::Instant::now());
                Ok(())
            }
            Ok(false) => {
                self.memory_ok_at = None;
                Err(Failure::Again(format!(
                    "the server's used memory is above {}% of its limit (`memory.threshold.percentage`)",
                    self.config.memory_threshold_percentage
                )))
            }
            Err(e) => Err(self.dropped(&e)),
        }
    }

    /// An entry the server refused, under `event.processing.failure.handling.mode`.
    fn failed_entry(
        &self,
        entry: &Entry,
        reason: impl std::fmt::Display,
    ) -> Result<(), ComponentError> {
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
                return Err(Failure::Stop(ComponentError::from(
                    RedisSinkError::Replicas {
                        sink: self.name.clone(),
                        acked,
                        replicas,
                        timeout_ms: self.config.wait_timeout_ms,
                    },
                )));
            }
            tracing::warn!(sink = %self.name, acked, replicas, "Not every replica confirmed the entries; waiting again.");
            tokio::time::sleep(Duration::from_millis(self.config.wait_retry_delay_ms)).await;
        }
    }

    /// Sends the entries, in blocks of `batch.size`, until the server took them all: after a
    /// failure, again from the first block not taken (the later ones, if Redis took them, come
    /// again after it: at least once).
    async fn send(&mut self, entries: &[Entry]) -> Result<(), ComponentError> {
        let mut backoff = Backoff {
            next: Duration::from_millis(self.config.retry_initial_delay_ms),
            max: Duration::from_millis(self.config.retry_max_delay_ms),
        };
        let blocks: Vec<&[Entry]> = entries.chunks(self.config.batch_size.max(1)).collect();
        let mut from = 0;
        // After a failure, one block at a time: a block refused while later ones were taken
        // can only happen on the first attempt.
        let mut at_once = blocks.len();
        loop {
            let window = &blocks[from..(from + at_once).min(blocks.len())];
            match self.attempt(window).await {
                (taken, None) if from + taken < blocks.len() => from += taken,
                (_, None) => return Ok(()),
                (_, Some(Failure::Stop(e))) => return Err(e),
                (taken, Some(Failure::Again(why))) => {
                    from += taken;
                    at_once = 1;
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
    /// The server reached (connection, login, `PING`), the connection kept for the writes;
    /// then the format's services.
    async fn health_check(&mut self) -> Result<(), ComponentError> {
        let reached = async {
            let mut writer = self.writer.lock().await;
            let mut conn = writer.open().await?;
            redis::cmd("PING").query_async::<()>(&mut conn).await
        };
        reached.await.map_err(|source| RedisSinkError::Start {
            sink: self.name.clone(),
            message: describe(&source, &self.config),
            source,
        })?;
        tracing::info!(sink = %self.name, address = %self.config.address, "Connected to Redis.");
        self.encoder.health_check().await
    }

    async fn write(&mut self, batch: &SinkBatch<'_>) -> Result<Delivery, ComponentError> {
        use tracing::Instrument;
        let span = tracing::debug_span!("redis", sink = %self.name, events = batch.len());
        let entries = self.entries(batch).instrument(span.clone()).await?;
        let writer = Arc::clone(&self.writer);
        // Sent when the runtime awaits it: in order, while the next batch is encoded.
        Ok(self
            .ordered
            .delivery(async move { writer.lock().await.send(&entries).await }.instrument(span)))
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
