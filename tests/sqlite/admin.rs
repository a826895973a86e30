//! The admin endpoint's observation routes against a running pipeline: Prometheus metrics that
//! move as rows are captured, the health checks, the status JSON, and what a failing sink
//! shows (not ready, its last error).

use super::*;

/// The test pipeline of `db` with an admin endpoint on a free port: its file and the port.
fn admin_pipeline(dir: &Path, db: &Path) -> (PathBuf, u16) {
    let (pipeline, port) = admin_base(dir, source(db));
    (pipeline.write(dir), port)
}

/// The test pipeline of `source` with an admin endpoint on a free port: its parts and the
/// port.
fn admin_base(dir: &Path, source: Component) -> (Pipeline, u16) {
    let port = sluice_test_support::pg::free_port();
    let pipeline = base(dir, source).setting("admin", &[("bind", bind(port))]);
    (pipeline, port)
}

/// `127.0.0.1:port`.
fn bind(port: u16) -> Scalar {
    format!("127.0.0.1:{port}").into()
}

/// `GET target` on `port`: the status code and the body.
fn get(port: u16, target: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = response.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

/// Waits until `GET target` answers `status`; returns the body.
fn wait_for_status(port: u16, target: &str, status: u16) -> String {
    let t0 = Instant::now();
    loop {
        let answer = std::panic::catch_unwind(|| get(port, target));
        if let Ok((s, body)) = &answer {
            if *s == status {
                return body.clone();
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{target}: {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value of the Prometheus sample whose line starts with `name{` and holds `label`.
pub(super) fn sample(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} with {label} in:\n{text}"))
}

#[test]
fn metrics_health_and_status_follow_a_running_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text);",
        &["t"],
    );
    let (path, port) = admin_pipeline(dir.path(), &db);
    let child = start(&path, &[]);
    wait_for_status(port, "/health/ready", 200);
    assert_eq!(get(port, "/health/live").0, 200);
    // Before any event (the table is empty, snapshot and all): Debezium's `Connected`.
    let t0 = Instant::now();
    let connected = loop {
        let (_, metrics) = get(port, "/metrics");
        if metrics.contains("debezium_metrics_Connected{") || t0.elapsed() > Duration::from_secs(10)
        {
            break metrics;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        sample(
            &connected,
            "debezium_metrics_Connected",
            "plugin=\"sqlite\",name=\"app\",context=\"streaming\""
        ),
        1.0,
        "{connected}"
    );
    assert_eq!(lines(dir.path()).len(), 0, "no event yet");
    let sent = |metrics: &str| sample(metrics, "sluice_events_sent_total", "component=\"source\"");
    conn.execute_batch("insert into t values (1, 'a'); insert into t values (2, 'b');")
        .unwrap();
    wait_lines(dir.path(), 2);
    let (status, first) = get(port, "/metrics");
    assert_eq!(status, 200);
    assert!(sent(&first) >= 2.0, "{first}");
    conn.execute_batch(
        "with recursive g(v) as (select 3 union all select v + 1 from g where v < 102) insert into t select v, 'row' from g;",
    )
    .unwrap();
    wait_lines(dir.path(), 102);
    // The sink counts an event once it is acknowledged, a moment after it is in the file.
    let t0 = Instant::now();
    let second = loop {
        let (_, metrics) = get(port, "/metrics");
        let sink = sample(&metrics, "sluice_events_sent_total", "component=\"sink:");
        if sink >= 102.0 || t0.elapsed() > Duration::from_secs(10) {
            break metrics;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(sent(&second) >= sent(&first) + 100.0, "{second}");
    let sink = sample(&second, "sluice_events_sent_total", "component=\"sink:");
    assert!(sink >= 102.0, "{second}");
    // The status: running, the events counted, a committed position.
    let t0 = Instant::now();
    let status = loop {
        let (code, body) = get(port, "/pipelines/sqlite_test");
        assert_eq!(code, 200);
        let j: Json = serde_json::from_str(&body).unwrap();
        if !j["committed"].is_null() || t0.elapsed() > Duration::from_secs(10) {
            break j;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status["state"], "running", "{status}");
    assert_eq!(status["events"], 102, "{status}");
    assert!(!status["committed"].is_null(), "{status}");
    assert!(status["last_error"].is_null(), "{status}");
    // The queues' fill against their limits, and the position each sink has taken: the
    // file sink has everything, so its position is the last event's (the committed one's or
    // later).
    assert_eq!(status["queues"]["source"]["max_events"], 8192, "{status}");
    assert!(status["queues"]["sink:file"]["events"].is_u64(), "{status}");
    let acknowledged = &status["sinks"]["file"]["acknowledged"];
    assert!(acknowledged["seq"].is_u64(), "{status}");
    assert!(
        acknowledged["seq"].as_u64() >= status["committed"]["seq"].as_u64(),
        "{status}"
    );
    assert_eq!(get(port, "/pipelines/other").0, 404);
    // `sluice status` reads the same.
    let o = sluice(&["status", path.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    let shown: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (shown["name"].as_str(), shown["state"].as_str()),
        (Some("sqlite_test"), Some("running"))
    );
    sluice_test_support::pg::stop(&child);
    assert!(child.wait_with_output().unwrap().status.success());
}

/// A sink whose writes fail (retried with backoff, the pipeline still running) makes the
/// pipeline not ready, and the status names the sink and its error.
#[cfg(feature = "http")]
#[test]
fn a_failing_sink_makes_the_pipeline_not_ready_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key);",
        &["t"],
    );
    conn.execute_batch("insert into t values (1);").unwrap();
    let closed = sluice_test_support::pg::free_port();
    let (pipeline, port) = admin_base(dir.path(), source(&db));
    // A sink whose server is away: its writes fail and are retried.
    let away = Component::new("http")
        .set("url", format!("http://127.0.0.1:{closed}/events"))
        .set("retries", 0u32);
    let path = pipeline.without_sinks().sink(away).write(dir.path());
    let mut child = start(&path, &[]);
    let body = wait_for_status(port, "/health/ready", 503);
    assert!(body.contains("DOWN"), "{body}");
    let t0 = Instant::now();
    let status = loop {
        let j: Json = serde_json::from_str(&get(port, "/pipelines/sqlite_test").1).unwrap();
        if !j["failing_sinks"]["http"].is_null() || t0.elapsed() > Duration::from_secs(20) {
            break j;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status["state"], "running", "{status}");
    assert!(!status["failing_sinks"]["http"].is_null(), "{status}");
    let error = status["last_error"]["message"].as_str().unwrap();
    assert!(error.contains(&format!("127.0.0.1:{closed}")), "{status}");
    assert!(status["last_error"]["at_ms"].as_u64().unwrap() > 0);
    assert_eq!(get(port, "/health/live").0, 200, "alive while not ready");
    let o = sluice(&["status", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "not ready: {o:?}");
    // The server comes: the next retry writes, the pipeline is ready again.
    let listener = std::net::TcpListener::bind(("127.0.0.1", closed)).unwrap();
    std::thread::spawn(move || {
        use std::io::{BufRead, Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; length];
            let _ = reader.read_exact(&mut body);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    let body = wait_for_status(port, "/health/ready", 200);
    assert!(body.contains("\"UP\""), "{body}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Debezium's connector metrics under the JMX exporter's names, moving with the data: the
/// snapshot's rows (`RowsScanned`, `SnapshotCompleted`), then streamed changes
/// (`TotalNumberOfEventsSeen` by kind, `MilliSecondsBehindSource`, `Connected`, the queue).
#[test]
fn debeziums_metric_names_follow_the_snapshot_and_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text);
         with recursive g(v) as (select 1 union all select v + 1 from g where v < 50) insert into t select v, 'row' from g;",
        &["t"],
    );
    let (path, port) = admin_pipeline(dir.path(), &db);
    let child = start(&path, &[]);
    wait_lines(dir.path(), 50);
    let metrics = wait_for_status(port, "/metrics", 200);
    println!("{metrics}");
    let snapshot = "context=\"snapshot\"";
    assert_eq!(
        sample(
            &metrics,
            "debezium_metrics_TotalNumberOfEventsSeen",
            snapshot
        ),
        50.0
    );
    assert_eq!(
        sample(&metrics, "debezium_metrics_RowsScanned", "table="),
        50.0
    );
    conn.execute_batch(
        "insert into t values (51, 'x'); insert into t values (52, 'y'); update t set v = 'z' where id = 1; delete from t where id = 2;",
    )
    .unwrap();
    wait_lines(dir.path(), 54);
    let metrics = get(port, "/metrics").1;
    let streaming = "context=\"streaming\"";
    let value =
        |name: &str, label: &str| sample(&metrics, &format!("debezium_metrics_{name}"), label);
    assert_eq!(value("SnapshotCompleted", snapshot), 1.0, "{metrics}");
    assert_eq!(value("SnapshotRunning", snapshot), 0.0);
    assert_eq!(
        value("TotalNumberOfEventsSeen", streaming),
        4.0,
        "{metrics}"
    );
    assert_eq!(value("TotalNumberOfCreateEventsSeen", streaming), 2.0);
    assert_eq!(value("TotalNumberOfUpdateEventsSeen", streaming), 1.0);
    assert_eq!(value("TotalNumberOfDeleteEventsSeen", streaming), 1.0);
    assert_eq!(value("Connected", streaming), 1.0);
    // The changes were made a moment ago.
    assert!(
        value("MilliSecondsBehindSource", streaming) < 60_000.0,
        "{metrics}"
    );
    assert!(value("QueueTotalCapacity", streaming) > 0.0);
    assert!(value("QueueRemainingCapacity", streaming) <= value("QueueTotalCapacity", streaming));
    assert!(
        metrics.contains("plugin=\"sqlite\"") && metrics.contains("name=\"app\""),
        "{metrics}"
    );
    sluice_test_support::pg::stop(&child);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    // The snapshot's progress in the log: its end, with the rows read.
    let log = String::from_utf8_lossy(&out.stderr);
    let line =
        (log.lines().find(|l| l.contains("Snapshot read."))).unwrap_or_else(|| panic!("{log}"));
    assert!(line.contains("rows=50"), "{line}");
}

#[test]
fn an_endpoint_beyond_this_machine_needs_its_token_and_the_cli_sends_it() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text);",
        &["t"],
    );
    let (pipeline, port) = admin_base(dir.path(), source(&db));
    let everywhere: Scalar = format!("0.0.0.0:{port}").into();
    let open = pipeline.setting("admin", &[("bind", everywhere.clone())]);
    let path = open.write(dir.path());
    // No token: refused before anything runs, naming the fix.
    let o = std::process::Command::new(sluice_test_support::pg::sluice())
        .arg("validate")
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("listens beyond this machine: set `token`") && err.contains("admin"),
        "{err}"
    );
    // A token from a file: requests without it are refused, the health checks are not, and
    // `sluice status` sends it.
    let secret = "3f9c2a7b1d8e4c6a9b0d2e4f6a8c0e1d";
    std::fs::write(dir.path().join("token"), format!("{secret}\n")).unwrap();
    let token_file = ("token.file", dir.path().join("token").into());
    let guarded = open
        .clone()
        .setting("admin", &[("bind", everywhere), token_file]);
    guarded.write(dir.path());
    let mut child = sluice_test_support::pg::spawn_logged(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("run")
            .arg(&path),
    );
    wait_for_status(port, "/health/live", 200);
    let (status, body) = get(port, "/pipelines/sqlite_test");
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("Authorization: Bearer"), "{body}");
    assert_eq!(get(port, "/metrics").0, 401);
    let o = std::process::Command::new(sluice_test_support::pg::sluice())
        .arg("status")
        .arg(&path)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("\"state\""),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!out.contains(secret), "the token is in no answer");
    child.kill().unwrap();
    child.wait().unwrap();
    let log = sluice_test_support::pg::log_of(&child);
    assert!(!log.contains(secret), "the token is in no log line:\n{log}");

    // A token from the environment (`${VAR}`): the same, for the run and the command line.
    // (In block style: `${...}` is a plain scalar, which a flow mapping's braces would end.)
    let from_env = open.yaml().replace(
        &format!("admin: {{ bind: \"0.0.0.0:{port}\" }}"),
        &format!("admin:\n  bind: \"0.0.0.0:{port}\"\n  token: ${{SLUICE_TEST_ADMIN_TOKEN}}"),
    );
    assert!(from_env.contains("SLUICE_TEST_ADMIN_TOKEN"), "{from_env}");
    std::fs::write(&path, from_env).unwrap();
    let env_secret = "b7e1c94d0a2f3e5d6c8b9a0f1e2d3c4b";
    let mut child = sluice_test_support::pg::spawn_logged(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("run")
            .arg(&path)
            .env("SLUICE_TEST_ADMIN_TOKEN", env_secret),
    );
    wait_for_status(port, "/health/live", 200);
    assert_eq!(get(port, "/pipelines/sqlite_test").0, 401);
    let (code, answer) = curl(
        &["-H", &format!("Authorization: Bearer {env_secret}")],
        &format!("http://127.0.0.1:{port}/pipelines/sqlite_test"),
    );
    assert_eq!(code, Some(0), "{answer}");
    assert!(answer.contains("\"state\""), "{answer}");
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("status")
        .arg(&path)
        .env("SLUICE_TEST_ADMIN_TOKEN", env_secret)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("\"state\""),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let log = sluice_test_support::pg::log_of(&child);
    assert!(
        !log.contains(env_secret),
        "the token is in no log line:\n{log}"
    );
}

#[test]
fn a_tap_shows_one_sinks_events_of_the_topics_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text); create table u (id integer primary key);",
        &["t", "u"],
    );
    let (pipeline, port) = admin_base(dir.path(), source(&db));
    let quiet = Component::new("null").named("quiet");
    let path = pipeline.sink(quiet).write(dir.path());
    let mut child = start(&path, &[]);
    wait_for_status(port, "/health/ready", 200);
    let sluice = env!("CARGO_BIN_EXE_sluice");
    // A sink the pipeline does not have: one line naming those it has.
    let o = Command::new(sluice)
        .args(["tap", "--sink", "nope"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no sink named `nope`: the sinks are file, quiet"),
        "{err}"
    );
    // Three events of table t, as the file sink is handed them.
    let tap = Command::new(sluice)
        .args([
            "tap",
            "--sink",
            "file",
            "--topic",
            "app\\.main\\.t",
            "--limit",
            "3",
        ])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    for i in 1..=4 {
        conn.execute_batch(&format!(
            "insert into u values ({i}); insert into t values ({i}, 'v{i}');"
        ))
        .unwrap();
    }
    let o = tap.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tapped: Vec<Json> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(tapped.len(), 3, "{out}");
    wait_lines(dir.path(), 8);
    let file: Vec<Json> = lines(dir.path())
        .into_iter()
        .filter(|l| l["topic"] == "app.main.t")
        .collect();
    for (t, f) in tapped.iter().zip(&file) {
        assert_eq!(t["sink"], "file");
        assert_eq!(
            (&t["topic"], &t["key"], &t["value"]),
            (&f["topic"], &f["key"], &f["value"])
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The page at `url` as headless Chromium renders it once its script has run (Debian's
/// `chromium`; `tests/run.sh` installs it).
pub(super) fn rendered(url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let o = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=4000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .output()
        .expect("chromium (apt-get install chromium; tests/run.sh installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_status_page_shows_the_pipeline_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text); insert into t values (1, 'a'), (2, 'b');",
        &["t"],
    );
    let (path, port) = admin_pipeline(dir.path(), &db);
    let mut child = start(&path, &[]);
    wait_for_status(port, "/health/ready", 200);
    conn.execute_batch("insert into t values (3, 'c');")
        .unwrap();
    wait_lines(dir.path(), 3);
    let dom = rendered(&format!("http://127.0.0.1:{port}/"));
    child.kill().unwrap();
    child.wait().unwrap();
    // What the script filled in from the status: the name, the state, the events, the
    // snapshot's rows by table, the throughput line.
    assert!(
        dom.contains(r#"<span id="name">sqlite_test</span>"#),
        "{dom}"
    );
    assert!(dom.contains(r#"data-state="running""#), "{dom}");
    assert!(dom.contains(r#"<td id="connected">yes</td>"#), "{dom}");
    let events: u64 = dom
        .split(r#"<td id="events">"#)
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no event count in {dom}"));
    assert!(events >= 3, "{events}");
    assert!(
        dom.contains("main.t 2 rows") || dom.contains("t 2 rows"),
        "{dom}"
    );
    assert!(dom.contains("<polyline"), "{dom}");
}

/// Debezium's `NumberOfErroneousEvents` counts the changes skipped under
/// `event.processing.failure.handling.mode: warn`, in the snapshot and in the stream.
#[test]
fn skipped_changes_are_counted_as_erroneous_events() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, n integer); insert into t values (1, 10), (2, 'abc'), (3, 30);",
        &["t"],
    );
    let warn = source(&db).set("event.processing.failure.handling.mode", "warn");
    let (pipeline, port) = admin_base(dir.path(), warn);
    let path = pipeline.write(dir.path());
    let mut child = start(&path, &[]);
    wait_lines(dir.path(), 2);
    conn.execute_batch("update t set n = 'x' where id = 1; insert into t values (4, 40);")
        .unwrap();
    wait_lines(dir.path(), 3);
    let t0 = Instant::now();
    let erroneous = loop {
        let (_, metrics) = get(port, "/metrics");
        let label = "context=\"streaming\"";
        let line = metrics.lines().find(|l| {
            l.starts_with("debezium_metrics_NumberOfErroneousEvents{") && l.contains(label)
        });
        if let Some(v) = line
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
        {
            if v >= 2.0 || t0.elapsed() > Duration::from_secs(10) {
                break v;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{metrics}");
        std::thread::sleep(Duration::from_millis(200));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        erroneous, 2.0,
        "the snapshot's row 2 and the stream's update of row 1"
    );
}

/// `curl` against the endpoint: its exit code and what it printed (`args` before the URL).
fn curl(args: &[&str], url: &str) -> (Option<i32>, String) {
    let o = Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// HTTPS with client certificates: curl (an independent client) is answered only with a
/// certificate the configured CA signed; plain HTTP gets no answer; `sluice status` and
/// `signal` go over HTTPS with `--cacert`, `--cert`, `--key`.
#[test]
fn the_endpoint_serves_https_and_asks_for_client_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    sluice_test_support::certs::ca(&certs, "ca");
    sluice_test_support::certs::server_certificate(&certs, "ca");
    sluice_test_support::certs::client_certificate(&certs, "ca", "operator");
    sluice_test_support::certs::ca(&certs, "other");
    sluice_test_support::certs::client_certificate(&certs, "other", "stranger");
    let (db, _conn) = captured(
        dir.path(),
        "create table t (id integer primary key); insert into t values (1);",
        &["t"],
    );
    let (pipeline, port) = admin_base(dir.path(), source(&db));
    let tls = [
        ("bind", bind(port)),
        ("tls.certificate", certs.join("server.pem").into()),
        ("tls.key", certs.join("server.key").into()),
        ("tls.client.ca", certs.join("ca.pem").into()),
    ];
    let path = pipeline.setting("admin", &tls).write(dir.path());
    let c = certs.display();
    let mut child = start(&path, &[]);
    wait_lines(dir.path(), 1);
    let url = format!("https://127.0.0.1:{port}/pipelines/sqlite_test");
    let ca = format!("{c}/ca.pem");
    let (cert, key) = (format!("{c}/operator.pem"), format!("{c}/operator.key"));
    let t0 = Instant::now();
    let (code, body) = loop {
        let answer = curl(&["--cacert", &ca, "--cert", &cert, "--key", &key], &url);
        if answer.0 == Some(0) || t0.elapsed() > Duration::from_secs(20) {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(code, Some(0), "{body}");
    let status: Json = serde_json::from_str(&body).unwrap();
    assert_eq!(status["name"], "sqlite_test", "{body}");
    // No certificate, or one another CA signed: no answer.
    assert_ne!(curl(&["--cacert", &ca], &url).0, Some(0));
    let (stranger, stranger_key) = (format!("{c}/stranger.pem"), format!("{c}/stranger.key"));
    assert_ne!(
        curl(
            &["--cacert", &ca, "--cert", &stranger, "--key", &stranger_key],
            &url
        )
        .0,
        Some(0)
    );
    // Plain HTTP: no HTTP answer.
    let (plain_code, plain) = curl(&[], &format!("http://127.0.0.1:{port}/health/live"));
    assert!(plain_code != Some(0) || !plain.contains("UP"), "{plain}");
    // The command line speaks HTTPS too: with the CA and the client certificate it is
    // answered, without the certificate it is refused (one line).
    let p = path.to_str().unwrap();
    let tls = [
        "--cacert",
        ca.as_str(),
        "--cert",
        cert.as_str(),
        "--key",
        key.as_str(),
    ];
    let o = sluice(&[&["status", p][..], &tls[..]].concat());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        serde_json::from_str::<Json>(&out).unwrap()["name"],
        "sqlite_test"
    );
    let signal = r#"{"id": "s-1", "type": "log", "data": {"message": "over TLS"}}"#;
    let o = sluice(&[&["signal", p, signal][..], &tls[..]].concat());
    assert!(o.status.success(), "{}", text(&o).1);
    let o = sluice(&["status", p, "--cacert", &ca]);
    let line = error_line(&o);
    assert!(
        line.contains("reading the answer") || line.contains("sending the request"),
        "{line}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The endpoint's limits against a running pipeline: a body over 64 KiB is refused (`413`)
/// before it is read, a body that is not JSON is refused (`415`: no form posts from other
/// sites), and a client that stops sending mid-request is dropped after 10 s.
#[test]
fn requests_are_bounded_in_size_and_time_and_bodies_are_json() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text);",
        &["t"],
    );
    let (path, port) = admin_pipeline(dir.path(), &db);
    let mut child = start(&path, &[]);
    wait_for_status(port, "/health/live", 200);
    let exchange = |request: &str| {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response
    };
    let big = exchange("POST /pipelines/sqlite_test/signals HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 70000\r\n\r\n{");
    assert!(big.starts_with("HTTP/1.1 413"), "{big}");
    let form = exchange("POST /pipelines/sqlite_test/signals HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: 3\r\n\r\na=b");
    assert!(form.starts_with("HTTP/1.1 415"), "{form}");
    // Half a request, then nothing: the connection is closed, unanswered, after 10 s.
    let t0 = Instant::now();
    let stalled = exchange("GET /pipelines/sqlite_test HTTP/1.1\r\nhost: 127.0.0.1\r\n");
    let waited = t0.elapsed();
    assert!(stalled.is_empty(), "{stalled}");
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(25),
        "closed after {waited:?}"
    );
    assert_eq!(get(port, "/health/live").0, 200, "still serving");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// An incremental snapshot's rows, by table, in the status (`snapshot.incremental`).
#[test]
fn the_status_counts_an_incremental_snapshots_rows() {
    let port = sluice_test_support::pg::free_port();
    let (dir, signals, path) = super::signals::file_signals_with(120, 50, |pipeline| {
        pipeline.setting("admin", &[("bind", bind(port))])
    });
    let mut child = start(&path, &[]);
    wait_for_status(port, "/health/ready", 200);
    std::fs::write(
        &signals,
        "{\"id\": \"i-1\", \"type\": \"execute-snapshot\", \"data\": {\"data-collections\": [\"main.t\"]}}\n",
    )
    .unwrap();
    let t0 = Instant::now();
    let snapshot = loop {
        let (_, body) = get(port, "/pipelines/sqlite_test");
        let status: Json = serde_json::from_str(&body).unwrap_or_default();
        if status["snapshot"]["incremental"]["app.main.t"] == 120 {
            break status["snapshot"].clone();
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{status}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(snapshot["running"], false, "{snapshot}");
    let reads = lines(dir.path())
        .iter()
        .filter(|l| l["value"]["source"]["snapshot"] == "incremental")
        .count();
    assert_eq!(reads, 120);
    child.kill().unwrap();
    child.wait().unwrap();
}
