//! `sluice serve` with a watched directory of SQLite pipelines: several at once, one failing
//! while the others go on, a file changed (restarted from its committed position: nothing lost,
//! nothing twice), one removed, pause/resume and restart through the Kafka Connect API, the
//! page listing them all.

use super::*;
use sluice_test_support::pg::admin_call;

/// A pipeline `name` reading `db` (topics under `name`, its source's `keys` set) into
/// `<dir>/<name>.jsonl`, its offsets kept in `<dir>/data-<name>`.
pub(super) fn serve_base(dir: &Path, name: &str, db: &Path, keys: &[(&str, Scalar)]) -> Pipeline {
    let sink = Component::new("file")
        .set("path", dir.join(format!("{name}.jsonl")))
        .set("schemas.enable", false);
    Pipeline::new(name, dir.join(format!("data-{name}")))
        .setting("offsets", &[("flush_interval", "50ms".into())])
        .source(source(db).set("topic.prefix", name).set_all(keys))
        .sink(sink)
}

/// The ids of table `t`'s created rows in `<dir>/<name>.jsonl`, in order.
pub(super) fn created_ids(dir: &Path, name: &str) -> Vec<i64> {
    let text = std::fs::read_to_string(dir.join(format!("{name}.jsonl"))).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
    complete
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).unwrap())
        .filter(|l| l["value"]["op"] == "c")
        .map(|l| l["value"]["after"]["id"].as_i64().unwrap())
        .collect()
}

