//! DBLog's windows bounded by watermark rows (Debezium's default incremental snapshots): a
//! source's chunk reader writes an open watermark to the signaling table, reads the chunk,
//! then writes a close watermark (`insert_insert`) or deletes the open one (`insert_delete`).
//! The stream meets the watermarks in log order: from the open one on, a streamed change of a
//! chunk's key drops the chunk's row (a change streamed before the rows arrive is remembered and
//! applied when they do); at the close one the rows left go out. Several chunks may be in
//! flight; they close in log order. The source reads the chunks, writes the watermarks and
//! routes the watermark rows it streams here; the windows are kept here.
//!
//! `T` names a table as the source's stream does (PostgreSQL: its oid), `C` is what the source
//! keeps with a chunk's rows until its window closes.

use std::collections::{HashSet, VecDeque};

use serde::Serialize;
use sluice_engine::ChangeEvent;

use super::{Emitted, KeyBuffer, Tracker};
use crate::signal::{WINDOW_CLOSE, WINDOW_OPEN};

/// A chunk's rows in their window, with the bookkeeping to do when it closes.
#[derive(Debug)]
pub struct Held<K, C> {
    /// The rows, evicted by the stream's changes in the window.
    pub rows: KeyBuffer,
    /// The progress after the chunk, and the chunk as the tracker is told of it.
    pub emitted: Emitted<K>,
    /// The source's own (the chunk's table, what it checks the chunk against, ...).
    pub extra: C,
}

/// One chunk's window.
#[derive(Debug)]
struct Slot<T, K, C> {
    id: String,
    table: T,
    open: bool,
    /// Keys changed in the open window before the rows arrived.
    early: HashSet<Vec<u8>>,
    held: Option<Held<K, C>>,
    /// Tables passed over after this chunk, found empty: their notifications follow its own.
    empty_after: Vec<String>,
    /// The source's mark of where the stream was when the window opened.
    opened_at: u64,
}

/// What a watermark row streamed does to the windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watermark {
    /// It opened the window at this index.
    Opened(usize),
    /// It closes the oldest window (once its rows are there: [`Windows::waiting_for_rows`]).
    Closes,
    /// Nothing (another run's watermark, or one of a window dropped).
    Other,
}

/// An open window that has its rows (for a source's own checks of the chunk).
#[derive(Debug)]
pub struct OpenChunk<'w, T, K, C> {
    /// The chunk's id.
    pub id: &'w str,
    /// Its table.
    pub table: &'w T,
    /// The source's mark when the window opened.
    pub opened_at: u64,
    /// The rows and the source's own.
    pub held: &'w mut Held<K, C>,
}

/// The chunks in flight, oldest first (see the module's documentation).
#[derive(Debug)]
pub struct Windows<T, K, C> {
    slots: VecDeque<Slot<T, K, C>>,
}

impl<T, K, C> Default for Windows<T, K, C> {
    fn default() -> Self {
        Windows {
            slots: VecDeque::new(),
        }
    }
}

impl<T: PartialEq, K: Clone + Serialize, C> Windows<T, K, C> {
    /// Whether no chunk is in flight.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Drops every chunk in flight.
    pub fn clear(&mut self) {
        self.slots.clear();
    }

    /// The reader is about to write chunk `id`'s open watermark (`open`: the window is open
    /// from now on, as under `read.only`, where there are no watermark rows); `at` is the
    /// source's mark of the stream now.
    pub fn announce(&mut self, id: String, table: T, open: bool, at: u64) {
        self.slots.push_back(Slot {
            id,
            table,
            open,
            early: HashSet::new(),
            held: None,
            empty_after: Vec::new(),
            opened_at: at,
        });
    }

    /// A watermark row streamed: `id` and `kind` as the signaling table has them (`deleted`:
    /// the open row was deleted, which is the close under `insert_delete`); `at` is the
    /// source's mark of the stream, kept by a window it opens.
    pub fn watermark(&mut self, id: &str, kind: &str, deleted: bool, at: u64) -> Watermark {
        let opening = id.strip_suffix("-open");
        if !deleted && kind == WINDOW_OPEN {
            let found = self
                .slots
                .iter()
                .position(|w| opening == Some(w.id.as_str()));
            return match found {
                Some(i) => {
                    self.slots[i].open = true;
                    self.slots[i].opened_at = at;
                    Watermark::Opened(i)
                }
                None => Watermark::Other,
            };
        }
        // Windows close in log order: only the oldest one can.
        let Some(front) = self.slots.front() else {
            return Watermark::Other;
        };
        let closes = (kind == WINDOW_CLOSE && id.strip_suffix("-close") == Some(front.id.as_str()))
            || (deleted && opening == Some(front.id.as_str()));
        if closes && front.open {
            Watermark::Closes
        } else {
            Watermark::Other
        }
    }

    /// Whether a window of `table` is open.
    pub fn open_on(&self, table: &T) -> bool {
        self.slots.iter().any(|w| w.open && w.table == *table)
    }

    /// A change of `table` with key `key` ([`super::key_bytes`]) streamed: it drops that key's
    /// row from every open window of the table (now, or when the rows arrive).
    pub fn evict(&mut self, table: &T, key: &[u8]) {
        for w in self
            .slots
            .iter_mut()
            .filter(|w| w.open && w.table == *table)
        {
            match &mut w.held {
                Some(held) => held.rows.evict(key),
                None => {
                    w.early.insert(key.to_vec());
                }
            }
        }
    }

    /// Chunk `id`'s rows arrived: the keys changed early are evicted. Returns the window's
    /// index, `None` when the window was dropped meanwhile.
    pub fn arrived(&mut self, id: &str, mut held: Held<K, C>) -> Option<usize> {
        let i = self.slots.iter().rposition(|w| w.id == id)?;
        let w = &mut self.slots[i];
        for key in w.early.drain() {
            held.rows.evict(&key);
        }
        w.held = Some(held);
        Some(i)
    }

