//! The MySQL/MariaDB source end to end through the `sluice` binary, against a private MariaDB
//! with the binlog on (`sluice_test_support::mariadb`): the snapshot compared with real
//! Debezium 3.6.3's MySQL connector byte for byte, and one-line errors for bad setups.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value as Json;
use sluice_test_support::mariadb;
use sluice_test_support::pg::{assert_same_events, normalize};
use sluice_test_support::pipeline::{Component, Pipeline, Scalar};

mod charsets;
mod columns;
mod consistency;
mod faults;
mod flavour;
mod heartbeat;
mod incremental;
mod mariadb_ddl;
mod scenarios;
mod schema;
mod snapshots;
mod spatial;
mod tls;
mod transactions;
mod types;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/debezium/mysql");

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("run sluice")
}

/// The test source of type `kind` (`mysql`, or `mariadb` for Debezium's MariaDB connector)
/// reading the server on `port` as root with a replica id of its own for `dir`: topics under
/// `dbserver1`, a snapshot only. The server is shared by parallel tests: schema change events
/// (which describe every database) only where a test asks for them.
fn source_of(kind: &str, dir: &Path, port: u16) -> Component {
    Component::new(kind)
        .set("database.hostname", "127.0.0.1")
        .set("database.port", port)
        .set("database.user", "root")
        .set("database.server.id", server_id(dir))
        .set("topic.prefix", "dbserver1")
        .set("snapshot.mode", "initial_only")
        .set("include.schema.changes", false)
}

/// [`source_of`] with `type: mysql`.
fn source(dir: &Path, port: u16) -> Component {
    source_of("mysql", dir, port)
}

/// The test pipeline of `source` under `dir`: no restarts, its events written with their
/// schemas to `dir/out.jsonl`.
fn base(dir: &Path, source: Component) -> Pipeline {
    Pipeline::new("mysql_test", dir.join("data"))
        .setting("restart", &[("max_retries", 0u32.into())])
        .source(source)
        .sink(file_sink(dir.join("out.jsonl")))
}

/// The test pipeline's file sink writing to `path`, with schemas.
fn file_sink(path: impl Into<Scalar>) -> Component {
    sluice_test_support::pipeline::file_sink(path, true)
}

/// The test pipeline reading `port` with its source's `keys`, written in `dir`.
fn pipeline(dir: &Path, port: u16, keys: &[(&str, Scalar)]) -> PathBuf {
    base(dir, source(dir, port).set_all(keys)).write(dir)
}

/// A replica id of its own for the test writing to `dir` (tests stream in parallel).
fn server_id(dir: &Path) -> u32 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    dir.hash(&mut h);
    10_000 + (h.finish() % 1_000_000) as u32
}

/// [`pipeline`] with `snapshot.mode: initial`: a snapshot, then the stream.
fn streaming_pipeline(dir: &Path, port: u16, keys: &[(&str, Scalar)]) -> PathBuf {
    let source = source(dir, port).set("snapshot.mode", "initial");
    base(dir, source.set_all(keys)).write(dir)
}

/// [`streaming_pipeline`] with `type: mariadb`.
fn mariadb_pipeline(dir: &Path, port: u16, keys: &[(&str, Scalar)]) -> PathBuf {
    let source = source_of("mariadb", dir, port).set("snapshot.mode", "initial");
    base(dir, source.set_all(keys)).write(dir)
}

/// [`streaming_pipeline`] capturing database `db`.
fn captured_pipeline(dir: &Path, port: u16, db: &str) -> PathBuf {
    streaming_pipeline(dir, port, &[("database.include.list", db.into())])
}

/// `pipeline` (a test pipeline's parts, under `dir`) with its sink writing into a FIFO that the
/// test reads at its own pace, written as `dir/first.yaml`: backpressure then holds the
/// pipeline where the test stops reading, whatever the machine's speed. Returns the file and
/// the FIFO.
fn fifo_pipeline(dir: &Path, pipeline: Pipeline) -> (PathBuf, PathBuf) {
    let fifo = sluice_test_support::pg::make_fifo(dir);
    let sink = file_sink(&fifo).set("fsync", false);
    let file = pipeline
        .without_sinks()
        .sink(sink)
        .write_as(&dir.join("first.yaml"));
    (file, fifo)
}

/// The log and last `error:` line of a running pipeline that stops by itself, failing.
fn failed(mut child: std::process::Child) -> (String, String) {
    let status = child.wait().unwrap();
    let log = sluice_test_support::pg::log_of(&child);
    assert!(!status.success(), "{log}");
    let e = log
        .lines()
        .rfind(|l| l.starts_with("error:"))
        .unwrap_or_default()
        .to_owned();
    (log, e)
}

