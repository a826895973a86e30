//! A change row turned into events, as Debezium's relational change record emitter does it:
//! a delete followed by its tombstone (`tombstones.on.delete`), an update whose key changed as
//! a delete, its tombstone and a create.

use sluice_engine::{ChangeEvent, Op, Struct};

use crate::shape::Shape;

/// The events of a change of `op` with images `before` and `after`; `make` builds one event;
/// `keyed`: whether the table's events have a key.
pub fn events(
    (op, before, after): (Op, Option<Struct>, Option<Struct>),
    (shape, keyed): (&Shape, bool),
    tombstones: bool,
    make: impl Fn(Op, Option<Struct>, Option<Struct>) -> ChangeEvent,
) -> Vec<ChangeEvent> {
    let delete = |before: Option<Struct>| -> Vec<ChangeEvent> {
        let event = make(Op::Delete, before, None);
        let tombstone = tombstones.then(|| crate::records::tombstone(&event));
        std::iter::once(event).chain(tombstone).collect()
    };
    match (op, before, after) {
        (Op::Delete, before, _) => delete(before),
        (Op::Update, Some(b), Some(a)) if keyed && key_of(shape, &b) != key_of(shape, &a) => {
            let mut out = delete(Some(b));
            out.push(make(Op::Create, None, Some(a)));
            out
        }
        (op, before, after) => vec![make(op, before, after)],
    }
}

/// The event key's values in a row.
fn key_of<'a>(shape: &Shape, row: &'a Struct) -> Vec<&'a sluice_engine::Value> {
    shape
        .event_key
        .iter()
        .filter_map(|&i| row.values().get(i))
        .collect()
}
