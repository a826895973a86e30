//! Ordered acknowledgement across a fan-out.
//!
//! Every batch a source emits is registered with a sequence number, the position it covers and
//! the number of sinks that must acknowledge it. Sinks acknowledge batches (in any order); the
//! acknowledged position is the position of the newest batch such that it *and every batch
//! before it* have been acknowledged by every sink. Only that position is ever committed, so a
//! restart never skips an event that some sink has not made durable.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::event::Position;

#[derive(Debug)]
struct Entry {
    position: Option<Position>,
    remaining: u32,
    /// When the source emitted it.
    registered: Instant,
}

#[derive(Debug, Default)]
struct State {
    /// Sequence number of `pending[0]`.
    head: u64,
    pending: VecDeque<Entry>,
    acked: Option<Position>,
    acked_batches: u64,
}

/// Tracks which batches every sink has acknowledged.
#[derive(Debug, Default)]
pub struct AckTracker {
    state: Mutex<State>,
}

impl AckTracker {
    /// A tracker whose acknowledged position starts at `start` (the committed offset).
    pub fn new(start: Option<Position>) -> Self {
        AckTracker {
            state: Mutex::new(State {
                acked: start,
                ..State::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a batch that `sinks` sinks must acknowledge; returns its sequence number.
    pub fn register(&self, position: Option<Position>, sinks: u32) -> u64 {
        let mut s = self.lock();
        let seq = s.head + s.pending.len() as u64;
        s.pending.push_back(Entry {
            position,
            remaining: sinks,
            registered: Instant::now(),
        });
        if sinks == 0 {
            Self::advance(&mut s);
        }
        seq
    }

    /// One sink acknowledges batch `seq`. Unknown or already completed sequence numbers are
    /// ignored.
    pub fn ack(&self, seq: u64) {
        let mut s = self.lock();
        let Some(index) = seq.checked_sub(s.head) else {
            return;
        };
        if let Some(entry) = s.pending.get_mut(index as usize) {
            entry.remaining = entry.remaining.saturating_sub(1);
        }
        Self::advance(&mut s);
    }

    fn advance(s: &mut State) {
        while s.pending.front().is_some_and(|e| e.remaining == 0) {
            if let Some(entry) = s.pending.pop_front() {
                s.head += 1;
                s.acked_batches += 1;
                if entry.position.is_some() {
                    s.acked = entry.position;
                }
            }
        }
    }

    /// The newest position covered by acknowledgements of every sink.
    pub fn acked(&self) -> Option<Position> {
        self.lock().acked.clone()
    }

    /// Batches registered but not yet acknowledged by every sink.
    pub fn in_flight(&self) -> usize {
        self.lock().pending.len()
    }

    /// How long the oldest batch not yet acknowledged by every sink has waited (zero when
    /// there is none).
    pub fn oldest_pending(&self) -> Duration {
        (self.lock().pending.front()).map_or(Duration::ZERO, |e| e.registered.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn out_of_order_acks_never_pass_a_gap() {
        let t = AckTracker::new(None);
        let a = t.register(Some(Position::Offset(10)), 2);
        let b = t.register(Some(Position::Offset(20)), 2);
        let c = t.register(Some(Position::Offset(30)), 2);
        // Sink 1 acknowledges everything, sink 2 only the last two.
        t.ack(a);
        t.ack(b);
        t.ack(c);
        t.ack(c);
        t.ack(b);
        assert_eq!(t.acked(), None);
        std::thread::sleep(Duration::from_millis(20));
        assert!(t.oldest_pending() >= Duration::from_millis(20), "a waits");
        t.ack(a);
        assert_eq!(t.acked(), Some(Position::Offset(30)));
        assert_eq!(t.in_flight(), 0);
        assert_eq!(t.oldest_pending(), Duration::ZERO);
    }

    proptest! {
        /// Whatever the interleaving of acknowledgements, the acknowledged position is always
        /// the position of the longest fully acknowledged prefix.
        #[test]
        fn acked_is_the_fully_acknowledged_prefix(
            batches in 1usize..30,
            sinks in 1u32..4,
            order in proptest::collection::vec(any::<u32>(), 0..200),
        ) {
            let t = AckTracker::new(None);
            for i in 0..batches {
                t.register(Some(Position::Offset(i as u64)), sinks);
            }
            let mut remaining = vec![sinks; batches];
            let mut all: Vec<usize> = (0..batches).flat_map(|b| std::iter::repeat_n(b, sinks as usize)).collect();
            for r in order {
                if all.is_empty() { break; }
                let pick = all.swap_remove(r as usize % all.len());
                remaining[pick] -= 1;
                t.ack(pick as u64);
                let prefix = remaining.iter().take_while(|r| **r == 0).count();
                let expected = prefix.checked_sub(1).map(|i| Position::Offset(i as u64));
                prop_assert_eq!(t.acked(), expected);
            }
        }
    }
}
