//! One pipeline fanning out to every message sink at once (file, Redis Streams, NATS JetStream,
//! RabbitMQ, HTTP is `http.rs`'s), killed with SIGKILL while it delivers a stream of
//! inserts and started again: every event reached every sink at least once, in order, and
//! what each service holds matches the file sink of the same runs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::time::Duration;

use serde_json::Value as Json;
use sluice_test_support::feed::{
    after_ids as ids, database, in_order, insert, pipeline, wait_until,
};
use sluice_test_support::pg as run;
use sluice_test_support::pipeline::Component;
use sluice_test_support::{nats, rabbitmq, redis};

const ROWS: i64 = 5_000;

#[test]
fn every_sink_gets_every_event_across_a_kill_9_during_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let (db, conn) = database(dir.path(), 100);
    let redis = redis::Private::start(&[]);
    let nats = nats::Private::start("");
    let rabbit = rabbitmq::Private::start("");
    let sinks = [
        Component::new("redis")
            .named("redis")
            .set("address", redis.address()),
        Component::new("nats")
            .named("nats")
            .set("url", nats.url())
            .set("create-stream", true)
            .set("stream-name", "Fan")
            .set("subjects", "fan.>"),
        Component::new("rabbitmq")
            .named("rabbitmq")
            .set("connection.uri", rabbit.url())
            .set("exchange", "fan")
            .set("autoCreateExchange", true)
            .set("routingKey", "all")
            .set("autoCreateRoutingKey", true),
    ];
    let path = pipeline(dir.path(), &db, "fan", sinks);
    let mut child = run::start(&path, &[]);
    let nats_url = nats.url();
    wait_until("the snapshot in NATS", &mut child, |_| {
        nats::count(&nats_url, "Fan") >= 100
    });
    // Inserts go on while the pipeline delivers them; it is killed in the middle.
    let writer_db = db.clone();
    let writer = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(writer_db).unwrap();
        for start in (101..=ROWS).step_by(100) {
            insert(&conn, start..=(start + 99).min(ROWS));
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    wait_until("a part of the inserts", &mut child, |_| {
        nats::count(&nats_url, "Fan") >= 1000
    });
    let mut killed = child;
    killed.kill().unwrap();
    let _ = run::wait_output(killed);
    writer.join().unwrap();
    drop(conn);

    let mut child = run::start(&path, &[]);
    wait_until("every row in NATS", &mut child, |_| {
        nats::count(&nats_url, "Fan") >= ROWS as u64
    });
    run::stop(&child);
    run::finish(child);
    // A last run delivers and commits whatever the stop left in flight.
    sluice_test_support::feed::ok(&sluice_test_support::feed::run_until_idle(&path));

    let every: Vec<i64> = (1..=ROWS).collect();
    let file: Vec<Json> = run::lines(dir.path());
    let file_ids: Vec<i64> = file
        .iter()
        .filter_map(|l| l["value"]["payload"]["after"]["id"].as_i64())
        .collect();
    assert_eq!(in_order(file_ids), every, "file");
    let entries = redis::entries(&redis.address(), "fan.main.t");
    let redis_ids = ids(entries.iter().map(|e| e[0].1.as_str()));
    assert_eq!(in_order(redis_ids), every, "redis");
    let stored = nats::messages(&nats_url, "Fan");
    let nats_ids = ids(stored.iter().map(|m| m.payload.as_str()));
    assert_eq!(
        nats_ids, every,
        "nats: each once (the duplicate window drops the replay)"
    );
    let got = rabbitmq::drain(&rabbit.url(), "all");
    let rabbit_ids = ids(got.iter().map(|m| m.body.as_str()));
    assert_eq!(in_order(rabbit_ids), every, "rabbitmq");
}
