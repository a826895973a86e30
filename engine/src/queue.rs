//! Bounded queues between stages, limited in events and in bytes.
//!
//! Records never ride on actor mailboxes: each edge of the pipeline (source → transforms,
//! transforms → each sink) is one [`BoundedQueue`] with a single producer and a single consumer.
//! `push` waits while the queue is full, which is how a slow sink slows the source down. An item
//! larger than the limits is still admitted into an empty queue, otherwise it could never move.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

use crate::event::ChangeEvent;

/// One batch in flight: a sequence number for acknowledgement and shared events.
#[derive(Debug, Clone)]
pub struct QueueItem {
    /// Sequence number assigned by the acknowledgement tracker.
    pub seq: u64,
    /// The events (shared between sinks of a fan-out).
    pub events: Arc<Vec<ChangeEvent>>,
    /// Estimated bytes of the events.
    pub bytes: usize,
}

/// The queue was closed by its consumer (the pipeline is stopping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("queue closed")]
pub struct Closed;

/// What a bounded wait on a queue gave.
#[derive(Debug)]
pub enum Popped {
    /// One or more items.
    Items(Vec<QueueItem>),
    /// Nothing arrived within the wait.
    Idle,
    /// The queue is closed and drained.
    Closed,
}

impl std::fmt::Debug for BoundedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedQueue")
            .field("name", &self.name)
            .field("max_events", &self.max_events)
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

#[derive(Debug, Default)]
struct State {
    items: VecDeque<QueueItem>,
    events: usize,
    bytes: usize,
    closed: bool,
}

/// A single-producer single-consumer queue bounded in events and bytes.
pub struct BoundedQueue {
    name: String,
    events_gauge: metrics::Gauge,
    bytes_gauge: metrics::Gauge,
    max_events: usize,
    max_bytes: usize,
    state: Mutex<State>,
    not_empty: Notify,
    not_full: Notify,
}

impl BoundedQueue {
    /// A queue holding at most `max_events` events and `max_bytes` bytes.
    pub fn new(name: impl Into<String>, max_events: usize, max_bytes: usize) -> Arc<Self> {
        Self::of_pipeline("", name, max_events, max_bytes)
    }