fn run_ok(path: &Path) -> String {
    let o = sluice(&["run", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    err
}

/// The one `error:` line of a failed run (exit code 1 at run time, 3 for an invalid pipeline file).
fn error_line(path: &Path) -> String {
    let o = sluice(&["run", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(matches!(o.status.code(), Some(1 | 3)), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err.lines()
        .rfind(|l| l.starts_with("error:"))
        .unwrap_or_default()
        .to_owned()
}

/// The fixture's statements for `table` only (its CREATE TABLE and INSERT), from setup.sql.
fn setup_of(table: &str) -> String {
    let setup = std::fs::read_to_string(format!("{FIXTURES}/setup.sql")).unwrap();
    setup
        .split(';')
        .filter(|s| {
            let s = s.trim_start_matches(|c: char| c.is_whitespace());
            let s: String = s
                .lines()
                .filter(|l| !l.starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n");
            s.contains(&format!("TABLE {table} (")) || s.contains(&format!("INTO {table} VALUES"))
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// Our output in `dir` from line `skip` on, database `db` renamed to Debezium's fixture's
/// `inventory`, blanked, one event per line.
fn ours(dir: &Path, db: &str, skip: usize) -> String {
    std::fs::read_to_string(dir.join("out.jsonl"))
        .unwrap()
        .lines()
        .skip(skip)
        .map(|l| format!("{}\n", blank(&l.replace(db, "inventory"))))
        .collect()
}

/// Blanks what differs from run to run beyond `normalize`: the binlog file and position.
fn blank(line: &str) -> String {
    let pos = regex::Regex::new(r#""(pos)":\d+"#).unwrap();
    let file = regex::Regex::new(r#""(file)":"[^"]*""#).unwrap();
    let line = normalize(line);
    let line = pos.replace_all(&line, "\"$1\":0");
    file.replace_all(&line, "\"$1\":\"\"").into_owned()
}

/// Debezium's events of `basic` in the fixture whose `op` `keep` selects (a tombstone's is
/// null), blanked, one per line.
fn debezium_basic(keep: impl Fn(&Json) -> bool) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/reference.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| {
            let j: Json = serde_json::from_str(l).unwrap();
            j["topic"] == "dbserver1.inventory.basic" && keep(&j["value"]["payload"]["op"])
        })
        .map(|l| format!("{}\n", blank(l)))
        .collect()
}

#[test]
fn the_snapshot_matches_debezium_byte_for_byte() {
    let server = mariadb::server();
    // Debezium's fixture captured database `inventory`: the topics and schema names carry it.
    let db = mariadb::database("inventory");
    mariadb::sql(&db, &setup_of("basic"));
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(
        dir.path(),
        server.port,
        &[("database.include.list", "inventory".into())],
    );
    run_ok(&path);
    let ours = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    let theirs = debezium_basic(|op| op == "r");
    // Debezium's run had a second table after `basic` (`types`, tested in types.rs): its last row of
    // `basic` is `last_in_data_collection`, where a snapshot of `basic` alone ends with `last`.
    let theirs = theirs.replace(
        "\"snapshot\":\"last_in_data_collection\"",
        "\"snapshot\":\"last\"",
    );
    let ours: String = ours.lines().map(|l| format!("{}\n", blank(l))).collect();
    assert_eq!(ours.lines().count(), 3, "{ours}");
    assert_same_events(&ours, &theirs, "mysql snapshot of `basic`");
    // The snapshot's position is MariaDB's for the consistent snapshot.
    let first: Json = serde_json::from_str(
        std::fs::read_to_string(dir.path().join("out.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let source = &first["value"]["payload"]["source"];
    assert!(
        source["file"].as_str().unwrap().starts_with("binlog."),
        "{source}"
    );
    // initial_only: a second start with the completed snapshot stored reads nothing.
    let again = run_ok(&path);
    assert!(again.contains("nothing to do"), "{again}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.jsonl"))
            .unwrap()
            .lines()
            .count(),
        3
    );
}

#[test]
fn bad_setups_get_one_line_that_says_what_to_change() {
    let dir = tempfile::tempdir().unwrap();
    // The machine's own MariaDB runs with the binlog off.
    let plain: u16 = std::env::var("SLUICE_MARIADB_NOBINLOG_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3306);
    let e = error_line(&pipeline(dir.path(), plain, &[]));
    assert!(
        e.contains("binlog is off") && e.contains("--log-bin"),
        "{e}"
    );
    // A character set the source does not decode is named, with the way out.
    let server = mariadb::server();
    let db = mariadb::database("bad_setups");
    mariadb::sql(
        &db,
        "CREATE TABLE z (id INT PRIMARY KEY, name VARCHAR(9) CHARACTER SET sjis)",
    );
    let e = error_line(&pipeline(
        dir.path(),
        server.port,
        &[("database.include.list", db.as_str().into())],
    ));
    assert!(
        e.contains("`bad_setups.z`") && e.contains("`sjis`") && e.contains("cp932"),
        "{e}"
    );
    // Two pipelines reading as one replica id: one of them is told which key to change.
    mariadb::sql(&db, "CREATE TABLE dup (id INT PRIMARY KEY)");
    let only_dup = [("table.include.list", Scalar::from(format!("{db}\\.dup")))];
    let streaming = dir.path().join("streaming");
    std::fs::create_dir_all(&streaming).unwrap();
    let first = streaming_pipeline(&streaming, server.port, &only_dup);
    mariadb::sql(&db, "INSERT INTO dup VALUES (1)");
    let mut child = sluice_test_support::pg::start(&first, &[]);
    let id = server_id(&streaming);
    let second = dir.path().join("second");
    std::fs::create_dir_all(&second).unwrap();
    let same_id = source(&second, server.port)
        .set_all(&only_dup)
        .set("snapshot.mode", "no_data")
        .set("database.server.id", id);
    let second = base(&second, same_id).write(&second);
    // The first one streams once a row inserted after its snapshot reaches its file.
    sluice_test_support::pg::wait_lines(&streaming, 1, &mut child);
    mariadb::sql(&db, "INSERT INTO dup VALUES (2)");
    sluice_test_support::pg::wait_lines(&streaming, 2, &mut child);
    // The server keeps one of the two connections: the other pipeline stops, saying why.
    let mut other = sluice_test_support::pg::start(&second, &[]);
    let started = std::time::Instant::now();
    let (stopped, running) = loop {
        if child.try_wait().unwrap().is_some() {
            break (child, other);
        }
        if other.try_wait().unwrap().is_some() {
            break (other, child);
        }
        assert!(started.elapsed().as_secs() < 60, "both pipelines still run");
        mariadb::sql(&db, "REPLACE INTO dup VALUES (3)");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let log = sluice_test_support::pg::log_of(&stopped);
    let e = log
        .lines()
        .rfind(|l| l.starts_with("error:"))
        .unwrap_or_default();
    assert!(e.contains(&format!("`database.server.id: {id}`")), "{log}");
    sluice_test_support::pg::stop(&running);
    sluice_test_support::pg::finish(running);
    // Truncate events are not emitted yet: a list without `t` is refused at its line.
    let e = error_line(&pipeline(
        dir.path(),
        server.port,
        &[("skipped.operations", "u".into())],
    ));
    assert!(e.contains("keep `t`"), "{e}");
    // Nobody listening.
    let e = error_line(&pipeline(
        dir.path(),
        sluice_test_support::pg::free_port(),
        &[("connect.timeout.ms", 2000u32.into())],
    ));
    assert!(e.contains("connecting to 127.0.0.1:"), "{e}");
}

#[test]
fn the_example_pipeline_snapshots_a_database() {
    let server = mariadb::server();
    let db = mariadb::database("example");
    mariadb::sql(&db, &setup_of("basic"));
    let dir = tempfile::tempdir().unwrap();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/pipelines/mysql-file.yaml");
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", example])
        .env("MYSQL_PORT", server.port.to_string())
        .env("MYSQL_DATABASE", &db)
        .env("SLUICE_DATA_DIR", dir.path())
        .env("SLUICE_OUT_DIR", dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = std::fs::read_to_string(dir.path().join("mysql-file/events.jsonl")).unwrap();
    let events: Vec<Json> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<i64> = events
        .iter()
        .filter(|e| e["topic"] != "dbserver1")
        .map(|e| e["value"]["after"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3]);
    // The schema change events describe the captured database only (as the example asks).
    let described: Vec<&str> = events
        .iter()
        .filter(|e| e["topic"] == "dbserver1")
        .filter_map(|e| e["value"]["ddl"].as_str())
        .collect();
    assert_eq!(described.len(), 6, "{described:?}");
    assert!(
        described[5].starts_with("CREATE TABLE `basic`"),
        "{described:?}"
    );
    assert!(dir
        .path()
        .join("mysql-file/mysql-schema-history.jsonl")
        .exists());
}

/// The fixture's changes to `table` only, from changes.sql (transactions kept).
fn changes_of(table: &str) -> String {
    let changes = std::fs::read_to_string(format!("{FIXTURES}/changes.sql")).unwrap();
    changes
        .lines()
        .filter(|l| !l.starts_with("--") && !l.starts_with("USE "))
        .filter(|l| {
            let dml = l.contains(" INTO ")
                || l.starts_with("UPDATE ")
                || l.starts_with("DELETE ")
                || l.starts_with("ALTER TABLE ");
            !dml || l.contains(&format!(" {table} "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn streamed_changes_match_debezium_byte_for_byte() {
    let server = mariadb::server();
    // As the snapshot test, in a database named as Debezium's fixture's: `inventory_stream`
    // is renamed to `inventory` in our output before comparing.
    let db = mariadb::database("inventory_stream");
    mariadb::sql(&db, &setup_of("basic"));
    let dir = tempfile::tempdir().unwrap();
    let path = captured_pipeline(dir.path(), server.port, &db);
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), 3, &mut child);
    mariadb::sql(&db, &changes_of("basic"));
    // c 4, u 1, d 2 + tombstone, d 3 + tombstone, c 30, c 5, c 6, then (after an ALTER TABLE
    // adding, dropping and widening columns) c 8, u 8 with the new schema.
    sluice_test_support::pg::wait_lines(dir.path(), 3 + 11, &mut child);
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let ours = ours(dir.path(), &db, 3);
    let theirs = debezium_basic(|op| op != "r");
    assert_same_events(&ours, &theirs, "mysql stream of `basic`");
    // `source.pos` (blanked above) is the rows event's own position in the binlog, as Debezium
    // writes it: checked against the server's `SHOW BINLOG EVENTS`.
    let streamed = sluice_test_support::pg::lines(dir.path());
    let source = &streamed[3]["value"]["payload"]["source"];
    let file = source["file"].as_str().unwrap();
    let rows_events: Vec<u64> = mariadb::sql("", &format!("SHOW BINLOG EVENTS IN '{file}'"))
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            f[2].ends_with("_rows_v1").then(|| f[1].parse().unwrap())
        })
        .collect();
    for e in &streamed[3..] {
        if let Some(pos) = e["value"]["payload"]["source"]["pos"].as_u64() {
            assert!(
                rows_events.contains(&pos),
                "{pos} is not a rows event: {rows_events:?}"
            );
        }
    }
    // A restart resumes after the last committed transaction: nothing again.
    mariadb::sql(&db, "INSERT INTO basic (id, name) VALUES (7, 'seven')");
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), 15, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(500));
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let all = sluice_test_support::pg::lines(dir.path());
    assert_eq!(all.len(), 15, "no duplicate after the restart");
    assert_eq!(all[14]["value"]["payload"]["after"]["id"], 7);
}

/// Stopped after its snapshot, the source is restarted once the table was altered and written
/// to: each row decodes with the schema in force when it was written (the TABLE_MAP's full
/// metadata), equal to Debezium's events.
#[test]
fn a_restart_across_a_schema_change_decodes_every_row_with_its_own_schema() {
    let server = mariadb::server();
    let db = mariadb::database("inventory_across");
    mariadb::sql(&db, &setup_of("basic"));
    let dir = tempfile::tempdir().unwrap();
    let path = captured_pipeline(dir.path(), server.port, &db);
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), 3, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    mariadb::sql(&db, &changes_of("basic"));
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), 3 + 11, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let ours = ours(dir.path(), &db, 3);
    assert_same_events(
        &ours,
        &debezium_basic(|op| op != "r"),
        "mysql stream of `basic` after a restart",
    );
}

/// A table created while the source streams is captured from its first row (the filters select
/// it; its schema comes from its TABLE_MAP events).
#[test]
fn a_table_created_after_the_snapshot_is_captured() {
    let server = mariadb::server();
    let db = mariadb::database("mysql_created_later");
    mariadb::sql(
        &db,
        "CREATE TABLE first (id INT PRIMARY KEY); INSERT INTO first VALUES (1)",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = captured_pipeline(dir.path(), server.port, &db);
    let mut child = sluice_test_support::pg::start(&path, &[]);
    sluice_test_support::pg::wait_lines(dir.path(), 1, &mut child);
    mariadb::sql(
        &db,
        "CREATE TABLE later (id INT PRIMARY KEY, v VARCHAR(5) NOT NULL); INSERT INTO later VALUES (7, 'seven')",
    );
    sluice_test_support::pg::wait_lines(dir.path(), 2, &mut child);
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let lines = sluice_test_support::pg::lines(dir.path());
    assert_eq!(lines[1]["topic"], format!("dbserver1.{db}.later"));
    assert_eq!(
        lines[1]["value"]["payload"]["after"],
        serde_json::json!({"id": 7, "v": "seven"})
    );
    assert_eq!(lines[1]["key"]["payload"], serde_json::json!({"id": 7}));
}
