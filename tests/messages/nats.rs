//! The `nats` sink against real `nats-server`s with JetStream (private ones, on free ports, with
//! their own stores), fed by the SQLite source through the `sluice` binary; what reached the
//! streams is read with the `async-nats` client's own calls and compared with the file sink of
//! the same run.

use std::collections::HashSet;

use serde_json::Value as Json;
use sluice_test_support::feed::{
    after_ids, database, error_line, insert, ok, pipeline, run_until_idle,
};
use sluice_test_support::nats::{self as server, Private, Stored};
use sluice_test_support::pg as run;
use sluice_test_support::pipeline::{Component, Scalar};

use crate::scenarios::Bus;

/// A private `nats-server` with JetStream; a pipeline's events go to a stream named after its
/// topic prefix, created by the sink.
pub(crate) struct Nats(Private);

impl Bus for Nats {
    const EXAMPLE: (&'static str, &'static str) = ("sqlite-nats", "NATS_URL");
    const SENT_AGAIN: &'static str =
        "NATS did not acknowledge every message; publishing the rest again";
    const QUICK_RETRIES: &'static [(&'static str, Scalar)] = &[
        ("async.timeout.ms", Scalar::Integer(1000)),
        ("sync.retry.interval.ms", Scalar::Integer(100)),
        ("sync.retry.max.interval.ms", Scalar::Integer(1000)),
    ];
    const DROPS_REPEATS: bool = true;

    fn start() -> Self {
        Nats(Private::start(""))
    }
    fn address(&self) -> String {
        self.0.url()
    }
    fn sink(&self, prefix: &str) -> Component {
        sink("bus", &self.0.url())
            .set("create-stream", true)
            .set("stream-name", prefix)
    }
    fn bodies(&self, prefix: &str) -> Vec<String> {
        let stored = server::messages(&self.0.url(), prefix);
        stored.into_iter().map(|m| m.payload).collect()
    }
    fn count(&self, prefix: &str) -> u64 {
        server::count(&self.0.url(), prefix)
    }
    fn example_bodies(&self, topic: &str) -> Vec<String> {
        let stored = server::messages(&self.0.url(), "Inventory");
        (stored.into_iter())
            .filter(|m| m.subject == topic)
            .map(|m| m.payload)
            .collect()
    }
    fn stop(&mut self) {
        self.0.stop();
    }
    fn restart(&mut self) {
        self.0.restart();
    }
}

scenarios!(Nats);

fn json(text: &str) -> Json {
    serde_json::from_str(text).unwrap()
}

/// The ids of the `after` images of a stream's messages (with or without schemas), in order.
fn ids(messages: &[Stored]) -> Vec<i64> {
    after_ids(messages.iter().map(|m| m.payload.as_str()))
}

/// The sink `name`: `nats` at `url` (more keys set by the caller).
fn sink(name: &str, url: &str) -> Component {
    Component::new("nats").named(name).set("url", url)
}

#[test]
fn messages_are_the_file_sinks_values_on_their_topics_subjects_with_ids_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = database(dir.path(), 3);
    let private = Private::start("");
    let url = private.url();
    let sinks = [
        sink("plain", &url)
            .set("create-stream", true)
            .set("stream-name", "Plain"),
        // `${topic}` is the sink's template (kept as written, quoted or not).
        sink("templated", &url)
            .set("create-stream", true)
            .set("stream-name", "Templated")
            .set("subject", "cdc.${topic}")
            .set("subjects", "cdc.*.*.*")
            .set("storage", "memory")
            .set("schemas.enable", false),
    ];
    let path = pipeline(dir.path(), &db, "e2e", sinks);
    ok(&run_until_idle(&path));
    conn.execute_batch("update t set v = 'x' where id = 1; delete from t where id = 2;")
        .unwrap();
    ok(&run_until_idle(&path));

    let file: Vec<Json> = run::lines(dir.path());
    assert_eq!(file.len(), 6, "3 reads, an update, a delete, a tombstone");
    let values: Vec<&Json> = file
        .iter()
        .map(|l| &l["value"])
        .filter(|v| !v.is_null())
        .collect();
    let plain = server::messages(&url, "Plain");
    assert_eq!(
        plain.len(),
        5,
        "{plain:#?} tombstones are left out, as Debezium Server's"
    );
    for (m, value) in plain.iter().zip(&values) {
        assert_eq!(m.subject, "e2e.main.t");
        assert_eq!(&json(&m.payload), *value);
    }
    let templated = server::messages(&url, "Templated");
    assert_eq!(templated.len(), 5);
    for (m, value) in templated.iter().zip(&values) {
        assert_eq!(m.subject, "cdc.e2e.main.t");
        assert_eq!(json(&m.payload), value["payload"], "without schemas");
    }
    let unique: HashSet<_> = plain.iter().map(|m| m.id.clone().unwrap()).collect();
    assert_eq!(unique.len(), 5, "every message has an id of its own");
    assert_eq!(
        plain.iter().map(|m| &m.id).collect::<Vec<_>>(),
        templated.iter().map(|m| &m.id).collect::<Vec<_>>(),
        "an event's id does not depend on the sink"
    );
    // Everything was acknowledged: a restart adds nothing.
    ok(&run_until_idle(&path));
    assert_eq!(server::messages(&url, "Plain").len(), 5);
}

