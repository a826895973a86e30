//! The `http` sink against a webhook receiver (Python's own HTTP server,
//! `tests/fixtures/http/receiver.py`), fed by the SQLite source through the `sluice` binary:
//! requests per event and per batch, retries of 503 with `Retry-After`, the idempotency key
//! that stays the same when a request is sent again, refusals under each failure mode, and
//! secret headers that never reach the logs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use rusqlite::Connection;
use serde_json::Value as Json;
use sluice_test_support::pg::free_port;
use sluice_test_support::pipeline::{Component, Pipeline};

/// A receiver on a free port; killed on drop.
struct Receiver {
    port: u16,
    log: PathBuf,
    child: Child,
}

impl Receiver {
    fn start(dir: &Path, name: &str, plan: &str) -> Self {
        let port = free_port();
        let log = dir.join(format!("{name}.jsonl"));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/http/receiver.py");
        let child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .arg(&log)
            .arg(plan)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs the receiver");
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the receiver did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Receiver { port, log, child }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// The requests received so far.
    fn requests(&self) -> Vec<Json> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The requests answered 200.
    fn accepted(&self) -> Vec<Json> {
        self.requests()
            .into_iter()
            .filter(|r| r["status"] == 200)
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn body(request: &Json) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(request["body"].as_str().unwrap())
        .unwrap()
}

fn body_json(request: &Json) -> Json {
    serde_json::from_slice(&body(request)).unwrap()
}

fn header<'a>(request: &'a Json, name: &str) -> Option<&'a str> {
    request["headers"][name].as_str()
}

