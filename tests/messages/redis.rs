//! The `redis` sink against real Redis servers (the machine's, and private `redis-server`s
//! the tests stop, fill or replicate), fed by the SQLite source through the `sluice` binary;
//! what reached Redis is read with the `redis` crate's own client and compared with the file
//! sink of the same run.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use sluice_test_support::feed::{database, error_line, ok, pipeline, run_until_idle, wait_until};
use sluice_test_support::pg as run;
use sluice_test_support::pipeline::{Component, Scalar};

use crate::scenarios::Bus;
use sluice_test_support::redis::{self as server, Private};

/// A private `redis-server`; a pipeline's events go to a stream per topic (`<prefix>.main.t`),
/// in the compact form (one field: the key, the value).
pub(crate) struct Redis(Private);

impl Bus for Redis {
    const EXAMPLE: (&'static str, &'static str) = ("sqlite-redis", "REDIS_ADDRESS");
    const SENT_AGAIN: &'static str = "Redis did not take the entries; trying again";
    const QUICK_RETRIES: &'static [(&'static str, Scalar)] = &[
        ("retry.initial.delay.ms", Scalar::Integer(100)),
        ("retry.max.delay.ms", Scalar::Integer(1000)),
    ];
    const DROPS_REPEATS: bool = false;

    fn start() -> Self {
        Redis(Private::start(&[]))
    }
    fn address(&self) -> String {
        self.0.address()
    }
    fn sink(&self, _prefix: &str) -> Component {
        Component::new("redis")
            .named("bus")
            .set("address", self.0.address())
    }
    fn bodies(&self, prefix: &str) -> Vec<String> {
        self.example_bodies(&format!("{prefix}.main.t"))
    }
    fn count(&self, prefix: &str) -> u64 {
        // A server just started again may refuse a moment: nothing counted yet.
        let stream = format!("{prefix}.main.t");
        std::panic::catch_unwind(|| {
            let mut conn = server::connect(&self.0.address());
            redis::cmd("XLEN")
                .arg(&stream)
                .query::<u64>(&mut conn)
                .unwrap()
        })
        .unwrap_or(0)
    }
    fn example_bodies(&self, topic: &str) -> Vec<String> {
        (server::entries(&self.0.address(), topic).into_iter())
            .map(|mut entry| entry.remove(0).1)
            .collect()
    }
    fn stop(&mut self) {
        self.0.stop();
    }
    fn restart(&mut self) {
        self.0.restart();
    }
}

scenarios!(Redis);

/// A unique topic prefix for a test on the shared server.
fn prefix(test: &str) -> String {
    format!(
        "{test}_{}_{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    )
}

fn json(text: &str) -> Json {
    serde_json::from_str(text).unwrap()
}

/// The ids of the `after` images in a stream's entries (compact format), in order.
fn ids(entries: &[Vec<(String, String)>]) -> Vec<i64> {
    entries
        .iter()
        .filter_map(|e| {
            let value = json(&e[0].1);
            value["payload"]["after"]["id"].as_i64()
        })
        .collect()
}

#[test]
fn entries_are_debezium_servers_compact_and_extended_forms_of_the_file_sinks_events() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = database(dir.path(), 3);
    let private = Private::start(&[]);
    let prefix = prefix("redis_e2e");
    let sinks = [
        Component::new("redis")
            .named("compact")
            .set("address", server::address()),
        Component::new("redis")
            .named("extended")
            .set("address", private.address())
            .set("message.format", "extended")
            .set("schemas.enable", false)
            .set("null.value", "gone"),
    ];
    let path = pipeline(dir.path(), &db, &prefix, sinks);
    ok(&run_until_idle(&path));
    conn.execute_batch("update t set v = 'x' where id = 1; delete from t where id = 2;")
        .unwrap();
    ok(&run_until_idle(&path));

    let stream = format!("{prefix}.main.t");
    let file: Vec<Json> = run::lines(dir.path());
    assert_eq!(
        file.len(),
        6,
        "3 reads, an update, a delete and its tombstone"
    );
    let compact = server::entries(&server::address(), &stream);
    assert_eq!(compact.len(), file.len());
    for (entry, line) in compact.iter().zip(&file) {
        assert_eq!(entry.len(), 1, "compact: one field, the key");
        let (key, value) = &entry[0];
        assert_eq!(json(key), line["key"]);
        match line["value"].is_null() {
            true => assert_eq!(value, "default", "a tombstone is `null.value`"),
            false => assert_eq!(json(value), line["value"]),
        }
    }
    let extended = server::entries(&private.address(), &stream);
    assert_eq!(extended.len(), file.len());
    for (entry, line) in extended.iter().zip(&file) {
        assert_eq!(entry[0].0, "key");
        assert_eq!(entry[1].0, "value");
        assert_eq!(json(&entry[0].1), line["key"]["payload"], "without schemas");
        match line["value"].is_null() {
            true => assert_eq!(entry[1].1, "gone"),
            false => assert_eq!(json(&entry[1].1), line["value"]["payload"]),
        }
    }
    // Everything was acknowledged: a restart adds nothing.
    ok(&run_until_idle(&path));
    assert_eq!(server::entries(&server::address(), &stream).len(), 6);
}

