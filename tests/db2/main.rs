//! The Db2 source end to end through the `sluice` binary, against an emulation of Db2's ASN
//! capture on PostgreSQL (`sluice_test_support::db2`), read through the PostgreSQL ODBC driver
//! as a real deployment reads Db2 through IBM's: no Db2 server can run on these machines.
//! Event shapes follow seeds 002 and 004 (Debezium's Db2 connector documentation) and
//! Debezium 3.x's Db2 connector source (`Db2SourceInfoStructMaker`, `Db2ValueConverters`); no
//! real Debezium Db2 connector output could be made here.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use sluice_test_support::db2::Db2;
use sluice_test_support::pg::{lines, payloads, start, wait_events, wait_for};
use sluice_test_support::pipeline::{Component, Pipeline, Scalar};

mod incremental;
mod resume;
mod scenarios;
mod stream;
mod types;
mod zos;

/// The test source reading `db`: topics under `db2server`, polled every 50 ms, without schema
/// change events (only where a test sets the key).
fn source(db: &Db2) -> Component {
    Component::new("db2")
        .set("odbc.connection.string", db.connection_string())
        .set("database.password", "unused")
        .set("database.dbname", "TESTDB")
        .set("topic.prefix", "db2server")
        .set("poll.interval.ms", 50u32)
        .set("include.schema.changes", false)
}

/// The test pipeline of `source` under `dir`: offsets flushed every 50 ms, no restarts, a file
/// sink (`out.jsonl`, schemas on).
fn base(dir: &Path, source: Component) -> Pipeline {
    Pipeline::new("db2_test", dir.join("data"))
        .setting("offsets", &[("flush_interval", "50ms".into())])
        .setting("restart", &[("max_retries", 0u32.into())])
        .source(source)
        .sink(sluice_test_support::pipeline::file_sink(
            dir.join("out.jsonl"),
            true,
        ))
}

/// A pipeline reading `db` into `dir/out.jsonl` (schemas on), its source's `keys` set.
fn pipeline(dir: &Path, db: &Db2, keys: &[(&str, Scalar)]) -> PathBuf {
    base(dir, source(db).set_all(keys)).write(dir)
}

/// A schema `DB2INST1` with `CUSTOMERS (ID, NAME)`, as Db2 names them (upper case).
fn customers(db: &Db2) {
    db.sql("CREATE SCHEMA \"DB2INST1\"; CREATE TABLE \"DB2INST1\".\"CUSTOMERS\" (\"ID\" integer PRIMARY KEY, \"NAME\" varchar(40) NOT NULL)");
}

/// The rows of `CUSTOMERS` rebuilt from the events in `dir`: creates, reads and updates set a
/// row, deletes remove it, and a new snapshot (its `first` row) starts over.
fn rebuilt(dir: &Path) -> std::collections::BTreeMap<i64, String> {
    let mut state = std::collections::BTreeMap::new();
    for line in lines(dir) {
        if line["topic"] != "db2server.DB2INST1.CUSTOMERS" || line["value"].is_null() {
            continue;
        }
        let p = &line["value"]["payload"];
        if p["source"]["snapshot"] == "first" {
            state.clear();
        }
        match p["op"].as_str().unwrap() {
            "d" => {
                state.remove(&p["before"]["ID"].as_i64().unwrap());
            }
            _ => {
                state.insert(
                    p["after"]["ID"].as_i64().unwrap(),
                    p["after"]["NAME"].as_str().unwrap_or_default().to_owned(),
                );
            }
        }
    }
    state
}

/// The table's rows as the database has them.
fn table_rows(db: &Db2) -> std::collections::BTreeMap<i64, String> {
    db.sql("SELECT \"ID\", \"NAME\" FROM \"DB2INST1\".\"CUSTOMERS\" ORDER BY 1")
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (id, name) = l.split_once('|').unwrap();
            (id.parse().unwrap(), name.to_owned())
        })
        .collect()
}

/// A 16-byte LSN in hex as Debezium prints it (`00000000:00000000:0000000000000a2c`).
fn printed(hex: &str) -> String {
    format!("{}:{}:{}", &hex[..8], &hex[8..16], &hex[16..])
}

/// The (commit, change) LSNs every change of `CUSTOMERS`'s change-data table gives an event
/// at: a row's own, an update's (a 'D' then an 'I' in one commit) its 'I' row's.
fn change_positions(db: &Db2) -> std::collections::BTreeSet<(String, String)> {
    db.sql(
        "SELECT encode(c, 'hex') || '|' || encode(e, 'hex') FROM (\
         SELECT ibmsnap_commitseq c, CASE WHEN ibmsnap_operation = 'D' AND nxt = 'I' THEN nxt_seq ELSE ibmsnap_intentseq END e, \
                ibmsnap_operation = 'I' AND coalesce(prv, 'X') = 'D' AS second FROM (\
           SELECT *, lead(ibmsnap_operation) OVER w nxt, lead(ibmsnap_intentseq) OVER w nxt_seq, lag(ibmsnap_operation) OVER w prv \
           FROM \"ASNCDC\".\"CDC_DB2INST1_CUSTOMERS\" WINDOW w AS (PARTITION BY ibmsnap_commitseq ORDER BY ibmsnap_intentseq)) r) p \
         WHERE NOT second",
    )
    .lines()
    .filter(|l| !l.is_empty())
    .map(|l| {
        let (c, e) = l.split_once('|').unwrap();
        (printed(c), printed(e))
    })
    .collect()
}

/// The last snapshot's LSN and the (commit, change) LSNs of the streamed events in `dir`.
fn streamed_positions(dir: &Path) -> (String, std::collections::BTreeSet<(String, String)>) {
    let mut snapshot = String::new();
    let mut out = std::collections::BTreeSet::new();
    for line in lines(dir) {
        let source = &line["value"]["payload"]["source"];
        if line["topic"] != "db2server.DB2INST1.CUSTOMERS" || source.is_null() {
            continue;
        }
        let commit = source["commit_lsn"].as_str().unwrap().to_owned();
        if source["snapshot"] == "false" {
            out.insert((commit, source["change_lsn"].as_str().unwrap().to_owned()));
        } else {
            snapshot = snapshot.max(commit);
        }
    }
    (snapshot, out)
}

/// Writes `position` as the pipeline's committed offset in `dir/data`.
fn store_offset(dir: &Path, position: &str) {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let offsets = serde_json::json!({"pipelines": {"db2_test": {"position": position, "committed_at_ms": 0}}});
    std::fs::write(dir.join("data/offsets.json"), offsets.to_string()).unwrap();
}