    /// The window at `i` when it is open and has its rows.
    pub fn open_chunk(&mut self, i: usize) -> Option<OpenChunk<'_, T, K, C>> {
        let w = self.slots.get_mut(i).filter(|w| w.open)?;
        Some(OpenChunk {
            id: &w.id,
            table: &w.table,
            opened_at: w.opened_at,
            held: w.held.as_mut()?,
        })
    }

    /// A table passed over after the last chunk in flight, found empty: its notification
    /// follows that chunk's. `false` when no chunk is in flight (notify it now).
    pub fn empty_after_last(&mut self, table: String) -> bool {
        match self.slots.back_mut() {
            Some(w) => {
                w.empty_after.push(table);
                true
            }
            None => false,
        }
    }

    /// Whether the oldest window still waits for its rows.
    pub fn waiting_for_rows(&self) -> bool {
        self.slots.front().is_some_and(|w| w.held.is_none())
    }

    /// What the source keeps with the oldest window's rows, once they arrived.
    pub fn front(&self) -> Option<&C> {
        self.slots.front()?.held.as_ref().map(|h| &h.extra)
    }

    /// Closes the oldest window: the tracker moves past its chunk (notifications included),
    /// and its rows left are returned, to go out with [`Tracker::around`]. `Err` with the
    /// chunk's id when its rows never arrived (the source restarts from what was delivered).
    pub fn close_front(
        &mut self,
        tracker: &mut Tracker<K>,
    ) -> Result<Option<(Vec<ChangeEvent>, C)>, String> {
        let Some(w) = self.slots.pop_front() else {
            return Ok(None);
        };
        let Some(held) = w.held else {
            return Err(w.id);
        };
        let mut emitted = held.emitted;
        emitted.empty_after = w.empty_after;
        tracker.emitted(emitted, !self.slots.is_empty());
        Ok(Some((held.rows.into_rows(), held.extra)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incremental::{key_bytes, keyed_row, ChunkEnd, Progress};
    use std::collections::BTreeMap;

    type W = Windows<u32, String, &'static str>;

    fn held(
        p: &Progress<String>,
        keys: std::ops::RangeInclusive<i64>,
    ) -> Held<String, &'static str> {
        let last = keys.end().to_string();
        let rows = keys.map(|k| keyed_row("p.t", k)).collect::<Vec<_>>();
        let emitted = p.after_chunk(ChunkEnd::of(
            rows.len(),
            3,
            Some(vec![last]),
            vec!["9".into()],
        ));
        Held {
            rows: KeyBuffer::new(rows),
            emitted,
            extra: "mine",
        }
    }

    fn ids(rows: &[ChangeEvent]) -> Vec<Vec<u8>> {
        rows.iter().map(|e| key_bytes(e.key.as_ref())).collect()
    }

    #[test]
    fn a_window_opens_at_its_watermark_evicts_early_and_late_and_closes_in_order() {
        let p: Progress<String> = Progress::new("s", vec!["t".into()], BTreeMap::new(), None);
        let mut tracker = Tracker::new(Some(p.clone()), None);
        let mut w = W::default();
        w.announce("c1".into(), 7, false, 0);
        let k = |i| key_bytes(keyed_row("p.t", i).key.as_ref());
        // Before the open watermark: nothing evicts.
        w.evict(&7, &k(1));
        assert!(!w.open_on(&7));
        assert_eq!(
            w.watermark("c1-open", WINDOW_OPEN, false, 5),
            Watermark::Opened(0)
        );
        assert!(w.open_on(&7) && !w.open_on(&8));
        // In the window, before the rows arrive: remembered.
        w.evict(&7, &k(2));
        w.evict(&8, &k(3)); // another table
        let i = w.arrived("c1", held(&p, 1..=3));
        assert_eq!(i, Some(0));
        let chunk = w
            .open_chunk(0)
            .map(|c| (c.id.to_owned(), *c.table, c.opened_at));
        assert_eq!(chunk, Some(("c1".to_owned(), 7, 5)));
        // After: evicted at once.
        w.evict(&7, &k(3));
        // A second chunk in flight, and an empty table after it.
        w.announce("c2".into(), 7, false, 0);
        assert!(w.empty_after_last("empty".into()));
        // Only the oldest window closes.
        assert_eq!(
            w.watermark("c2-close", WINDOW_CLOSE, false, 9),
            Watermark::Other
        );
        assert_eq!(
            w.watermark("c1-close", WINDOW_CLOSE, false, 9),
            Watermark::Closes
        );
        assert!(!w.waiting_for_rows());
        assert_eq!(w.front(), Some(&"mine"));
        let closed = w.close_front(&mut tracker);
        let Ok(Some((rows, extra))) = closed else {
            panic!("the window did not close: {closed:?}");
        };
        assert_eq!((ids(&rows), extra), (vec![k(1)], "mine"));
        // The second window waits for rows; under insert_delete its open row's deletion
        // closes it (once open).
        assert!(w.waiting_for_rows());
        assert_eq!(
            w.watermark("c2-open", "x", true, 9),
            Watermark::Other,
            "not open yet"
        );
        assert_eq!(
            w.watermark("c2-open", WINDOW_OPEN, false, 10),
            Watermark::Opened(0)
        );
        assert_eq!(w.watermark("c2-open", "x", true, 11), Watermark::Closes);
        assert_eq!(
            w.close_front(&mut tracker).err(),
            Some("c2".to_owned()),
            "no rows"
        );
        assert!(w.is_empty());
        assert!(!w.empty_after_last("other".into()));
    }
}
