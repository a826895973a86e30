//! Private RabbitMQ nodes for the tests (a node name, AMQP and distribution ports and a data
//! directory of their own, started from the machine's `rabbitmq-server`), which a test may stop,
//! start again or alarm; and queues read with `lapin`'s `basic.get`, declared and bound by the
//! test as a consumer would.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lapin::options::{BasicGetOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Connection, ConnectionProperties};

/// The broker's scripts, run as the current user (Debian's wrappers in /usr/sbin switch to the
/// `rabbitmq` user, which cannot write a test's directory).
const BIN: &str = "/usr/lib/rabbitmq/bin";

/// The machine's broker.
pub fn shared_url() -> String {
    std::env::var("RABBITMQ_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

/// One message read from a queue.
#[derive(Debug, Clone)]
pub struct Got {
    pub routing_key: String,
    pub exchange: String,
    pub body: String,
    pub delivery_mode: Option<u8>,
    pub headers: Vec<(String, String)>,
}

/// A private node.
pub struct Private {
    pub port: u16,
    pub node: String,
    dist: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Private {
    /// Starts one; `config` is more of its `rabbitmq.conf` (`max_message_size = 4096`).
    pub fn start(config: &str) -> Private {
        let dir = tempfile::tempdir().unwrap();
        let port = crate::pg::free_port();
        let mut file = std::fs::File::create(dir.path().join("rabbitmq.conf")).unwrap();
        write!(file, "listeners.tcp.default = {port}\n{config}\n").unwrap();
        std::fs::write(dir.path().join("enabled_plugins"), "[].\n").unwrap();
        let mut node = Private {
            port,
            node: format!("sluice{port}@localhost"),
            dist: crate::pg::free_port(),
            dir,
            child: None,
        };
        node.launch();
        node
    }

    /// `amqp://guest:guest@127.0.0.1:<port>/%2f`.
    pub fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }

    fn env(&self, command: &mut Command) {
        let d = self.dir.path();
        command
            .env("RABBITMQ_NODENAME", &self.node)
            .env("RABBITMQ_NODE_PORT", self.port.to_string())
            .env("RABBITMQ_DIST_PORT", self.dist.to_string())
            .env("RABBITMQ_MNESIA_BASE", d.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", d.join("log"))
            .env("RABBITMQ_CONFIG_FILE", d.join("rabbitmq.conf"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", d.join("enabled_plugins"))
            .env("RABBITMQ_PLUGINS_EXPAND_DIR", d.join("plugins"))
            .env("RABBITMQ_PID_FILE", d.join("pid"));
    }

    fn launch(&mut self) {
        let mut command = Command::new(format!("{BIN}/rabbitmq-server"));
        self.env(&mut command);
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("rabbitmq-server (apt-get install rabbitmq-server)");
        self.child = Some(child);
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "rabbitmq-server did not start (logs in {})",
                self.dir.path().join("log").display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `rabbitmqctl -n <node> args...`, which must succeed.
    pub fn ctl(&self, args: &[&str]) -> String {
        let mut command = Command::new(format!("{BIN}/rabbitmqctl"));
        self.env(&mut command);
        let o = command
            .arg("-n")
            .arg(&self.node)
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "rabbitmqctl {args:?}: {text}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        text
    }

    /// Stops it (SIGTERM to the Erlang VM) and waits until it is gone.
    pub fn stop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("pid")) {
            let _ = Command::new("kill").args(["-TERM", pid.trim()]).status();
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, with the same data.
    pub fn restart(&mut self) {
        self.launch();
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("pid")) {
            let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Declares the durable queue `queue` at `url` and binds it to `exchange` (which must exist)
/// with `key`, as a consumer would before the pipeline runs.
pub fn bind(url: &str, queue: &str, exchange: &str, key: &str) {
    runtime().block_on(async {
        let conn = Connection::connect(url, ConnectionProperties::default())
            .await
            .unwrap();
        let channel = conn.create_channel().await.unwrap();
        let durable = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        channel
            .queue_declare(queue.into(), durable, FieldTable::default())
            .await
            .unwrap();
        channel
            .queue_bind(
                queue.into(),
                exchange.into(),
                key.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        conn.close(200, "done".into()).await.ok();
    })
}

/// Declares the durable topic exchange `exchange` at `url`.
pub fn exchange(url: &str, exchange: &str) {
    runtime().block_on(async {
        let conn = Connection::connect(url, ConnectionProperties::default())
            .await
            .unwrap();
        let channel = conn.create_channel().await.unwrap();
        let durable = lapin::options::ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        };
        channel
            .exchange_declare(
                exchange.into(),
                lapin::ExchangeKind::Topic,
                durable,
                FieldTable::default(),
            )
            .await
            .unwrap();
        conn.close(200, "done".into()).await.ok();
    })
}

/// Every message in `queue` at `url`, taken off it (`basic.get` with auto-ack); none when the
/// queue or the broker is not there.
pub fn drain(url: &str, queue: &str) -> Vec<Got> {
    runtime().block_on(async {
        let Ok(conn) = Connection::connect(url, ConnectionProperties::default()).await else {
            return Vec::new();
        };
        let channel = conn.create_channel().await.unwrap();
        let mut out = Vec::new();
        let get = BasicGetOptions { no_ack: true };
        while let Ok(Some(m)) = channel.basic_get(queue.into(), get).await {
            let headers = m
                .delivery
                .properties
                .headers()
                .as_ref()
                .map(|t| {
                    t.inner()
                        .iter()
                        .map(|(k, v)| {
                            let v = match v {
                                AMQPValue::LongString(s) => {
                                    String::from_utf8_lossy(s.as_bytes()).into_owned()
                                }
                                other => format!("{other:?}"),
                            };
                            (k.to_string(), v)
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.push(Got {
                routing_key: m.delivery.routing_key.to_string(),
                exchange: m.delivery.exchange.to_string(),
                body: String::from_utf8_lossy(&m.delivery.data).into_owned(),
                delivery_mode: *m.delivery.properties.delivery_mode(),
                headers,
            });
        }
        conn.close(200, "done".into()).await.ok();
        out
    })
}

/// How many messages `queue` at `url` holds (0 when the broker is not there).
pub fn count(url: &str, queue: &str) -> u32 {
    runtime().block_on(async {
        let Ok(conn) = Connection::connect(url, ConnectionProperties::default()).await else {
            return 0;
        };
        let Ok(channel) = conn.create_channel().await else {
            return 0;
        };
        let passive = QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        let n = channel
            .queue_declare(queue.into(), passive, FieldTable::default())
            .await
            .map_or(0, |q| q.message_count());
        conn.close(200, "done".into()).await.ok();
        n
    })
}

/// Deletes what a test made on a shared broker.
pub fn remove(url: &str, queues: &[&str], exchanges: &[&str]) {
    runtime().block_on(async {
        let conn = Connection::connect(url, ConnectionProperties::default())
            .await
            .unwrap();
        let channel = conn.create_channel().await.unwrap();
        for q in queues {
            let _ = channel
                .queue_delete((*q).into(), lapin::options::QueueDeleteOptions::default())
                .await;
        }
        for e in exchanges {
            let _ = channel
                .exchange_delete(
                    (*e).into(),
                    lapin::options::ExchangeDeleteOptions::default(),
                )
                .await;
        }
        conn.close(200, "done".into()).await.ok();
    })
}
