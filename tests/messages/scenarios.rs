//! What every message sink must do, written once over a [`Bus`] (a server of the test's own and
//! how to read what reached it), and run for each bus by [`scenarios!`].

use std::time::Duration;

use serde_json::Value as Json;
use sluice_test_support::feed::{
    after_ids, database, in_order, insert, ok, outage, pipeline, run_until_idle, wait_until,
};
use sluice_test_support::pg as run;
use sluice_test_support::pipeline::{Component, Scalar};

/// A message sink's server, private to a test, and what it holds.
pub(crate) trait Bus: Sized {
    /// The example pipeline (`pipelines/<name>.yaml`) and the variable naming its server.
    const EXAMPLE: (&'static str, &'static str);
    /// The log line of a sink sending again what its server did not acknowledge.
    const SENT_AGAIN: &'static str;
    /// Settings that make the sink retry quickly.
    const QUICK_RETRIES: &'static [(&'static str, Scalar)];
    /// Whether the server drops what is sent again (by the messages' ids): an outage then
    /// stores nothing twice.
    const DROPS_REPEATS: bool;

    /// A server of the test's own.
    fn start() -> Self;
    /// Where it is, as the example's variable names it.
    fn address(&self) -> String;
    /// The sink `bus` taking the events of the pipeline whose topic prefix is `prefix`.
    fn sink(&self, prefix: &str) -> Component;
    /// The bodies stored of the events of `prefix`'s pipeline, in order.
    fn bodies(&self, prefix: &str) -> Vec<String>;
    /// How many are stored, read without taking them.
    fn count(&self, prefix: &str) -> u64;
    /// The bodies the example pipeline stored for `topic`.
    fn example_bodies(&self, topic: &str) -> Vec<String>;
    fn stop(&mut self);
    fn restart(&mut self);
}

fn json(text: &str) -> Json {
    serde_json::from_str(text).unwrap()
}

/// With `format: cloudevents`, the bodies are the file sink's CloudEvents.
pub(crate) fn cloudevents_are_the_file_sinks<B: Bus>() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _conn) = database(dir.path(), 3);
    let bus = B::start();
    let file = Component::new("file")
        .named("ce")
        .set("path", dir.path().join("ce.jsonl"))
        .set("format", "cloudevents");
    let sinks = [file, bus.sink("ce").set("format", "cloudevents")];
    let path = pipeline(dir.path(), &db, "ce", sinks);
    ok(&run_until_idle(&path));
    let file: Vec<Json> = std::fs::read_to_string(dir.path().join("ce.jsonl"))
        .unwrap()
        .lines()
        .map(json)
        .collect();
    let bodies = bus.bodies("ce");
    assert_eq!(bodies.len(), 3, "{bodies:#?}");
    for (body, line) in bodies.iter().zip(&file) {
        let body = json(body);
        assert_eq!(body, line["value"]);
        assert_eq!(body["specversion"], "1.0");
        assert_eq!(body["type"], "io.debezium.connector.sqlite.DataChangeEvent");
    }
}

/// The server stopped while 20,000 rows stream and started again: the sink retries by itself,
/// and the server holds every row in order (repeats only where the sink sent again, none where
/// the server drops them).
pub(crate) fn a_server_stopped_mid_stream_loses_nothing<B: Bus>() {
    const ROWS: i64 = 20_100;
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = database(dir.path(), 100);
    let mut bus = B::start();
    let sink = bus.sink("outage").set_all(B::QUICK_RETRIES);
    let path = pipeline(dir.path(), &db, "outage", [sink]);
    let mut child = run::start(&path, &[]);
    wait_until("the first 100 messages", &mut child, |_| {
        bus.count("outage") >= 100
    });
    let server = std::cell::RefCell::new(&mut bus);
    outage(
        &mut child,
        || server.borrow_mut().stop(),
        || insert(&conn, 101..=ROWS),
        || server.borrow_mut().restart(),
    );
    wait_until("every message", &mut child, |_| {
        bus.count("outage") >= ROWS as u64
    });
    std::thread::sleep(Duration::from_secs(1));
    run::stop(&child);
    let log = run::finish(child);
    assert!(log.contains(B::SENT_AGAIN), "{log}");
    let got = after_ids(bus.bodies("outage").iter().map(String::as_str));
    if B::DROPS_REPEATS {
        assert_eq!(got, (1..=ROWS).collect::<Vec<_>>());
    } else {
        assert_eq!(in_order(got), (1..=ROWS).collect::<Vec<_>>());
    }
}

/// `pipelines/sqlite-<bus>.yaml` runs as shipped: the demo's tables reach the server as values
/// without schemas.
pub(crate) fn the_example_pipeline_runs_as_shipped<B: Bus>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::start();
    let (example, variable) = B::EXAMPLE;
    ok(&sluice_test_support::feed::run_example(
        dir.path(),
        example,
        &[(variable, &bus.address())],
    ));
    let customers = bus.example_bodies("inventory.main.customers");
    assert!(customers.len() >= 1000, "{}", customers.len());
    assert!(bus.example_bodies("inventory.main.products").len() >= 200);
    let first = json(&customers[0]);
    assert!(
        first["op"].is_string() && first.get("schema").is_none(),
        "{first}"
    );
}

/// The scenarios, as tests of the bus `$bus`.
macro_rules! scenarios {
    ($bus:ty) => {
        #[test]
        fn cloudevents_are_the_file_sinks_cloudevents() {
            crate::scenarios::cloudevents_are_the_file_sinks::<$bus>();
        }

        #[test]
        fn a_server_stopped_mid_stream_loses_nothing() {
            crate::scenarios::a_server_stopped_mid_stream_loses_nothing::<$bus>();
        }

        #[test]
        fn the_example_pipeline_runs_as_shipped() {
            crate::scenarios::the_example_pipeline_runs_as_shipped::<$bus>();
        }
    };
}
