//! PostgreSQL → Kafka, end to end, against the local PostgreSQL and Kafka broker (tansu):
//!
//! - throughput: streaming catch-up of `../shared/debezium/workload.sql` (100k inserts in 1,000
//!   transactions, an update of every 4th row, a delete of every 10th row with its tombstone:
//!   145k records) from a slot made before the workload ran, for JSON without schemas, JSON with
//!   schemas and Avro (through the test registry); events/s from start until the slot is
//!   confirmed past the workload (every record acknowledged by the broker), and peak RSS;
//! - latency at an offered load of 10k events/s (100-row transactions every 10 ms for 10 s):
//!   from the commit (`source.ts_ms`) to the record's arrival at a consumer, p50 / p99 /
//!   max. That includes the consumer's fetch, so it is an upper bound of commit → broker
//!   acknowledgement.
//!
//!     cargo bench --bench kafka          (SLUICE_TEST_PG_HOST/PORT, SLUICE_TEST_KAFKA)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a benchmark program

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice_test_support::{broker, pg, procstat, registry};

const RECORDS: usize = 145_000;

fn shared() -> PathBuf {
    std::env::var("SLUICE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

fn psql_file(db: &str, file: &Path) {
    let ok = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-v",
            "tbl=customers",
            "-U",
            "postgres",
        ])
        .args(["-h", &pg::host(), "-p", &pg::port(), "-d", db, "-f"])
        .arg(file)
        .stdout(Stdio::null())
        .status()
        .expect("psql")
        .success();
    assert!(ok, "psql -f {}", file.display());
}

fn nonce() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000_000_000)
        .unwrap_or(0)
}

