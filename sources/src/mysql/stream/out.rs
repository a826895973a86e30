//! Where the binlog stream's events go: the batch being filled, the open transaction (its
//! metadata records), the incremental snapshot's window, and the positions they carry.

use sluice_engine::event::BatchCut;
use sluice_engine::{Batch, ChangeEvent, Position, SourceContext};
use sluice_kit::records::transaction::{set_block, TxSchemas};

use super::super::gtid::GtidPosition;
use super::super::incremental::Window;
use super::super::MysqlOffset;
use super::position;
use super::transaction::Tx;

/// Where the stream's events go: the batch being filled, the open transaction, the positions.
pub(in crate::mysql) struct Out {
    pub(super) batch: Vec<ChangeEvent>,
    pub(super) cut: BatchCut,
    pub(super) tx: Option<Tx>,
    /// The position after the last committed transaction.
    pub(super) done: MysqlOffset,
    /// The position of the last batch handed to the pipeline (a heartbeat's).
    pub(super) sent: Position,
    /// `provide.transaction.metadata`.
    pub(super) meta: Option<TxSchemas>,
    /// The running incremental snapshot's delivered progress, which positions carry.
    pub(super) progress: Option<Box<serde_json::value::RawValue>>,
    /// The incremental snapshot's chunk in its window.
    pub(super) window: Option<Window>,
    /// `type: mariadb`: the GTID position of the transactions done, and its text, which
    /// positions carry (made once per transaction, not once per row).
    pub(super) gtids: Option<GtidPosition>,
    pub(super) gtids_text: Option<String>,
}

impl Out {
    /// The engine position of `offset`, with the incremental snapshot's progress.
    pub(super) fn position(&self, offset: &MysqlOffset) -> Position {
        let offset = MysqlOffset {
            gtids: self.gtids_text.clone(),
            ..offset.clone()
        };
        match &self.progress {
            Some(progress) => sluice_kit::position::with_progress(&offset, progress),
            None => position(offset),
        }
    }

    /// The open transaction's GTID is done (it committed, or a DDL statement's next
    /// transaction begins).
    pub(super) fn gtid_done(&mut self) {
        if let (Some(Tx { gtid: Some(g), .. }), Some(gtids)) = (&self.tx, &mut self.gtids) {
            gtids.done(*g);
            self.gtids_text = Some(gtids.to_string());
        }
    }

    /// The position after the last committed transaction.
    pub(super) fn done_position(&self) -> Position {
        self.position(&self.done)
    }

    /// The position after row `row` of the current event.
    pub(super) fn row_position(&self, row: usize) -> Position {
        match &self.tx {
            Some(tx) => self.position(&MysqlOffset {
                file: tx.file.clone(),
                pos: tx.pos,
                event: tx.event,
                row: u32::try_from(row + 1).unwrap_or(u32::MAX),
                gtids: None,
                snapshot_completed: true,
            }),
            None => self.done_position(),
        }
    }

    /// Places a data event of `collection` (`db.table`): counted in the transaction's metadata
    /// (with BEGIN before its first), and kept unless it was delivered before a restart.
    pub(super) fn place(&mut self, collection: &str, mut event: ChangeEvent, keep: bool) {
        if let (Some(meta), Some(tx), true) = (&self.meta, &mut self.tx, event.value.is_some()) {
            if !tx.counts.begun {
                tx.counts.begun = true;
                if keep {
                    let mut begin = meta.begin(&tx.id, tx.ts_ms);
                    begin.position = event.position.clone();
                    self.cut.add(&begin);
                    self.batch.push(begin);
                }
            }
            let (total, in_collection) = tx.counts.count(collection);
            set_block(&mut event, meta.block(&tx.id, total, in_collection));
        }
        if keep {
            if let Some(window) = &mut self.window {
                window.evict_by(&event);
            }
            self.cut.add(&event);
            self.batch.push(event);
        }
    }

    /// An event that is not a row change (a schema change), kept as it is.
    pub(super) fn push(&mut self, event: ChangeEvent) {
        self.cut.add(&event);
        self.batch.push(event);
    }

    /// Hands the batch to the pipeline at `position`.
    pub(super) async fn send(&mut self, position: Position, ctx: &mut SourceContext) {
        self.cut.taken();
        let events = std::mem::take(&mut self.batch);
        self.sent = position.clone();
        let _ = ctx
            .emit(Batch {
                events,
                position: Some(position),
            })
            .await;
    }
}
