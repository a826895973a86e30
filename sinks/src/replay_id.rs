//! What identifies an event across replays, for the receivers that drop what they saw (an HTTP
//! receiver's `Idempotency-Key`, JetStream's `Nats-Msg-Id`): its topic, position, key, whether it
//! is a tombstone (a delete and its tombstone share a position), its envelope's `op`, `before`
//! and `after` (not its timestamps, which a re-read changes), and how many events alike came
//! before it at the same position (the identical rows of a keyless table, read at one snapshot
//! position). An event sent again (a retry, a restart before the commit) has the same identity:
//! a replay starts at the first event of a position, since a source resumes after a position,
//! never inside one.

use std::collections::HashMap;

use sha2::{Digest, Sha256};
use sluice_engine::{ChangeEvent, Position, Value};

/// Gives events their identities, in the order a sink sees them.
#[derive(Default)]
pub(crate) struct ReplayIds {
    /// The position of the last event seen.
    position: Option<Position>,
    /// How many events of each identity were seen at that position.
    seen: HashMap<[u8; 32], u32>,
}

impl ReplayIds {
    /// The digest of the next event's identity.
    pub(crate) fn digest(&mut self, event: &ChangeEvent) -> [u8; 32] {
        if self.position.as_ref() != Some(&event.position) {
            self.position = Some(event.position.clone());
            self.seen.clear();
        }
        let base = identity(event);
        let occurrence = self.seen.entry(base).or_insert(0);
        let mut digest = Sha256::new();
        digest.update(base);
        digest.update(occurrence.to_be_bytes());
        *occurrence += 1;
        digest.finalize().into()
    }

    /// The next event's id: 32 hex digits of its digest.
    pub(crate) fn id(&mut self, event: &ChangeEvent) -> String {
        hex(&self.digest(event)[..16])
    }
}

/// The digest of an event's identity, before its occurrence is counted.
fn identity(event: &ChangeEvent) -> [u8; 32] {
    let mut digest = Sha256::new();
    digest.update(event.topic.as_bytes());
    digest.update([0]);
    // The position's text (an offset's digits), without making a string of an opaque one.
    match &event.position {
        Position::Opaque(text) => digest.update(text.as_bytes()),
        Position::Offset(n) => digest.update(n.to_string().as_bytes()),
    }
    digest.update([0]);
    optional(&mut digest, event.key.as_ref().map(|k| &k.value));
    digest.update([u8::from(event.value.is_none())]);
    let envelope = event.value.as_ref().and_then(|v| v.value.as_struct());
    for name in ["op", "before", "after"] {
        optional(&mut digest, envelope.and_then(|e| e.get(name)));
    }
    digest.finalize().into()
}

fn optional(digest: &mut Sha256, value: Option<&Value>) {
    match value {
        None => digest.update([0]),
        Some(v) => {
            digest.update([1]);
            feed(digest, v);
        }
    }
}

/// Feeds a value into `digest`: its variant, then its content, lengths before variable parts,
/// so that different values feed different bytes (a struct's field values only: its schema and
/// cached JSON are not part of what it is).
fn feed(digest: &mut Sha256, value: &Value) {
    let bytes = |digest: &mut Sha256, tag: u8, b: &[u8]| {
        digest.update([tag]);
        digest.update((b.len() as u64).to_be_bytes());
        digest.update(b);
    };
    match value {
        Value::Null => digest.update([0]),
        Value::Boolean(v) => digest.update([1, u8::from(*v)]),
        Value::Int8(v) => bytes(digest, 2, &v.to_be_bytes()),
        Value::Int16(v) => bytes(digest, 3, &v.to_be_bytes()),
        Value::Int32(v) => bytes(digest, 4, &v.to_be_bytes()),
        Value::Int64(v) => bytes(digest, 5, &v.to_be_bytes()),
        Value::Float32(v) => bytes(digest, 6, &v.to_bits().to_be_bytes()),
        Value::Float64(v) => bytes(digest, 7, &v.to_bits().to_be_bytes()),
        Value::String(v) => bytes(digest, 8, v.as_bytes()),
        Value::Bytes(v) => bytes(digest, 9, v),
        Value::Array(items) => {
            bytes(digest, 10, &(items.len() as u64).to_be_bytes());
            items.iter().for_each(|v| feed(digest, v));
        }
        Value::Map(entries) => {
            bytes(digest, 11, &(entries.len() as u64).to_be_bytes());
            for (k, v) in entries {
                feed(digest, k);
                feed(digest, v);
            }
        }
        Value::Struct(s) => {
            bytes(digest, 12, &(s.values().len() as u64).to_be_bytes());
            s.values().iter().for_each(|v| feed(digest, v));
        }
    }
}

/// Lower-case hex digits of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::{Record, Schema, SchemaType, Struct};
    use std::sync::Arc;

    fn event(position: u64, after: i64) -> ChangeEvent {
        let schema = Schema::struct_builder()
            .field("op", Schema::primitive(SchemaType::String, false))
            .field("after", Schema::primitive(SchemaType::Int64, false))
            .field("ts_ms", Schema::primitive(SchemaType::Int64, false))
            .build();
        let values = vec![
            Value::String("r".into()),
            Value::Int64(after),
            Value::Int64(position as i64 * 1000 + after),
        ];
        let envelope = Struct::from_values(schema.clone(), values).unwrap();
        ChangeEvent {
            topic: Arc::from("p.main.t"),
            key: None,
            value: Some(Record {
                schema,
                value: Value::Struct(envelope),
            }),
            headers: Vec::new(),
            position: Position::Offset(position),
        }
    }

    #[test]
    fn hex_is_lower_case_digits() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
    }

    #[test]
    fn identical_keyless_rows_at_one_position_get_ids_of_their_own_and_the_same_on_replay() {
        let run = |events: &[ChangeEvent]| {
            let mut ids = ReplayIds::default();
            events.iter().map(|e| ids.id(e)).collect::<Vec<_>>()
        };
        let events = [event(1, 7), event(1, 7), event(1, 8), event(2, 7)];
        let first = run(&events);
        let unique: std::collections::HashSet<_> = first.iter().collect();
        assert_eq!(unique.len(), 4, "{first:?}");
        assert_eq!(run(&events), first, "a replay has the same ids");
        // A replay from the second position onwards gives that position's events their ids.
        assert_eq!(run(&events[3..]), first[3..]);
    }

    #[test]
    fn timestamps_are_not_part_of_the_identity() {
        let mut a = event(1, 7);
        let b = event(1, 7);
        if let Some(Value::Struct(s)) = a.value.as_mut().map(|r| &mut r.value) {
            if let Some(ts) = s.get_mut("ts_ms") {
                *ts = Value::Int64(0);
            }
        }
        assert_eq!(ReplayIds::default().id(&a), ReplayIds::default().id(&b));
    }
}
