//! Debezium's records that are not row images: tombstones after deletes, transaction BEGIN/END
//! records and the `transaction` block ([`transaction`]), heartbeats ([`heartbeat`]); the
//! notification records are in [`crate::notification`]; schema change events
//! ([`schema_change`]).

pub mod heartbeat;
pub mod schema_change;
pub mod transaction;

use sluice_engine::ChangeEvent;

/// The tombstone that follows a delete when `tombstones.on.delete` is on: the delete's topic,
/// key, headers and position with a null value, so log compaction drops the key.
pub fn tombstone(delete: &ChangeEvent) -> ChangeEvent {
    ChangeEvent {
        topic: delete.topic.clone(),
        key: delete.key.clone(),
        value: None,
        headers: delete.headers.clone(),
        position: delete.position.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::Position;

    #[test]
    fn a_tombstone_keeps_the_key_and_drops_the_value() {
        let delete = ChangeEvent {
            topic: "p.public.t".into(),
            key: None,
            value: None,
            headers: Vec::new(),
            position: Position::Offset(7),
        };
        let t = tombstone(&delete);
        assert!(t.is_tombstone());
        assert_eq!((t.topic, t.position), (delete.topic, delete.position));
    }
}
