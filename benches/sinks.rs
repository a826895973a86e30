//! The message sinks against private services, each beside a plain client loop against the
//! same service in the same run (`cargo bench --bench sinks`):
//!
//! - throughput: datagen (inserts, JSON without schemas) → the sink, `EVENTS` events; events/s
//!   from the start of `sluice run` until the service holds them all (every one acknowledged),
//!   and peak RSS;
//! - the plain loop: the same number of messages of the same size (a message the sink wrote),
//!   published by the service's own tool or a bare client in the sink's pattern: Redis
//!   `redis-benchmark -P 500 XADD`, NATS a bare async-nats JetStream publisher awaiting acks per
//!   window of 1024, RabbitMQ a bare lapin publisher awaiting confirms per window of 1024;
//! - latency at an offered load of 10k events/s for 10 s (datagen `rate`): from the event's
//!   `source.ts_ms` (when datagen made it) to its arrival at a consumer (XREAD, a core NATS
//!   subscription, basic.consume), p50 / p99 / max: an upper bound of make → acknowledgement.
//!
//! Runs `target/release/sluice` when it exists (build it first: `cargo build --release`), else
//! the debug binary the bench was built beside.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a benchmark program

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_test_support::{nats, procstat, rabbitmq, redis};

const EVENTS: u64 = 200_000;
const RATE: u64 = 10_000;
const LATENCY_SECONDS: u64 = 10;

