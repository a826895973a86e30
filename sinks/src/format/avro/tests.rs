//! Conformance with Confluent's AvroConverter 7.0.16 on Debezium 3.6.3's own records: the
//! fixtures under `tests/fixtures/debezium/avro/` were made by `tools/AvroRef.java` from the JSON
//! fixtures beside them (the schemas AvroData derives and the datums AvroConverter writes).

use serde_json::Value as Json;
use sluice_engine::codec::decode_record;

use super::{datum, schema, subject};
use crate::format::{NameAdjustment, SubjectStrategy};

macro_rules! fixture {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!(
                "../../../../tests/fixtures/debezium/",
                $name,
                ".jsonl"
            )),
            include_str!(concat!(
                "../../../../tests/fixtures/debezium/avro/",
                $name,
                ".jsonl"
            )),
        )
    };
}

const FIXTURES: &[(&str, &str, &str)] = &[
    fixture!("types_a"),
    fixture!("types_b"),
    fixture!("types_c"),
    fixture!("customers_snapshot_schemas"),
    fixture!("customers_stream_schemas"),
    fixture!("edge_stream"),
    fixture!("tx_stream"),
    fixture!("heartbeat"),
    fixture!("columns_a"),
    fixture!("columns_b"),
    fixture!("columns_c"),
    fixture!("columns_d"),
    fixture!("notifications"),
    fixture!("notifications_initial"),
    fixture!("notifications_blocking"),
];

fn read(schema: &apache_avro::Schema, datum: &[u8]) -> Result<apache_avro::types::Value, String> {
    apache_avro::reader::datum::GenericDatumReader::builder(schema)
        .build()
        .and_then(|r| r.read_value(&mut &datum[..]))
        .map_err(|e| e.to_string())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn schemas_and_datums_match_confluents_avro_converter() {
    let mut compared = 0;
    for (name, json_lines, avro_lines) in FIXTURES {
        for (i, (line, reference)) in json_lines.lines().zip(avro_lines.lines()).enumerate() {
            let line: Json = serde_json::from_str(line).unwrap_or_default();
            let reference: Json = serde_json::from_str(reference).unwrap_or_default();
            for part in ["key", "value"] {
                let record =
                    decode_record(&line[part]).unwrap_or_else(|e| panic!("{name}:{i}: {e}"));
                let Some(record) = record else {
                    assert!(reference[part].is_null(), "{name}:{i} {part}");
                    continue;
                };
                let derived = schema::derive(&record.schema, NameAdjustment::Avro);
                assert_eq!(
                    derived.json,
                    reference[format!("{part}_schema")]
                        .as_str()
                        .unwrap_or_default(),
                    "{name}:{i} {part} schema"
                );
                let mut out = Vec::new();
                datum::encode(&record.schema, &record.value, &mut out)
                    .unwrap_or_else(|e| panic!("{name}:{i}: {e}"));
                // apache-avro reads it back under the derived schema.
                let parsed =
                    apache_avro::Schema::parse_str(&derived.json).unwrap_or_else(|e| panic!("{e}"));
                let back = read(&parsed, &out);
                assert!(back.is_ok(), "{name}:{i} {part}: {back:?}");
                let expected = reference[part].as_str().unwrap_or_default();
                if hex(&out) != expected {
                    // Maps: Java wrote the entries of a HashMap in hash order; the same entries in
                    // another order are the same datum.
                    assert!(
                        derived.json.contains("\"type\":\"map\""),
                        "{name}:{i} {part} datum:\n{}\n{expected}",
                        hex(&out)
                    );
                    let bytes: Vec<u8> = (0..expected.len() / 2)
                        .map(|j| {
                            u8::from_str_radix(&expected[2 * j..2 * j + 2], 16).unwrap_or_default()
                        })
                        .collect();
                    let java = read(&parsed, &bytes);
                    assert_eq!(back.ok(), java.ok(), "{name}:{i} {part} datum");
                }
                compared += 1;
            }
        }
    }
    assert!(compared >= 150, "{compared}");
}

#[test]
fn credentials_in_the_registry_url_are_not_shown() {
    assert_eq!(
        super::shown("https://u:secret@registry:8081/x"),
        "https://registry:8081/x"
    );
    assert_eq!(super::shown("http://registry:8081"), "http://registry:8081");
}

#[test]
fn subjects_follow_the_strategies() {
    let derived = schema::Derived {
        json: String::new(),
        full_name: Some("app.public.orders.Envelope".into()),
    };
    let topic = "app.public.orders";
    assert_eq!(
        subject(SubjectStrategy::TopicName, topic, false, &derived),
        "app.public.orders-value"
    );
    assert_eq!(
        subject(SubjectStrategy::TopicName, topic, true, &derived),
        "app.public.orders-key"
    );
    assert_eq!(
        subject(SubjectStrategy::RecordName, topic, false, &derived),
        "app.public.orders.Envelope"
    );
    assert_eq!(
        subject(SubjectStrategy::TopicRecordName, topic, false, &derived),
        "app.public.orders-app.public.orders.Envelope"
    );
}

#[test]
fn a_port_in_the_address_is_not_a_refusal() {
    use super::refused_credentials;
    assert!(!refused_credentials(
        "http call to schema registry failed",
        " (error sending request for url (http://127.0.0.1:40193/subjects))"
    ));
    assert!(refused_credentials(
        "HTTP status client error (401 Unauthorized) for url (http://127.0.0.1:8081/subjects)",
        ""
    ));
    assert!(refused_credentials("", " (403 Forbidden)"));
}
