//! The `kafka` signal channel: a record keyed by `topic.prefix` in the signal topic starts an
//! incremental snapshot; records with another key are ignored; a handled signal is not handled
//! again after a restart.

use std::time::Duration;

use crate::broker;
use crate::e2e::unique_prefix;
use crate::pg;

/// The source's keys of these tests: no snapshot, table `t` and the signaling table captured,
/// signals from the signaling table and from `topic` at `bootstrap`.
fn signal_keys(bootstrap: &str, topic: &str) -> Vec<(&'static str, pg::Scalar)> {
    vec![
        ("snapshot.mode", "no_data".into()),
        (
            "table.include.list",
            "public.t,public.debezium_signal".into(),
        ),
        ("signal.data.collection", "public.debezium_signal".into()),
        ("signal.enabled.channels", "source,kafka".into()),
        ("signal.kafka.bootstrap.servers", bootstrap.into()),
        ("signal.kafka.topic", topic.into()),
        ("signal.kafka.groupId", topic.into()),
        ("signal.consumer.broker.address.family", "v4".into()),
    ]
}

#[test]
fn a_signal_record_starts_an_incremental_snapshot_once() {
    let bootstrap = broker::shared();
    let db = pg::fresh_db("kafka_signal");
    pg::psql(&db, pg::SIGNAL_TABLE);
    pg::psql(&db, "create table t (id int primary key, v text); insert into t select g, 'v' from generate_series(1, 50) g");
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_prefix("signals");
    let path = pg::pipeline(dir.path(), &db, &signal_keys(&bootstrap, &topic), false);
    let mut child = pg::start(&path, &[]);
    pg::active_slot_pid(&db, &mut child);
    let signal = r#"{"id":"k-1","type":"execute-snapshot","data":{"data-collections":["public.t"],"type":"incremental"}}"#;
    // The channel created the topic at start; a record for another connector comes first.
    broker::produce(&bootstrap, &topic, "another-connector", signal);
    broker::produce(&bootstrap, &topic, "dbserver1", signal);
    pg::wait_lines(dir.path(), 50, &mut child);
    std::thread::sleep(Duration::from_millis(500));
    pg::stop(&child);
    let said = pg::finish(child);
    assert!(said.contains("Created the signal topic"), "{said}");
    assert!(said.contains("Ignoring a signal record"), "{said}");
    let rows = |lines: &[serde_json::Value]| {
        lines
            .iter()
            .filter(|l| l["value"]["op"] == "r" && l["topic"] == "dbserver1.public.t")
            .count()
    };
    assert_eq!(
        rows(&pg::lines(dir.path())),
        50,
        "one snapshot of the 50 rows"
    );

    // Restarted: the handled signal is not read again.
    let child = pg::start(&path, &["--stop-when-idle", "3s"]);
    pg::finish(child);
    assert_eq!(rows(&pg::lines(dir.path())), 50);
    pg::drop_db(&db);
}

/// Bad signals on the `kafka` channel (malformed JSON, a filter that is not SQL, one that would
/// write, an unknown type) are refused one by one and the pipeline goes on: a good signal after
/// them still runs, and the bad ones are not read again after a restart.
#[test]
fn bad_signal_records_are_refused_and_the_pipeline_goes_on() {
    let bootstrap = broker::shared();
    let db = pg::fresh_db("kafka_bad_signal");
    pg::psql(&db, pg::SIGNAL_TABLE);
    pg::psql(&db, "create table t (id int primary key, v text); insert into t select g, 'v' from generate_series(1, 30) g");
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_prefix("bad-signals");
    let path = pg::pipeline(dir.path(), &db, &signal_keys(&bootstrap, &topic), false);
    let mut child = pg::start(&path, &[]);
    pg::active_slot_pid(&db, &mut child);
    let bad = [
        r#"{"id":"b-1","type":"execute-snapshot","data":{"data-collections":["public.t"],"additional-conditions":[{"data-collection":"public.t","filter":"v >"}]}}"#,
        r#"{"id":"b-2","type":"execute-snapshot","data":{"data-collections":["public.t"],"additional-conditions":[{"data-collection":"public.t","filter":"1=1; drop table t"}]}}"#,
        r#"{"id":"b-3","type":"explode","data":{}}"#,
        r#"{"id":"b-4","type":"execute-snapshot","data":{"data-collections":"public.t"}}"#,
        r#"not json at all"#,
    ];
    for signal in bad {
        broker::produce(&bootstrap, &topic, "dbserver1", signal);
    }
    let good = r#"{"id":"k-2","type":"execute-snapshot","data":{"data-collections":["public.t"]}}"#;
    broker::produce(&bootstrap, &topic, "dbserver1", good);
    pg::wait_lines(dir.path(), 30, &mut child);
    pg::stop(&child);
    let said = pg::finish(child);
    let refused = said
        .lines()
        .filter(|l| l.contains("Signal refused"))
        .count();
    assert_eq!(refused, bad.len(), "{said}");
    assert_eq!(pg::psql(&db, "select count(*) from t").trim(), "30");
    let child = pg::start(&path, &["--stop-when-idle", "3s"]);
    let said = pg::finish(child);
    assert!(
        !said.contains("refused"),
        "a handled signal was read again: {said}"
    );
    pg::drop_db(&db);
}
