//! A poll's events on their way to batches, with Debezium's transaction metadata when
//! `provide.transaction.metadata` asks for it (a change-table server's transaction id is its
//! commit LSN, the same in BEGIN and END). Each data event's position then carries its
//! transaction's counts so far ([`TxState`]): a restart inside the transaction goes on counting
//! with no second BEGIN, and ends it when the next transaction starts, as Debezium's restored
//! transaction context does; BEGIN and END records are at positions without it.

use std::fmt::Display;

use sluice_engine::event::BatchCut;
use sluice_engine::{Batch, ChangeEvent, Position, SourceContext};

use crate::records::transaction::{set_block, TxCounts, TxSchemas, TxState};

/// The pipeline stopped while a batch was on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

/// Gathers events into batches; `L` is the server's commit LSN.
pub struct TxOut<L> {
    batch: Vec<ChangeEvent>,
    cut: BatchCut,
    /// The position of the last event pushed, without its transaction's counts (BEGIN and END
    /// records, and events between transactions, take it: they hold no change).
    last: Position,
    schemas: Option<TxSchemas>,
    /// The open transaction: its commit LSN, its first change's time, its counts.
    tx: Option<(L, i64, TxCounts)>,
    /// The transaction a restart landed in, until the first change says whether it goes on.
    resumed: Option<TxState>,
    /// While a transaction is open: the last position with its counts (events between its
    /// changes take it, so that a batch cut there keeps them).
    last_tx: Option<Position>,
}

impl<L: Copy + PartialEq + Display> TxOut<L> {
    /// Batches cut at `ctx`'s limits; transaction records on `<prefix>.transaction` when
    /// `metadata`; `last` is the position before the poll's first event.
    pub fn new(ctx: &SourceContext, metadata: bool, prefix: &str, last: Position) -> Self {
        TxOut {
            batch: Vec::new(),
            cut: BatchCut::for_limits(ctx.limits()),
            last,
            schemas: metadata.then(|| TxSchemas::new(prefix)),
            tx: None,
            resumed: None,
            last_tx: None,
        }
    }

    /// The stream resumed inside transaction `state` (from the stored position): its next
    /// changes go on counting, a change of another transaction ends it first.
    /// `last`, the stored position, carries the state; BEGIN and END records go without it.
    pub fn resume(&mut self, state: Option<TxState>) {
        self.resumed = state.filter(|_| self.schemas.is_some());
        if self.resumed.is_some() {
            self.last_tx = Some(self.last.clone());
            self.last = TxState::strip(&self.last);
        }
    }

    /// Adds a change's events (of `collection`, as transaction records name it, in the
    /// transaction committed at `commit`, `ts_ms` its time); emits a batch when one is full.
    pub async fn push(
        &mut self,
        events: Vec<ChangeEvent>,
        (commit, ts_ms): (L, i64),
        collection: &str,
        ctx: &mut SourceContext,
    ) -> Result<(), Stopped> {
        if events.is_empty() {
            return Ok(());
        }
        if let Some(r) = self.resumed.take() {
            if r.id == commit.to_string() {
                self.tx = Some((commit, r.ts_ms, r.counts()));
            } else {
                self.end_resumed(&r);
            }
        }
        if self.tx.as_ref().is_some_and(|t| t.0 != commit) {
            self.end_transaction();
        }
        if let (Some(schemas), None) = (&self.schemas, &self.tx) {
            let mut begin = schemas.begin(&commit.to_string(), ts_ms);
            begin.position = self.last.clone();
            self.batch.push(begin);
            self.tx = Some((commit, ts_ms, TxCounts::default()));
        }
        for mut event in events {
            self.last = event.position.clone();
            if let (Some(schemas), Some((lsn, ts, counts))) = (&self.schemas, self.tx.as_mut()) {
                let id = lsn.to_string();
                if event.value.is_some() {
                    let (total, order) = counts.count(collection);
                    set_block(&mut event, schemas.block(&id, total, order));
                }
                event.position = TxState::of(id, *ts, counts).in_position(&event.position);
                self.last_tx = Some(event.position.clone());
            }
            self.batch.push(event);
        }
        if self.cut.is_full(&self.batch) {
            self.flush(ctx).await?;
        }
        Ok(())
    }

    /// Adds events that belong to no transaction (a schema change event at a capture
    /// instance switch), uncounted, at the last position; an open transaction goes on.
    pub async fn push_between(
        &mut self,
        events: Vec<ChangeEvent>,
        ctx: &mut SourceContext,
    ) -> Result<(), Stopped> {
        for mut event in events {
            event.position = self.last_tx.clone().unwrap_or_else(|| self.last.clone());
            self.batch.push(event);
        }
        if self.cut.is_full(&self.batch) {
            self.flush(ctx).await?;
        }
        Ok(())
    }

    /// The END record of the transaction a restart landed in, which had no more changes.
    fn end_resumed(&mut self, r: &TxState) {
        self.last_tx = None;
        if let Some(schemas) = &self.schemas {
            let counts = r.counts();
            let mut end = schemas.end(&r.id, r.ts_ms, counts.total, &counts.per_table);
            end.position = self.last.clone();
            self.batch.push(end);
        }
    }

    /// The open transaction's END record.
    pub fn end_transaction(&mut self) {
        if let Some(r) = self.resumed.take() {
            self.end_resumed(&r);
        }
        self.last_tx = None;
        if let (Some(schemas), Some((lsn, ts, counts))) = (&self.schemas, self.tx.take()) {
            let mut end = schemas.end(&lsn.to_string(), ts, counts.total, &counts.per_table);
            end.position = self.last.clone();
            self.batch.push(end);
        }
    }

    /// Emits what is gathered.
    pub async fn flush(&mut self, ctx: &mut SourceContext) -> Result<(), Stopped> {
        self.cut.taken();
        if self.batch.is_empty() {
            return Ok(());
        }
        let events = std::mem::take(&mut self.batch);
        // The last event's: inside a transaction, with the transaction's counts.
        let position = events.last().map(|e| e.position.clone());
        ctx.emit(Batch { events, position })
            .await
            .map_err(|_| Stopped)
    }
}
