//! The PostgreSQL source against the real server (address from `SLUICE_TEST_PG_HOST` /
//! `SLUICE_TEST_PG_PORT`, default 127.0.0.1:5432, user `postgres`, trust auth). Every test uses
//! its own database, slot and publication, so tests run in parallel.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

fn host() -> String {
    std::env::var("SLUICE_TEST_PG_HOST").unwrap_or_else(|_| "127.0.0.1".into())
}
fn port() -> String {
    std::env::var("SLUICE_TEST_PG_PORT").unwrap_or_else(|_| "5432".into())
}

fn psql(db: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-U",
            "postgres",
            "-h",
            &host(),
            "-p",
            &port(),
            "-d",
            db,
            "-c",
            sql,
        ])
        .output()
        .expect("psql");
    assert!(
        out.status.success(),
        "psql failed on {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh database named after the test (slots of an earlier run dropped first).
fn fresh_db(name: &str) -> String {
    let db = format!("sluice_{name}");
    psql("postgres", &format!("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '{db}' AND NOT active"));
    psql(
        "postgres",
        &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
    );
    psql("postgres", &format!("CREATE DATABASE {db}"));
    db
}

fn drop_db(db: &str) {
    let _ = Command::new("psql")
        .args(["-X", "-q", "-U", "postgres", "-h", &host(), "-p", &port(), "-d", "postgres", "-c",
            &format!("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '{db}' AND NOT active")])
        .output();
    let _ = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-U",
            "postgres",
            "-h",
            &host(),
            "-p",
            &port(),
            "-d",
            "postgres",
            "-c",
            &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
        ])
        .output();
}

fn pipeline(dir: &Path, db: &str, extra_source: &str, schemas: bool) -> PathBuf {
    let text = format!(
        "name: {db}\ndata_dir: {d}/data\noffsets: {{ flush_interval: 50ms }}\nrestart: {{ max_retries: 0 }}\n\
source:\n  type: postgres\n  database.hostname: {h}\n  database.port: {p}\n  database.user: postgres\n  database.dbname: {db}\n  \
topic.prefix: dbserver1\n  slot.name: {db}\n  publication.name: {db}\n  publication.autocreate.mode: filtered\n  status.update.interval.ms: 200\n{extra_source}\
sinks:\n  - name: out\n    type: file\n    path: {d}/out.jsonl\n    schemas.enable: {schemas}\n",
        d = dir.display(),
        h = host(),
        p = port(),
    );
    let path = dir.join("pipeline.yaml");
    std::fs::write(&path, text).expect("write pipeline");
    path
}

fn start(pipeline: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg(pipeline)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sluice")
}

