//! The `outbox` transform against Debezium 3.6.3's Outbox Event Router on the same outbox table
//! and changes (`tests/fixtures/debezium/outbox/`, made by its `make.sh` with the real engine):
//! one pipeline, one file sink per router configuration, each compared with Debezium's output
//! for that configuration (topic, key, value with schemas; the `id` header and the placed ones).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::common::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/debezium/outbox")
}

/// A case: fixture name and the router's settings.
type Case = (&'static str, Vec<(&'static str, Scalar)>);

/// The cases.
fn cases() -> Vec<Case> {
    vec![
        ("default", vec![]),
        (
            "invalid_op_error",
            vec![("table.op.invalid.behavior", "error".into())],
        ),
        (
            "route_by_tenant",
            vec![
                ("route.by.field", "tenant".into()),
                (
                    "route.topic.replacement",
                    "outbox.${routedByValue}.events".into(),
                ),
            ],
        ),
        (
            "expand_json",
            vec![("table.expand.json.payload", true.into())],
        ),
        (
            "expand_json_envelope",
            vec![
                ("table.expand.json.payload", true.into()),
                (
                    "table.fields.additional.placement",
                    "type:envelope:eventType".into(),
                ),
            ],
        ),
        (
            "tombstone",
            vec![("route.tombstone.on.empty.payload", true.into())],
        ),
        (
            "placement_headers_only",
            vec![(
                "table.fields.additional.placement",
                "type:header:eventType,tenant:header".into(),
            )],
        ),
        (
            "placement_no_partition",
            vec![(
                "table.fields.additional.placement",
                "type:header:eventType,tenant:envelope:tenantId".into(),
            )],
        ),
    ]
}

fn lines(path: &Path) -> Vec<Json> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Debezium's line as Sluice's file sink writes it: its headers as the raw texts Kafka
/// Connect's default header converter gives (`connect_headers`), Debezium's own
/// `__debezium.context.*` left out (Sluice does not add them); an envelope schema named after
/// its own routing value (Debezium names it after the first one routed: see `outbox/mod.rs`).
fn theirs(line: &Json) -> (Json, Vec<(String, String)>) {
    let mut event = serde_json::json!({
        "topic": line["topic"],
        "key": line["key"],
        "value": line["value"],
    });
    let routed = line["topic"]
        .as_str()
        .unwrap()
        .rsplit('.')
        .next()
        .unwrap()
        .to_owned();
    if let Some(name) = event["value"]["schema"]["name"].as_str() {
        if name.starts_with("dbserver1.public.outbox.") && name.ends_with(".Value") {
            event["value"]["schema"]["name"] =
                format!("dbserver1.public.outbox.{routed}.Value").into();
        }
    }
    let headers = line["connect_headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| !h[0].as_str().unwrap().starts_with("__debezium.context."))
        .map(|h| {
            (
                h[0].as_str().unwrap().to_owned(),
                h[2].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (event, headers)
}

#[test]
fn the_outbox_router_matches_debezium() {
    let read = |f: &str| std::fs::read_to_string(fixtures().join(f)).unwrap();
    let db = fresh_db("outbox");
    let schema: String = read("schema.sql")
        .lines()
        .filter(|l| !l.contains("PUBLICATION"))
        .collect::<Vec<_>>()
        .join("\n");
    psql(&db, &schema);
    let dir = tempfile::tempdir().unwrap();
    let cases = cases();
    let keys: &[(&str, Scalar)] = &[
        ("table.include.list", "public.outbox".into()),
        ("snapshot.mode", "no_data".into()),
    ];
    let mut routers = base(dir.path(), &db, source(&db).set_all(keys), true);
    for (case, settings) in &cases {
        let sink = Component::new("file")
            .named(case)
            .set("path", dir.path().join(format!("{case}.jsonl")))
            .set("headers", true)
            .transform(Component::new("outbox").set_all(settings));
        routers = routers.sink(sink);
    }
    let file = routers.write(dir.path());
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    let workload: String = read("workload.sql")
        .split("-- Same events in outbox_ext")
        .next()
        .unwrap()
        .to_owned();
    psql(&db, &workload);
    let t0 = Instant::now();
    while cases
        .iter()
        .any(|(case, _)| lines(&dir.path().join(format!("{case}.jsonl"))).len() < 4)
    {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{}",
            log_so_far(&child)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    stop(&child);
    let log = finish(child);
    assert!(
        log.contains("Dropped an update of the outbox table"),
        "{log}"
    );

    for (case, _) in &cases {
        let ours = lines(&dir.path().join(format!("{case}.jsonl")));
        let expected = lines(&fixtures().join(format!("{case}.jsonl")));
        assert_eq!(ours.len(), expected.len(), "{case}");
        for (i, (a, b)) in ours.iter().zip(&expected).enumerate() {
            let (event, headers) = theirs(b);
            let mine =
                serde_json::json!({"topic": a["topic"], "key": a["key"], "value": a["value"]});
            assert_eq!(mine.to_string(), event.to_string(), "{case}: event {i}");
            let my_headers: Vec<(String, String)> = a["headers"]
                .as_object()
                .map(|h| {
                    h.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(my_headers, headers, "{case}: event {i} headers");
        }
    }
    drop_db(&db);
}
