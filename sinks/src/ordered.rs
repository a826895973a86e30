//! Deliveries that send when the runtime awaits them, for the sinks whose service answers each
//! request (Redis, NATS JetStream): the runtime keeps a few batches in flight and awaits the
//! oldest first, so batches go out one after another, in order, while the next ones are being
//! encoded. After one failed, the later ones send nothing (the runtime writes the failed batch
//! and every later one again, in order): nothing goes out of order.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use sluice_engine::{ComponentError, Delivery};

/// The deliveries of one sink.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ordered {
    state: Arc<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Deliveries made and not finished (or dropped).
    outstanding: AtomicUsize,
    /// A delivery failed, and the runtime has not written again since everything settled.
    failed: AtomicBool,
}

/// Counts a delivery as outstanding until it is finished or dropped.
struct Outstanding(Arc<State>);

impl Drop for Outstanding {
    fn drop(&mut self) {
        self.0.outstanding.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Ordered {
    /// The delivery that runs `send` when awaited, unless an earlier delivery failed.
    pub(crate) fn delivery(
        &self,
        send: impl std::future::Future<Output = Result<(), ComponentError>> + Send + 'static,
    ) -> Delivery {
        let state = Arc::clone(&self.state);
        // Nothing outstanding: whatever failed was settled, and this write starts again.
        if state.outstanding.load(Ordering::Acquire) == 0 {
            state.failed.store(false, Ordering::Release);
        }
        state.outstanding.fetch_add(1, Ordering::AcqRel);
        let guard = Outstanding(Arc::clone(&state));
        Box::pin(async move {
            let _guard = guard;
            if state.failed.load(Ordering::Acquire) {
                return Err(ComponentError::retryable(
                    "not sent: an earlier batch failed (it is sent again, then this one)",
                ));
            }
            let done = send.await;
            if done.is_err() {
                state.failed.store(true, Ordering::Release);
            }
            done
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn after_a_failure_nothing_is_sent_until_everything_settled() {
        let ordered = Ordered::default();
        let sent = Arc::new(std::sync::Mutex::new(Vec::new()));
        let send = |n: u32, ok: bool| {
            let sent = Arc::clone(&sent);
            async move {
                sent.lock().unwrap().push(n);
                if ok {
                    Ok(())
                } else {
                    Err(ComponentError::retryable("down"))
                }
            }
        };
        let one = ordered.delivery(send(1, false));
        let two = ordered.delivery(send(2, true));
        assert!(one.await.is_err());
        assert!(two.await.is_err(), "not sent after the failure");
        // Everything settled: the runtime writes the failed batch again, then the next.
        let again = ordered.delivery(send(1, true));
        assert!(again.await.is_ok());
        let next = ordered.delivery(send(2, true));
        drop(ordered.delivery(send(9, true)));
        assert!(next.await.is_ok());
        assert_eq!(*sent.lock().unwrap(), [1, 1, 2]);
    }
}
