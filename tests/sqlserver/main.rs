//! The SQL Server source end to end through the `sluice` binary, against the emulated SQL Server
//! of `sluice_test_support::sqlserver` (no SQL Server can run on these machines), and the
//! emulator itself checked with FreeTDS's `tsql`, a client independent of Sluice's. Event
//! shapes follow seed 003 (Debezium's SQL Server connector documentation) and Debezium's
//! `SqlServerValueConverters`: no real Debezium SQL Server connector output could be made here.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use sluice_test_support::pg::{lines, payloads, start, wait_events, wait_for};
use sluice_test_support::pipeline::{Component, Pipeline, Scalar};
use sluice_test_support::sqlserver::{SqlServer, PASSWORD, USER};

mod databases;
mod emulator;
mod faults;
mod incremental;
mod scenarios;
mod stream;
mod tls;
mod types;

/// The test source's connection to `server` (its host, port, login and database), without
/// its topic prefix.
fn connection(server: &SqlServer) -> Component {
    Component::new("sqlserver")
        .set("database.hostname", "127.0.0.1")
        .set("database.port", server.port)
        .set("database.user", USER)
        .set("database.password", PASSWORD)
        .set("database.names", &server.database)
}

/// The test source reading `server`: topics under `server1`, polled every 50 ms, without
/// schema change events (on by default, as in Debezium: only where a test sets the key).
fn source(server: &SqlServer) -> Component {
    connection(server)
        .set("topic.prefix", "server1")
        .set("poll.interval.ms", 50u32)
        .set("include.schema.changes", false)
}

/// The test pipeline of `source` under `dir`: no restarts, a file sink (`out.jsonl`, schemas
/// on).
fn base(dir: &Path, source: Component) -> Pipeline {
    Pipeline::new("sqlserver_test", dir.join("data"))
        .setting("restart", &[("max_retries", 0u32.into())])
        .source(source)
        .sink(sluice_test_support::pipeline::file_sink(
            dir.join("out.jsonl"),
            true,
        ))
}

/// A pipeline reading `server` into `dir/out.jsonl` (schemas on), its source's `keys` set.
fn pipeline(dir: &Path, server: &SqlServer, keys: &[(&str, Scalar)]) -> PathBuf {
    base(dir, source(server).set_all(keys)).write(dir)
}

/// The one `error:` line of a run that fails.
fn error_line(path: &Path) -> String {
    sluice_test_support::pg::run_expecting_failure(path)
}

/// The rows of `table` (`id` and `name`) rebuilt from the events in `dir`: creates, reads and
/// updates set a row, deletes remove it, and a new snapshot (its `first` row) starts over.
fn rebuilt(dir: &Path, topic: &str) -> std::collections::BTreeMap<i64, String> {
    let mut state = std::collections::BTreeMap::new();
    for line in lines(dir) {
        if line["topic"] != topic || line["value"].is_null() {
            continue;
        }
        let p = &line["value"]["payload"];
        if p["source"]["snapshot"] == "first" {
            state.clear();
        }
        match p["op"].as_str().unwrap() {
            "d" => {
                state.remove(&p["before"]["id"].as_i64().unwrap());
            }
            _ => {
                state.insert(
                    p["after"]["id"].as_i64().unwrap(),
                    p["after"]["name"].as_str().unwrap_or_default().to_owned(),
                );
            }
        }
    }
    state
}
