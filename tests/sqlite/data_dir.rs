//! A data directory holds one running pipeline's state: a second pipeline started on it (the
//! same file run twice, or two files naming one `data_dir` under `sluice serve`) is refused
//! with one line naming the holder, and the first goes on untouched.

use super::serve::{created_ids, insert, serve, serve_base, terminate, wait_ids};
use super::*;
use sluice_test_support::pg::admin_call;

#[test]
fn the_same_pipeline_run_twice_is_refused_and_the_first_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text);",
        &["t"],
    );
    let path = pipeline(dir.path(), &db, &[]);
    let mut first = start(&path, &[]);
    insert(&conn, 1..=2);
    wait_created(dir.path(), &[1, 2]);
    let second = sluice(&["run", path.to_str().unwrap()]);
    let line = error_line(&second);
    let holder = format!("pipeline sqlite_test, process {}", first.id());
    assert!(
        line.contains("is in use by") && line.contains(&holder),
        "{line}"
    );
    assert!(line.contains("`data_dir` of its own"), "{line}");
    // The first goes on, and commits what comes after.
    insert(&conn, 3..=4);
    wait_created(dir.path(), &[1, 2, 3, 4]);
    assert!(first.try_wait().unwrap().is_none(), "the first stopped");
    let offsets = dir.path().join("data/offsets.json");
    let t0 = Instant::now();
    while !std::fs::read_to_string(&offsets).is_ok_and(|t| t.contains(r#"\"seq\":4,"#)) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "seq 4 not committed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Once it is gone (kill -9: the kernel lets go of the lock), the same file runs again from
    // the committed position: the next change only.
    first.kill().unwrap();
    first.wait().unwrap();
    let before = lines(dir.path()).len();
    insert(&conn, 5..=5);
    let mut again = start(&path, &[]);
    wait_created(dir.path(), &[1, 2, 3, 4, 5]);
    again.kill().unwrap();
    again.wait().unwrap();
    let after: Vec<Json> = lines(dir.path()).split_off(before);
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0]["value"]["op"], "c");
}

/// Waits until the rows read or created in `<dir>/out.jsonl` are `want`, in order.
fn wait_created(dir: &Path, want: &[i64]) {
    let t0 = Instant::now();
    loop {
        let got: Vec<i64> = (lines(dir).iter())
            .filter(|l| l["value"]["op"] == "c" || l["value"]["op"] == "r")
            .map(|l| l["value"]["after"]["id"].as_i64().unwrap())
            .collect();
        if got == want {
            return;
        }
        assert!(
            got.len() <= want.len() && t0.elapsed() < Duration::from_secs(60),
            "got {got:?}, want {want:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Two files naming one `data_dir` under `sluice serve`: one runs, the other fails saying
/// why; stopped, the first lets go and the other runs; the offsets API does not write a
/// directory another pipeline holds.
#[test]
fn serve_runs_one_of_two_pipelines_sharing_a_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let watched = root.join("pipelines");
    std::fs::create_dir(&watched).unwrap();
    let mut conns = Vec::new();
    for name in ["a", "b"] {
        let sub = root.join(format!("db-{name}"));
        std::fs::create_dir(&sub).unwrap();
        let (db, conn) = captured(
            &sub,
            "create table t (id integer primary key, v text);",
            &["t"],
        );
        // Both keep their offsets in `data-a`.
        let yaml = serve_base(root, name, &db, &[])
            .data_dir(root.join("data-a"))
            .yaml();
        std::fs::write(watched.join(format!("{name}.yaml")), yaml).unwrap();
        conns.push(conn);
    }
    let port = sluice_test_support::pg::free_port();
    let child = serve(port, &watched, &root.join("serve"));
    // Which one takes the directory first is the threads' race: the other fails.
    let t0 = Instant::now();
    let (winner, loser) = loop {
        match (state_of(port, "a").as_str(), state_of(port, "b").as_str()) {
            ("RUNNING", "FAILED") => break (0, 1),
            ("FAILED", "RUNNING") => break (1, 0),
            states => assert!(t0.elapsed() < Duration::from_secs(60), "{states:?}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let names = ["a", "b"];
    let (w, l) = (names[winner], names[loser]);
    let (_, body) = admin_call(port, "GET", &format!("/connectors/{l}/status"), None).unwrap();
    let status: Json = serde_json::from_str(&body).unwrap();
    let trace = status["tasks"][0]["trace"].as_str().unwrap_or_default();
    assert!(
        trace.contains(&format!(
            "is in use by pipeline {w}, process {}",
            child.id()
        )),
        "{body}"
    );
    insert(&conns[winner], 1..=2);
    wait_ids(root, w, &[1, 2]);
    assert_eq!(created_ids(root, l), Vec::<i64>::new());

    // The winner stopped, the directory is free: the other, restarted, runs and captures.
    let (s, _) = admin_call(port, "PUT", &format!("/connectors/{w}/stop"), None).unwrap();
    assert_eq!(s, 204);
    super::serve::wait_state(port, w, "STOPPED");
    let (s, body) = admin_call(port, "POST", &format!("/connectors/{l}/restart"), None).unwrap();
    assert!(s == 204 || s == 202, "{s} {body}");
    super::serve::wait_state(port, l, "RUNNING");
    insert(&conns[loser], 1..=3);
    wait_ids(root, l, &[1, 2, 3]);

    // The stopped one's offsets are in the directory the running one holds: not written.
    let (s, body) = admin_call(port, "DELETE", &format!("/connectors/{w}/offsets"), None).unwrap();
    assert_eq!(s, 400, "{body}");
    assert!(body.contains(&format!("in use by pipeline {l}")), "{body}");
    terminate(child);
}

/// `name`'s state, or `-` while the server does not know it yet.
fn state_of(port: u16, name: &str) -> String {
    let answer = admin_call(port, "GET", &format!("/connectors/{name}/status"), None);
    let body = answer.map(|(_, body)| body).unwrap_or_default();
    let status: Json = serde_json::from_str(&body).unwrap_or_default();
    status["connector"]["state"]
        .as_str()
        .unwrap_or("-")
        .to_owned()
}

/// A committed position of another source (the offsets of a PostgreSQL pipeline of the same
/// name) is refused with one line that says how to start over, and the offsets are left as
/// they were.
#[test]
fn another_sources_position_is_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = captured(
        dir.path(),
        "create table t (id integer primary key, v text);",
        &["t"],
    );
    let path = pipeline(dir.path(), &db, &[]);
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    let offsets = dir.path().join("data/offsets.json");
    let stored = r#"{"pipelines": {"sqlite_test": {"position": "{\"lsn\":91664504}", "committed_at_ms": 0}}}"#;
    std::fs::write(&offsets, stored).unwrap();
    let o = sluice(&["run", "--stop-when-idle", "1s", path.to_str().unwrap()]);
    assert!(!o.status.success());
    let line = error_line(&o);
    assert!(
        line.contains(r#"the committed position `{"lsn":91664504}` is not a sqlite position"#)
            && line.contains("remove the offsets file or rename the pipeline"),
        "{line}"
    );
    assert_eq!(std::fs::read_to_string(&offsets).unwrap(), stored);
}