fn lines(dir: &Path) -> Vec<Json> {
    let text = std::fs::read_to_string(dir.join("out.jsonl")).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
    complete
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

fn wait_lines(dir: &Path, n: usize, child: &mut Child) {
    let start = Instant::now();
    while lines(dir).len() < n {
        if child.try_wait().expect("poll").is_some() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            panic!("sluice exited early:\n{err}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "timed out waiting for {n} lines"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn finish(child: Child) -> String {
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sluice failed: {stderr}");
    stderr
}

fn stop(child: &Child) {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
}

fn normalize(text: &str) -> String {
    let numbers = regex::Regex::new(r#""(ts_ms|ts_us|ts_ns|txId|lsn)":(-?\d+|null)"#).unwrap();
    let strings = regex::Regex::new(r#""(sequence|version|db)":"(?:[^"\\]|\\.)*""#).unwrap();
    let text = numbers.replace_all(text, "\"$1\":0");
    strings.replace_all(&text, "\"$1\":\"\"").into_owned()
}

const CUSTOMERS: &str = "create table customers (id serial primary key, first_name varchar(255) not null, last_name varchar(255), email varchar(255) unique, ssn char(11), balance numeric(12,2), created_at timestamptz default now(), birth date, active boolean, notes text, tags jsonb);";
const ROWS: &str = r#"insert into customers (first_name,last_name,email,ssn,balance,created_at,birth,active,notes,tags) values
 ('Anne','Kretchmar','annek@noanswer.org','123-45-6789',1234.56,'2024-03-01 10:15:30.123456+00','1980-05-17',true,'plain note','{"vip": true, "n": [1,2]}'),
 ('Zoë','Ürban-Ω',null,null,-0.50,'1999-12-31 23:59:59+02','1970-01-01',false,E'line1\nline2\t"quoted" \\ back\u0001ctl','{}'),
 ('Sally','Thomas','sally@example.com','000-00-0000',0,'2030-01-01 00:00:00+00',null,null,null,null),
 ('日本','語',  'jp@example.jp', '999-99-9999', 9999999999.99, '1969-07-20 20:17:40.5+00', '1600-01-01', true, '€ and 😀', '[1, "a", null]');"#;

/// The same rows and changes that produced `tests/fixtures/debezium/customers_stream_schemas.jsonl`
/// with Debezium 3.6.3 give byte-identical events (run-dependent fields blanked, and `db`, as
/// every test has its own database).
#[test]
fn snapshot_and_stream_match_debezium_byte_for_byte() {
    let db = fresh_db("conformance");
    psql(&db, CUSTOMERS);
    psql(&db, ROWS);
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.customers\n",
        true,
    );
    let mut child = start(&file, &[]);
    wait_lines(dir.path(), 4, &mut child);
    psql(&db, "insert into customers (first_name,last_name,email,ssn,balance,created_at,birth,active,notes,tags) values ('Edward','Walker','ed@walker.com','111-22-3333',12.5,'2020-02-29 12:00:00+00','2000-02-29',true,'new','{\"a\":1}')");
    psql(
        &db,
        "update customers set balance = balance + 1, notes = 'updated' where id = 1",
    );
    psql(&db, "delete from customers where id = 3");
    wait_lines(dir.path(), 8, &mut child);
    stop(&child);
    finish(child);
    let ours = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/debezium/customers_stream_schemas.jsonl");
    let theirs = std::fs::read_to_string(fixture).unwrap();
    for (i, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        assert_eq!(
            normalize(a),
            normalize(b),
            "event {i} differs from Debezium's"
        );
    }
    assert_eq!(ours.lines().count(), theirs.lines().count());
    drop_db(&db);
}

/// Replays a key's events: the state Sluice's output says the table is in.
fn replay(events: &[Json]) -> BTreeMap<i64, Json> {
    let mut state = BTreeMap::new();
    for e in events {
        let key = e["key"]["id"].as_i64().expect("key");
        if e["value"].is_null() {
            state.remove(&key);
            continue;
        }
        match e["value"]["op"].as_str() {
            Some("r" | "c" | "u") => {
                state.insert(key, e["value"]["after"].clone());
            }
            Some("d") => {
                state.remove(&key);
            }
            other => panic!("unexpected op {other:?}"),
        }
    }
    state
}

fn table_state(db: &str) -> BTreeMap<i64, Json> {
    psql(db, "select id, n, note from items order by id")
        .lines()
        .map(|l| {
            let mut parts = l.splitn(3, '|');
            let id: i64 = parts.next().unwrap().parse().unwrap();
            let n: i64 = parts.next().unwrap().parse().unwrap();
            let note = parts.next().unwrap();
            (id, serde_json::json!({"id": id, "n": n, "note": note}))
        })
        .collect()
}

const WRITER: &str = "do $$ begin for i in 1..400 loop \
    insert into items (n, note) values (i, 'w' || i); \
    update items set n = n + 1, note = 'u' || i where id = 1 + (i * 7) % 1500; \
    delete from items where id = 2 + (i * 13) % 1500; \
    commit; perform pg_sleep(0.002); end loop; end $$";

#[test]
fn snapshot_meets_the_stream_with_a_concurrent_writer() {
    let db = fresh_db("concurrent");
    psql(
        &db,
        "create table items (id serial primary key, n int not null, note text not null)",
    );
    psql(
        &db,
        "insert into items (n, note) select g, 'seed' || g from generate_series(1, 1500) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.items\n  snapshot.fetch.size: 100\n",
        false,
    );
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || psql(&db, WRITER))
    };
    let mut child = start(&file, &["--stop-when-idle", "3s"]);
    writer.join().expect("writer");
    let _ = &mut child;
    finish(child);
    let events = lines(dir.path());
    // No duplicate across the boundary: a key is read by the snapshot or created by the
    // stream, once.
    let mut born: BTreeMap<i64, usize> = BTreeMap::new();
    for e in &events {
        if matches!(e["value"]["op"].as_str(), Some("r" | "c")) {
            *born.entry(e["key"]["id"].as_i64().unwrap()).or_default() += 1;
        }
    }
    assert!(
        born.values().all(|n| *n == 1),
        "a key was both snapshotted and created, or twice"
    );
    // No gap: replaying the output gives the table's final state.
    assert_eq!(replay(&events), table_state(&db));
    drop_db(&db);
}

#[test]
fn kill_9_during_the_stream_loses_nothing() {
    let db = fresh_db("kill_stream");
    psql(
        &db,
        "create table items (id serial primary key, n int not null, note text not null)",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.items\n",
        false,
    );
    let mut child = start(&file, &[]);
    // Wait until the (empty) snapshot is done and streaming runs.
    let slot_active = || {
        psql(
            &db,
            &format!(
                "select count(*) from pg_replication_slots where slot_name = '{db}' and active"
            ),
        )
        .trim()
            == "1"
    };
    let t0 = Instant::now();
    while !slot_active() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "slot never became active"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            psql(&db, "do $$ begin for i in 1..3000 loop insert into items (n, note) values (i, 'x'); commit; end loop; end $$")
        })
    };
    wait_lines(dir.path(), 500, &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    writer.join().unwrap();
    let child = start(&file, &["--stop-when-idle", "3s"]);
    finish(child);
    let mut ids: Vec<i64> = lines(dir.path())
        .iter()
        .map(|e| e["key"]["id"].as_i64().unwrap())
        .collect();
    let total = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids,
        (1..=3000).collect::<Vec<_>>(),
        "rows were lost across kill -9"
    );
    assert!(total >= 3000);
    drop_db(&db);
}

