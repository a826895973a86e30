//! The `rabbitmq` sink against real RabbitMQ brokers (the machine's, and private nodes the
//! tests stop, alarm or restrict), fed by the SQLite source through the `sluice` binary; what
//! reached the queues is read with `lapin`'s `basic.get`, from queues the test bound as a
//! consumer would, and compared with the file sink of the same run.

use std::time::{Duration, Instant};

use serde_json::Value as Json;
use sluice_test_support::feed::{
    after_ids, database, error_line, in_order, insert, ok, pipeline, run_until_idle, wait_until,
};
use sluice_test_support::pg as run;
use sluice_test_support::pipeline::{Component, Scalar};

use crate::scenarios::Bus;
use sluice_test_support::rabbitmq::{self as broker, Got, Private};

/// A private RabbitMQ node; a pipeline's events go to a queue named after its topic prefix,
/// through an exchange, both declared by the sink.
pub(crate) struct Rabbitmq(Private);

impl Bus for Rabbitmq {
    const EXAMPLE: (&'static str, &'static str) = ("sqlite-rabbitmq", "RABBITMQ_URL");
    const SENT_AGAIN: &'static str =
        "RabbitMQ did not confirm every message; publishing the rest again";
    const QUICK_RETRIES: &'static [(&'static str, Scalar)] = &[
        ("ackTimeout", Scalar::Integer(2000)),
        ("retry.initial.delay.ms", Scalar::Integer(100)),
        ("retry.max.delay.ms", Scalar::Integer(1000)),
    ];
    const DROPS_REPEATS: bool = false;

    fn start() -> Self {
        Rabbitmq(Private::start(""))
    }
    fn address(&self) -> String {
        self.0.url()
    }
    fn sink(&self, prefix: &str) -> Component {
        sink("bus", &self.0.url())
            .set("exchange", format!("{prefix}_x"))
            .set("autoCreateExchange", true)
            .set("routingKey", prefix)
            .set("autoCreateRoutingKey", true)
    }
    fn bodies(&self, prefix: &str) -> Vec<String> {
        (broker::drain(&self.0.url(), prefix).into_iter())
            .map(|m| m.body)
            .collect()
    }
    fn count(&self, prefix: &str) -> u64 {
        broker::count(&self.0.url(), prefix).into()
    }
    fn example_bodies(&self, topic: &str) -> Vec<String> {
        self.bodies(topic)
    }
    fn stop(&mut self) {
        self.0.stop();
    }
    fn restart(&mut self) {
        self.0.restart();
    }
}

scenarios!(Rabbitmq);

/// A name of the test's own on the shared broker.
fn unique(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("sluice_{test}_{}_{nanos}", std::process::id())
}

fn json(text: &str) -> Json {
    serde_json::from_str(text).unwrap()
}

/// The ids of the `after` images in messages (with or without schemas), in order.
fn ids(messages: &[Got]) -> Vec<i64> {
    after_ids(messages.iter().map(|m| m.body.as_str()))
}

/// The sink `name`: `rabbitmq` at `uri` (more keys set by the caller).
fn sink(name: &str, uri: &str) -> Component {
    Component::new("rabbitmq")
        .named(name)
        .set("connection.uri", uri)
}

