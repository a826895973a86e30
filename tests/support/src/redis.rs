//! Redis for the tests: the machine's server (`SLUICE_REDIS_ADDRESS`, default `127.0.0.1:6379`)
//! and private `redis-server`s on free ports that a test may stop and start again, each with
//! a data directory of its own (entries kept across restarts with an append-only file).
//! Reads go through the `redis` crate's synchronous client: not the sink's code path.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The machine's server, `host:port`.
pub fn address() -> String {
    std::env::var("SLUICE_REDIS_ADDRESS").unwrap_or_else(|_| "127.0.0.1:6379".into())
}

/// A connection to the server at `address`.
pub fn connect(address: &str) -> redis::Connection {
    redis::Client::open(format!("redis://{address}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// The entries of `stream`: each its fields, in order.
pub fn entries(address: &str, stream: &str) -> Vec<Vec<(String, String)>> {
    let mut conn = connect(address);
    let reply: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(stream)
        .arg("-")
        .arg("+")
        .query(&mut conn)
        .unwrap();
    reply.into_iter().map(|(_, fields)| fields).collect()
}

/// A private server.
pub struct Private {
    pub port: u16,
    dir: tempfile::TempDir,
    extra: Vec<String>,
    child: Option<Child>,
}

impl Private {
    /// Starts one on a free port with more `redis-server` options.
    pub fn start(extra: &[&str]) -> Private {
        let mut server = Private {
            port: crate::pg::free_port(),
            dir: tempfile::tempdir().unwrap(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        server.launch();
        server
    }

    /// `127.0.0.1:<port>`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn launch(&mut self) {
        let dir: PathBuf = self.dir.path().into();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ])
            .arg("--dir")
            .arg(&dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (apt-get install redis-server)");
        self.child = Some(child);
        let t0 = Instant::now();
        loop {
            let ok = Command::new("redis-cli")
                .args(["-p", &self.port.to_string(), "--no-auth-warning", "ping"])
                .output()
                .is_ok_and(|o| !o.stdout.is_empty());
            if ok {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "redis-server did not start"
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

    /// Starts it again on the same port, with the same data.
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
