//! The SQL Server source end to end through the `sluice` binary, against the emulated SQL Server
//! of `sluice_test_support::sqlserver` (no SQL Server can run on these machines), and the
//! emulator itself checked with FreeTDS's `tsql`, a client independent of Sluice's. Event
//! shapes follow seed 003 (Debezium's SQL Server connector documentation) and Debezium's
//! `SqlServerValueConverters`: no real Debezium SQL Server connector output could be made here.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use sluice_test_support::pg::{lines, payloads, start, wait_events, wait_for};
use sluice_test_support::sqlserver::{SqlServer, PASSWORD, USER};

mod databases;
mod emulator;
mod faults;
mod incremental;
mod scenarios;
mod stream;
mod tls;
mod types;

/// A pipeline reading `server` into `dir/out.jsonl` (schemas on), with `extra` source lines.
fn pipeline(dir: &Path, server: &SqlServer, extra: &str) -> PathBuf {
    // Schema change events (on by default, as in Debezium) only where a test asks for them.
    let quiet = if extra.contains("include.schema.changes") {
        ""
    } else {
        "  include.schema.changes: false\n"
    };
    let text = format!(
        "name: sqlserver_test\ndata_dir: {d}/data\nrestart: {{ max_retries: 0 }}\n\
source:\n  type: sqlserver\n  database.hostname: 127.0.0.1\n  database.port: {port}\n  database.user: {USER}\n  database.password: {PASSWORD}\n  database.names: {db}\n  topic.prefix: server1\n  poll.interval.ms: 50\n{quiet}{extra}\
sinks:\n  - type: file\n    path: {d}/out.jsonl\n    schemas.enable: true\n",
        d = dir.display(),
        port = server.port,
        db = server.database,
    );
    let path = dir.join("pipeline.yaml");
    std::fs::write(&path, text).unwrap();
    path
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
