//! Sluice sinks. Each sink lives in its own folder with its `config.rs`; `kafka`, `http`,
//! `redis` and `nats` are behind the Cargo features of their names (on by default). `format/` is the formats layer the sinks that
//! write keys and values share (JSON; Avro behind the `avro` feature).

pub mod file;
pub mod format;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "jdbc")]
pub mod jdbc;
#[cfg(feature = "kafka")]
pub mod kafka;
#[cfg(feature = "nats")]
pub mod nats;
pub mod null;
#[cfg(any(feature = "redis", feature = "nats"))]
mod ordered;
#[cfg(feature = "rabbitmq")]
pub mod rabbitmq;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(any(feature = "http", feature = "nats"))]
mod replay_id;
#[cfg(any(feature = "http", feature = "nats", feature = "rabbitmq"))]
mod shown_url;
mod skipped;
pub mod stdout;
#[cfg(any(feature = "avro", feature = "http", feature = "jdbc"))]
mod tls;
mod writer;
