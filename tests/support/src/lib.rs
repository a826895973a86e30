//! Helpers shared by Sluice's integration tests (`tests/`) and benchmarks (`benches/`): a
//! dev-only crate, so that each suite uses them instead of including their files by path.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test
#![allow(missing_docs)]

pub mod broker;
pub mod certs;
pub mod db2;
pub mod feed;
pub mod mariadb;
pub mod moments;
pub mod nats;
pub mod pg;
pub mod pipeline;
pub mod procstat;
pub mod rabbitmq;
pub mod redis;
pub mod registry;
pub mod scenario;
pub mod sqlserver;
