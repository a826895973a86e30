//! What a source implements to run the kit's incremental snapshots with positions for
//! watermarks ([`ChunkSource`]), and the chunk step the kit runs on it ([`next_window`]): pick
//! the table and the chunk's start from the tracker, pass over what cannot be read, have the
//! source read the chunk, do the chunk's bookkeeping and open its [`Window`]. The source then
//! streams until [`Window::passed_by`] and closes the window. MySQL (binlog file and offset)
//! and SQLite (its change sequence) implement it.

use std::future::Future;
use std::sync::Arc;

use serde::Serialize;
use sluice_engine::ChangeEvent;

use super::{ChunkEnd, KeyText, Progress, Tracker, Window};

/// A chunk a source read.
#[derive(Debug)]
pub enum Read<K, P> {
    /// The chunk's rows, in key order, read in one consistent view of the table at `at`.
    Rows {
        /// Where in the log the rows were read: the table's state there.
        at: P,
        /// The table's maximum key (the progress's, or read now in the same view).
        max_key: Vec<K>,
        /// Each row's event (`None`: left out by the failure handling mode, still counted)
        /// and its key.
        rows: Vec<(Option<ChangeEvent>, Vec<K>)>,
    },
    /// The table (with the signal's condition) has no rows: passed over, notified as scanned.
    Empty,
    /// The server refused the query for this reason (a signal's `additional-conditions`):
    /// the snapshot is aborted, the stream goes on.
    Refused(String),
    /// The chunk was read before what the stream already delivered: read it again later.
    Later,
}

/// The source's side of the position-watermark mode: it knows its tables, reads a chunk
/// after a key and says where in its log it read it. The kit does the rest ([`next_window`]).
pub trait ChunkSource {
    /// One key column's value as progress records it.
    type Key: Clone + Serialize + KeyText + PartialEq + Send;
    /// A position in the source's log.
    type At: PartialOrd + Send;
    /// A captured table.
    type Table: Sync;
    /// What a failed read is.
    type Error: Send;

    /// The topic of `table`'s events (streamed changes evict a window's rows by topic and key).
    fn topic(table: &Self::Table) -> Arc<str>;

    /// Why `table` cannot be read in chunks with `p` (no key to read it by), or `None`.
    fn unreadable(_table: &Self::Table, _p: &Progress<Self::Key>) -> Option<String> {
        None
    }

    /// Reads the chunk of `table` that `p` starts: keys after `p.last_key` (from the start
    /// when `None`) up to `p.max_key` (when `None`, the table's maximum key, read in the same
    /// view), with `p`'s condition for the table, in key order, at most `limit` rows.
    fn read(
        &mut self,
        table: &Self::Table,
        p: &Progress<Self::Key>,
        limit: usize,
    ) -> impl Future<Output = Result<Read<Self::Key, Self::At>, Self::Error>> + Send;
}

/// What one chunk step gives.
#[derive(Debug)]
pub enum Step<K, P> {
    /// A chunk, in its window: stream until the window is passed, then close it.
    Window(Box<Window<K, P>>),
    /// Nothing to read now (none wanted, or a table passed over, or the snapshot aborted):
    /// the tracker's notifications say which.
    Passed,
    /// The chunk was read too early: try again after streaming on.
    Later,
}

/// Reads the next chunk the tracker wants from `source` (`find` looks up a captured table by
/// the name progress gives it), `limit` rows at most: its bookkeeping done and its window open.
pub async fn next_window<'t, S: ChunkSource>(
    source: &mut S,
    tracker: &mut Tracker<S::Key>,
    find: impl Fn(&str) -> Option<&'t S::Table> + Send,
    limit: usize,
) -> Result<Step<S::Key, S::At>, S::Error>
where
    S::Table: 't,
{
    if !tracker.wants_chunk() {
        return Ok(Step::Passed);
    }
    let Some((p, table)) = tracker.next_chunk_of(find) else {
        return Ok(Step::Passed);
    };
    if let Some(why) = S::unreadable(table, &p) {
        tracker.abort(why);
        return Ok(Step::Passed);
    }
    let limit = limit.max(1);
    let (at, max_key, rows) = match source.read(table, &p, limit).await? {
        Read::Rows { at, max_key, rows } => (at, max_key, rows),
        Read::Empty => {
            tracker.pass_over_current(true);
            return Ok(Step::Passed);
        }
        Read::Refused(reason) => {
            tracker.abort(reason);
            return Ok(Step::Passed);
        }
        Read::Later => return Ok(Step::Later),
    };
    let last_key = rows.last().map(|(_, k)| k.clone());
    let emitted = p.after_chunk(ChunkEnd::of(rows.len(), limit, last_key, max_key));
    tracker.read_ahead(Some(emitted.next.clone()));
    let rows = rows.into_iter().filter_map(|(e, _)| e).collect();
    Ok(Step::Window(Box::new(Window::new(
        at,
        S::topic(table),
        rows,
        emitted,
    ))))
}

