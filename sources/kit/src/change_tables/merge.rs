//! The change tables of a poll, read in pieces and merged: each table's rows come in at most
//! `streaming.fetch.size` at a time (re-queried from the last row's (commit LSN, change LSN,
//! operation)), and the merge takes the smallest of the tables' next rows, so memory holds a
//! piece per table, not the poll. A piece is bounded by bytes too ([`PieceLimits`]): it asks
//! for as many rows as its share of the bytes holds at the size of the table's rows so far, so
//! rows of megabytes come one at a time. The server's dialect reads a piece ([`Pieces`]).

use std::collections::VecDeque;

use async_trait::async_trait;

/// Where a row sorts: (commit LSN, change LSN, operation).
pub type Key<L> = (L, L, i32);

/// One change table row: its key, the table it belongs to (an index into the poll's tables)
/// and the row as the server's client returned it.
#[derive(Debug)]
pub struct Change<L, R> {
    pub commit: L,
    pub seq: L,
    /// The operation: 1 delete, 2 insert, 3 an update's old row, 4 its new row.
    pub op: i32,
    pub table: usize,
    pub row: R,
}

impl<L: Copy, R> Change<L, R> {
    /// Its (commit, change) LSNs.
    pub fn at(&self) -> (L, L) {
        (self.commit, self.seq)
    }
}

/// How a server's change tables are read.
#[async_trait]
pub trait Pieces: Send {
    type Lsn: Ord + Copy + Send + Sync;
    type Row: Send;
    type Error: Send;

    /// Whether an update's two rows share their change LSN (SQL Server's `__$seqval`); when
    /// not (Db2's intent sequence), the new row is the old row's next.
    const PAIRED_BY_CHANGE_LSN: bool;

    /// Table `table`'s rows after `after` (exclusive) up to the poll's upper bound, in key
    /// order, at most `limit` of them (`None`: all).
    async fn piece(
        &mut self,
        table: usize,
        after: Key<Self::Lsn>,
        limit: Option<usize>,
    ) -> Result<Vec<Change<Self::Lsn, Self::Row>>, Self::Error>;

    /// About how many bytes a row holds in memory (its values' lengths).
    fn row_bytes(row: &Self::Row) -> usize;
}

/// How large a table's piece may be.
#[derive(Debug, Clone, Copy)]
pub struct PieceLimits {
    /// Rows at most (`streaming.fetch.size`); 0: a poll's rows at once, whatever their bytes
    /// (Debezium's way, chosen by the user).
    pub rows: usize,
    /// Bytes the poll's pieces hold at most together, shared by its tables (each table's
    /// share at least [`MIN_SHARE`]); a piece always holds at least one row.
    pub bytes: usize,
    /// The largest row of the last poll, if any: a table's first piece asks for as many rows
    /// as its share holds at that size (one row when no row was seen yet).
    pub row_hint: Option<usize>,
}

/// The least bytes a table's piece may hold, however many tables share the poll's.
pub const MIN_SHARE: usize = 64 << 10;

impl PieceLimits {
    /// `fetch` rows (`streaming.fetch.size`) and the bytes a queue holds
    /// (`max_queue_size_bytes`): a poll's pieces hold about what its queue may; `row_hint`
    /// the last poll's ([`Merge::row_hint`]).
    pub fn new(
        limits: &sluice_engine::config::Limits,
        fetch: usize,
        row_hint: Option<usize>,
    ) -> Self {
        PieceLimits {
            rows: fetch,
            bytes: usize::try_from(limits.max_queue_size_bytes).unwrap_or(usize::MAX),
            row_hint,
        }
    }
}

/// A table's rows not yet merged.
struct Pointer<L, R> {
    buffer: VecDeque<Change<L, R>>,
    /// The last row read: the next piece starts after it.
    after: Key<L>,
    /// Where a newer capture instance of the table starts: this one's rows from there on are
    /// the newer one's to give.
    stop: Option<L>,
    exhausted: bool,
    /// The largest row of the table's last piece (bytes).
    row_bytes: Option<usize>,
}