fn sluice() -> PathBuf {
    let release = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/sluice");
    match release.exists() {
        true => release,
        false => sluice_test_support::pg::sluice(),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `consumer` on a thread of its own; returns once it said it listens.
fn listen<F>(consumer: impl FnOnce(std::sync::mpsc::Sender<()>) -> F + Send + 'static)
where
    F: std::future::Future<Output = ()>,
{
    let (ready, listening) = std::sync::mpsc::channel();
    std::thread::spawn(move || runtime().block_on(consumer(ready)));
    listening.recv_timeout(Duration::from_secs(30)).unwrap();
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Runs datagen → `sink` (`events` inserts at `rate`/s, 0 as fast as it goes) with topic
/// prefix `prefix`, stopping 2 s after the last event.
fn run(dir: &Path, prefix: &str, sink: &str, events: u64, rate: u64) -> Child {
    let text = format!(
        "name: {prefix}\ndata_dir: {d}/{prefix}\nsource:\n  type: datagen\n  topic.prefix: {prefix}\n  max.events: {events}\n  rate: {rate}\n  mix: {{ insert: 100 }}\nsinks:\n{sink}",
        d = dir.display()
    );
    let path = dir.join(format!("{prefix}.yaml"));
    std::fs::write(&path, text).unwrap();
    Command::new(sluice())
        .args(["run", "--stop-when-idle", "2s"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Events/s until `count()` reaches `EVENTS`, and the pipeline's peak RSS in MiB.
fn throughput(dir: &Path, prefix: &str, sink: &str, count: impl Fn() -> u64) -> (f64, u64) {
    let t0 = Instant::now();
    let mut child = run(dir, prefix, sink, EVENTS, 0);
    let mut peak = 0;
    while count() < EVENTS {
        peak = peak.max(procstat::peak_rss_mib(child.id()));
        assert!(
            t0.elapsed() < Duration::from_secs(600),
            "{prefix}: too slow"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let secs = t0.elapsed().as_secs_f64();
    peak = peak.max(procstat::peak_rss_mib(child.id()));
    assert!(child.wait().unwrap().success(), "{prefix}: sluice failed");
    (EVENTS as f64 / secs, peak)
}

/// p50, p99 and max of `samples` (ms).
fn percentiles(samples: &Mutex<Vec<i64>>) -> (i64, i64, i64, usize) {
    let mut v = samples.lock().unwrap().clone();
    v.sort_unstable();
    let at = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
    (at(0.50), at(0.99), *v.last().unwrap(), v.len())
}

/// `source.ts_ms` of a JSON value without schemas.
fn made_at(body: &[u8]) -> Option<i64> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    value["source"]["ts_ms"].as_i64()
}

/// Offers `RATE` events/s for `LATENCY_SECONDS` to `sink`, while `consume` (already listening)
/// records latencies into the samples; waits for all of them.
fn latency(
    dir: &Path,
    prefix: &str,
    sink: &str,
    samples: &Arc<Mutex<Vec<i64>>>,
) -> (i64, i64, i64, usize) {
    let events = RATE * LATENCY_SECONDS;
    let mut child = run(dir, prefix, sink, events, RATE);
    let t0 = Instant::now();
    while (samples.lock().unwrap().len() as u64) < events {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "{prefix}: latency run stalled"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(child.wait().unwrap().success(), "{prefix}: sluice failed");
    percentiles(samples)
}

fn row(name: &str, sink: (f64, u64), plain: f64, lat: (i64, i64, i64, usize)) {
    println!(
        "{name:<10} sink {:>9.0} events/s  {:>4} MiB   plain loop {:>9.0} msg/s   ratio {:.2}   latency p50 {} ms  p99 {} ms  max {} ms ({} events at {RATE}/s)",
        sink.0, sink.1, plain, sink.0 / plain, lat.0, lat.1, lat.2, lat.3
    );
}

fn bench_redis(dir: &Path) {
    let server = redis::Private::start(&[]);
    let address = server.address();
    let xlen = |stream: &str| {
        let mut conn = redis::connect(&address);
        ::redis::cmd("XLEN")
            .arg(stream)
            .query::<u64>(&mut conn)
            .unwrap()
    };
    let sink = format!("  - type: redis\n    address: {address}\n    schemas.enable: false\n");
    let sink_rate = throughput(dir, "rthr", &sink, || xlen("rthr.public.customers"));
    let entry = redis::entries(&address, "rthr.public.customers")
        .swap_remove(0)
        .swap_remove(0);
    let o = Command::new("redis-benchmark")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &server.port.to_string(),
            "-n",
            &EVENTS.to_string(),
        ])
        .args(["-P", "500", "-q", "XADD", "plain", "*", &entry.0, &entry.1])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    // `XADD plain * ...: 123456.79 requests per second, p50=...` (after \r-separated progress).
    let plain: f64 = text
        .rsplit(':')
        .find_map(|part| part.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("redis-benchmark said: {text}"));

    let samples = Arc::new(Mutex::new(Vec::new()));
    let (into, addr) = (samples.clone(), address.clone());
    std::thread::spawn(move || {
        let mut conn = redis::connect(&addr);
        let mut last = "0".to_owned();
        loop {
            let reply: ::redis::streams::StreamReadReply = match ::redis::cmd("XREAD")
                .arg(
                    &[
                        "BLOCK",
                        "1000",
                        "COUNT",
                        "1000",
                        "STREAMS",
                        "rlat.public.customers",
                        &last,
                    ][..],
                )
                .query(&mut conn)
            {
                Ok(r) => r,
                Err(_) => return,
            };
            let now = now_ms();
            for key in reply.keys {
                for id in key.ids {
                    last = id.id.clone();
                    for v in id.map.values() {
                        if let Ok(bytes) = ::redis::from_redis_value_ref::<Vec<u8>>(v) {
                            if let Some(t) = made_at(&bytes) {
                                into.lock().unwrap().push(now - t);
                            }
                        }
                    }
                }
            }
        }
    });
    let lat = latency(dir, "rlat", &sink, &samples);
    row("redis", sink_rate, plain, lat);
}

fn bench_nats(dir: &Path) {
    let server = nats::Private::start("");
    let url = server.url();
    let sink = format!("  - type: nats\n    url: {url}\n    create-stream: true\n    stream-name: Bench\n    subjects: \"nthr.>,nlat.>\"\n    schemas.enable: false\n");
    let sink_rate = throughput(dir, "nthr", &sink, || nats::count(&url, "Bench"));
    let payload = nats::messages(&url, "Bench").swap_remove(0).payload;
    let plain = runtime().block_on(async {
        let client = async_nats::ConnectOptions::new()
            .custom_inbox_prefix("_INBOX.bench")
            .connect(&url)
            .await
            .unwrap();
        let js = async_nats::jetstream::new(client);
        let body = bytes::Bytes::from(payload.into_bytes());
        let t0 = Instant::now();
        let mut sent = 0;
        while sent < EVENTS {
            let mut acks = Vec::with_capacity(1024);
            for _ in 0..1024.min(EVENTS - sent) {
                acks.push(js.publish("nthr.plain", body.clone()).await.unwrap());
                sent += 1;
            }
            for ack in acks {
                ack.await.unwrap();
            }
        }
        EVENTS as f64 / t0.elapsed().as_secs_f64()
    });
    let samples = Arc::new(Mutex::new(Vec::new()));
    let into = samples.clone();
    let at = url.clone();
    listen(move |ready| async move {
        use futures_util::StreamExt;
        let client = async_nats::connect(&at).await.unwrap();
        let mut subscription = client.subscribe("nlat.>").await.unwrap();
        client.flush().await.unwrap();
        ready.send(()).unwrap();
        while let Some(m) = subscription.next().await {
            if let Some(t) = made_at(&m.payload) {
                into.lock().unwrap().push(now_ms() - t);
            }
        }
    });
    let lat = latency(dir, "nlat", &sink, &samples);
    row("nats", sink_rate, plain, lat);
}

fn bench_rabbitmq(dir: &Path) {
    let node = rabbitmq::Private::start("");
    let url = node.url();
    let sink = |key: &str| {
        format!("  - type: rabbitmq\n    connection.uri: \"{url}\"\n    exchange: bench\n    autoCreateExchange: true\n    routingKey: {key}\n    autoCreateRoutingKey: true\n    schemas.enable: false\n")
    };
    let sink_rate = throughput(dir, "qthr", &sink("thr"), || {
        u64::from(rabbitmq::count(&url, "thr"))
    });
    let body = rabbitmq::drain(&url, "thr").swap_remove(0).body;
    let plain = runtime().block_on(async {
        use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
        let conn = lapin::Connection::connect(&url, lapin::ConnectionProperties::default())
            .await
            .unwrap();
        let channel = conn.create_channel().await.unwrap();
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        let properties = lapin::BasicProperties::default().with_delivery_mode(2);
        let t0 = Instant::now();
        let mut sent = 0;
        while sent < EVENTS {
            let mut confirms = Vec::with_capacity(1024);
            for _ in 0..1024.min(EVENTS - sent) {
                let c = channel
                    .basic_publish(
                        "bench".into(),
                        "thr".into(),
                        BasicPublishOptions::default(),
                        body.as_bytes(),
                        properties.clone(),
                    )
                    .await
                    .unwrap();
                confirms.push(c);
                sent += 1;
            }
            for c in confirms {
                c.await.unwrap();
            }
        }
        EVENTS as f64 / t0.elapsed().as_secs_f64()
    });
    // The latency run's queue, declared and consumed before it starts.
    rabbitmq::exchange(&url, "bench");
    rabbitmq::bind(&url, "lat", "bench", "lat");
    let samples = Arc::new(Mutex::new(Vec::new()));
    let into = samples.clone();
    let consumer_url = url.clone();
    listen(move |ready| async move {
        use futures_util::StreamExt;
        use lapin::options::BasicConsumeOptions;
        let conn =
            lapin::Connection::connect(&consumer_url, lapin::ConnectionProperties::default())
                .await
                .unwrap();
        let channel = conn.create_channel().await.unwrap();
        let options = BasicConsumeOptions {
            no_ack: true,
            ..Default::default()
        };
        let mut consumer = channel
            .basic_consume(
                "lat".into(),
                "bench".into(),
                options,
                lapin::types::FieldTable::default(),
            )
            .await
            .unwrap();
        ready.send(()).unwrap();
        while let Some(Ok(delivery)) = consumer.next().await {
            if let Some(t) = made_at(&delivery.data) {
                into.lock().unwrap().push(now_ms() - t);
            }
        }
    });
    let lat = latency(dir, "qlat", &sink("lat"), &samples);
    row("rabbitmq", sink_rate, plain, lat);
}

/// The jdbc sink (upserts keyed by the record key into a table it creates) against a plain
/// tokio-postgres loop of the same upserts (prepared once, one transaction per 1024 rows).
fn bench_jdbc(dir: &Path) {
    use sluice_test_support::pg;
    let db = pg::fresh_db("bench_jdbc");
    let sink = format!(
        "  - type: jdbc\n    connection.url: jdbc:postgresql://{}:{}/{db}\n    connection.username: postgres\n    insert.mode: upsert\n    primary.key.mode: record_key\n    schema.evolution: basic\n",
        pg::host(),
        pg::port()
    );
    let table = "jthr_public_customers";
    let count = || {
        let n = pg::psql(
            &db,
            &format!("SELECT count(*) FROM pg_tables WHERE tablename = '{table}'"),
        );
        match n.trim() {
            "1" => pg::psql(&db, &format!("SELECT count(*) FROM {table}"))
                .trim()
                .parse()
                .unwrap_or(0),
            _ => 0,
        }
    };
    let sink_rate = throughput(dir, "jthr", &sink, count);
    // The plain loop: the same rows, as text, upserted into a copy of the table.
    pg::psql(
        &db,
        &format!("CREATE TABLE plain (LIKE {table} INCLUDING ALL)"),
    );
    let columns: Vec<(String, String)> = pg::psql(
        &db,
        &format!("SELECT a.attname || '|' || format_type(a.atttypid, a.atttypmod) FROM pg_attribute a WHERE a.attrelid = '{table}'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"),
    )
    .lines()
    .filter_map(|l| l.split_once('|').map(|(a, b)| (a.to_owned(), b.to_owned())))
    .collect();
    let plain = runtime().block_on(async {
        let url = format!(
            "host={} port={} user=postgres dbname={db}",
            pg::host(),
            pg::port()
        );
        let (mut client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let select: Vec<String> = columns
            .iter()
            .map(|(c, _)| format!("\"{c}\"::text"))
            .collect();
        let rows = client
            .query(&format!("SELECT {} FROM {table}", select.join(",")), &[])
            .await
            .unwrap();
        let names: Vec<String> = columns.iter().map(|(c, _)| format!("\"{c}\"")).collect();
        let params: Vec<String> = columns
            .iter()
            .enumerate()
            .map(|(i, (_, t))| format!("${}::text::{t}", i + 1))
            .collect();
        let set: Vec<String> = names
            .iter()
            .skip(1)
            .map(|n| format!("{n}=EXCLUDED.{n}"))
            .collect();
        let sql = format!(
            "INSERT INTO plain ({}) VALUES ({}) ON CONFLICT ({}) DO UPDATE SET {}",
            names.join(","),
            params.join(","),
            names[0],
            set.join(",")
        );
        let types = vec![tokio_postgres::types::Type::TEXT; columns.len()];
        let t0 = Instant::now();
        for chunk in rows.chunks(1024) {
            let tx = client.transaction().await.unwrap();
            let statement = tx.prepare_typed(&sql, &types).await.unwrap();
            for row in chunk {
                let values: Vec<Option<String>> = (0..columns.len()).map(|i| row.get(i)).collect();
                let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = values
                    .iter()
                    .map(|v| v as &(dyn tokio_postgres::types::ToSql + Sync))
                    .collect();
                tx.execute(&statement, &refs).await.unwrap();
            }
            tx.commit().await.unwrap();
        }
        rows.len() as f64 / t0.elapsed().as_secs_f64()
    });
    println!(
        "{:<10} sink {:>9.0} events/s  {:>4} MiB   plain loop {:>9.0} rows/s   ratio {:.2}   (upserts keyed by id, one transaction per batch)",
        "jdbc", sink_rate.0, sink_rate.1, plain, sink_rate.0 / plain
    );
    pg::drop_db(&db);
}

/// The jdbc sink into MariaDB (upserts keyed by the record key into a table it creates) against
/// a plain mysql_async loop of the same upserts (`ON DUPLICATE KEY UPDATE`, prepared, one
/// transaction per 1024 rows) into a copy of the table.
fn bench_jdbc_mariadb(dir: &Path) {
    use mysql_async::prelude::Queryable;
    use sluice_test_support::mariadb;
    let db = mariadb::database("bench_jdbc_maria");
    let port = mariadb::server().port;
    let sink = format!(
        "  - type: jdbc\n    connection.url: jdbc:mariadb://127.0.0.1:{port}/{db}\n    connection.username: root\n    insert.mode: upsert\n    primary.key.mode: record_key\n    schema.evolution: basic\n"
    );
    let table = "jmthr_public_customers";
    let count = || {
        let exists = mariadb::sql(&db, &format!("SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{table}'"));
        match exists.trim() {
            "1" => mariadb::sql(&db, &format!("SELECT count(*) FROM {table}"))
                .trim()
                .parse()
                .unwrap_or(0),
            _ => 0,
        }
    };
    let sink_rate = throughput(dir, "jmthr", &sink, count);
    let plain = runtime().block_on(async {
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(port)
            .user(Some("root"))
            .db_name(Some(db.clone()));
        let mut conn = mysql_async::Conn::new(opts).await.unwrap();
        conn.query_drop(format!("CREATE TABLE plain LIKE {table}"))
            .await
            .unwrap();
        let columns: Vec<String> = conn
            .query(format!("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{table}' ORDER BY ORDINAL_POSITION"))
            .await
            .unwrap();
        let rows: Vec<mysql_async::Row> = conn
            .query(format!("SELECT * FROM {table}"))
            .await
            .unwrap();
        let names: Vec<String> = columns.iter().map(|c| format!("`{c}`")).collect();
        let marks = vec!["?"; names.len()].join(",");
        let set: Vec<String> = (names.iter().skip(1))
            .map(|n| format!("{n}=VALUES({n})"))
            .collect();
        let sql = format!(
            "INSERT INTO plain ({}) VALUES ({marks}) ON DUPLICATE KEY UPDATE {}",
            names.join(","),
            set.join(",")
        );
        let t0 = Instant::now();
        for chunk in rows.chunks(1024) {
            let mut tx = conn
                .start_transaction(mysql_async::TxOpts::default())
                .await
                .unwrap();
            for row in chunk {
                let values = mysql_async::Params::Positional(row.clone().unwrap());
                tx.exec_drop(&sql, values).await.unwrap();
            }
            tx.commit().await.unwrap();
        }
        rows.len() as f64 / t0.elapsed().as_secs_f64()
    });
    println!(
        "{:<10} sink {:>9.0} events/s  {:>4} MiB   plain loop {:>9.0} rows/s   ratio {:.2}   (MariaDB upserts keyed by id, one transaction per batch)",
        "jdbc-maria", sink_rate.0, sink_rate.1, plain, sink_rate.0 / plain
    );
}

fn main() {
    let only = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let dir = tempfile::tempdir().unwrap();
    println!("sluice: {}", sluice().display());
    type Bench = fn(&Path);
    let benches: [(&str, Bench); 5] = [
        ("redis", bench_redis),
        ("nats", bench_nats),
        ("rabbitmq", bench_rabbitmq),
        ("jdbc", bench_jdbc),
        ("jdbc-maria", bench_jdbc_mariadb),
    ];
    for (name, bench) in benches {
        if only.as_deref().is_none_or(|o| o == name) {
            bench(dir.path());
        }
    }
}