#[test]
fn messages_are_the_file_sinks_values_routed_by_topic_and_persistent() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = database(dir.path(), 3);
    let url = broker::shared_url();
    let (exchange, queue) = (unique("e2e_x"), unique("e2e_q"));
    let (created, cdc) = (unique("e2e_created"), unique("e2e_cdc"));
    broker::exchange(&url, &exchange);
    broker::bind(&url, &queue, &exchange, "#");
    let sinks = [
        sink("topic", &url)
            .set("exchange", &exchange)
            .set("routingKey.source", "topic"),
        sink("static", &url)
            .set("exchange", &created)
            .set("autoCreateExchange", true)
            .set("routingKey", &cdc)
            .set("autoCreateRoutingKey", true)
            .set("schemas.enable", false)
            .set("null.value", "gone"),
    ];
    let path = pipeline(dir.path(), &db, "e2e", sinks);
    ok(&run_until_idle(&path));
    conn.execute_batch("update t set v = 'x' where id = 1; delete from t where id = 2;")
        .unwrap();
    ok(&run_until_idle(&path));

    let file: Vec<Json> = run::lines(dir.path());
    assert_eq!(file.len(), 6, "3 reads, an update, a delete, a tombstone");
    let by_topic = broker::drain(&url, &queue);
    let fixed = broker::drain(&url, &cdc);
    broker::remove(&url, &[&queue, &cdc], &[&exchange, &created]);
    assert_eq!(by_topic.len(), 6, "{by_topic:#?}");
    for (m, line) in by_topic.iter().zip(&file) {
        assert_eq!(
            (m.exchange.as_str(), m.routing_key.as_str()),
            (exchange.as_str(), "e2e.main.t")
        );
        assert_eq!(m.delivery_mode, Some(2), "persistent");
        match line["value"].is_null() {
            true => assert_eq!(m.body, "default", "a tombstone's body is `null.value`"),
            false => assert_eq!(json(&m.body), line["value"]),
        }
    }
    assert_eq!(fixed.len(), 6);
    for (m, line) in fixed.iter().zip(&file) {
        assert_eq!(m.routing_key, cdc);
        match line["value"].is_null() {
            true => assert_eq!(m.body, "gone"),
            false => assert_eq!(json(&m.body), line["value"]["payload"], "without schemas"),
        }
    }
}

#[test]
fn a_wrong_login_address_or_virtual_host_stops_the_start_with_one_line_and_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = database(dir.path(), 1);
    let parts = |key: &str, value: Scalar| {
        Component::new("rabbitmq")
            .named("bus")
            .set("connection.host", "127.0.0.1")
            .set("exchange", "x")
            .set(key, value)
    };
    let path = pipeline(
        dir.path(),
        &db,
        "login",
        [parts("connection.password", "wr0ng-pa55-x".into())],
    );
    let o = run_until_idle(&path);
    let error = error_line(&o);
    assert!(
        error.contains("sink `bus`")
            && error.contains("RabbitMQ at 127.0.0.1:5672/ refused the login of user `guest`")
            && error.contains("check `connection.username` and `connection.password`"),
        "{error}"
    );
    assert!(!String::from_utf8_lossy(&o.stderr).contains("wr0ng-pa55-x"));

    let path = pipeline(
        dir.path(),
        &db,
        "login",
        [parts("connection.virtual.host", "nowhere".into())],
    );
    let error = error_line(&run_until_idle(&path));
    assert!(
        error.contains("does not let user `guest` use virtual host `nowhere`"),
        "{error}"
    );

    let closed = run::free_port();
    let path = pipeline(
        dir.path(),
        &db,
        "login",
        [parts("connection.port", closed.into())],
    );
    let error = error_line(&run_until_idle(&path));
    assert!(
        error.contains(&format!("cannot reach RabbitMQ at 127.0.0.1:{closed}/"))
            && error.contains("check `connection.host`, `connection.port`"),
        "{error}"
    );
}

#[test]
fn a_missing_exchange_or_a_key_no_queue_takes_stops_the_pipeline_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = database(dir.path(), 1);
    let url = broker::shared_url();
    let exchange = unique("missing");
    let path = pipeline(
        dir.path(),
        &db,
        "missing",
        [sink("bus", &url).set("exchange", &exchange)],
    );
    let error = error_line(&run_until_idle(&path));
    assert!(
        error.contains(&format!("exchange `{exchange}` does not exist"))
            && error.contains("autoCreateExchange: true"),
        "{error}"
    );

    // The exchange is there, no queue is bound: the broker returns the message (mandatory).
    broker::exchange(&url, &exchange);
    let error = error_line(&run_until_idle(&path));
    broker::remove(&url, &[], &[&exchange]);
    assert!(
        error.contains(&format!(
            "no queue is bound to exchange `{exchange}` for routing key ``"
        )) && error.contains("NO_ROUTE")
            && error.contains("autoCreateRoutingKey: true"),
        "{error}"
    );
}