/// A database with `t(id, v)` in capture mode holding `rows`.
fn database(dir: &Path, rows: &[(i64, &str)]) -> (PathBuf, Connection) {
    let db = dir.join("app.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("create table t (id integer primary key, v text)")
        .unwrap();
    for (id, v) in rows {
        conn.execute("insert into t values (?1, ?2)", rusqlite::params![id, v])
            .unwrap();
    }
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["capture", "enable", db.to_str().unwrap(), "t"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (db, conn)
}

/// The test pipeline of `db` under `dir`, without sinks: offsets flushed every 50 ms, no
/// restarts, topics under `app`.
fn base(dir: &Path, db: &Path) -> Pipeline {
    let source = Component::new("sqlite")
        .set("database.path", db)
        .set("topic.prefix", "app")
        .set("poll.interval.ms", 20u32);
    Pipeline::new("http_test", dir.join("data"))
        .setting("offsets", &[("flush_interval", "50ms".into())])
        .setting("restart", &[("max_retries", 0u32.into())])
        .source(source)
}

/// The test pipeline of `db` into `sinks`, written as `dir/pipeline.yaml`.
fn pipeline(dir: &Path, db: &Path, sinks: impl IntoIterator<Item = Component>) -> PathBuf {
    (sinks.into_iter())
        .fold(base(dir, db), Pipeline::sink)
        .write(dir)
}

fn run_until_idle(path: &Path, env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "--stop-when-idle", "2s"])
        .arg(path)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn events_reach_the_receiver_in_order_and_503s_are_retried_with_the_same_key() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = database(dir.path(), &[(1, "a"), (2, "b"), (3, "c")]);
    let each = Receiver::start(dir.path(), "each", "503:1,503");
    let batched = Receiver::start(dir.path(), "batched", "");
    let array = Receiver::start(dir.path(), "array", "");
    let sinks = [
        Component::new("http")
            .named("each")
            .set("url", each.url())
            .set("schemas.enable", false)
            .set("retry.interval.ms", 100u32),
        Component::new("http")
            .named("batched")
            .set("url", batched.url())
            .set("request.mode", "ndjson")
            .set("schemas.enable", false),
        Component::new("http")
            .named("array")
            .set("url", array.url())
            .set("request.mode", "array")
            .set("method", "PUT"),
    ];
    let path = pipeline(dir.path(), &db, sinks);
    ok(&run_until_idle(&path, &[]));

    let all = each.requests();
    assert_eq!(all[0]["status"], 503);
    assert_eq!(all[1]["status"], 503);
    let accepted = each.accepted();
    assert_eq!(accepted.len(), 3, "one request per event: {all:?}");
    assert_eq!(
        header(&all[0], "idempotency-key"),
        header(&accepted[0], "idempotency-key"),
        "a request sent again keeps its key"
    );
    let keys: std::collections::BTreeSet<_> = accepted
        .iter()
        .map(|r| header(r, "idempotency-key"))
        .collect();
    assert_eq!(keys.len(), 3, "each event has its own key");
    for (request, (id, v)) in accepted.iter().zip([(1, "a"), (2, "b"), (3, "c")]) {
        assert_eq!(request["method"], "POST");
        assert_eq!(request["path"], "/hook");
        assert_eq!(header(request, "content-type"), Some("application/json"));
        assert_eq!(header(request, "x-sluice-topic"), Some("app.main.t"));
        let key = base64::engine::general_purpose::STANDARD
            .decode(header(request, "x-sluice-key").unwrap())
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<Json>(&key).unwrap(),
            serde_json::json!({"id": id})
        );
        let value = body_json(request);
        assert_eq!(value["op"], "r");
        assert_eq!(value["after"], serde_json::json!({"id": id, "v": v}));
    }
    let lines: Vec<Json> = batched
        .accepted()
        .iter()
        .flat_map(|r| {
            assert_eq!(header(r, "content-type"), Some("application/x-ndjson"));
            String::from_utf8(body(r))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Json>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    let ids: Vec<&Json> = lines.iter().map(|l| &l["value"]["after"]["id"]).collect();
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(lines[0]["topic"], "app.main.t");
    let elements: Vec<Json> = array
        .accepted()
        .iter()
        .flat_map(|r| {
            assert_eq!(r["method"], "PUT");
            body_json(r).as_array().unwrap().clone()
        })
        .collect();
    let ids: Vec<&Json> = elements
        .iter()
        .map(|e| &e["value"]["payload"]["after"]["id"])
        .collect();
    assert_eq!(
        ids,
        [1, 2, 3],
        "with schemas: {{schema, payload}} per key and value"
    );

    conn.execute_batch("insert into t values (4, 'd'); update t set v = 'x' where id = 1; delete from t where id = 2;")
        .unwrap();
    ok(&run_until_idle(&path, &[]));
    let streamed = &each.accepted()[3..];
    let ops: Vec<String> = streamed
        .iter()
        .map(|r| match header(r, "x-sluice-tombstone") {
            Some("true") => {
                assert!(body(r).is_empty(), "a tombstone has no body");
                "-".to_owned()
            }
            _ => body_json(r)["op"].as_str().unwrap().to_owned(),
        })
        .collect();
    assert_eq!(ops, ["c", "u", "d", "-"]);

    // Everything was acknowledged: a restart sends nothing again.
    let before = (each.requests().len(), batched.requests().len());
    ok(&run_until_idle(&path, &[]));
    assert_eq!((each.requests().len(), batched.requests().len()), before);
}

#[test]
fn refused_requests_stop_the_pipeline_or_are_skipped_per_mode_and_secrets_stay_out_of_logs() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = database(dir.path(), &[(1, "a"), (2, "b")]);
    let receiver = Receiver::start(dir.path(), "refusing", "always:400");
    // The header's value reads an environment variable, which the loader interpolates in a
    // plain scalar only (and a flow mapping cannot hold `${...}` unquoted): the sink is text.
    let written = |mode: &str| {
        let sinks = format!(
            "sinks:\n  - type: http\n    url: {}\n    headers:\n      Authorization: Bearer ${{HOOK_TOKEN}}\n    event.processing.failure.handling.mode: {mode}\n",
            receiver.url()
        );
        let path = dir.path().join("pipeline.yaml");
        std::fs::write(&path, base(dir.path(), &db).yaml() + &sinks).unwrap();
        path
    };
    let token = ("HOOK_TOKEN", "s3cr3t-t0ken");
    let path = written("fail");
    let failed = run_until_idle(&path, &[token]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let error = stderr
        .lines()
        .rfind(|l| l.starts_with("error:"))
        .unwrap_or_default();
    assert!(
        error.contains("refused a request of 1 event(s): 400 Bad Request: nope")
            && error.contains("event.processing.failure.handling.mode: warn"),
        "{stderr}"
    );
    assert_eq!(receiver.requests().len(), 1, "a refusal is not retried");
    assert_eq!(
        header(&receiver.requests()[0], "authorization"),
        Some("Bearer s3cr3t-t0ken")
    );
    assert!(
        !stderr.contains("s3cr3t"),
        "the header's secret is in the logs: {stderr}"
    );

    let path = written("warn");
    let warned = run_until_idle(&path, &[token]);
    ok(&warned);
    let stderr = String::from_utf8_lossy(&warned.stderr);
    assert!(
        stderr.contains("Skipped events the receiver refused"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cr3t"), "{stderr}");
    assert_eq!(
        receiver.requests().len(),
        3,
        "both events tried once more, then skipped"
    );
}

/// `format: cloudevents` over HTTP: the structured binding (the file sink's CloudEvent as the
/// body, `application/cloudevents+json`), the binary one (`ce-*` headers, `data` as the body)
/// and a batch (`application/cloudevents-batch+json`, tombstones left out).
#[test]
fn cloudevents_go_in_the_structured_and_binary_bindings_and_as_batches() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = database(dir.path(), &[(1, "a"), (2, "b")]);
    let structured = Receiver::start(dir.path(), "structured", "");
    let binary = Receiver::start(dir.path(), "binary", "");
    let batch = Receiver::start(dir.path(), "batch", "");
    let http = |name: &str, url: String| {
        Component::new("http")
            .named(name)
            .set("url", url)
            .set("format", "cloudevents")
    };
    let sinks = [
        Component::new("file")
            .set("path", dir.path().join("ce.jsonl"))
            .set("format", "cloudevents"),
        http("structured", structured.url()),
        http("binary", binary.url()).set("cloudevents.mode", "binary"),
        http("batch", batch.url())
            .set("request.mode", "array")
            .set("schemas.enable", false),
    ];
    let path = pipeline(dir.path(), &db, sinks);
    ok(&run_until_idle(&path, &[]));
    conn.execute_batch("delete from t where id = 2").unwrap();
    ok(&run_until_idle(&path, &[]));

    let file: Vec<Json> = std::fs::read_to_string(dir.path().join("ce.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(file.len(), 4, "2 reads, a delete, its tombstone");
    let events = &file[..3];
    assert_eq!(events[0]["value"]["specversion"], "1.0");
    assert_eq!(events[0]["value"]["source"], "/debezium/sqlite/app");

    let got = structured.accepted();
    assert_eq!(got.len(), 4);
    for (request, line) in got.iter().zip(&file) {
        match line["value"].is_null() {
            true => assert_eq!(header(request, "x-sluice-tombstone"), Some("true")),
            false => {
                assert_eq!(
                    header(request, "content-type"),
                    Some("application/cloudevents+json")
                );
                assert_eq!(body_json(request), line["value"]);
            }
        }
    }

    let got = binary.accepted();
    assert_eq!(got.len(), 4);
    for (request, line) in got.iter().zip(events) {
        let ce = &line["value"];
        assert_eq!(header(request, "content-type"), Some("application/json"));
        for name in [
            "id",
            "source",
            "specversion",
            "type",
            "time",
            "iodebeziumop",
            "iodebeziumtable",
        ] {
            assert_eq!(
                header(request, &format!("ce-{name}")),
                ce[name].as_str(),
                "ce-{name}"
            );
        }
        assert_eq!(body_json(request), ce["data"]);
    }

    let got = batch.accepted();
    assert_eq!(got.len(), 2, "one request per batch");
    let all: Vec<Json> = got
        .iter()
        .flat_map(|r| {
            assert_eq!(
                header(r, "content-type"),
                Some("application/cloudevents-batch+json")
            );
            body_json(r).as_array().unwrap().clone()
        })
        .collect();
    assert_eq!(all.len(), 3, "tombstones are left out of a batch");
    for (ce, line) in all.iter().zip(events) {
        assert_eq!(ce["id"], line["value"]["id"]);
        assert_eq!(
            ce["data"], line["value"]["data"]["payload"],
            "without the data's schema"
        );
    }
}