/// The merge of a poll's change tables.
pub struct Merge<P: Pieces> {
    fetch: Option<usize>,
    /// Each table's share of the bytes.
    share: usize,
    /// The largest row of the last poll, for a table's first piece.
    row_hint: Option<usize>,
    pointers: Vec<Pointer<P::Lsn, P::Row>>,
}

impl<P: Pieces> Merge<P> {
    /// The changes of the tables whose (start LSN, stop LSN) `tables` gives, from `from`
    /// (inclusive), in pieces of at most `limits`.
    pub fn new(
        tables: &[(P::Lsn, Option<P::Lsn>)],
        from: P::Lsn,
        zero: P::Lsn,
        limits: PieceLimits,
    ) -> Self {
        let pointers: Vec<_> = tables
            .iter()
            .map(|&(start, stop)| Pointer {
                buffer: VecDeque::new(),
                after: (from.max(start), zero, 0),
                stop,
                exhausted: false,
                row_bytes: None,
            })
            .collect();
        let share = (limits.bytes / pointers.len().max(1)).max(MIN_SHARE);
        Merge {
            fetch: (limits.rows > 0).then_some(limits.rows),
            share,
            row_hint: limits.row_hint,
            pointers,
        }
    }

    /// The largest row of this poll's last pieces (or the hint it started with, when it read
    /// none): the next poll's [`PieceLimits::row_hint`].
    pub fn row_hint(&self) -> Option<usize> {
        self.pointers
            .iter()
            .filter_map(|t| t.row_bytes)
            .max()
            .or(self.row_hint)
    }

    /// The rows table `i`'s next piece asks for: as many as its share of the bytes holds at
    /// its rows' size (the last poll's largest, before it read any; one row when no size is
    /// known), at most `fetch`, at least one; `None` (all) when `fetch` is 0.
    fn limit(&self, i: usize) -> Option<usize> {
        let fetch = self.fetch?;
        let fits = match self.pointers[i].row_bytes.or(self.row_hint) {
            Some(row) => self.share / row.max(1),
            None => 1,
        };
        Some(fits.clamp(1, fetch))
    }

