//! `format: cloudevents` against Debezium 3.6.3's CloudEventsConverter (JSON structured mode)
//! on the same rows and changes (`tests/fixtures/debezium/cloudevents/`, made by its
//! `make.sh` with the real engine): snapshot, insert, update, delete and tombstone, with and
//! without the data's schema and the extension attributes.

use std::path::Path;

use serde_json::Value as Json;

use super::common::*;

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/debezium/cloudevents")
}

/// The fields that change from run to run, blanked.
fn blank(line: &str) -> Json {
    let mut event: Json = serde_json::from_str(line).unwrap();
    if let Some(value) = event.get_mut("value").and_then(Json::as_object_mut) {
        for field in [
            "id",
            "time",
            "iodebeziumtsms",
            "iodebeziumtsus",
            "iodebeziumtsns",
            "iodebeziumsequence",
            "iodebeziumtxId",
            "iodebeziumlsn",
            "iodebeziumdb",
            "iodebeziumversion",
        ] {
            if let Some(v) = value.get_mut(field) {
                *v = Json::String("<run>".into());
            }
        }
    }
    event
}

/// Runs the fixture's rows and changes into a file sink with `format: cloudevents` and the
/// `sink` keys, and compares with Debezium's `expected`; `key_payload` compares keys without
/// their schema (Debezium's key converter keeps it when the data's is off).
fn golden(name: &str, schemas: bool, sink: &[(&str, Scalar)], expected: &str, key_payload: bool) {
    let read = |f: &str| std::fs::read_to_string(fixtures().join(f)).unwrap();
    let db = fresh_db(name);
    psql(&db, &read("schema.sql"));
    let dir = tempfile::tempdir().unwrap();
    let source = source(&db).set("table.include.list", "public.customers");
    let sink = file_sink(dir.path(), schemas)
        .set("format", "cloudevents")
        .set_all(sink);
    let file = base(dir.path(), &db, source, schemas)
        .without_sinks()
        .sink(sink)
        .write(dir.path());
    let mut child = start(&file, &[]);
    wait_lines(dir.path(), 2, &mut child);
    psql(&db, &read("stream.sql"));
    let theirs = read(expected);
    wait_lines(dir.path(), theirs.lines().count(), &mut child);
    stop(&child);
    finish(child);
    let ours = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert_eq!(ours.lines().count(), theirs.lines().count());
    for (i, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        let (a, mut b) = (blank(a), blank(b));
        if key_payload {
            b["key"] = b["key"]["payload"].clone();
        }
        assert_eq!(a, b, "event {i} differs from Debezium's");
        // Byte for byte once blanked: same members in the same order.
        assert_eq!(a.to_string(), b.to_string(), "event {i}: member order");
    }
    let value: Json = serde_json::from_str(ours.lines().nth(2).unwrap()).unwrap();
    let id = value["value"]["id"].as_str().unwrap();
    assert!(
        id.starts_with("name:dbserver1;lsn:")
            && id.contains(";txId:")
            && id.contains(";sequence:["),
        "{id}"
    );
    drop_db(&db);
}

#[test]
fn cloudevents_match_debezium() {
    golden("ce_default", true, &[], "default.jsonl", false);
}

#[test]
fn cloudevents_without_the_datas_schema_match_debezium() {
    golden("ce_noschemas", false, &[], "noschemas.jsonl", true);
}

#[test]
fn cloudevents_without_extension_attributes_match_debezium() {
    golden(
        "ce_noext",
        true,
        &[("extension.attributes.enable", false.into())],
        "noext.jsonl",
        false,
    );
}
