//! Where a batch is cut: by events and by bytes, so that memory stays bounded whatever the row
//! size.

use super::ChangeEvent;
use crate::config::Limits;

/// Counts the events a stage adds to the batch it is building and says when to cut it: at
/// `max_batch_size` events or at [`Limits::max_batch_bytes`] estimated bytes, whichever comes
/// first. A single event larger than the byte limit makes a batch of its own.
///
/// ```
/// # use sluice_engine::event::BatchCut;
/// # use sluice_engine::{ChangeEvent, Position, Record, Schema, SchemaType, Value};
/// let event = |text: &str| ChangeEvent {
///     topic: "t".into(),
///     key: None,
///     value: Some(Record { schema: Schema::primitive(SchemaType::String, false), value: Value::from(text) }),
///     headers: Vec::new(),
///     position: Position::Offset(0),
/// };
/// let mut cut = BatchCut::new(100, 4096);
/// let mut batch = vec![event("small")];
/// assert!(!cut.is_full(&batch));
/// batch.push(event(&"x".repeat(5000)));
/// assert!(cut.is_full(&batch));
/// assert!(cut.taken() > 5000);
/// ```
#[derive(Debug, Clone)]
pub struct BatchCut {
    max_events: usize,
    max_bytes: usize,
    counted: usize,
    bytes: usize,
}

impl BatchCut {
    /// Cuts at `max_events` events or `max_bytes` bytes (each at least 1).
    pub fn new(max_events: usize, max_bytes: usize) -> Self {
        BatchCut {
            max_events: max_events.max(1),
            max_bytes: max_bytes.max(1),
            counted: 0,
            bytes: 0,
        }
    }

    /// The pipeline's batch limits.
    pub fn for_limits(limits: &Limits) -> Self {
        Self::new(limits.max_batch_size, limits.max_batch_bytes())
    }

    /// Counts the events appended to `batch` since the last call and says whether the batch is
    /// full. `batch` must be the same batch, only appended to, until [`BatchCut::taken`].
    pub fn is_full(&mut self, batch: &[ChangeEvent]) -> bool {
        if let Some(new) = batch.get(self.counted..) {
            self.bytes += new.iter().map(ChangeEvent::estimated_size).sum::<usize>();
        }
        self.counted = batch.len();
        self.counted >= self.max_events || self.bytes >= self.max_bytes
    }

    /// Counts one event kept outside a batch that [`BatchCut::is_full`] sees (a stage that
    /// gathers rows before building the batch) and says whether the rows fill a batch.
    pub fn add(&mut self, event: &ChangeEvent) -> bool {
        self.bytes += event.estimated_size();
        self.counted += 1;
        self.counted >= self.max_events || self.bytes >= self.max_bytes
    }

    /// The batch's events up to `len` were counted by whoever built them, at `bytes`: they are
    /// not counted again (a stage passing on pieces another stage sized).
    pub fn counted_elsewhere(&mut self, len: usize, bytes: usize) {
        self.counted = len;
        self.bytes += bytes;
    }

    /// The most events a batch holds.
    pub fn max_events(&self) -> usize {
        self.max_events
    }

    /// The batch was emitted (or dropped): starts counting a new one. Returns the bytes counted.
    pub fn taken(&mut self) -> usize {
        self.counted = 0;
        std::mem::take(&mut self.bytes)
    }

    /// Estimated bytes counted so far.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Position, Record, Schema, SchemaType, Value};

    fn event(len: usize) -> ChangeEvent {
        ChangeEvent {
            topic: "t".into(),
            key: None,
            value: Some(Record {
                schema: Schema::primitive(SchemaType::String, false),
                value: Value::from("x".repeat(len)),
            }),
            headers: Vec::new(),
            position: Position::Offset(0),
        }
    }

    #[test]
    fn cuts_by_count_and_by_bytes_and_lets_one_large_event_through_alone() {
        let mut cut = BatchCut::new(3, 10_000);
        let mut batch = vec![event(10), event(10)];
        assert!(!cut.is_full(&batch));
        batch.push(event(10));
        assert!(cut.is_full(&batch), "three events");
        cut.taken();
        batch.clear();
        batch.push(event(20_000));
        assert!(
            cut.is_full(&batch),
            "one event over the byte limit is a batch"
        );
        assert!(cut.taken() >= 20_000);
        batch.clear();
        for _ in 0..2 {
            batch.push(event(4_000));
            assert!(!cut.is_full(&batch));
        }
        batch.push(event(4_000));
        assert!(cut.is_full(&batch), "bytes add up across calls");
    }

    proptest::proptest! {
        /// However events are sized and however often the batch is checked, a cut batch never
        /// holds more than the limit plus its last event.
        #[test]
        fn a_cut_batch_is_within_the_limits_plus_one_event(
            sizes in proptest::collection::vec(0usize..50_000, 1..60),
            max_events in 1usize..10,
            max_bytes in 1usize..100_000,
        ) {
            let mut cut = BatchCut::new(max_events, max_bytes);
            let mut batch: Vec<ChangeEvent> = Vec::new();
            for size in sizes {
                batch.push(event(size));
                if cut.is_full(&batch) {
                    let bytes: usize = batch.iter().map(ChangeEvent::estimated_size).sum();
                    let last = batch.last().map_or(0, ChangeEvent::estimated_size);
                    proptest::prop_assert!(batch.len() <= max_events);
                    proptest::prop_assert!(bytes - last < max_bytes);
                    proptest::prop_assert_eq!(cut.taken(), bytes);
                    batch.clear();
                }
            }
        }
    }
}
