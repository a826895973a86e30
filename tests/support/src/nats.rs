//! Private `nats-server`s with JetStream for the tests, on free ports, each with a store
//! directory of its own (file streams survive a restart), which a test may stop and start
//! again; and a reader of a stream's messages through the `async-nats` client's own calls
//! (`STREAM.MSG.GET`), not the sink's code path.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One stored message: subject, `Nats-Msg-Id`, payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub subject: String,
    pub id: Option<String>,
    pub payload: String,
}

/// A private server.
pub struct Private {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Private {
    /// Starts one on a free port; `config` is more of its configuration file's text
    /// (`authorization { ... }`, `max_payload: 2048`).
    pub fn start(config: &str) -> Private {
        let dir = tempfile::tempdir().unwrap();
        let port = crate::pg::free_port();
        let mut file = std::fs::File::create(dir.path().join("server.conf")).unwrap();
        write!(
            file,
            "port: {port}\nhost: 127.0.0.1\njetstream {{ store_dir: \"{}\" }}\n{config}\n",
            dir.path().join("store").display()
        )
        .unwrap();
        let mut server = Private {
            port,
            dir,
            child: None,
        };
        server.launch();
        server
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn launch(&mut self) {
        let child = Command::new("nats-server")
            .arg("-c")
            .arg(self.dir.path().join("server.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server (apt-get install nats-server)");
        self.child = Some(child);
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "nats-server did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops it (SIGTERM) and waits until it is gone.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, with the same store.
    pub fn restart(&mut self) {
        self.launch();
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The prefix of the test clients' reply subjects: 4 tokens and more, so that a stream taking
/// `*.*.*` (Debezium's default) does not store the replies as messages.
const INBOX: &str = "_INBOX.test";

fn plain() -> async_nats::ConnectOptions {
    async_nats::ConnectOptions::new().custom_inbox_prefix(INBOX)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The messages of `stream` at `url` (`options` logs in), in sequence order; none when the
/// stream does not exist.
pub fn messages_with(url: &str, stream: &str, options: async_nats::ConnectOptions) -> Vec<Stored> {
    runtime().block_on(async {
        let client = options
            .custom_inbox_prefix(INBOX)
            .connect(url)
            .await
            .unwrap();
        let js = async_nats::jetstream::new(client);
        let Ok(mut stream) = js.get_stream(stream).await else {
            return Vec::new();
        };
        let info = stream.info().await.unwrap().state.clone();
        let mut out = Vec::new();
        if info.messages == 0 {
            return out;
        }
        for seq in info.first_sequence..=info.last_sequence {
            let m = match stream.get_raw_message(seq).await {
                Ok(m) => m,
                Err(e)
                    if e.kind()
                        == async_nats::jetstream::stream::RawMessageErrorKind::NoMessageFound =>
                {
                    continue
                }
                Err(e) => panic!("reading message {seq} of the stream: {e}"),
            };
            out.push(Stored {
                subject: m.subject.to_string(),
                id: m.headers.get("Nats-Msg-Id").map(|v| v.to_string()),
                payload: String::from_utf8_lossy(&m.payload).into_owned(),
            });
        }
        out
    })
}

/// [`messages_with`] without a login.
pub fn messages(url: &str, stream: &str) -> Vec<Stored> {
    messages_with(url, stream, async_nats::ConnectOptions::new())
}

/// Creates a file stream `name` taking `subjects` (the test's own, as an operator would).
pub fn add_stream(url: &str, name: &str, subjects: &[&str]) {
    runtime().block_on(async {
        let client = plain().connect(url).await.unwrap();
        let js = async_nats::jetstream::new(client);
        js.create_stream(async_nats::jetstream::stream::Config {
            name: name.into(),
            subjects: subjects.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
        .await
        .unwrap();
    })
}

/// How many messages `stream` at `url` holds (0 when the server or the stream is not there).
pub fn count(url: &str, stream: &str) -> u64 {
    runtime().block_on(async {
        let Ok(client) = plain().connect(url).await else {
            return 0;
        };
        let js = async_nats::jetstream::new(client);
        let Ok(mut stream) = js.get_stream(stream).await else {
            return 0;
        };
        stream.info().await.map_or(0, |i| i.state.messages)
    })
}