#[test]
fn a_user_without_write_permission_or_a_message_over_max_message_size_stops_or_skips() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = database(dir.path(), 1);
    conn.execute("insert into t values (2, ?1)", [&"x".repeat(5000)])
        .unwrap();
    insert(&conn, 3..=3);
    let private = Private::start("max_message_size = 4096");
    private.ctl(&["add_user", "reader", "reader-pw"]);
    private.ctl(&["set_permissions", "-p", "/", "reader", ".*", "^$", ".*"]);
    let url = private.url();
    broker::exchange(&url, "cdc");
    broker::bind(&url, "all", "cdc", "#");
    let reader = url.replace("guest:guest", "reader:reader-pw");
    let by_topic = |uri: &str| {
        sink("bus", uri)
            .set("exchange", "cdc")
            .set("routingKey.source", "topic")
    };
    let path = pipeline(dir.path(), &db, "perm", [by_topic(&reader)]);
    let error = error_line(&run_until_idle(&path));
    assert!(
        error.contains("user `reader` may not publish to exchange `cdc`"),
        "{error}"
    );
    assert!(error.contains("rabbitmqctl set_permissions"), "{error}");
    assert_eq!(broker::count(&url, "all"), 0);

    let more = by_topic(&url).set("schemas.enable", false);
    let path = pipeline(dir.path(), &db, "big", [more.clone()]);
    let error = error_line(&run_until_idle(&path));
    assert!(
        error.contains("the broker refused a message of")
            && error.contains("max_message_size")
            && error.contains("event.processing.failure.handling.mode: warn"),
        "{error}"
    );
    let warn = more.set("event.processing.failure.handling.mode", "warn");
    let path = pipeline(dir.path(), &db, "big", [warn]);
    let stderr = ok(&run_until_idle(&path));
    assert!(stderr.contains("Skipped an event"), "{stderr}");
    // The snapshot's rows 1-3 and the inserts of 2 and 3; the first run stopped after row 1
    // (confirmed, so it is there twice: at least once); the big ones are left out.
    let got = ids(&broker::drain(&url, "all"));
    assert_eq!(in_order(got.clone()), vec![1, 3], "{got:?}");
    assert!(!got.contains(&2), "{got:?}");
}

#[test]
fn publishing_waits_while_the_broker_blocks_it_and_goes_on_after() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = database(dir.path(), 50);
    let private = Private::start("");
    let url = private.url();
    broker::exchange(&url, "cdc");
    broker::bind(&url, "all", "cdc", "#");
    private.ctl(&["set_vm_memory_high_watermark", "absolute", "1"]);
    let blocked = sink("bus", &url)
        .set("exchange", "cdc")
        .set("routingKey.source", "topic")
        .set("ackTimeout", 1000u32)
        .set("retry.initial.delay.ms", 100u32)
        .set("retry.max.delay.ms", 500u32);
    let path = pipeline(dir.path(), &db, "alarm", [blocked]);
    let mut child = run::start(&path, &[]);
    let t0 = Instant::now();
    wait_until("the block", &mut child, |child| {
        run::log_so_far(child).contains("RabbitMQ blocks publishing")
            || t0.elapsed() > Duration::from_secs(20)
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(broker::count(&url, "all"), 0, "{}", run::log_so_far(&child));
    private.ctl(&["set_vm_memory_high_watermark", "0.4"]);
    wait_until("the 50 messages", &mut child, |_| {
        broker::count(&url, "all") >= 50
    });
    run::stop(&child);
    let log = run::finish(child);
    assert!(log.contains("RabbitMQ blocks publishing"), "{log}");
    let got = ids(&broker::drain(&url, "all"));
    assert_eq!(in_order(got), (1..=50).collect::<Vec<_>>());
}
