//! Failures: the broker gone for 30 s, records the broker rejects, brokers that cannot be
//! reached at startup; and fan-out to Kafka and a file with different transform chains.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use sluice_test_support::pipeline::{Component, Scalar};

use crate::broker::{self, PrivateBroker, Reader};
use crate::e2e::{file_sink, kafka_base, kafka_pipeline, kafka_sink, unique_prefix};
use crate::pg;

/// Kills the pipeline when the test fails, so it does not hold its slot.
struct KillOnDrop(Option<std::process::Child>);

impl KillOnDrop {
    fn get(&mut self) -> &mut std::process::Child {
        self.0.as_mut().unwrap()
    }
    fn take(&mut self) -> std::process::Child {
        self.0.take().unwrap()
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
            let text = pg::log_of(c);
            let lines: Vec<&str> = text.lines().collect();
            eprintln!(
                "sluice said:\n{}",
                lines[lines.len().saturating_sub(60)..].join("\n")
            );
        }
    }
}

fn ids(records: &[broker::Consumed]) -> BTreeSet<i64> {
    records
        .iter()
        .filter_map(|r| {
            let v: Json = serde_json::from_slice(r.value.as_deref()?).ok()?;
            let v = v.get("payload").unwrap_or(&v);
            v["after"]["id"].as_i64()
        })
        .collect()
}