fn pipeline(dir: &Path, db: &str, prefix: &str, sink: &str) -> PathBuf {
    let text = format!(
        "name: {db}\ndata_dir: {d}/data\noffsets: {{ flush_interval: 50ms }}\n\
source:\n  type: postgres\n  database.hostname: {h}\n  database.port: {p}\n  database.user: postgres\n  database.dbname: {db}\n  \
topic.prefix: {prefix}\n  slot.name: {db}\n  publication.name: {db}\n  publication.autocreate.mode: filtered\n  table.include.list: public.customers\n  snapshot.mode: no_data\n  status.update.interval.ms: 100\n\
sinks:\n{sink}",
        d = dir.display(),
        h = pg::host(),
        p = pg::port(),
    );
    let path = dir.join(format!("{prefix}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// A Kafka sink block on the shared broker with `extra` keys.
fn kafka_sink(extra: &str) -> String {
    format!(
        "  - name: kafka\n    type: kafka\n    bootstrap.servers: {}\n    producer: {{ broker.address.family: v4{} }}\n{extra}",
        broker::shared(),
        // Extra producer properties, e.g. `, compression.type: lz4`.
        std::env::var("SLUICE_BENCH_PRODUCER").unwrap_or_default()
    )
}

fn confirmed(db: &str) -> u64 {
    let text = pg::psql(
        db,
        &format!("select confirmed_flush_lsn from pg_replication_slots where slot_name = '{db}'"),
    );
    if text.trim().is_empty() {
        0
    } else {
        pg::lsn_of(&text)
    }
}

/// Streaming catch-up of the workload; returns (events/s, peak RSS MiB).
fn throughput(case: &str, sink: &str) -> (f64, u64) {
    let db = pg::fresh_db(&format!("bench_kafka_{case}"));
    psql_file(&db, &shared().join("debezium/schema.sql"));
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("bench_{case}_{}", nonce());
    let path = pipeline(dir.path(), &db, &prefix, sink);
    // The slot and the publication first (no events), then the workload.
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "--stop-when-idle", "1s"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    psql_file(&db, &shared().join("debezium/workload.sql"));
    let end = pg::lsn_of(&pg::psql(&db, "select pg_current_wal_lsn()"));
    let t0 = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while confirmed(&db) < end {
        assert!(
            t0.elapsed() < Duration::from_secs(600),
            "{case}: not done in 10 minutes"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "{case}: sluice stopped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let rss = procstat::peak_rss_mib(child.id());
    let walsender: u32 = pg::psql(
        &db,
        &format!(
            "select coalesce(active_pid, 0) from pg_replication_slots where slot_name = '{db}'"
        ),
    )
    .trim()
    .parse()
    .unwrap_or(0);
    println!(
        "  {case}: {elapsed:.2} s, sluice used {:.2} CPU-seconds, the server's walsender {:.2}",
        procstat::cpu_seconds(&child.id().to_string()),
        procstat::cpu_seconds(&walsender.to_string())
    );
    pg::stop(&child);
    let _ = child.wait();
    pg::drop_db(&db);
    (RECORDS as f64 / elapsed, rss)
}

/// Commit → consumer latency at 10k events/s; returns (p50, p99, max) in ms and the count.
fn latency() -> (i64, i64, i64, usize) {
    let db = pg::fresh_db("bench_kafka_latency");
    psql_file(&db, &shared().join("debezium/schema.sql"));
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("bench_latency_{}", nonce());
    let path = pipeline(
        dir.path(),
        &db,
        &prefix,
        &kafka_sink("    schemas.enable: false\n"),
    );
    let mut child = pg::start(&path, &[]);
    pg::active_slot_pid(&db, &mut child);
    let mut writer = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-U",
            "postgres",
            "-h",
            &pg::host(),
            "-p",
            &pg::port(),
            "-d",
            &db,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = writer.stdin.take().unwrap();
    // The topic exists once the first row went through.
    writeln!(
        stdin,
        "insert into customers (first_name) values ('warmup');"
    )
    .unwrap();
    let topic = format!("{prefix}.public.customers");
    let mut reader = broker::Reader::new(&broker::shared(), &[&topic]);
    let start = Instant::now();
    let mut next = start;
    for i in 0..1000 {
        writeln!(
            stdin,
            "insert into customers (first_name, email) select 'l', 'l{i}_' || g || '@x' from generate_series(1, 100) g;"
        )
        .unwrap();
        next += Duration::from_millis(10);
        while Instant::now() < next {
            reader.poll(Duration::from_millis(1));
        }
    }
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(60);
    while reader.records.len() < 100_001 && Instant::now() < deadline {
        reader.poll(Duration::from_millis(5));
    }
    let mut latencies = Vec::with_capacity(reader.records.len());
    for r in &reader.records {
        let v: serde_json::Value = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
        let commit = v["source"]["ts_ms"].as_i64().unwrap();
        latencies.push(r.received_ms - commit);
    }
    let _ = writer.wait();
    pg::stop(&child);
    let _ = child.wait();
    pg::drop_db(&db);
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    (
        at(0.5),
        at(0.99),
        *latencies.last().unwrap(),
        latencies.len(),
    )
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!(
        "PostgreSQL {} → Kafka (tansu at {}), {} cores",
        pg::psql("postgres", "show server_version").trim(),
        broker::shared(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let registry = registry::Registry::start();
    let cases = [
        // The source alone (encoding, no broker): the ceiling of the Kafka cases.
        (
            "null_plain",
            "  - name: discard\n    type: null\n    schemas.enable: false\n".to_owned(),
        ),
        ("json_plain", kafka_sink("    schemas.enable: false\n")),
        ("json_schemas", kafka_sink("    schemas.enable: true\n")),
        ("avro", kafka_sink(&registry.avro_sink(""))),
    ];
    let only = std::env::var("SLUICE_BENCH_CASES").unwrap_or_default();
    for (case, sink) in &cases {
        if !only.is_empty() && !only.split(',').any(|c| c == *case) {
            continue;
        }
        let (rate, rss) = throughput(case, sink);
        println!(
            "streaming {RECORDS} records, {case:<12}: {rate:>9.0} events/s, peak RSS {rss} MiB"
        );
    }
    if !only.is_empty() && !only.split(',').any(|c| c == "latency") {
        return;
    }
    let (p50, p99, max, n) = latency();
    println!("latency commit → consumer at 10k events/s ({n} records): p50 {p50} ms, p99 {p99} ms, max {max} ms");
}
