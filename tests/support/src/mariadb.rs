//! A private MariaDB server with the binlog on (the machine's own runs with `log_bin=OFF`),
//! started once per test process on a free port with a data directory of its own, and stopped
//! when the process ends (a watcher shell kills it once its parent is gone). `SLUICE_MARIADB_PORT`
//! points the tests at a running server instead (root without a password on 127.0.0.1).
//! Statements go through the `mariadb` command-line client: a client independent of Sluice's.

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The server the tests of this process use.
pub struct Server {
    pub port: u16,
    _dir: Option<tempfile::TempDir>,
    /// The watcher shell (it outlives this process by at most a second).
    _watcher: Option<std::process::Child>,
}

static SERVER: OnceLock<Server> = OnceLock::new();

/// Starts the server on first use.
pub fn server() -> &'static Server {
    SERVER.get_or_init(|| {
        if let Some(port) = std::env::var("SLUICE_MARIADB_PORT")
            .ok()
            .and_then(|p| p.parse().ok())
        {
            return Server {
                port,
                _dir: None,
                _watcher: None,
            };
        }
        let dir = install();
        let (port, watcher) = launch_on_free_port(dir.path(), "");
        Server {
            port,
            _dir: Some(dir),
            _watcher: Some(watcher),
        }
    })
}

/// A data directory with a fresh install.
fn install() -> tempfile::TempDir {
    // Several servers may be installed at once (one per test that restarts its own): a failed
    // install is tried again, and its output is shown if it keeps failing.
    let mut last = String::new();
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let out = Command::new("mariadb-install-db")
            .args([
                "--no-defaults",
                "--user=root",
                "--auth-root-authentication-method=normal",
            ])
            .arg(format!("--datadir={}", data.display()))
            .output()
            .expect("mariadb-install-db (apt-get install mariadb-server)");
        if out.status.success() {
            return dir;
        }
        last = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("mariadb-install-db failed: {last}")
}