#[test]
fn broker_down_for_30_seconds_loses_nothing_and_memory_stays_bounded() {
    let mut kafka = PrivateBroker::start();
    let bootstrap = kafka.address();
    let db = pg::fresh_db("kafka_outage");
    pg::psql(
        &db,
        "create table t (id bigserial primary key, payload text)",
    );
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("outage");
    // Small queues: while the broker is away the source must stop reading, not buffer.
    let producer = Scalar::map(&[
        ("broker.address.family", "v4".into()),
        ("message.timeout.ms", 10000u32.into()),
        ("reconnect.backoff.max.ms", 1000u32.into()),
    ]);
    let retry = Scalar::map(&[
        ("max_retries", 1000u32.into()),
        ("max_backoff", "2s".into()),
    ]);
    let sink = kafka_sink(&bootstrap)
        .set("producer", producer)
        .set("retry", retry);
    let path = kafka_base(dir.path(), &db, &prefix)
        .top("max_queue_size", 4096u32)
        .top("max_batch_size", 512u32)
        .sink(sink)
        .write(dir.path());
    let mut child = KillOnDrop(Some(pg::start(&path, &[])));
    pg::active_slot_pid(&db, child.get());

    // A writer inserting 200 rows every 50 ms, paused around the broker's stop.
    let paused = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (paused, done, written, db) =
            (paused.clone(), done.clone(), written.clone(), db.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if !paused.load(Ordering::Relaxed) {
                    pg::psql(&db, "insert into t (payload) select repeat('x', 200) from generate_series(1, 200)");
                    written.fetch_add(200, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let topic = format!("{prefix}.public.t");
    let mut before = Reader::new(&bootstrap, &[&topic]);
    while before.records.len() < 2000 {
        before.poll(Duration::from_millis(100));
    }
    // Everything written so far is acknowledged by the broker (the slot is confirmed past it)
    // and read, before the broker dies with its memory.
    paused.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(300));
    let written_lsn = pg::lsn_of(&pg::psql(&db, "select pg_current_wal_lsn()"));
    let t0 = Instant::now();
    loop {
        let confirmed = pg::psql(
            &db,
            &format!(
                "select confirmed_flush_lsn from pg_replication_slots where slot_name = '{db}'"
            ),
        );
        if pg::lsn_of(&confirmed) >= written_lsn {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the slot was not confirmed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let max_written: i64 = pg::psql(&db, "select max(id) from t")
        .trim()
        .parse()
        .unwrap();
    let t0 = Instant::now();
    while ids(&before.records).len() < max_written as usize {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "read {} of the {max_written} rows the broker acknowledged",
            ids(&before.records).len()
        );
        before.poll(Duration::from_millis(100));
    }
    // This consumer's broker goes away for good: librdkafka (2.12) has crashed the test process
    // on a consumer whose broker came back empty with the same topic recreated.
    let mut seen = ids(&before.records);
    drop(before);
    kafka.stop();
    paused.store(false, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(30));
    let during = written.load(Ordering::Relaxed);
    kafka.restart();
    // The restarted broker is empty: the sink creates the topic again and delivers the rest.
    std::thread::sleep(Duration::from_secs(5));
    done.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let total = written.load(Ordering::Relaxed);
    let mut after = Reader::new(&bootstrap, &[&topic]);
    let t0 = Instant::now();
    while (seen.len() as u64) < total {
        if t0.elapsed() > Duration::from_secs(120) {
            let missing: Vec<i64> = (1..=total as i64).filter(|i| !seen.contains(i)).collect();
            panic!(
                "{} of {total} rows arrived; missing {:?}",
                seen.len(),
                &missing[..missing.len().min(30)]
            );
        }
        let n = after.records.len();
        after.poll(Duration::from_millis(200));
        seen.extend(ids(&after.records[n..]));
    }
    let missing: Vec<i64> = (1..=total as i64).filter(|i| !seen.contains(i)).collect();
    assert!(
        missing.is_empty(),
        "missing {} ids: {:?}",
        missing.len(),
        &missing[..missing.len().min(20)]
    );
    assert_eq!(
        seen.iter().copied().max(),
        Some(total as i64),
        "ids 1..=total, none missing"
    );
    assert!(
        during > 2000,
        "rows were written while the broker was down ({during})"
    );
    let child = child.take();
    let rss = crate::procstat::peak_rss_mib(child.id());
    pg::stop(&child);
    let stderr = pg::finish(child);
    assert!(stderr.contains("Created Kafka topics"), "{stderr}");
    // Bounded by the queues, not by the outage's backlog.
    assert!(rss < 200, "peak RSS {rss} MiB");
    pg::drop_db(&db);
}

#[test]
fn records_the_broker_rejects_stop_the_pipeline_or_are_skipped_per_mode() {
    let bootstrap = broker::shared();
    for mode in ["fail", "warn"] {
        let db = pg::fresh_db(&format!("kafka_reject_{mode}"));
        pg::psql(&db, "create table t (id int primary key, payload text)");
        pg::psql(
            &db,
            "insert into t values (1, 'small'), (2, repeat('y', 5000)), (3, 'small too')",
        );
        let dir = tempfile::tempdir().unwrap();
        let prefix = unique_prefix(&format!("reject_{mode}"));
        let producer = Scalar::map(&[
            ("broker.address.family", "v4".into()),
            ("message.max.bytes", 2000u32.into()),
        ]);
        let kafka = kafka_sink(&bootstrap)
            .set("event.processing.failure.handling.mode", mode)
            .set("schemas.enable", false)
            .set("producer", producer);
        let path = kafka_pipeline(dir.path(), &db, &prefix, [kafka]);
        let child = pg::start(&path, &["--stop-when-idle", "2s"]);
        let (status, stderr) = pg::wait_output(child);
        assert!(!stderr.contains("panicked"), "{stderr}");
        let topic = format!("{prefix}.public.t");
        if mode == "fail" {
            assert_eq!(status.code(), Some(1), "{stderr}");
            let last = stderr
                .lines()
                .rfind(|l| l.starts_with("error:"))
                .unwrap_or_default();
            assert!(
                last.contains("event.processing.failure.handling.mode: warn"),
                "{last}"
            );
            assert!(last.contains(&topic), "{last}");
        } else {
            assert!(status.success(), "{stderr}");
            assert!(stderr.contains("Kafka rejected a record"), "{stderr}");
            let records = broker::consume(&bootstrap, &[&topic], 2, Duration::from_secs(30));
            assert_eq!(ids(&records), [1, 3].into());
        }
        pg::drop_db(&db);
    }
}

#[test]
fn unreachable_brokers_fail_at_startup_with_one_line() {
    let db = pg::fresh_db("kafka_unreachable");
    pg::psql(&db, "create table t (id int primary key)");
    for (servers, hint) in [
        (
            "no-such-host.invalid:9092",
            "check the host names in `bootstrap.servers`",
        ),
        (
            &*format!("127.0.0.1:{}", pg::free_port()),
            "check `bootstrap.servers` and that the brokers are running",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let kafka = kafka_sink(servers).set("connect.timeout", "2s");
        let path = kafka_pipeline(dir.path(), &db, "x", [kafka]);
        let t0 = Instant::now();
        let last = pg::run_expecting_failure(&path);
        assert!(last.contains("cannot reach the Kafka brokers at"), "{last}");
        assert!(last.contains(hint), "{last}");
        assert!(t0.elapsed() < Duration::from_secs(30));
    }
    pg::drop_db(&db);
}

#[test]
fn kafka_and_file_sinks_get_their_own_transform_chains() {
    let bootstrap = broker::shared();
    let db = pg::fresh_db("kafka_fanout");
    pg::psql(
        &db,
        "create table customers (id int primary key, email text)",
    );
    pg::psql(&db, "insert into customers select g, 'user' || g || '@example.com' from generate_series(1, 20) g");
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("fanout");
    let routed = format!("{prefix}-customers");
    let route = Component::new("route")
        .set("regex", r".*\.customers")
        .set("replacement", &routed);
    let mask = Component::new("mask")
        .set("columns", r".*\.customers\.email")
        .set("chars", 5u32);
    let sinks = [
        kafka_sink(&bootstrap)
            .set("schemas.enable", false)
            .transform(route),
        file_sink(dir.path())
            .set("schemas.enable", false)
            .transform(mask),
    ];
    let path = kafka_pipeline(dir.path(), &db, &prefix, sinks);
    let child = pg::start(&path, &["--stop-when-idle", "2s"]);
    pg::finish(child);
    let records = broker::consume(&bootstrap, &[&routed], 20, Duration::from_secs(30));
    assert_eq!(ids(&records).len(), 20);
    for r in &records {
        let v: Json = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
        assert!(
            v["after"]["email"]
                .as_str()
                .unwrap()
                .ends_with("@example.com"),
            "Kafka's copy is not masked"
        );
    }
    let lines = pg::lines(dir.path());
    assert_eq!(lines.len(), 20);
    for l in &lines {
        assert_eq!(
            l["topic"],
            format!("{prefix}.public.customers"),
            "the file's copy is not routed"
        );
        assert_eq!(l["value"]["after"]["email"], "*****");
    }
    pg::drop_db(&db);
}

#[test]
fn rejected_credentials_fail_at_startup_with_one_line() {
    let kafka = PrivateBroker::start_with(&["--authentication"]);
    let db = pg::fresh_db("kafka_bad_auth");
    pg::psql(&db, "create table t (id int primary key)");
    let dir = tempfile::tempdir().unwrap();
    let producer = [
        ("broker.address.family", "v4"),
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "SCRAM-SHA-256"),
        ("sasl.username", "nobody"),
        ("sasl.password", "not-this-one"),
    ];
    let sink = kafka_sink(&kafka.address())
        .set("connect.timeout", "5s")
        .set("producer", producer);
    let path = kafka_pipeline(dir.path(), &db, "x", [sink]);
    let last = pg::run_expecting_failure(&path);
    assert!(
        last.contains("refused the connection's credentials"),
        "{last}"
    );
    assert!(
        last.contains("check `security.protocol` and the `sasl.*`"),
        "{last}"
    );
    assert!(
        !last.contains("not-this-one"),
        "no password in messages: {last}"
    );
    pg::drop_db(&db);
}
