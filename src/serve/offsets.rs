//! Kafka Connect's offsets API (KIP-875, Kafka Connect 3.6+) over a pipeline's committed
//! position: `GET /connectors/{name}/offsets`, and for a stopped connector `PATCH` (set it)
//! and `DELETE` (forget it: the pipeline starts again as a new one).
//!
//! A pipeline has one source partition, `{"pipeline": NAME}`; its offset is the committed
//! position as the source wrote it (a JSON object: PostgreSQL's LSNs, MySQL's binlog file and
//! position, ...), or `{"position": ...}` for a position that is not one. These are Sluice's
//! positions, not Debezium's offsets: what `GET` shows is what `PATCH` takes back.

use serde_json::{json, Value};
use sluice_engine::Position;
use sluice_runtime::admin::http::Answer;

use super::connect::{error, refused};
use super::manager::Manager;

/// `/connectors/{name}/offsets`.
pub(crate) fn answer(manager: &Manager, name: &str, method: &str, body: &[u8]) -> Answer {
    if manager.view(name).is_none() {
        return error(404, format!("Connector {name} not found"));
    }
    match method {
        "GET" => match manager.committed(name) {
            Ok(committed) => {
                sluice_runtime::admin::http::json(200, &shown(name, committed.as_ref()))
            }
            Err(r) => refused(r),
        },
        "DELETE" => change(manager, name, None, "reset"),
        "PATCH" => match given(name, body) {
            Ok(position) => change(manager, name, position.as_ref(), "altered"),
            Err(e) => error(400, e),
        },
        _ => error(405, "HTTP 405 Method Not Allowed"),
    }
}

fn change(manager: &Manager, name: &str, position: Option<&Position>, done: &str) -> Answer {
    match manager.set_committed(name, position) {
        Ok(()) => sluice_runtime::admin::http::json(
            200,
            &json!({"message": format!("The offsets for this connector have been {done} successfully")}),
        ),
        Err(r) => refused(r),
    }
}

/// The source partition of pipeline `name`.
fn partition(name: &str) -> Value {
    json!({"pipeline": name})
}

/// `{"offsets": [{"partition", "offset"}]}`, empty without a committed position.
fn shown(name: &str, committed: Option<&Position>) -> Value {
    let offsets: Vec<Value> = committed
        .map(|p| json!({"partition": partition(name), "offset": offset_of(p)}))
        .into_iter()
        .collect();
    json!({ "offsets": offsets })
}

/// A position as an offset: the source's JSON object, else `{"position": ...}` (also for an
/// object that is itself only a `position`, so that reading it back is never ambiguous).
fn offset_of(position: &Position) -> Value {
    match position {
        Position::Offset(n) => json!({ "position": n }),
        Position::Opaque(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(o)) if !(o.len() == 1 && o.contains_key("position")) => {
                Value::Object(o)
            }
            _ => json!({ "position": text.as_ref() }),
        },
    }
}

/// The position an offset names (the inverse of [`offset_of`]).
fn position_of(offset: &serde_json::Map<String, Value>) -> Result<Position, String> {
    if offset.len() == 1 {
        if let Some(p) = offset.get("position") {
            return match p {
                Value::Number(n) => (n.as_u64().map(Position::Offset)).ok_or_else(|| {
                    format!("offset position {n}: a whole number from 0 up, or a string")
                }),
                Value::String(s) => Ok(Position::Opaque(s.as_str().into())),
                other => Err(format!(
                    "offset position {other}: a whole number from 0 up, or a string"
                )),
            };
        }
    }
    serde_json::to_string(offset)
        .map(|text| Position::Opaque(text.into()))
        .map_err(|e| e.to_string())
}

/// A `PATCH` body's position: `{"offsets": [{"partition": {"pipeline": NAME}, "offset":
/// {...}}]}`; a `null` offset forgets the position (`None`).
fn given(name: &str, body: &[u8]) -> Result<Option<Position>, String> {
    let body: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let shape = "send {\"offsets\": [{\"partition\": {\"pipeline\": NAME}, \"offset\": {...}}]}, the offset as GET shows it (null to reset)";
    let Some([entry]) = body["offsets"].as_array().map(Vec::as_slice) else {
        return Err(format!(
            "the body needs one entry in `offsets` (a pipeline has one source partition): {shape}"
        ));
    };
    if entry["partition"] != partition(name) {
        return Err(format!(
            "unknown partition {}: connector {name} has one, {}",
            entry["partition"],
            partition(name)
        ));
    }
    match &entry["offset"] {
        Value::Null => Ok(None),
        Value::Object(offset) => position_of(offset).map(Some),
        other => Err(format!("offset {other}: {shape}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_read_back_as_the_positions_they_show() {
        let positions = [
            Position::Offset(42),
            Position::Opaque(r#"{"lsn":123456789012,"in_tx":{"lsn_commit":7}}"#.into()),
            Position::Opaque("file.000001:4".into()),
            Position::Opaque(r#"{"position":1}"#.into()),
        ];
        for p in positions {
            let shown = shown("orders", Some(&p));
            let body = serde_json::to_vec(&shown).unwrap();
            let back = given("orders", &body).unwrap().unwrap();
            // A JSON object comes back as equal JSON (its keys perhaps in another order).
            let object = |p: &Position| match p {
                Position::Opaque(t) => serde_json::from_str::<Value>(t)
                    .ok()
                    .filter(Value::is_object),
                Position::Offset(_) => None,
            };
            match (object(&p), object(&back)) {
                (Some(a), Some(b)) => assert_eq!(a, b, "{shown}"),
                _ => assert_eq!(p, back, "{shown}"),
            }
        }
        assert_eq!(shown("orders", None), json!({"offsets": []}));
    }

    #[test]
    fn patch_bodies_are_checked() {
        let reset = br#"{"offsets": [{"partition": {"pipeline": "o"}, "offset": null}]}"#;
        assert_eq!(given("o", reset), Ok(None));
        for (bad, says) in [
            (&b"{"[..], "not JSON"),
            (br#"{"offsets": []}"#, "one entry"),
            (
                br#"{"offsets": [{"partition": {"server": "o"}, "offset": null}]}"#,
                "unknown partition",
            ),
            (
                br#"{"offsets": [{"partition": {"pipeline": "o"}, "offset": 3}]}"#,
                "offset 3",
            ),
            (
                br#"{"offsets": [{"partition": {"pipeline": "o"}, "offset": {"position": -1}}]}"#,
                "whole number",
            ),
        ] {
            let e = given("o", bad).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }
}
