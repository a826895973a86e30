//! Kafka helpers: the shared broker's address, private brokers, a consumer, Java's murmur2.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::TopicPartitionList;

/// The broker `.ci/run` starts (`SLUICE_TEST_KAFKA`, default `127.0.0.1:9092`).
pub fn shared() -> String {
    std::env::var("SLUICE_TEST_KAFKA").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

/// The tansu binary (`SLUICE_TANSU`, else `tansu` on the PATH or in `~/.cargo/bin`).
fn tansu() -> String {
    if let Ok(t) = std::env::var("SLUICE_TANSU") {
        return t;
    }
    let home = std::env::var("HOME").unwrap_or_default();
    let cargo = format!("{home}/.cargo/bin/tansu");
    if std::path::Path::new(&cargo).exists() {
        cargo
    } else {
        "tansu".into()
    }
}

/// A tansu broker of this test's own, on a free port, kept in memory; killed on drop.
pub struct PrivateBroker {
    pub port: u16,
    child: Option<Child>,
    extra: Vec<String>,
}

impl PrivateBroker {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A broker started with extra arguments (e.g. `--authentication`).
    pub fn start_with(extra: &[&str]) -> Self {
        let port = crate::pg::free_port();
        let mut broker = PrivateBroker {
            port,
            child: None,
            extra: extra.iter().map(|a| (*a).to_owned()).collect(),
        };
        broker.restart();
        broker
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Starts the broker process (again) on the same port; it starts empty.
    pub fn restart(&mut self) {
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let dir = tempfile::tempdir().expect("tempdir");
        let child = Command::new(tansu())
            .args([
                "broker",
                "--storage-engine",
                "memory://tansu/",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(&self.extra)
            // tansu reads a `.env` from its working directory: give it an empty one.
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tansu (install it: cargo install --locked tansu --features dynostore)");
        self.child = Some(child);
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "tansu did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for PrivateBroker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One consumed record.
#[derive(Debug, Clone)]
pub struct Consumed {
    pub topic: String,
    pub partition: i32,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: BTreeMap<String, String>,
    /// When this consumer received it (ms since the epoch; read by `benches/kafka.rs`).
    #[allow(dead_code)]
    pub received_ms: i64,
}

fn consumer_config(bootstrap: &str) -> ClientConfig {
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", bootstrap)
        .set("group.id", "sluice-tests")
        .set("enable.auto.commit", "false")
        .set("broker.address.family", "v4")
        // tansu answers a fetch with one record batch and holds it for the whole wait.
        .set("fetch.wait.max.ms", "10");
    cc
}

/// Reads `topics` from offset 0 of every partition until `n` records arrived (panics after
/// `limit`).
pub fn consume(bootstrap: &str, topics: &[&str], n: usize, limit: Duration) -> Vec<Consumed> {
    let mut reader = Reader::new(bootstrap, topics);
    let t0 = Instant::now();
    while reader.records.len() < n {
        assert!(
            t0.elapsed() < limit,
            "timed out with {} of {n} records from {topics:?}",
            reader.records.len()
        );
        reader.poll(Duration::from_millis(200));
    }
    reader.records
}

/// A consumer of every partition of some topics, from offset 0.
pub struct Reader {
    consumer: BaseConsumer,
    pub records: Vec<Consumed>,
}

impl Reader {
    pub fn new(bootstrap: &str, topics: &[&str]) -> Self {
        let consumer: BaseConsumer = consumer_config(bootstrap).create().expect("consumer");
        let mut list = TopicPartitionList::new();
        for topic in topics {
            let partitions = wait_for_topic(&consumer, topic);
            for p in 0..partitions {
                list.add_partition_offset(topic, p, rdkafka::Offset::Offset(0))
                    .expect("partition");
            }
        }
        consumer.assign(&list).expect("assign");
        Reader {
            consumer,
            records: Vec::new(),
        }
    }

    pub fn poll(&mut self, timeout: Duration) {
        if let Some(result) = self.consumer.poll(timeout) {
            let Ok(m) = result else { return };
            let headers = m
                .headers()
                .map(|h| {
                    h.iter()
                        .map(|h| {
                            (
                                h.key.to_owned(),
                                String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            self.records.push(Consumed {
                topic: m.topic().to_owned(),
                partition: m.partition(),
                key: m.key().map(<[u8]>::to_vec),
                value: m.payload().map(<[u8]>::to_vec),
                headers,
                received_ms: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64),
            });
        }
    }
}

/// The partition count of `topic`, once it exists.
fn wait_for_topic(consumer: &BaseConsumer, topic: &str) -> i32 {
    let t0 = Instant::now();
    loop {
        if let Ok(md) = consumer.fetch_metadata(Some(topic), Duration::from_secs(5)) {
            if let Some(t) = md.topics().iter().find(|t| t.name() == topic) {
                if t.error().is_none() && !t.partitions().is_empty() {
                    return t.partitions().len() as i32;
                }
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "topic {topic} never appeared"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The partition counts of the broker's topics.
pub fn partitions(bootstrap: &str) -> BTreeMap<String, usize> {
    let consumer: BaseConsumer = consumer_config(bootstrap).create().expect("consumer");
    let md = consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .expect("metadata");
    md.topics()
        .iter()
        .map(|t| (t.name().to_owned(), t.partitions().len()))
        .collect()
}

/// An admin client and a runtime to block on its calls.
fn admin(bootstrap: &str) -> (AdminClient<DefaultClientContext>, tokio::runtime::Runtime) {
    let admin = consumer_config(bootstrap).create().expect("admin");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    (admin, rt)
}

/// Creates a topic (for signals, or to test a sink that must not create topics).
pub fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    let (admin, rt) = admin(bootstrap);
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(-1));
    let r = rt
        .block_on(admin.create_topics([&new], &AdminOptions::new()))
        .expect("create topic");
    assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
}

/// A topic's configuration entry as the broker describes it (`None`: not set or not known).
pub fn topic_config(bootstrap: &str, topic: &str, name: &str) -> Option<String> {
    use rdkafka::admin::ResourceSpecifier;
    let (admin, rt) = admin(bootstrap);
    let described = rt
        .block_on(admin.describe_configs([&ResourceSpecifier::Topic(topic)], &AdminOptions::new()))
        .expect("describe configs");
    described.into_iter().find_map(|r| {
        let resource = r.expect("topic config");
        resource.get(name).and_then(|e| e.value.clone())
    })
}

/// Java's `Utils.murmur2` (Kafka's default partitioner for keyed records).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Kafka's Java producer picks for a key.
pub fn java_partition(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions
}

#[test]
fn murmur2_matches_javas() {
    // Vectors of librdkafka's unit test, taken from the Java client.
    for (key, hash) in [
        ("kafka", 0xd067cf64_u32),
        ("giberish123456789", 0x8f552b0c),
        ("1234", 0x9fc97b14),
        ("234", 0xe7c009ca),
        ("34", 0x873930da),
        ("4", 0x5a4b5ca1),
        ("PreAmbleWillBeRemoved,ThePrePartThatIs", 0x78424f1c),
        ("", 0x106e08d9),
    ] {
        assert_eq!(murmur2(key.as_bytes()), hash as i32, "{key}");
    }
}

/// Writes one record and waits for the broker's acknowledgement.
pub fn produce(bootstrap: &str, topic: &str, key: &str, value: &str) {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer = consumer_config(bootstrap).create().expect("producer");
    producer
        .send(BaseRecord::to(topic).key(key).payload(value))
        .map_err(|(e, _)| e)
        .expect("send");
    producer.flush(Duration::from_secs(30)).expect("flush");
}
