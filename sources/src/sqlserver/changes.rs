//! The change tables of a poll, read in pieces and merged: each table's rows come in at most
//! `streaming.fetch.size` at a time (Debezium's `SELECT TOP n` re-queried from the last row's
//! (commit LSN, change LSN, operation)), and the merge takes the smallest of the tables' next
//! rows, so memory holds a piece per table, not the poll.

use std::collections::VecDeque;

use tiberius::{Row, ToSql};

use super::config::QueryMode;
use super::connection::{lsn_at, rows, Conn, Statements};
use super::error::SqlServerError;
use super::lsn::Lsn;
use super::tables::Table;

/// One change table row.
pub(super) struct Change {
    pub commit: Lsn,
    pub seq: Lsn,
    pub op: i32,
    pub table: usize,
    pub row: Row,
}

/// A table's rows not yet merged.
struct Pointer {
    buffer: VecDeque<Change>,
    /// The last row read: the next piece starts after it.
    after: (Lsn, Lsn, i32),
    exhausted: bool,
}

/// The merge of a poll's change tables between two LSNs.
pub(super) struct Merge<'a> {
    tables: &'a [Table],
    q: &'a Statements,
    mode: QueryMode,
    fetch: usize,
    /// The operations `skipped.operations` leaves out, filtered by the query as Debezium does.
    skip_ops: Vec<i32>,
    to: Lsn,
    pointers: Vec<Pointer>,
}

impl<'a> Merge<'a> {
    /// The changes of `tables` from `from` to `to` (inclusive).
    pub(super) fn new(
        tables: &'a [Table],
        q: &'a Statements,
        (mode, fetch, skip_ops): (QueryMode, usize, Vec<i32>),
        from: Lsn,
        to: Lsn,
    ) -> Self {
        let pointers = tables
            .iter()
            .map(|t| Pointer {
                buffer: VecDeque::new(),
                after: (from.max(t.start_lsn), Lsn::default(), 0),
                exhausted: false,
            })
            .collect();
        Merge {
            tables,
            q,
            mode,
            fetch,
            skip_ops,
            to,
            pointers,
        }
    }

    /// The next change in (commit LSN, change LSN, operation) order.
    pub(super) async fn next(&mut self, conn: &mut Conn) -> Result<Option<Change>, SqlServerError> {
        for i in 0..self.pointers.len() {
            self.fill(conn, i).await?;
        }
        let best = self
            .pointers
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.buffer.front().map(|c| ((c.commit, c.seq, c.op), i)))
            .min();
        Ok(best.and_then(|(_, i)| self.pointers[i].buffer.pop_front()))
    }

    /// The new row (operation 4) of the update whose old row `old` was.
    pub(super) async fn new_row(
        &mut self,
        conn: &mut Conn,
        old: &Change,
    ) -> Result<Option<Change>, SqlServerError> {
        self.fill(conn, old.table).await?;
        let buffer = &mut self.pointers[old.table].buffer;
        if buffer
            .front()
            .is_some_and(|n| n.op == 4 && n.seq == old.seq)
        {
            return Ok(buffer.pop_front());
        }
        Ok(None)
    }

    /// Reads table `i`'s next piece when it has none left.
    async fn fill(&mut self, conn: &mut Conn, i: usize) -> Result<(), SqlServerError> {
        let p = &self.pointers[i];
        if p.exhausted || !p.buffer.is_empty() {
            return Ok(());
        }
        let t = &self.tables[i];
        // An older capture instance gives its changes up to where the newer one starts.
        if t.stop_lsn.is_some_and(|stop| stop <= p.after.0) {
            self.pointers[i].exhausted = true;
            return Ok(());
        }
        let columns: Vec<String> = t.columns.iter().map(|(c, _)| c.clone()).collect();
        let top = (self.fetch > 0).then_some(self.fetch);
        let sql = self
            .q
            .changes(self.mode, &t.instance, &columns, top, &self.skip_ops);
        let (from, seq, op) = p.after;
        let (f, z, to) = (&from.0[..], &seq.0[..], &self.to.0[..]);
        let params: Vec<&dyn ToSql> = match self.mode {
            QueryMode::Direct => vec![&f, &z, &op, &f, &z, &f, &to],
            QueryMode::Function => {
                // The function reads from the capture instance's range: from the piece's LSN.
                vec![&f, &to, &f, &z, &op, &f, &z, &f, &to]
            }
        };
        let what = format!(
            "reading the changes of {}.{} (capture instance {})",
            t.schema, t.name, t.instance
        );
        let found = rows(conn, &what, &sql, &params).await?;
        let p = &mut self.pointers[i];
        p.exhausted = top.is_none_or(|n| found.len() < n);
        for row in found {
            let commit = lsn_at(&row, 0)?.ok_or_else(|| {
                SqlServerError::Setup(format!("{what}: a change without a commit LSN"))
            })?;
            let seq = lsn_at(&row, 1)?.ok_or_else(|| {
                SqlServerError::Setup(format!("{what}: a change without a change LSN (__$seqval)"))
            })?;
            let op: i32 = row
                .try_get(2)
                .map_err(|e| SqlServerError::query(&what, e))?
                .unwrap_or_default();
            p.after = (commit, seq, op);
            if t.stop_lsn.is_some_and(|stop| stop <= commit) {
                p.exhausted = true;
                break;
            }
            p.buffer.push_back(Change {
                commit,
                seq,
                op,
                table: i,
                row,
            });
        }
        Ok(())
    }
}