/// Starts mariadbd on `dir` and `port` under a watcher shell that ends it when the test
/// process is gone, and waits until it answers. `None` when the port was taken by another
/// server (several tests pick free ports at once): the server that answers there is not this
/// one (its data directory differs) or this one exited.
fn try_launch(dir: &std::path::Path, port: u16, extra: &str) -> Option<std::process::Child> {
    let d = dir.display();
    let server = format!(
        "mariadbd --no-defaults --datadir={d}/data --port={port} --bind-address=127.0.0.1 \
         --socket={d}/sock --pid-file={d}/pid --user=root --log-bin={d}/data/binlog --server-id=1 \
         --binlog-format=ROW --binlog-row-image=FULL --binlog-row-metadata=FULL \
         --default-time-zone=+00:00 --skip-name-resolve {extra} >>{d}/server.log 2>&1"
    );
    let watcher = format!(
        "{server} & M=$!; while kill -0 {parent} 2>/dev/null && kill -0 $M 2>/dev/null; do sleep 1; done; kill $M 2>/dev/null",
        parent = std::process::id()
    );
    let mut watcher = Command::new("sh")
        .args(["-c", &watcher])
        .stdin(Stdio::null())
        .spawn()
        .expect("start mariadbd");
    let t0 = Instant::now();
    let ours = format!("{d}/data/");
    loop {
        if watcher.try_wait().ok().flatten().is_some() {
            return None;
        }
        if ping(port) {
            match datadir(port) {
                Some(answering) if answering == ours => return Some(watcher),
                Some(_) => {
                    // Another test's server holds the port: ours cannot bind it.
                    let _ = watcher.kill();
                    let _ = watcher.wait();
                    if let Ok(pid) = std::fs::read_to_string(dir.join("pid")) {
                        let _ = Command::new("kill").args(["-TERM", pid.trim()]).status();
                    }
                    return None;
                }
                None => {}
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the private MariaDB did not start: {}",
            std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// [`try_launch`] on a free port, another one while the port turns out taken.
fn launch_on_free_port(dir: &std::path::Path, extra: &str) -> (u16, std::process::Child) {
    for _ in 0..5 {
        let port = crate::pg::free_port();
        if let Some(watcher) = try_launch(dir, port, extra) {
            return (port, watcher);
        }
    }
    panic!("the private MariaDB found no free port in 5 tries")
}

/// The data directory of the server answering on `port`.
fn datadir(port: u16) -> Option<String> {
    let out = Command::new("mariadb")
        .args([
            "-h127.0.0.1",
            &format!("-P{port}"),
            "-uroot",
            "-N",
            "-B",
            "-e",
            "select @@datadir",
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A server of one test's own, which it may stop and start again (same port and data).
pub struct Restartable {
    pub port: u16,
    dir: tempfile::TempDir,
    watcher: Option<std::process::Child>,
    /// More `mariadbd` options (`--ssl-cert=...`).
    extra: String,
}

impl Restartable {
    /// Installs and starts it.
    pub fn start() -> Restartable {
        Self::start_with("")
    }

    /// Installs and starts it with more `mariadbd` options.
    pub fn start_with(extra: &str) -> Restartable {
        let dir = install();
        let (port, watcher) = launch_on_free_port(dir.path(), extra);
        let watcher = Some(watcher);
        Restartable {
            port,
            dir,
            watcher,
            extra: extra.to_owned(),
        }
    }

    /// Installs and starts it with TLS: in `certs`, a CA (`ca.pem`), another one the server
    /// does not know (`other.pem`), and the server's certificate for 127.0.0.1 that `ca` signs.
    pub fn start_tls(certs: &std::path::Path) -> Restartable {
        use crate::certs::{ca, server_certificate};
        ca(certs, "ca");
        ca(certs, "other");
        server_certificate(certs, "ca");
        Self::start_with(&format!(
            "--ssl-ca={d}/ca.pem --ssl-cert={d}/server.pem --ssl-key={d}/server.key",
            d = certs.display()
        ))
    }

    /// Stops it (a clean shutdown) and waits until it is gone.
    pub fn stop(&mut self) {
        let pid = std::fs::read_to_string(self.dir.path().join("pid")).unwrap();
        Command::new("kill")
            .args(["-TERM", pid.trim()])
            .status()
            .unwrap();
        if let Some(mut w) = self.watcher.take() {
            w.wait().unwrap();
        }
        let t0 = Instant::now();
        while ping(self.port) {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "mariadbd did not stop"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts it again.
    pub fn restart(&mut self) {
        // The same port (the pipeline under test points at it): taken meanwhile by another
        // test's server, the test cannot go on.
        self.watcher = Some(
            try_launch(self.dir.path(), self.port, &self.extra).unwrap_or_else(|| {
                panic!("port {} was taken while the server was down", self.port)
            }),
        );
    }

    /// [`sql`] on this server.
    pub fn sql(&self, db: &str, statements: &str) -> String {
        sql_at(self.port, db, statements)
    }
}

impl Drop for Restartable {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("pid")) {
            let _ = Command::new("kill").args(["-TERM", pid.trim()]).status();
        }
        if let Some(mut w) = self.watcher.take() {
            let _ = w.wait();
        }
    }
}

fn ping(port: u16) -> bool {
    Command::new("mariadb")
        .args([
            "-h127.0.0.1",
            &format!("-P{port}"),
            "-uroot",
            "-e",
            "select 1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `sql` (statements separated by `;`) in database `db` (`""`: none) and returns the
/// output rows, tab-separated, without headers.
pub fn sql(db: &str, sql: &str) -> String {
    sql_at(server().port, db, sql)
}

/// [`sql`] on the server at `port`.
pub fn sql_at(port: u16, db: &str, sql: &str) -> String {
    let mut cmd = Command::new("mariadb");
    cmd.args(["-h127.0.0.1", &format!("-P{port}"), "-uroot", "-N", "-B"]);
    if !db.is_empty() {
        cmd.arg(db);
    }
    // An argument holds 128 KiB at most: a longer script goes in on standard input.
    let out = if sql.len() < 100_000 {
        cmd.args(["-e", sql]).output().expect("mariadb client")
    } else {
        crate::scenario::piped(&mut cmd, sql.trim_end().trim_end_matches(';'))
    };
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh database named after `test` (dropped first if an earlier run left it).
pub fn database(test: &str) -> String {
    let name: String = test
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    sql(
        "",
        &format!("DROP DATABASE IF EXISTS `{name}`; CREATE DATABASE `{name}`"),
    );
    name
}
