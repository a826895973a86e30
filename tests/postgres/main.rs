//! The PostgreSQL source against the real server (address from `SLUICE_TEST_PG_HOST` /
//! `SLUICE_TEST_PG_PORT`, default 127.0.0.1:5432, user `postgres`, trust auth). Every test uses
//! its own database, slot and publication, so tests run in parallel.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod bad_signals;
mod blocking;
mod cloudevents;
mod columns;
mod scenarios;
use sluice_test_support::pg as common;
mod conformance;
mod consistency;
mod incremental;
#[cfg(feature = "jdbc")]
mod jdbc;
#[cfg(feature = "jdbc")]
mod jdbc_mariadb;
mod memory;
use sluice_test_support::moments;
mod notifications;
mod outbox;
mod ownership;
mod progress;
mod resume;
mod setup;
