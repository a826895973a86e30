//! A poll's changes delivered: merged rows skipped where a restart already delivered them,
//! an update's two rows paired, each change numbered (`event_serial_no`), turned into events
//! by the source and gathered into batches with transaction metadata.

use sluice_engine::{ChangeEvent, Op, SourceContext};

use super::merge::{Change, Merge, Pieces};
use super::{Cursor, Stopped, TxOut};

/// A change of a source's change tables.
pub type ChangeOf<P> = Change<<P as Pieces>::Lsn, <P as Pieces>::Row>;

/// What a change-table source does with a change.
pub trait Emit<P: Pieces> {
    type Error: From<P::Error> + From<Stopped>;

    /// The events of a change of table `table` (an index into the poll's tables): a create or
    /// a delete with its row, or an update with its old and new rows; `serial` its
    /// `event_serial_no`.
    fn events(
        &self,
        op: Op,
        rows: (&ChangeOf<P>, Option<&ChangeOf<P>>),
        serial: i64,
    ) -> Result<Vec<ChangeEvent>, Self::Error>;

    /// The table as transaction records name it (`data_collections`).
    fn collection(&self, table: usize) -> String;

    /// The commit time (milliseconds since the epoch) of a change, for transaction records.
    fn commit_time(&self, change: &ChangeOf<P>) -> i64;

    /// Events to deliver before a change, outside any transaction (a schema change event where
    /// a table's newer capture instance takes over); none by default.
    fn before(&self, _change: &ChangeOf<P>) -> Vec<ChangeEvent> {
        Vec::new()
    }

    /// The error for a change table that breaks the rules (`what` says how).
    fn broken(&self, table: usize, what: String) -> Self::Error;
}

/// Delivers the poll's changes from `merge`; the last transaction ends with the poll.
pub async fn deliver<P: Pieces, E: Emit<P>>(
    (merge, pieces): (&mut Merge<P>, &mut P),
    cursor: &mut Cursor<P::Lsn>,
    out: &mut TxOut<P::Lsn>,
    emit: &E,
    ctx: &mut SourceContext,
) -> Result<(), E::Error>
where
    P::Lsn: std::fmt::Display,
{
    while let Some(change) = merge.next(pieces).await? {
        if cursor.skips(change.at()) {
            // An update's new row goes with its old one.
            if change.op == 3 {
                if let Some(next) = merge.new_row(pieces, &change).await? {
                    cursor.skips(next.at());
                }
            }
            continue;
        }
        let before = emit.before(&change);
        if !before.is_empty() {
            out.push_between(before, ctx).await?;
        }
        let events = match change.op {
            1 | 2 => {
                let serial = cursor.next_serial(change.at(), 1);
                let op = if change.op == 1 {
                    Op::Delete
                } else {
                    Op::Create
                };
                emit.events(op, (&change, None), serial)?
            }
            // A single-row update (Db2 registered with `CHG_UPD_TO_DEL_INS = 'N'`: one 'U' row,
            // its after image): an update without a before image, as Debezium's z/OS reading.
            5 => {
                let serial = cursor.next_serial(change.at(), 1);
                emit.events(Op::Update, (&change, None), serial)?
            }
            3 => {
                let Some(next) = merge.new_row(pieces, &change).await? else {
                    return Err(emit.broken(
                        change.table,
                        format!(
                            "holds an update's old row (operation 3) at {} without its new row (operation 4)",
                            change.seq
                        ),
                    ));
                };
                if cursor.skips(next.at()) {
                    continue;
                }
                let serial = cursor.next_serial(next.at(), 2);
                emit.events(Op::Update, (&change, Some(&next)), serial)?
            }
            other => {
                return Err(emit.broken(
                    change.table,
                    format!(
                        "holds operation {other} at {} where 1, 2, 3 or 5 was expected",
                        change.seq
                    ),
                ))
            }
        };
        let collection = emit.collection(change.table);
        out.push(
            events,
            (change.commit, emit.commit_time(&change)),
            &collection,
            ctx,
        )
        .await?;
    }
    out.end_transaction();
    Ok(out.flush(ctx).await?)
}