#[test]
fn kill_9_during_the_snapshot_restarts_it_and_loses_nothing() {
    let db = fresh_db("kill_snapshot");
    psql(
        &db,
        "create table items (id serial primary key, n int not null, note text not null)",
    );
    psql(
        &db,
        "insert into items (n, note) select g, repeat('x', 200) from generate_series(1, 60000) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.items\n  snapshot.fetch.size: 500\n",
        false,
    );
    // The first run writes into a FIFO that this test reads at its own pace: backpressure
    // holds the snapshot open until the kill, whatever the machine's speed.
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let yaml = std::fs::read_to_string(&file).unwrap();
    let out = format!("{}/out.jsonl", dir.path().display());
    let first_run = yaml
        .replace(&out, &format!("{}\n    fsync: false", fifo.display()))
        .replace(
            "offsets:",
            "max_queue_size: 1000\nmax_batch_size: 100\noffsets:",
        );
    let first_file = dir.path().join("first.yaml");
    std::fs::write(&first_file, first_run).unwrap();
    let mut child = start(&first_file, &[]);
    let mut seen: Vec<Json> = Vec::new();
    {
        use std::io::BufRead;
        let reader = std::io::BufReader::new(std::fs::File::open(&fifo).unwrap());
        for line in reader.lines().take(2000) {
            seen.push(serde_json::from_str(&line.unwrap()).unwrap());
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
    // The committed position at the kill is inside the snapshot (or nothing was committed yet).
    let offsets = std::fs::read_to_string(dir.path().join("data/offsets.json")).unwrap_or_default();
    assert!(
        !offsets.contains("lsn") || offsets.contains(r#"snapshot_completed\":false"#),
        "the kill landed after the snapshot: {offsets}"
    );
    assert_eq!(seen.len(), 2000);
    psql(
        &db,
        "insert into items (n, note) values (-1, 'after the crash')",
    );
    let child = start(&file, &["--stop-when-idle", "3s"]);
    finish(child);
    let mut events = lines(dir.path());
    events.extend(seen);
    let mut ids: Vec<i64> = events
        .iter()
        .map(|e| e["key"]["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids,
        (1..=60001).collect::<Vec<_>>(),
        "rows were lost across kill -9 in the snapshot"
    );
    drop_db(&db);
}

fn run_expecting_failure(file: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg(file)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "expected a failure:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
        .lines()
        .rfind(|l| l.starts_with("error:"))
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn bad_setups_give_one_actionable_line() {
    let db = fresh_db("bad_setup");
    psql(&db, "create table keyless (a int, b text)");
    // Missing REPLICATION privilege.
    psql(
        "postgres",
        "DROP ROLE IF EXISTS sluice_norepl; CREATE ROLE sluice_norepl LOGIN",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(dir.path(), &db, "", false);
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("database.user: postgres", "database.user: sluice_norepl");
    std::fs::write(&file, text).unwrap();
    let line = run_expecting_failure(&file);
    assert!(
        line.contains("lacks the REPLICATION privilege") && line.contains("ALTER ROLE"),
        "{line}"
    );
    // Slot in use by another process.
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.keyless\n",
        false,
    );
    let mut first = start(&file, &[]);
    let t0 = Instant::now();
    while psql(
        &db,
        &format!("select count(*) from pg_replication_slots where slot_name = '{db}' and active"),
    )
    .trim()
        != "1"
    {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "slot never became active"
        );
        assert!(
            first.try_wait().unwrap().is_none(),
            "the first pipeline stopped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let other = tempfile::tempdir().unwrap();
    let second = pipeline(
        other.path(),
        &db,
        "  table.include.list: public.keyless\n",
        false,
    );
    let line = run_expecting_failure(&second);
    assert!(line.contains("is in use by another process"), "{line}");
    // A publication that does not cover the captured table.
    psql(
        &db,
        "create table other (id int primary key); create publication narrow for table other",
    );
    let third_dir = tempfile::tempdir().unwrap();
    let third = pipeline(
        third_dir.path(),
        &db,
        "  table.include.list: public.keyless\n",
        false,
    );
    let yaml = std::fs::read_to_string(&third)
        .unwrap()
        .replace(
            &format!("publication.name: {db}"),
            "publication.name: narrow",
        )
        .replace(
            "publication.autocreate.mode: filtered",
            "publication.autocreate.mode: disabled",
        )
        .replace(
            &format!("slot.name: {db}"),
            &format!("slot.name: {db}_narrow"),
        );
    std::fs::write(&third, yaml).unwrap();
    let line = run_expecting_failure(&third);
    assert!(
        line.contains("publication `narrow` does not publish public.keyless")
            && line.contains("ALTER PUBLICATION"),
        "{line}"
    );
    stop(&first);
    let stderr = finish(first);
    // A table without a primary key is captured with a warning.
    assert!(stderr.contains("has no primary key"), "{stderr}");
    drop_db(&db);
}

/// Every type of `tests/fixtures/debezium/types.sql`, snapshotted under three combinations of
/// `time.precision.mode`, `decimal.handling.mode`, `binary.handling.mode` and
/// `interval.handling.mode`, equals Debezium 3.6.3's output for the same rows.
#[test]
fn types_match_debezium_in_every_mode() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/debezium");
    let types_sql = std::fs::read_to_string(fixtures.join("types.sql")).unwrap();
    let modes = [
        ("a", ""),
        ("b", "  time.precision.mode: connect\n  decimal.handling.mode: double\n  binary.handling.mode: hex\n  interval.handling.mode: string\n"),
        ("c", "  time.precision.mode: adaptive_time_microseconds\n  decimal.handling.mode: string\n  binary.handling.mode: base64\n"),
    ];
    for (name, extra) in modes {
        let db = fresh_db(&format!("types_{name}"));
        psql(&db, &types_sql);
        let dir = tempfile::tempdir().unwrap();
        let source =
            format!("  table.include.list: public.types\n  snapshot.mode: initial_only\n{extra}");
        let file = pipeline(dir.path(), &db, &source, true);
        finish(start(&file, &[]));
        let ours = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
        let theirs = std::fs::read_to_string(fixtures.join(format!("types_{name}.jsonl"))).unwrap();
        assert_eq!(ours.lines().count(), theirs.lines().count(), "mode {name}");
        for (i, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
            assert_eq!(
                normalize(a),
                normalize(b),
                "mode {name}, row {i} differs from Debezium's"
            );
        }
        drop_db(&db);
    }
}

/// Waits until the test's slot is held by a walsender, and returns its pid.
fn active_slot_pid(db: &str, child: &mut Child) -> i32 {
    let t0 = Instant::now();
    loop {
        let pid = psql(db, &format!("select coalesce(max(active_pid), 0) from pg_replication_slots where slot_name = '{db}'"));
        let pid: i32 = pid.trim().parse().unwrap_or(0);
        if pid != 0 {
            return pid;
        }
        assert!(child.try_wait().unwrap().is_none(), "sluice stopped");
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "slot never became active"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The replication connection is killed by the server mid-stream: the pipeline reconnects
/// from the committed position and nothing is lost.
#[test]
fn connection_loss_mid_stream_reconnects_without_loss() {
    let db = fresh_db("conn_loss");
    psql(
        &db,
        "create table items (id serial primary key, n int not null, note text not null)",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.items\n",
        false,
    );
    let yaml = std::fs::read_to_string(&file).unwrap().replace(
        "restart: { max_retries: 0 }",
        "restart: { max_retries: 20, initial_backoff: 50ms, max_backoff: 500ms }",
    );
    std::fs::write(&file, yaml).unwrap();
    let mut child = start(&file, &[]);
    let pid = active_slot_pid(&db, &mut child);
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            psql(&db, "do $$ begin for i in 1..3000 loop insert into items (n, note) values (i, 'x'); commit; end loop; end $$")
        })
    };
    wait_lines(dir.path(), 300, &mut child);
    psql("postgres", &format!("select pg_terminate_backend({pid})"));
    writer.join().unwrap();
    wait_lines(dir.path(), 3000, &mut child);
    stop(&child);
    let stderr = finish(child);
    assert!(
        stderr.contains("restarting the pipeline from the last committed position"),
        "no reconnect happened:\n{stderr}"
    );
    let mut ids: Vec<i64> = lines(dir.path())
        .iter()
        .map(|e| e["key"]["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids,
        (1..=3000).collect::<Vec<_>>(),
        "rows were lost across the connection loss"
    );
    drop_db(&db);
}

/// A sink stalled for several times `wal_sender_timeout` (set to 2s for the test) does not
/// break the replication connection: keepalives are answered under backpressure.
#[test]
fn a_sink_stalled_past_wal_sender_timeout_keeps_the_connection() {
    let db = fresh_db("stalled");
    psql(
        &db,
        "create table items (id serial primary key, n int not null, note text not null)",
    );
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.items\n",
        false,
    );
    let out = format!("{}/out.jsonl", dir.path().display());
    let yaml = std::fs::read_to_string(&file)
        .unwrap()
        .replace(&out, &format!("{}\n    fsync: false", fifo.display()))
        .replace(
            "offsets:",
            "max_queue_size: 200\nmax_batch_size: 50\noffsets:",
        );
    std::fs::write(&file, yaml).unwrap();
    psql("postgres", "ALTER SYSTEM SET wal_sender_timeout = '2s'");
    psql("postgres", "SELECT pg_reload_conf()");
    let mut child = start(&file, &[]);
    let reader = std::fs::File::open(&fifo).unwrap();
    let pid = active_slot_pid(&db, &mut child);
    psql(
        &db,
        "insert into items (n, note) select g, repeat('y', 500) from generate_series(1, 20000) g",
    );
    // Nobody reads the FIFO for 7 s: the sink, then the queues, then the source are blocked.
    std::thread::sleep(Duration::from_secs(7));
    let still = psql(
        "postgres",
        &format!("select count(*) from pg_stat_replication where pid = {pid}"),
    );
    psql("postgres", "ALTER SYSTEM RESET wal_sender_timeout");
    psql("postgres", "SELECT pg_reload_conf()");
    use std::io::BufRead;
    let mut ids = Vec::new();
    for line in std::io::BufReader::new(reader).lines().take(20000) {
        let e: Json = serde_json::from_str(&line.unwrap()).unwrap();
        ids.push(e["key"]["id"].as_i64().unwrap());
    }
    stop(&child);
    let stderr = finish(child);
    assert_eq!(
        still.trim(),
        "1",
        "the walsender went away while the sink was stalled"
    );
    assert!(
        !stderr.contains("restarting"),
        "the pipeline had to reconnect:\n{stderr}"
    );
    assert_eq!(ids, (1..=20000).collect::<Vec<_>>());
    drop_db(&db);
}

/// Streaming edge cases against Debezium 3.6.3's output for the same statements
/// (`tests/fixtures/debezium/edge_*.sql`): REPLICA IDENTITY FULL (`before` of updates and
/// deletes), an unchanged TOASTed column (Debezium's placeholder), a primary-key change (delete,
/// tombstone, create), a column added mid-stream (the new schema, with its default), and a
/// truncate with `skipped.operations: none`.
#[test]
fn stream_edge_cases_match_debezium() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/debezium");
    let db = fresh_db("edge");
    psql(
        &db,
        &std::fs::read_to_string(fixtures.join("edge_setup.sql")).unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let source = "  table.include.list: public.edge_full,public.edge_toast,public.edge_pk\n  snapshot.mode: no_data\n  skipped.operations: none\n";
    let file = pipeline(dir.path(), &db, source, true);
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    psql(
        &db,
        &std::fs::read_to_string(fixtures.join("edge_changes.sql")).unwrap(),
    );
    let theirs = std::fs::read_to_string(fixtures.join("edge_stream.jsonl")).unwrap();
    wait_lines(dir.path(), theirs.lines().count(), &mut child);
    stop(&child);
    finish(child);
    let ours = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert_eq!(ours.lines().count(), theirs.lines().count());
    for (i, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        assert_eq!(
            normalize(a),
            normalize(b),
            "event {i} differs from Debezium's"
        );
    }
    drop_db(&db);
}

/// `provide.transaction.metadata`: BEGIN/END records and `transaction` blocks equal Debezium's
/// (transaction ids are `xid:lsn` and are blanked like the other run-dependent LSNs).
#[test]
fn transaction_metadata_matches_debezium() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/debezium");
    let db = fresh_db("tx_meta");
    psql(
        &db,
        &std::fs::read_to_string(fixtures.join("tx_setup.sql")).unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let source = "  table.include.list: public.tx_a,public.tx_b\n  snapshot.mode: no_data\n  provide.transaction.metadata: true\n";
    let file = pipeline(dir.path(), &db, source, true);
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    psql(
        &db,
        &std::fs::read_to_string(fixtures.join("tx_changes.sql")).unwrap(),
    );
    let theirs = std::fs::read_to_string(fixtures.join("tx_stream.jsonl")).unwrap();
    wait_lines(dir.path(), theirs.lines().count(), &mut child);
    stop(&child);
    finish(child);
    let ours = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    let tx_ids = regex::Regex::new(r#""id":"\d+:\d+""#).unwrap();
    let blank = |t: &str| {
        tx_ids
            .replace_all(&normalize(t), "\"id\":\"\"")
            .into_owned()
    };
    assert_eq!(ours.lines().count(), theirs.lines().count());
    for (i, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        assert_eq!(blank(a), blank(b), "record {i} differs from Debezium's");
    }
    // The ids themselves follow Debezium's scheme: xid:lsn.
    let first: Json = serde_json::from_str(ours.lines().next().unwrap()).unwrap();
    assert!(
        tx_ids.is_match(&format!("\"id\":{}", first["key"]["payload"]["id"])),
        "{first}"
    );
    drop_db(&db);
}

fn lsn_of(text: &str) -> u64 {
    let (hi, lo) = text.trim().split_once('/').expect("an LSN");
    (u64::from_str_radix(hi, 16).unwrap() << 32) | u64::from_str_radix(lo, 16).unwrap()
}

/// Heartbeat records have Debezium's shape; the slot moves forward while the captured table is
/// idle and the rest of the database writes (keepalives and heartbeats carry the position; with
/// the action query removed the slot still advances, through the keepalives alone); and
/// `heartbeat.action.query` runs (its inserts into the captured heartbeat table arrive).
#[test]
fn heartbeats_match_debezium_and_keep_the_slot_moving() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/debezium");
    let db = fresh_db("heartbeat");
    psql(&db, "create table quiet (id int primary key); create table hb (id serial primary key, at timestamptz); create table busy (id serial primary key, v text)");
    let dir = tempfile::tempdir().unwrap();
    let source = "  table.include.list: public.quiet,public.hb\n  snapshot.mode: no_data\n  heartbeat.interval.ms: 100\n  heartbeat.action.query: insert into hb (at) values (now())\n";
    let file = pipeline(dir.path(), &db, source, true);
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    // Writes to a table that is not captured (and not in the filtered publication).
    psql(
        &db,
        "insert into busy (v) select repeat('z', 100) from generate_series(1, 5000)",
    );
    let target = lsn_of(&psql(&db, "select pg_current_wal_lsn()"));
    let t0 = Instant::now();
    loop {
        let confirmed = psql(&db, &format!("select coalesce(confirmed_flush_lsn::text, '0/0') from pg_replication_slots where slot_name = '{db}'"));
        if lsn_of(&confirmed) >= target {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the slot stayed at {confirmed} behind {target:X}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    stop(&child);
    finish(child);
    let ours: Vec<String> = std::fs::read_to_string(dir.path().join("out.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let fixture = std::fs::read_to_string(fixtures.join("heartbeat.jsonl")).unwrap();
    let theirs = normalize(fixture.lines().next().unwrap());
    let beats: Vec<&String> = ours
        .iter()
        .filter(|l| l.starts_with(r#"{"topic":"__debezium-heartbeat.dbserver1""#))
        .collect();
    assert!(!beats.is_empty(), "no heartbeat records");
    assert_eq!(normalize(beats[0]), theirs);
    // The action query's inserts were captured too.
    assert!(ours
        .iter()
        .any(|l| l.starts_with(r#"{"topic":"dbserver1.public.hb""#)));
    drop_db(&db);
}

/// `database.sslmode: require` encrypts both connections (the SQL one and the replication one),
/// as `pg_stat_ssl` shows; `verify-full` without a CA file is a one-line setup error.
#[test]
fn tls_require_encrypts_both_connections() {
    if psql("postgres", "show ssl").trim() != "on" {
        eprintln!("skipped: this PostgreSQL runs without TLS");
        return;
    }
    let db = fresh_db("tls");
    psql(&db, "create table items (id int primary key)");
    psql(&db, "insert into items select generate_series(1, 10)");
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.items\n  database.sslmode: require\n",
        false,
    );
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    wait_lines(dir.path(), 10, &mut child);
    let encrypted = psql(&db, &format!(
        "select count(*) from pg_stat_ssl s join pg_stat_activity a using (pid) where a.datname = '{db}' and a.application_name = 'sluice' and s.ssl"
    ));
    stop(&child);
    finish(child);
    assert_eq!(
        encrypted.trim(),
        "2",
        "the SQL and the replication connections should both use TLS"
    );
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.items\n  database.sslmode: verify-full\n",
        false,
    );
    let line = run_expecting_failure(&file);
    assert!(line.contains("need `database.sslrootcert`"), "{line}");
    drop_db(&db);
}