    /// A queue of pipeline `pipeline` (its gauges' `pipeline` label), as [`Self::new`].
    pub fn of_pipeline(
        pipeline: &str,
        name: impl Into<String>,
        max_events: usize,
        max_bytes: usize,
    ) -> Arc<Self> {
        let name = name.into();
        let labels = [("pipeline", pipeline.to_owned()), ("queue", name.clone())];
        metrics::gauge!(crate::metrics::QUEUE_MAX_EVENTS, &labels).set(max_events.max(1) as f64);
        metrics::gauge!(crate::metrics::QUEUE_MAX_BYTES, &labels).set(max_bytes.max(1) as f64);
        Arc::new(BoundedQueue {
            events_gauge: metrics::gauge!(crate::metrics::QUEUE_EVENTS, &labels),
            bytes_gauge: metrics::gauge!(crate::metrics::QUEUE_BYTES, &labels),
            name,
            max_events: max_events.max(1),
            max_bytes: max_bytes.max(1),
            state: Mutex::new(State::default()),
            not_empty: Notify::new(),
            not_full: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked while holding it; the state is a
        // plain queue and stays consistent, so keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends an item, waiting while the queue is full. Fails once the queue is closed.
    pub async fn push(&self, item: QueueItem) -> Result<(), Closed> {
        let n = item.events.len();
        loop {
            {
                let mut s = self.lock();
                if s.closed {
                    return Err(Closed);
                }
                let fits = s.items.is_empty()
                    || (s.events + n <= self.max_events && s.bytes + item.bytes <= self.max_bytes);
                if fits {
                    s.events += n;
                    s.bytes += item.bytes;
                    s.items.push_back(item);
                    self.record_depth(&s);
                    drop(s);
                    self.not_empty.notify_one();
                    return Ok(());
                }
            }
            self.not_full.notified().await;
        }
    }

    /// Takes items totalling at most `max_events` events and `max_bytes` bytes (always at least
    /// one item), waiting up to `wait` for the first.
    pub async fn pop(&self, max_events: usize, max_bytes: usize, wait: Duration) -> Popped {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            {
                let mut s = self.lock();
                if !s.items.is_empty() {
                    let mut out = Vec::new();
                    let (mut taken, mut bytes) = (0, 0);
                    while let Some(front) = s.items.front() {
                        let n = front.events.len();
                        if !out.is_empty()
                            && (taken + n > max_events || bytes + front.bytes > max_bytes)
                        {
                            break;
                        }
                        taken += n;
                        bytes += front.bytes;
                        if let Some(item) = s.items.pop_front() {
                            s.events -= item.events.len();
                            s.bytes -= item.bytes;
                            out.push(item);
                        }
                    }
                    self.record_depth(&s);
                    drop(s);
                    self.not_full.notify_one();
                    return Popped::Items(out);
                }
                if s.closed {
                    return Popped::Closed;
                }
            }
            if tokio::time::timeout_at(deadline, self.not_empty.notified())
                .await
                .is_err()
            {
                return Popped::Idle;
            }
        }
    }

    /// Closes the queue: the producer's next push fails; the consumer drains what is left.
    pub fn close(&self) {
        self.lock().closed = true;
        self.not_empty.notify_one();
        self.not_full.notify_one();
    }

    /// Drops everything queued and closes (used when a pipeline is torn down after a failure).
    pub fn abort(&self) {
        {
            let mut s = self.lock();
            s.items.clear();
            s.events = 0;
            s.bytes = 0;
            s.closed = true;
            self.record_depth(&s);
        }
        self.not_empty.notify_one();
        self.not_full.notify_one();
    }

    /// The queue's name (`source`, `sink:<name>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Events and bytes currently queued.
    pub fn depth(&self) -> (usize, usize) {
        let s = self.lock();
        (s.events, s.bytes)
    }

    fn record_depth(&self, s: &State) {
        self.events_gauge.set(s.events as f64);
        self.bytes_gauge.set(s.bytes as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Position;

    fn item(seq: u64, n: usize, bytes: usize) -> QueueItem {
        let event = ChangeEvent {
            topic: "t".into(),
            key: None,
            value: None,
            headers: Vec::new(),
            position: Position::Offset(seq),
        };
        QueueItem {
            seq,
            events: Arc::new(vec![event; n]),
            bytes,
        }
    }

    fn rt() -> Option<tokio::runtime::Runtime> {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .ok()
    }

    #[test]
    fn push_waits_when_full_in_events_and_bytes() {
        let Some(rt) = rt() else { return };
        rt.block_on(async {
            let q = BoundedQueue::new("t", 10, 1000);
            assert!(q.push(item(0, 6, 10)).await.is_ok());
            // 6 + 6 > 10 events: must wait.
            let waited =
                tokio::time::timeout(Duration::from_millis(20), q.push(item(1, 6, 10))).await;
            assert!(waited.is_err(), "push into a full queue returned");
            assert_eq!(q.depth(), (6, 10));
            let q2 = BoundedQueue::new("b", 100, 100);
            assert!(q2.push(item(0, 1, 80)).await.is_ok());
            let waited =
                tokio::time::timeout(Duration::from_millis(20), q2.push(item(1, 1, 80))).await;
            assert!(waited.is_err(), "push over the byte bound returned");
        });
    }

    #[test]
    fn oversized_item_enters_an_empty_queue_and_pop_frees_space() {
        let Some(rt) = rt() else { return };
        rt.block_on(async {
            let q = BoundedQueue::new("t", 4, 100);
            assert!(q.push(item(0, 9, 1000)).await.is_ok());
            match q.pop(100, usize::MAX, Duration::from_millis(1)).await {
                Popped::Items(items) => assert_eq!(items.len(), 1),
                other => panic!("unexpected {other:?}"),
            }
            assert!(q.push(item(1, 3, 10)).await.is_ok());
            assert!(q.push(item(2, 1, 10)).await.is_ok());
            match q.pop(3, usize::MAX, Duration::from_millis(1)).await {
                Popped::Items(items) => {
                    assert_eq!(items.iter().map(|i| i.seq).collect::<Vec<_>>(), vec![1])
                }
                other => panic!("unexpected {other:?}"),
            }
            q.close();
            assert!(q.push(item(3, 1, 1)).await.is_err());
            assert!(matches!(
                q.pop(3, usize::MAX, Duration::from_millis(1)).await,
                Popped::Items(_)
            ));
            assert!(matches!(
                q.pop(3, usize::MAX, Duration::from_millis(1)).await,
                Popped::Closed
            ));
        });
    }

    #[test]
    fn pop_takes_at_most_the_byte_limit_but_always_one_item() {
        let Some(rt) = rt() else { return };
        rt.block_on(async {
            let q = BoundedQueue::new("t", 100, 10_000);
            for seq in 0..4 {
                assert!(q.push(item(seq, 1, 400)).await.is_ok());
            }
            let seqs = |p: Popped| match p {
                Popped::Items(items) => items.iter().map(|i| i.seq).collect::<Vec<_>>(),
                other => panic!("unexpected {other:?}"),
            };
            assert_eq!(
                seqs(q.pop(100, 900, Duration::from_millis(1)).await),
                [0, 1]
            );
            assert_eq!(seqs(q.pop(100, 100, Duration::from_millis(1)).await), [2]);
            assert_eq!(seqs(q.pop(100, 400, Duration::from_millis(1)).await), [3]);
        });
    }
}
