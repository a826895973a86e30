//! DBLog's window with positions for watermarks (Debezium's read-only incremental snapshots):
//! a chunk read in a consistent snapshot at position `P` of the source's log is the table's
//! state at `P`. Its window lasts until the stream, between transactions, has passed `P`: a
//! change streamed meanwhile drops the chunk's row of its key (the change is as new or newer),
//! and the rows left go out when the window closes. A source supplies the chunk and the
//! positions (MySQL: binlog file and offset; SQLite: its change sequence); the window is here.

use std::sync::Arc;

use sluice_engine::ChangeEvent;

use super::{Emitted, KeyBuffer, Tracker};

/// A chunk read at a position of the log, waiting for the stream to pass it.
#[derive(Debug)]
pub struct Window<K, P> {
    at: P,
    topic: Arc<str>,
    buffer: KeyBuffer,
    emitted: Emitted<K>,
}

impl<K: Clone + serde::Serialize, P: PartialOrd> Window<K, P> {
    /// The chunk `emitted` of the table whose events go to `topic`, read at `at`: its rows.
    pub fn new(at: P, topic: Arc<str>, rows: Vec<ChangeEvent>, emitted: Emitted<K>) -> Self {
        Window {
            at,
            topic,
            buffer: KeyBuffer::new(rows),
            emitted,
        }
    }

    /// Where the chunk was read.
    pub fn at(&self) -> &P {
        &self.at
    }

    /// A change streamed in the window: the chunk's row of its key is dropped.
    pub fn evict_by(&mut self, change: &ChangeEvent) {
        if change.topic == self.topic {
            self.buffer.evict_by(change);
        }
    }

    /// Whether the stream, having delivered everything up to `reached` (between
    /// transactions), has passed the chunk's position: the window may close.
    pub fn passed_by(&self, reached: &P) -> bool {
        *reached >= self.at
    }

    /// Closes the window: the tracker moves past the chunk (and makes its notifications), the
    /// rows left are returned, to go out with [`Tracker::around`].
    pub fn close(self, tracker: &mut Tracker<K>) -> Vec<ChangeEvent> {
        tracker.emitted(self.emitted, false);
        self.buffer.into_rows()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incremental::keyed_row as row;
    use crate::incremental::{ChunkEnd, Progress};
    use std::collections::BTreeMap;

    #[test]
    fn changes_in_the_window_drop_their_rows_and_the_window_closes_past_its_position() {
        let p: Progress<String> = Progress::new("s", vec!["t".into()], BTreeMap::new(), None);
        let mut tracker = Tracker::new(Some(p.clone()), None);
        let emitted = p.after_chunk(ChunkEnd::of(3, 3, Some(vec!["3".into()]), vec!["9".into()]));
        tracker.read_ahead(Some(emitted.next.clone()));
        let rows = (1..=3).map(|i| row("p.t", i)).collect();
        let mut window = Window::new(100u64, "p.t".into(), rows, emitted);
        window.evict_by(&row("p.t", 2));
        window.evict_by(&row("p.other", 3)); // another table's key 3
        assert!(!window.passed_by(&99));
        assert!(window.passed_by(&100));
        assert_eq!(*window.at(), 100);
        let left = window.close(&mut tracker);
        let ids: Vec<Vec<u8>> = left
            .iter()
            .map(|e| crate::incremental::key_bytes(e.key.as_ref()))
            .collect();
        assert_eq!(ids, [b"{\"id\":1}".to_vec(), b"{\"id\":3}".to_vec()]);
        assert_eq!(
            tracker.delivered().map(|d| d.last_key.clone()),
            Some(Some(vec!["3".to_owned()])),
            "the tracker moved past the chunk"
        );
    }
}
