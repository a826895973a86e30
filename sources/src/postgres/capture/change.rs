//! The events of one streamed row change (insert, update, delete), built whole before any is
//! emitted, so that a change whose values cannot be read is skipped or fails as one.

use sluice_engine::{ChangeEvent, Op, Position, Record};
use smallvec::{smallvec, SmallVec};

use crate::postgres::records::table::{Cell, SourceInfo, TableSchema};
use crate::postgres::values::types::ReadPath;
use crate::postgres::wire::pgoutput::Message;
use sluice_kit::config::Skipped;

/// One event of a change.
#[derive(Debug)]
pub(crate) enum Built {
    /// A create or update.
    Event(ChangeEvent),
    /// A delete (a tombstone may follow it).
    Delete(ChangeEvent),
}

/// A change's events, and the keys an open incremental snapshot window must drop.
/// Inline (no allocation per change): a key change has two of each, any other change one.
pub(crate) type Change = (SmallVec<[Built; 2]>, SmallVec<[Option<Record>; 2]>);

/// The events of a row change and the keys an open incremental snapshot window must drop;
/// `Ok(None)` when the operation is skipped (`skipped.operations`) or the change cannot be
/// represented and `event.processing.failure.handling.mode` skips it.
pub(crate) fn build(
    table: &TableSchema,
    message: &Message<'_>,
    skipped: &Skipped,
    info: &SourceInfo<'_>,
) -> Result<Option<Change>, sluice_kit::failure::Refused> {
    let cells: &[Cell<'_>] = match message {
        Message::Insert { new, .. } if !skipped.create => new,
        Message::Update { new, .. } if !skipped.update => new,
        Message::Delete { old, .. } if !skipped.delete => &old.1,
        _ => return Ok(None),
    };
    match events(table, message, info) {
        Ok(built) => Ok(Some(built)),
        Err(e) => table.unreadable(ReadPath::Stream, e, cells).map(|()| None),
    }
}

fn events(
    table: &TableSchema,
    message: &Message<'_>,
    info: &SourceInfo<'_>,
) -> Result<Change, sluice_kit::failure::RowError> {
    let event =
        |op, key, before, after| table.event(op, key, before, after, info, Position::Offset(0));
    Ok(match message {
        Message::Insert { new, .. } => {
            let key = table.key(new)?;
            let e = event(Op::Create, key.clone(), None, Some(table.row(new)?));
            (smallvec![Built::Event(e)], smallvec![key])
        }
        Message::Update { old, new, .. } => {
            let new_key = table.key(new)?;
            let (old_key, before) = match old {
                Some((_, cells)) => (table.key(cells)?, Some(table.row(cells)?)),
                None => (None, None),
            };
            let after = Some(table.row(new)?);
            if old_key.is_some() && old_key != new_key {
                // Primary key change: delete + tombstone under the old key, create under the new.
                let delete = event(Op::Delete, old_key.clone(), before, None);
                let create = event(Op::Create, new_key.clone(), None, after);
                (
                    smallvec![Built::Delete(delete), Built::Event(create)],
                    smallvec![new_key, old_key],
                )
            } else {
                let e = event(Op::Update, new_key.clone(), before, after);
                (smallvec![Built::Event(e)], smallvec![new_key])
            }
        }
        Message::Delete {
            old: (_, cells), ..
        } => {
            let key = table.key(cells)?;
            let e = event(Op::Delete, key.clone(), Some(table.row(cells)?), None);
            (smallvec![Built::Delete(e)], smallvec![key])
        }
        _ => (SmallVec::new(), SmallVec::new()),
    })
}