    /// The next change in (commit LSN, change LSN, operation) order.
    pub async fn next(&mut self, p: &mut P) -> Result<Option<Change<P::Lsn, P::Row>>, P::Error> {
        for i in 0..self.pointers.len() {
            self.fill(p, i).await?;
        }
        let best = self
            .pointers
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.buffer.front().map(|c| ((c.commit, c.seq, c.op), i)))
            .min();
        Ok(best.and_then(|(_, i)| self.pointers[i].buffer.pop_front()))
    }

    /// The new row (operation 4) of the update whose old row `old` was.
    pub async fn new_row(
        &mut self,
        p: &mut P,
        old: &Change<P::Lsn, P::Row>,
    ) -> Result<Option<Change<P::Lsn, P::Row>>, P::Error> {
        self.fill(p, old.table).await?;
        let buffer = &mut self.pointers[old.table].buffer;
        if buffer
            .front()
            .is_some_and(|n| n.op == 4 && (!P::PAIRED_BY_CHANGE_LSN || n.seq == old.seq))
        {
            return Ok(buffer.pop_front());
        }
        Ok(None)
    }

    /// Reads table `i`'s next piece when it has none left.
    async fn fill(&mut self, p: &mut P, i: usize) -> Result<(), P::Error> {
        let t = &self.pointers[i];
        if t.exhausted || !t.buffer.is_empty() {
            return Ok(());
        }
        if t.stop.is_some_and(|stop| stop <= t.after.0) {
            self.pointers[i].exhausted = true;
            return Ok(());
        }
        let limit = self.limit(i);
        let found = p.piece(i, t.after, limit).await?;
        let t = &mut self.pointers[i];
        t.exhausted = limit.is_none_or(|n| found.len() < n);
        if let Some(largest) = found.iter().map(|c| P::row_bytes(&c.row)).max() {
            t.row_bytes = Some(largest);
        }
        for change in found {
            t.after = (change.commit, change.seq, change.op);
            if t.stop.is_some_and(|stop| stop <= change.commit) {
                t.exhausted = true;
                break;
            }
            t.buffer.push_back(change);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tables as lists of (commit, seq, op), read in pieces; `PAIRED`: an update's rows share
    /// their change LSN (SQL Server) or follow each other (Db2). A row is its size in bytes.
    struct Tables<const PAIRED: bool> {
        rows: Vec<Vec<Key<u32>>>,
        row_bytes: usize,
        /// The (table, limit) of each piece read.
        asked: Vec<(usize, usize)>,
    }

    impl<const PAIRED: bool> Tables<PAIRED> {
        fn new(rows: Vec<Vec<Key<u32>>>, row_bytes: usize) -> Self {
            Tables {
                rows,
                row_bytes,
                asked: Vec::new(),
            }
        }
    }

    #[async_trait]
    impl<const PAIRED: bool> Pieces for Tables<PAIRED> {
        type Lsn = u32;
        type Row = usize;
        type Error = ();
        const PAIRED_BY_CHANGE_LSN: bool = PAIRED;
        async fn piece(
            &mut self,
            table: usize,
            after: Key<u32>,
            limit: Option<usize>,
        ) -> Result<Vec<Change<u32, usize>>, ()> {
            let limit = limit.unwrap_or(usize::MAX);
            self.asked.push((table, limit));
            let rows = self.rows[table]
                .iter()
                .filter(|k| **k > after)
                .take(limit)
                .map(|&(commit, seq, op)| Change {
                    commit,
                    seq,
                    op,
                    table,
                    row: self.row_bytes,
                })
                .collect();
            Ok(rows)
        }

        fn row_bytes(row: &usize) -> usize {
            *row
        }
    }

    /// Limits of `fetch` rows, bytes enough for any number of rows of the size known.
    fn rows_only(fetch: usize) -> PieceLimits {
        PieceLimits {
            rows: fetch,
            bytes: usize::MAX,
            row_hint: Some(1),
        }
    }

    async fn all<const PAIRED: bool>(
        tables: Vec<Vec<Key<u32>>>,
        stops: &[(u32, Option<u32>)],
        fetch: usize,
    ) -> (Vec<(usize, Key<u32>)>, usize) {
        let mut p = Tables::<PAIRED>::new(tables, 1);
        let mut m = Merge::new(stops, 1, 0, rows_only(fetch));
        let mut out = Vec::new();
        while let Some(c) = m.next(&mut p).await.unwrap() {
            if c.op == 3 {
                let n = m.new_row(&mut p, &c).await.unwrap().unwrap();
                out.push((c.table, (c.commit, c.seq, c.op)));
                out.push((n.table, (n.commit, n.seq, n.op)));
                continue;
            }
            out.push((c.table, (c.commit, c.seq, c.op)));
        }
        (out, p.asked.len())
    }

    #[tokio::test]
    async fn tables_merge_in_commit_order_whatever_the_piece_size() {
        let a = vec![(1, 1, 2), (3, 1, 3), (3, 1, 4), (5, 2, 1)];
        let b = vec![(2, 1, 2), (3, 2, 2), (4, 1, 2)];
        let want = vec![
            (0, (1, 1, 2)),
            (1, (2, 1, 2)),
            (0, (3, 1, 3)),
            (0, (3, 1, 4)),
            (1, (3, 2, 2)),
            (1, (4, 1, 2)),
            (0, (5, 2, 1)),
        ];
        for fetch in [0, 1, 2, 3, 100] {
            let (got, _) =
                all::<true>(vec![a.clone(), b.clone()], &[(0, None), (0, None)], fetch).await;
            assert_eq!(got, want, "fetch {fetch}");
        }
        // A piece of one row: a query per row and one more per table to find the end.
        let (_, queries) = all::<true>(vec![a, b], &[(0, None), (0, None)], 1).await;
        assert_eq!(queries, 9);
    }

    #[tokio::test]
    async fn an_older_capture_instance_stops_where_the_newer_starts() {
        let old = vec![(1, 1, 2), (2, 1, 2), (4, 1, 2)];
        let new = vec![(4, 1, 2), (5, 1, 2)];
        for fetch in [0, 1, 2] {
            let (got, _) = all::<true>(
                vec![old.clone(), new.clone()],
                &[(0, Some(4)), (4, None)],
                fetch,
            )
            .await;
            assert_eq!(
                got,
                vec![
                    (0, (1, 1, 2)),
                    (0, (2, 1, 2)),
                    (1, (4, 1, 2)),
                    (1, (5, 1, 2))
                ]
            );
        }
    }

    #[tokio::test]
    async fn an_update_split_across_pieces_is_paired_by_its_next_row() {
        // Db2: the old row (3) and the new row (4) have their own intent LSNs; with pieces of
        // one and two rows the pair is split across two pieces.
        let t = vec![(1, 1, 2), (2, 2, 3), (2, 3, 4), (3, 1, 1)];
        for fetch in [0, 1, 2] {
            let (got, _) = all::<false>(vec![t.clone()], &[(0, None)], fetch).await;
            let want: Vec<(usize, Key<u32>)> = t.iter().map(|k| (0, *k)).collect();
            assert_eq!(got, want, "fetch {fetch}");
        }
        // Paired by change LSN (SQL Server), a new row at another LSN is not the pair.
        let mut p = Tables::<true>::new(vec![t], 1);
        let mut m = Merge::new(&[(0, None)], 1, 0, rows_only(2));
        let first = m.next(&mut p).await.unwrap().unwrap();
        assert_eq!(first.op, 2);
        let old = m.next(&mut p).await.unwrap().unwrap();
        assert!(m.new_row(&mut p, &old).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn pieces_hold_their_share_of_the_bytes() {
        // Two tables of rows of 1 MiB sharing 4 MiB: a first piece of one row (no size known),
        // then pieces of two, until a piece comes back short; every row arrives, in order.
        let a: Vec<Key<u32>> = (1..=5).map(|i| (i * 2, 1, 2)).collect();
        let b: Vec<Key<u32>> = (1..=3).map(|i| (i * 2 + 1, 1, 2)).collect();
        let mut p = Tables::<true>::new(vec![a, b], 1 << 20);
        let limits = PieceLimits {
            rows: 1024,
            bytes: 4 << 20,
            row_hint: None,
        };
        let mut m = Merge::new(&[(0, None), (0, None)], 1, 0, limits);
        let mut commits = Vec::new();
        while let Some(c) = m.next(&mut p).await.unwrap() {
            commits.push(c.commit);
        }
        assert_eq!(commits, vec![2, 3, 4, 5, 6, 7, 8, 10]);
        assert_eq!(
            p.asked,
            vec![(0, 1), (1, 1), (0, 2), (1, 2), (0, 2), (1, 2), (0, 2)],
            "pieces (table, rows)"
        );
        // The next poll starts from the size seen; a table of small rows is asked for up to
        // `rows` at once, whatever it shared.
        assert_eq!(m.row_hint(), Some(1 << 20));
        let mut p = Tables::<true>::new(vec![vec![(20, 1, 2)]], 1 << 20);
        let next = PieceLimits {
            row_hint: m.row_hint(),
            ..limits
        };
        let mut m = Merge::new(&[(0, None)], 1, 0, next);
        assert!(m.next(&mut p).await.unwrap().is_some());
        assert_eq!(p.asked, vec![(0, 4)]);
        let mut p = Tables::<true>::new(vec![vec![(20, 1, 2)]], 10);
        let mut m = Merge::new(&[(0, None)], 1, 0, next);
        assert!(m.next(&mut p).await.unwrap().is_some());
        assert!(m.next(&mut p).await.unwrap().is_none());
        assert_eq!(p.asked, vec![(0, 4)], "one row found: the table is done");
        // A table's share never goes under MIN_SHARE: a thousand tables of 1 KiB rows still
        // ask for 64 rows each.
        let m = Merge::<Tables<true>>::new(
            &vec![(0, None); 1000],
            1,
            0,
            PieceLimits {
                row_hint: Some(1024),
                ..limits
            },
        );
        assert_eq!(m.limit(0), Some(MIN_SHARE / 1024));
    }
}