/// The output of a future that needs no waiting (a source whose reads are synchronous, as
/// SQLite's, driving [`next_window`] from a thread without a runtime); `None` if it would wait.
pub fn now<F: Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(out) => Some(out),
        std::task::Poll::Pending => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incremental::keyed_row;
    use std::collections::BTreeMap;

    /// A table of keys 1..=n read at position `at` (each read moves it on by one).
    struct Table {
        name: &'static str,
        keys: Vec<i64>,
    }

    struct Source {
        at: u64,
        reads: Vec<(String, Option<Vec<String>>)>,
        refuse: bool,
    }

    impl ChunkSource for Source {
        type Key = String;
        type At = u64;
        type Table = Table;
        type Error = String;

        fn topic(table: &Table) -> Arc<str> {
            format!("p.{}", table.name).into()
        }

        fn unreadable(table: &Table, _p: &Progress<String>) -> Option<String> {
            (table.name == "keyless").then(|| "no key".to_owned())
        }

        async fn read(
            &mut self,
            table: &Table,
            p: &Progress<String>,
            limit: usize,
        ) -> Result<Read<String, u64>, String> {
            self.reads.push((table.name.to_owned(), p.last_key.clone()));
            if self.refuse {
                return Ok(Read::Refused("bad condition".into()));
            }
            let Some(&max) = table.keys.last() else {
                return Ok(Read::Empty);
            };
            let after: i64 = match &p.last_key {
                Some(k) => k[0].parse().map_err(|e| format!("{e}"))?,
                None => 0,
            };
            self.at += 1;
            let rows = table
                .keys
                .iter()
                .filter(|k| **k > after)
                .take(limit)
                .map(|k| {
                    (
                        Some(keyed_row(&format!("p.{}", table.name), *k)),
                        vec![k.to_string()],
                    )
                })
                .collect();
            Ok(Read::Rows {
                at: self.at,
                max_key: vec![max.to_string()],
                rows,
            })
        }
    }

    fn tables() -> Vec<Table> {
        vec![
            Table {
                name: "empty",
                keys: vec![],
            },
            Table {
                name: "t",
                keys: (1..=5).collect(),
            },
            Table {
                name: "keyless",
                keys: vec![1],
            },
        ]
    }

    fn step(
        source: &mut Source,
        tracker: &mut Tracker<String>,
        tables: &[Table],
    ) -> Result<Step<String, u64>, String> {
        now(next_window(
            source,
            tracker,
            |name| tables.iter().find(|t| t.name == name),
            3,
        ))
        .ok_or("waited")?
    }

    #[test]
    fn chunks_are_read_table_by_table_and_windows_carry_their_rows() -> Result<(), String> {
        let tables = tables();
        let p = Progress::new(
            "s",
            vec!["gone".into(), "empty".into(), "t".into(), "keyless".into()],
            BTreeMap::new(),
            None,
        );
        let mut tracker = Tracker::new(Some(p), None);
        let mut source = Source {
            at: 10,
            reads: Vec::new(),
            refuse: false,
        };
        // "gone" is not captured, "empty" has no rows: both passed over, one at a time.
        assert!(matches!(
            step(&mut source, &mut tracker, &tables)?,
            Step::Passed
        ));
        assert_eq!(tracker.ahead().and_then(|p| p.current()), Some("empty"));
        assert!(matches!(
            step(&mut source, &mut tracker, &tables)?,
            Step::Passed
        ));
        assert_eq!(tracker.ahead().and_then(|p| p.current()), Some("t"));
        // Two chunks of "t": 1-3 then 4-5, each in a window at its read position.
        let Step::Window(mut first) = step(&mut source, &mut tracker, &tables)? else {
            return Err("no window".into());
        };
        assert_eq!(*first.at(), 11);
        first.evict_by(&keyed_row("p.t", 2));
        let rows = first.close(&mut tracker);
        assert_eq!(rows.len(), 2, "key 2 was changed in the window");
        let Step::Window(second) = step(&mut source, &mut tracker, &tables)? else {
            return Err("no second window".into());
        };
        assert_eq!(second.close(&mut tracker).len(), 2);
        assert_eq!(
            source.reads,
            [
                ("empty".to_owned(), None),
                ("t".to_owned(), None),
                ("t".to_owned(), Some(vec!["3".to_owned()]))
            ]
        );
        // The keyless table aborts the snapshot.
        assert!(matches!(
            step(&mut source, &mut tracker, &tables)?,
            Step::Passed
        ));
        assert!(tracker.ahead().is_none());
        Ok(())
    }

    #[test]
    fn a_refused_condition_aborts_the_snapshot() -> Result<(), String> {
        let tables = tables();
        let p = Progress::new("s", vec!["t".into()], BTreeMap::new(), None);
        let mut tracker = Tracker::new(Some(p), None);
        let mut source = Source {
            at: 0,
            reads: Vec::new(),
            refuse: true,
        };
        assert!(matches!(
            step(&mut source, &mut tracker, &tables)?,
            Step::Passed
        ));
        assert!(tracker.ahead().is_none(), "aborted");
        assert!(!tracker.wants_chunk());
        Ok(())
    }
}