pub(super) fn wait_ids(dir: &Path, name: &str, want: &[i64]) {
    let t0 = Instant::now();
    loop {
        let got = created_ids(dir, name);
        if got == want {
            return;
        }
        assert!(
            got.len() <= want.len() && t0.elapsed() < Duration::from_secs(60),
            "{name}: got {got:?}, want {want:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `method target` answers `status` (and `check` holds of the body).
pub(super) fn wait_answer(
    port: u16,
    target: &str,
    status: u16,
    check: impl Fn(&str) -> bool,
) -> String {
    let t0 = Instant::now();
    loop {
        let answer = admin_call(port, "GET", target, None);
        if let Some((s, body)) = &answer {
            if *s == status && check(body) {
                return body.clone();
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{target}: {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn state(port: u16, name: &str) -> String {
    let (s, body) = admin_call(port, "GET", &format!("/connectors/{name}/status"), None).unwrap();
    assert_eq!(s, 200, "{body}");
    let j: Json = serde_json::from_str(&body).unwrap();
    j["connector"]["state"].as_str().unwrap().to_owned()
}

pub(super) fn wait_state(port: u16, name: &str, want: &str) {
    let target = format!("/connectors/{name}/status");
    wait_answer(port, &target, 200, |b| {
        serde_json::from_str::<Json>(b).is_ok_and(|j| j["connector"]["state"] == want)
    });
}

pub(super) fn insert(conn: &Connection, ids: std::ops::RangeInclusive<i64>) {
    for id in ids {
        conn.execute("insert into t values (?1, 'x')", [id])
            .unwrap();
    }
}

#[test]
fn serve_runs_a_directory_of_pipelines_and_follows_its_changes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let watched = root.join("pipelines");
    std::fs::create_dir(&watched).unwrap();
    let mut dbs = Vec::new();
    for name in ["a", "b"] {
        let sub = root.join(format!("db-{name}"));
        std::fs::create_dir(&sub).unwrap();
        let (db, conn) = captured(
            &sub,
            "create table t (id integer primary key, v text);",
            &["t"],
        );
        serve_base(root, name, &db, &[]).write_as(&watched.join(format!("{name}.yaml")));
        dbs.push((db, conn));
    }
    // A pipeline whose database is not there: it fails, the others go on.
    let missing = root.join("missing.db");
    serve_base(root, "c", &missing, &[]).write_as(&watched.join("c.yaml"));
    // A file that does not load: shown failed under its file's name, saying where.
    std::fs::write(watched.join("broken.yaml"), "name: broken\nsource: [\n").unwrap();
    let port = sluice_test_support::pg::free_port();
    let child = serve(port, &watched, &root.join("serve"));
    wait_state(port, "a", "RUNNING");
    wait_state(port, "b", "RUNNING");
    wait_state(port, "c", "FAILED");
    wait_state(port, "broken", "FAILED");
    let status: Json = serde_json::from_str(
        &admin_call(port, "GET", "/connectors/broken/status", None)
            .unwrap()
            .1,
    )
    .unwrap();
    let trace = status["tasks"][0]["trace"].as_str().unwrap();
    assert!(
        trace.contains("broken.yaml:"),
        "the file and where in it: {trace}"
    );
    let (s, list) = admin_call(port, "GET", "/connectors", None).unwrap();
    assert_eq!((s, list.trim()), (200, r#"["a","b","broken","c"]"#));
    // The server is ready; its checks say which pipelines are down.
    let body = wait_answer(port, "/health/ready", 200, |b| {
        b.contains("\"name\":\"pipeline:a\",\"status\":\"UP\"")
    });
    let ready: Json = serde_json::from_str(&body).unwrap();
    let down: Vec<&str> = (ready["checks"].as_array().unwrap().iter())
        .filter(|c| c["status"] == "DOWN")
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(down, ["pipeline:broken", "pipeline:c"], "{body}");

    // Both capture; c's failure touches neither.
    insert(&dbs[0].1, 1..=3);
    insert(&dbs[1].1, 1..=2);
    wait_ids(root, "a", &[1, 2, 3]);
    wait_ids(root, "b", &[1, 2]);

    // a's file changes: restarted from its committed position, rows written meanwhile kept.
    let changed = serve_base(root, "a", &dbs[0].0, &[("poll.interval.ms", 30u32.into())]);
    changed.write_as(&watched.join("a.yaml"));
    insert(&dbs[0].1, 4..=6);
    wait_ids(root, "a", &[1, 2, 3, 4, 5, 6]);
    let log_wait = Instant::now();
    while !sluice_test_support::pg::log_so_far(&child)
        .contains("restarted from its committed position")
    {
        assert!(
            log_wait.elapsed() < Duration::from_secs(30),
            "no restart logged"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Paused: nothing flows; resumed: what was written meanwhile, once.
    let (s, _) = admin_call(port, "PUT", "/connectors/a/pause", None).unwrap();
    assert_eq!(s, 202);
    wait_state(port, "a", "PAUSED");
    insert(&dbs[0].1, 7..=9);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(created_ids(root, "a"), vec![1, 2, 3, 4, 5, 6], "paused");
    let (s, _) = admin_call(port, "PUT", "/connectors/a/resume", None).unwrap();
    assert_eq!(s, 202);
    wait_ids(root, "a", &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(state(port, "a"), "RUNNING");

    // Restarted through the API, as curl -X POST sends it.
    let (s, body) = admin_call(port, "POST", "/connectors/a/restart", None).unwrap();
    assert_eq!(s, 204, "{body}");
    insert(&dbs[0].1, 10..=10);
    wait_ids(root, "a", &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    let (s, body) = admin_call(port, "DELETE", "/connectors/a", None).unwrap();
    assert_eq!(s, 409, "a file's pipeline goes with its file: {body}");
    assert!(body.contains("a.yaml"), "{body}");

    // b's file removed: it stops, and is no connector any more.
    std::fs::remove_file(watched.join("b.yaml")).unwrap();
    wait_answer(port, "/connectors", 200, |b| !b.contains("\"b\""));
    insert(&dbs[1].1, 3..=3);
    // a still runs and shows the pipelines left on the page's list.
    insert(&dbs[0].1, 11..=11);
    wait_ids(root, "a", &(1..=11).collect::<Vec<_>>());
    assert_eq!(
        created_ids(root, "b"),
        vec![1, 2],
        "b stopped with its file"
    );
    let (s, list) = admin_call(port, "GET", "/pipelines", None).unwrap();
    assert_eq!(s, 200);
    let names: Vec<String> = serde_json::from_str::<Vec<Json>>(&list)
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["a", "broken", "c"]);
    // The page lists them, and shows the one picked, in a real browser.
    let dom = super::admin::rendered(&format!("http://127.0.0.1:{port}/#c"));
    for listed in ["a (running)", "broken (failed)", "c (failed)"] {
        assert!(dom.contains(listed), "{listed}: {dom}");
    }
    assert!(dom.contains(r#"<span id="name">c</span>"#), "{dom}");
    assert!(dom.contains("missing.db"), "c's error: {dom}");

    // A second file naming `a` waits while a.yaml has the name, and takes over once it goes
    // (the same offsets: on from where a.yaml's pipeline stopped).
    let second = serve_base(root, "a", &dbs[0].0, &[("poll.interval.ms", 25u32.into())]);
    second.write_as(&watched.join("a2.yaml"));
    std::thread::sleep(Duration::from_millis(800));
    let file_of = |port: u16| {
        let (_, body) = admin_call(port, "GET", "/connectors/a/config", None).unwrap();
        let config: Json = serde_json::from_str(&body).unwrap();
        config["sluice.pipeline.file"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    assert!(file_of(port).ends_with("/a.yaml"), "{}", file_of(port));
    std::fs::remove_file(watched.join("a.yaml")).unwrap();
    let t0 = Instant::now();
    while !file_of(port).ends_with("/a2.yaml") {
        assert!(t0.elapsed() < Duration::from_secs(30), "{}", file_of(port));
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_state(port, "a", "RUNNING");
    insert(&dbs[0].1, 12..=12);
    wait_ids(root, "a", &(1..=12).collect::<Vec<_>>());

    // The command line reaches a pipeline of the server by its name.
    let server = format!("127.0.0.1:{port}");
    let o = sluice(&["status", "a", "--server", &server]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        serde_json::from_str::<Json>(&out).unwrap()["name"],
        "a",
        "{out}"
    );
    let o = sluice(&["status", "nope", "--server", &server]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o).1);

    // SIGTERM: every pipeline stops gracefully and the server exits 0.
    terminate(child);
}

/// `sluice serve` on `port`, watching `watched`, keeping its state in `data`.
pub(super) fn serve(port: u16, watched: &Path, data: &Path) -> Child {
    sluice_test_support::pg::spawn_logged(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--watch-interval", "200ms"])
            .args(["--bind", &format!("127.0.0.1:{port}")])
            .arg("--pipelines")
            .arg(watched)
            .arg("--data-dir")
            .arg(data),
    )
}

/// SIGTERM: the server stops its pipelines gracefully and exits 0 (checked).
pub(super) fn terminate(mut child: Child) {
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let t0 = Instant::now();
    let code = loop {
        if let Some(code) = child.try_wait().unwrap() {
            break code;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "serve did not stop");
        std::thread::sleep(Duration::from_millis(100));
    };
    let log = sluice_test_support::pg::log_of(&child);
    assert!(code.success(), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

/// A file's pipeline paused or stopped through the API stays so when the server restarts (as
/// Kafka Connect keeps a connector's target state); resumed, it runs again after restarts; its
/// file removed and written again (while the server runs, or is down), it starts afresh as
/// running.
#[test]
fn a_file_pipeline_paused_through_the_api_stays_paused_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let watched = root.join("pipelines");
    std::fs::create_dir(&watched).unwrap();
    let (db, conn) = captured(
        root,
        "create table t (id integer primary key, v text);",
        &["t"],
    );
    let file = watched.join("kept.yaml");
    let kept = serve_base(root, "kept", &db, &[]);
    kept.write_as(&file);
    let data = root.join("serve");
    let port = sluice_test_support::pg::free_port();
    let put = |verb: &str, status: u16| {
        let (s, body) = admin_call(port, "PUT", &format!("/connectors/kept/{verb}"), None).unwrap();
        assert_eq!(s, status, "{verb}: {body}");
    };
    let child = serve(port, &watched, &data);
    wait_state(port, "kept", "RUNNING");
    insert(&conn, 1..=2);
    wait_ids(root, "kept", &[1, 2]);
    put("pause", 202);
    wait_state(port, "kept", "PAUSED");
    terminate(child);

    // Restarted: still paused, nothing read.
    insert(&conn, 3..=4);
    let child = serve(port, &watched, &data);
    wait_state(port, "kept", "PAUSED");
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        created_ids(root, "kept"),
        [1, 2],
        "paused across the restart"
    );
    put("stop", 204);
    wait_state(port, "kept", "STOPPED");
    terminate(child);
    let child = serve(port, &watched, &data);
    wait_state(port, "kept", "STOPPED");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        created_ids(root, "kept"),
        [1, 2],
        "stopped across the restart"
    );

    // Resumed: on from its position; running across a restart.
    put("resume", 202);
    wait_ids(root, "kept", &[1, 2, 3, 4]);
    terminate(child);
    insert(&conn, 5..=5);
    let child = serve(port, &watched, &data);
    wait_state(port, "kept", "RUNNING");
    wait_ids(root, "kept", &[1, 2, 3, 4, 5]);

    // Paused, its file removed and written again: a new pipeline, running.
    put("pause", 202);
    wait_state(port, "kept", "PAUSED");
    std::fs::remove_file(&file).unwrap();
    wait_answer(port, "/connectors", 200, |b| !b.contains("\"kept\""));
    kept.write_as(&file);
    wait_state(port, "kept", "RUNNING");
    insert(&conn, 6..=6);
    wait_ids(root, "kept", &[1, 2, 3, 4, 5, 6]);

    // Paused, its file removed while the server is down: its state is forgotten at the start,
    // and the file written again later runs.
    put("pause", 202);
    wait_state(port, "kept", "PAUSED");
    terminate(child);
    std::fs::remove_file(&file).unwrap();
    let child = serve(port, &watched, &data);
    wait_answer(port, "/connectors", 200, |b| b.trim() == "[]");
    std::thread::sleep(Duration::from_millis(1000));
    kept.write_as(&file);
    wait_state(port, "kept", "RUNNING");
    terminate(child);
}

/// `sluice serve --tls-*`: the Kafka Connect API over HTTPS, for clients with a certificate.
#[test]
fn serve_speaks_https_to_clients_with_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path();
    sluice_test_support::certs::ca(certs, "ca");
    sluice_test_support::certs::server_certificate(certs, "ca");
    sluice_test_support::certs::client_certificate(certs, "ca", "operator");
    let c = |f: &str| certs.join(f).display().to_string();
    let port = sluice_test_support::pg::free_port();
    // Beyond this machine with client certificates and no token: allowed.
    let mut child = sluice_test_support::pg::spawn_logged(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--bind", &format!("0.0.0.0:{port}")])
            .args([
                "--tls-certificate",
                &c("server.pem"),
                "--tls-key",
                &c("server.key"),
            ])
            .args(["--tls-client-ca", &c("ca.pem")])
            .arg("--data-dir")
            .arg(certs.join("serve")),
    );
    let url = format!("https://127.0.0.1:{port}/connectors");
    let with_cert = [
        "--cacert",
        &c("ca.pem"),
        "--cert",
        &c("operator.pem"),
        "--key",
        &c("operator.key"),
    ];
    let t0 = Instant::now();
    let answer = loop {
        let o = Command::new("curl")
            .args(["-sS", "--max-time", "10"])
            .args(with_cert)
            .arg(&url)
            .output()
            .unwrap();
        if o.status.success() || t0.elapsed() > Duration::from_secs(20) {
            break o;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        answer.status.success(),
        "{}",
        sluice_test_support::pg::log_so_far(&child)
    );
    assert_eq!(String::from_utf8_lossy(&answer.stdout).trim(), "[]");
    let without = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--cacert", &c("ca.pem")])
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        !without.status.success(),
        "no client certificate, no answer"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The ops of `<dir>/<name>.jsonl`'s events with their row ids, in order.
fn ops(dir: &Path, name: &str) -> Vec<(String, i64)> {
    let text = std::fs::read_to_string(dir.join(format!("{name}.jsonl"))).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
    complete
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).unwrap())
        .filter(|l| l["value"].is_object())
        .map(|l| {
            let v = &l["value"];
            let row = if v["after"].is_object() {
                &v["after"]
            } else {
                &v["before"]
            };
            (
                v["op"].as_str().unwrap().to_owned(),
                row["id"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Kafka Connect's offsets API over a pipeline's committed position: read while it runs; set
/// back to an earlier position (the changes after it come again) and forgotten (a new snapshot)
/// once it is stopped, refused while it runs.
#[test]
fn the_offsets_api_reads_sets_and_resets_the_committed_position() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let watched = root.join("pipelines");
    std::fs::create_dir(&watched).unwrap();
    let (db, conn) = captured(
        root,
        "create table t (id integer primary key, v text);",
        &["t"],
    );
    // The change rows stay after they are acknowledged, so that an earlier position can be
    // read again (by default the source purges them at once).
    let o = serve_base(root, "o", &db, &[("purge.committed.changes", false.into())]);
    o.write_as(&watched.join("o.yaml"));
    let port = sluice_test_support::pg::free_port();
    let child = serve(port, &watched, &root.join("serve"));
    wait_state(port, "o", "RUNNING");
    let offsets = |port: u16| -> Json {
        let (s, body) = admin_call(port, "GET", "/connectors/o/offsets", None).unwrap();
        assert_eq!(s, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    };
    // The position committed once the (empty) snapshot is done, then once both rows (one
    // transaction) are: the first one that differs from the one before.
    let next_offset = |after: &Json| {
        let t0 = Instant::now();
        loop {
            let shown = offsets(port);
            if let Some(entry) = shown["offsets"].get(0) {
                if entry != after {
                    return entry.clone();
                }
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "{shown}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // The snapshot's sequence is committed before its rows (none here), then its end.
    let mut initial = next_offset(&Json::Null);
    while initial["offset"]["snapshot_completed"] != true {
        initial = next_offset(&initial);
    }
    conn.execute_batch(
        "begin; insert into t values (1, 'x'); insert into t values (2, 'x'); commit;",
    )
    .unwrap();
    wait_ids(root, "o", &[1, 2]);
    let early = next_offset(&initial);
    assert_eq!(early["partition"], serde_json::json!({"pipeline": "o"}));
    assert!(early["offset"].is_object(), "{early}");
    conn.execute_batch(
        "begin; insert into t values (3, 'x'); insert into t values (4, 'x'); commit;",
    )
    .unwrap();
    wait_ids(root, "o", &[1, 2, 3, 4]);
    next_offset(&early);

    // Running: changing its offsets is refused, as Kafka Connect refuses it.
    let patch = serde_json::json!({"offsets": [early]}).to_string();
    let (s, body) = admin_call(port, "PATCH", "/connectors/o/offsets", Some(&patch)).unwrap();
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("must be in the STOPPED state"), "{body}");
    let (s, _) = admin_call(port, "DELETE", "/connectors/o/offsets", None).unwrap();
    assert_eq!(s, 400);
    let (s, _) = admin_call(port, "GET", "/connectors/nope/offsets", None).unwrap();
    assert_eq!(s, 404);

    // Stopped and set back: resumed, the changes after the earlier position come again.
    assert_eq!(
        admin_call(port, "PUT", "/connectors/o/stop", None)
            .unwrap()
            .0,
        204
    );
    let (s, body) = admin_call(port, "PATCH", "/connectors/o/offsets", Some(&patch)).unwrap();
    assert_eq!(
        (s, body.contains("altered successfully")),
        (200, true),
        "{body}"
    );
    assert_eq!(offsets(port)["offsets"][0], early);
    assert_eq!(
        admin_call(port, "PUT", "/connectors/o/resume", None)
            .unwrap()
            .0,
        202
    );
    wait_ids(root, "o", &[1, 2, 3, 4, 3, 4]);

    // Stopped and reset: resumed, it starts as a new pipeline, with a snapshot of every row.
    assert_eq!(
        admin_call(port, "PUT", "/connectors/o/stop", None)
            .unwrap()
            .0,
        204
    );
    let (s, body) = admin_call(port, "DELETE", "/connectors/o/offsets", None).unwrap();
    assert_eq!(
        (s, body.contains("reset successfully")),
        (200, true),
        "{body}"
    );
    assert_eq!(offsets(port), serde_json::json!({"offsets": []}));
    assert_eq!(
        admin_call(port, "PUT", "/connectors/o/resume", None)
            .unwrap()
            .0,
        202
    );
    let t0 = Instant::now();
    loop {
        let read: Vec<i64> = (ops(root, "o").into_iter())
            .filter(|(op, _)| op == "r")
            .map(|(_, id)| id)
            .collect();
        if read == [1, 2, 3, 4] {
            break;
        }
        assert!(
            read.len() < 4 && t0.elapsed() < Duration::from_secs(30),
            "{read:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let bad = r#"{"offsets": [{"partition": {"server": "o"}, "offset": null}]}"#;
    assert_eq!(
        admin_call(port, "PUT", "/connectors/o/stop", None)
            .unwrap()
            .0,
        204
    );
    let (s, body) = admin_call(port, "PATCH", "/connectors/o/offsets", Some(bad)).unwrap();
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("unknown partition"), "{body}");
    terminate(child);
}

/// `sluice serve` beyond this machine with `--token-file`: requests without the token are
/// refused, the command line sends it (`--token-file`, `SLUICE_ADMIN_TOKEN`); and
/// `--max-queue-bytes` keeps a pipeline whose queues would go over it from starting, saying so,
/// while the other runs.
#[test]
fn serve_asks_for_its_token_and_bounds_all_queues() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let watched = root.join("pipelines");
    std::fs::create_dir(&watched).unwrap();
    let (db, _conn) = captured(
        root,
        "create table t (id integer primary key, v text);",
        &["t"],
    );
    // Queues of 2 MiB and of 8 MiB (the source's and one sink's each) under a 9 MiB bound.
    serve_base(root, "small", &db, &[])
        .top("max_queue_size_bytes", "1MiB")
        .write_as(&watched.join("small.yaml"));
    serve_base(root, "large", &db, &[]).write_as(&watched.join("large.yaml"));
    let secret = "5d2c9e8f7a6b4c3d2e1f0a9b8c7d6e5f";
    let token = root.join("token");
    std::fs::write(&token, format!("{secret}\n")).unwrap();
    let port = sluice_test_support::pg::free_port();
    let child = sluice_test_support::pg::spawn_logged(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--watch-interval", "200ms"])
            .args(["--bind", &format!("0.0.0.0:{port}")])
            .args(["--max-queue-bytes", "9MiB"])
            .arg("--token-file")
            .arg(&token)
            .arg("--pipelines")
            .arg(&watched)
            .arg("--data-dir")
            .arg(root.join("serve")),
    );
    let server = format!("127.0.0.1:{port}");
    let t0 = Instant::now();
    let statuses = loop {
        let o = Command::new("curl")
            .args(["-sS", "--max-time", "10", "-H"])
            .arg(format!("Authorization: Bearer {secret}"))
            .arg(format!("http://{server}/connectors?expand=status"))
            .output()
            .unwrap();
        let body: Json = serde_json::from_slice(&o.stdout).unwrap_or_default();
        let state = |n: &str| {
            body[n]["status"]["connector"]["state"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        };
        let states = [state("small"), state("large")];
        if states.contains(&"FAILED".to_owned()) && states.contains(&"RUNNING".to_owned()) {
            break body;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{body}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let failed = ["small", "large"]
        .into_iter()
        .find(|n| statuses[*n]["status"]["connector"]["state"] == "FAILED")
        .unwrap();
    let trace = statuses[failed]["status"]["tasks"][0]["trace"]
        .as_str()
        .unwrap_or("");
    assert!(trace.contains("--max-queue-bytes"), "{statuses}");
    // Without the token: refused.
    let (s, body) = admin_call(port, "GET", "/connectors", None).unwrap();
    assert_eq!(s, 401, "{body}");
    // The command line with the token, from a file and from the environment.
    let running = if failed == "small" { "large" } else { "small" };
    let o = sluice(&[
        "status",
        running,
        "--server",
        &server,
        "--token-file",
        &token.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["status", running, "--server", &server])
        .env("SLUICE_ADMIN_TOKEN", secret)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o).1);
    assert!(!text(&o).0.contains(secret));
    let o = sluice(&["status", running, "--server", &server]);
    assert!(!o.status.success(), "no token, no status");
    assert!(
        text(&o).1.contains("401") || text(&o).1.to_lowercase().contains("token"),
        "{}",
        text(&o).1
    );
    terminate(child);
}