#[test]
fn a_replay_from_scratch_is_dropped_by_jetstreams_duplicate_window() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = database(dir.path(), 20);
    let private = Private::start("");
    let url = private.url();
    server::add_stream(&url, "Replay", &["replay.>"]);
    let path = pipeline(dir.path(), &db, "replay", [sink("bus", &url)]);
    ok(&run_until_idle(&path));
    assert_eq!(
        ids(&server::messages(&url, "Replay")),
        (1..=20).collect::<Vec<_>>()
    );
    // The offsets are gone: the snapshot is read and sent again, with the same ids.
    std::fs::remove_dir_all(dir.path().join("data")).unwrap();
    ok(&run_until_idle(&path));
    assert_eq!(
        run::lines(dir.path()).len(),
        40,
        "the file sink got the replay"
    );
    assert_eq!(
        ids(&server::messages(&url, "Replay")),
        (1..=20).collect::<Vec<_>>()
    );
}

#[test]
fn a_wrong_login_or_address_stops_the_start_with_one_line_and_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = database(dir.path(), 2);
    let private = Private::start("authorization { user: app, password: \"right-pa55\" }");
    let url = private.url();
    let login = |password: &str| {
        sink("bus", &url)
            .set("create-stream", true)
            .set("stream-name", "Login")
            .set("auth.user", "app")
            .set("auth.password", password)
    };
    let path = pipeline(dir.path(), &db, "login", [login("wr0ng-pa55-x")]);
    let o = run_until_idle(&path);
    let error = error_line(&o);
    assert!(
        error.contains("sink `bus`")
            && error.contains(&format!("NATS at {url} refused the login"))
            && error.contains("check `auth.token`, `auth.user`/`auth.password`"),
        "{error}"
    );
    assert!(!String::from_utf8_lossy(&o.stderr).contains("wr0ng-pa55-x"));

    // The right password goes through.
    let path = pipeline(dir.path(), &db, "login", [login("right-pa55")]);
    ok(&run_until_idle(&path));
    let options =
        async_nats::ConnectOptions::with_user_and_password("app".into(), "right-pa55".into());
    assert_eq!(
        ids(&server::messages_with(&url, "Login", options)),
        vec![1, 2]
    );

    let closed = format!("nats://127.0.0.1:{}", run::free_port());
    let path = pipeline(dir.path(), &db, "login", [sink("bus", &closed)]);
    let error = error_line(&run_until_idle(&path));
    assert!(
        error.contains(&format!("cannot reach NATS at {closed}")) && error.contains("check `url`"),
        "{error}"
    );
}

#[test]
fn a_subject_no_stream_takes_stops_the_pipeline_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = database(dir.path(), 1);
    let private = Private::start("");
    let url = private.url();
    server::add_stream(&url, "Other", &["other.>"]);
    let path = pipeline(dir.path(), &db, "nostream", [sink("bus", &url)]);
    let error = error_line(&run_until_idle(&path));
    assert!(
        error.contains("no JetStream stream takes subject `nostream.main.t`")
            && error.contains("create-stream: true"),
        "{error}"
    );
    assert!(server::messages(&url, "Other").is_empty());

    // A stream that would take the replies to the sink, and store them, is refused.
    server::add_stream(&url, "Wide", &["_INBOX.>"]);
    let error = error_line(&run_until_idle(&path));
    assert!(
        error.contains("the stream `Wide` takes the subjects of the replies")
            && error.contains("narrow its subjects"),
        "{error}"
    );
    // `validate` sees it in the subjects of a stream the sink would create.
    let wide = sink("bus", &url)
        .set("create-stream", true)
        .set("subjects", ">");
    let path = pipeline(dir.path(), &db, "nostream", [wide]);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("validate")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert!(
        stderr.contains("pipeline.yaml:")
            && stderr.contains("`subjects`: `>` also takes the replies"),
        "{stderr}"
    );
}

#[test]
fn a_message_over_max_payload_follows_the_failure_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = database(dir.path(), 1);
    conn.execute("insert into t values (2, ?1)", [&"x".repeat(3000)])
        .unwrap();
    insert(&conn, 3..=3);
    let private = Private::start("max_payload: 2048");
    let url = private.url();
    let stream = sink("bus", &url)
        .set("create-stream", true)
        .set("stream-name", "Big")
        .set("schemas.enable", false);
    let path = pipeline(dir.path(), &db, "big", [stream.clone()]);
    let error = error_line(&run_until_idle(&path));
    assert!(
        error.contains("subject `big.main.t`")
            && error.contains("over the server's `max_payload` (2048 bytes)")
            && error.contains("event.processing.failure.handling.mode: warn"),
        "{error}"
    );

    let warn = stream.set("event.processing.failure.handling.mode", "warn");
    let path = pipeline(dir.path(), &db, "big", [warn]);
    let stderr = ok(&run_until_idle(&path));
    assert!(stderr.contains("Skipped an event"), "{stderr}");
    let stored = server::messages(&url, "Big");
    // The snapshot reads rows 1-3 (the inserts of 2 and 3, made before it, are in it and not
    // streamed again). The first run stopped at the big one after row 1 was stored; the second
    // read the snapshot again and sent row 1 under the same id, which JetStream dropped.
    assert_eq!(ids(&stored), vec![1, 3]);
}