#[test]
fn a_wrong_login_or_address_stops_the_start_with_one_line_and_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = database(dir.path(), 1);
    let private = Private::start(&["--requirepass", "right-pa55"]);
    let sink = |address: &str| {
        Component::new("redis")
            .named("cache")
            .set("address", address)
            .set("password", "wr0ng-pa55-x")
    };
    let path = pipeline(dir.path(), &db, "login", [sink(&private.address())]);
    let o = run_until_idle(&path);
    let error = error_line(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        error.contains("sink `cache`")
            && error.contains(&format!(
                "Redis at {} refused the login of user `default`",
                private.address()
            ))
            && error.contains("check `user` and `password`"),
        "{stderr}"
    );
    assert!(!stderr.contains("wr0ng-pa55-x"), "{stderr}");

    let closed = format!("127.0.0.1:{}", run::free_port());
    let path = pipeline(dir.path(), &db, "login", [sink(&closed)]);
    let o = run_until_idle(&path);
    let error = error_line(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        error.contains(&format!("cannot reach Redis at {closed}"))
            && error.contains("check `address`"),
        "{stderr}"
    );

    // `validate` catches what needs no server.
    let path = pipeline(
        dir.path(),
        &db,
        "login",
        [Component::new("redis").set("address", "localhost")],
    );
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("validate")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert!(
        stderr.contains("pipeline.yaml:") && stderr.contains("write it as host:port"),
        "{stderr}"
    );
}

#[test]
fn a_user_without_xadd_stops_the_pipeline_with_the_grant_to_add() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = database(dir.path(), 1);
    let private = Private::start(&[]);
    let mut conn = server::connect(&private.address());
    redis::cmd("ACL")
        .arg(
            &[
                "SETUSER",
                "reader",
                "on",
                ">reader-pw",
                "~*",
                "+@all",
                "-xadd",
            ][..],
        )
        .query::<()>(&mut conn)
        .unwrap();
    let sink = Component::new("redis")
        .set("address", private.address())
        .set("user", "reader")
        .set("password", "reader-pw");
    let path = pipeline(dir.path(), &db, "acl", [sink]);
    let o = run_until_idle(&path);
    let error = error_line(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        error.contains("does not let user `reader` run a command the sink needs")
            && error.contains("+xadd"),
        "{stderr}"
    );
    assert!(server::entries(&private.address(), "acl.main.t").is_empty());
}

#[test]
fn writing_pauses_above_the_memory_threshold_and_goes_on_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = database(dir.path(), 50);
    let private = Private::start(&["--maxmemory-policy", "noeviction"]);
    let mut conn = server::connect(&private.address());
    redis::cmd("SET")
        .arg("ballast")
        .arg(vec![b'x'; 8_000_000])
        .query::<()>(&mut conn)
        .unwrap();
    // The limit just above what the server uses now: about 95%, over the 85% threshold.
    let info: String = redis::cmd("INFO").arg("memory").query(&mut conn).unwrap();
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(used * 100 / 95)
        .query::<()>(&mut conn)
        .unwrap();
    let sink = Component::new("redis")
        .set("address", private.address())
        .set("retry.initial.delay.ms", 100u32)
        .set("retry.max.delay.ms", 200u32);
    let path = pipeline(dir.path(), &db, "memory", [sink]);
    let mut child = run::start(&path, &[]);
    let address = private.address();
    wait_until("the pause", &mut child, |child| {
        run::log_so_far(child).contains("used memory is above 85% of its limit")
    });
    assert!(server::entries(&address, "memory.main.t").is_empty());
    redis::cmd("DEL")
        .arg("ballast")
        .query::<()>(&mut conn)
        .unwrap();
    wait_until("the 50 entries", &mut child, |_| {
        server::entries(&address, "memory.main.t").len() >= 50
    });
    run::stop(&child);
    run::finish(child);
    assert_eq!(
        ids(&server::entries(&address, "memory.main.t")),
        (1..=50).collect::<Vec<_>>()
    );
}

#[test]
fn wait_enabled_acknowledges_once_the_replica_has_the_entries_and_maxlen_trims() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = database(dir.path(), 1000);
    let primary = Private::start(&[]);
    let port = primary.port.to_string();
    let replica = Private::start(&["--replicaof", "127.0.0.1", &port]);
    let mut conn = server::connect(&primary.address());
    let t0 = Instant::now();
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut conn)
            .unwrap();
        if info.contains("connected_slaves:1") && info.contains("state=online") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{info}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let sink = Component::new("redis")
        .set("address", primary.address())
        .set("wait.enabled", true)
        .set("stream.maxlen", 10u32)
        .set("batch.size", 100u32);
    let path = pipeline(dir.path(), &db, "wait", [sink]);
    ok(&run_until_idle(&path));
    let on_primary = server::entries(&primary.address(), "wait.main.t");
    let on_replica = server::entries(&replica.address(), "wait.main.t");
    assert_eq!(on_primary, on_replica, "the replica confirmed every block");
    // `MAXLEN ~ 10` trims whole nodes of 100 entries: about 10, never the 1000.
    assert!(
        (10..=110).contains(&on_primary.len()),
        "{}",
        on_primary.len()
    );
    assert_eq!(ids(&on_primary).last(), Some(&1000));
}
