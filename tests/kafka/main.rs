//! The Kafka sink against a real broker (tansu): the shared one `.ci/run` starts
//! (`SLUICE_TEST_KAFKA`, default 127.0.0.1:9092), or a private one a test starts and stops.
//! Events come from the PostgreSQL source (see tests/postgres); every test uses its own
//! database, slot and topics.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

#[cfg(feature = "avro")]
mod avro;
mod connect;
use sluice_test_support::{broker, pg, procstat, registry};
mod e2e;
mod history;
mod offsets;
mod resilience;
mod secrets;
mod signals;
