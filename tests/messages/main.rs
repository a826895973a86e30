//! The message sinks (`nats`, `rabbitmq`, `redis`) against real servers, fed by the SQLite
//! source through the `sluice` binary and compared with the file sink of the same run: what
//! every message sink must do is written once (`scenarios.rs`) and run for each; what is a
//! sink's own is in its module. One test binary for the three (one link, not three).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "redis"))]
#[macro_use]
mod scenarios;

#[cfg(feature = "nats")]
mod nats;
#[cfg(feature = "rabbitmq")]
mod rabbitmq;
#[cfg(feature = "redis")]
mod redis;
