//! Metric names (through the `metrics` crate; the exporter is chosen by the binary).
//!
//! Everything carries a `pipeline` label; counters and batch durations a `component` label
//! (`source`, `transforms`, `sink:<name>`), queue gauges a `queue` label (`source`,
//! `sink:<name>`).

/// Events a component received from upstream (or read, for a source).
pub const EVENTS_RECEIVED: &str = "sluice_events_received_total";
/// Events a component passed downstream (or wrote durably, for a sink).
pub const EVENTS_SENT: &str = "sluice_events_sent_total";
/// Events a component failed to process (failed write attempts count their events).
pub const EVENTS_FAILED: &str = "sluice_events_failed_total";
/// Estimated bytes of the events a component received.
pub const BYTES_RECEIVED: &str = "sluice_bytes_received_total";
/// Estimated bytes of the events a component passed downstream (or wrote durably).
pub const BYTES_SENT: &str = "sluice_bytes_sent_total";
/// Seconds a component took for one batch: the transforms' chain, a sink's write until it was
/// durable (a histogram).
pub const BATCH_SECONDS: &str = "sluice_batch_duration_seconds";
/// The buckets of [`BATCH_SECONDS`], in seconds.
pub const BATCH_BUCKETS: &[f64] = &[
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0,
];
/// Seconds the oldest batch read from the source but not yet durable in every sink has
/// waited (0 when every batch read is); the committed position trails what was read by at
/// most this plus the offsets' flush interval.
pub const COMMIT_LAG: &str = "sluice_commit_lag_seconds";
/// Events currently in a queue.
pub const QUEUE_EVENTS: &str = "sluice_queue_events";
/// Bytes currently in a queue.
pub const QUEUE_BYTES: &str = "sluice_queue_bytes";
/// The events a queue holds at most.
pub const QUEUE_MAX_EVENTS: &str = "sluice_queue_max_events";
/// The bytes a queue holds at most.
pub const QUEUE_MAX_BYTES: &str = "sluice_queue_max_bytes";
/// Offset commits written.
pub const OFFSET_COMMITS: &str = "sluice_offset_commits_total";
/// Pipeline restarts after failures.
pub const RESTARTS: &str = "sluice_pipeline_restarts_total";

/// The per-component counters and batch durations, resolved once.
#[derive(Clone)]
pub struct ComponentCounters {
    /// Received.
    pub received: metrics::Counter,
    /// Sent.
    pub sent: metrics::Counter,
    /// Failed.
    pub failed: metrics::Counter,
    /// Bytes received.
    pub bytes_received: metrics::Counter,
    /// Bytes sent.
    pub bytes_sent: metrics::Counter,
    /// Seconds per batch (for components that time their batches: see [`Self::timed`]).
    pub batch_seconds: Option<metrics::Histogram>,
}

impl ComponentCounters {
    /// Counters for the component `name` of pipeline `pipeline`.
    pub fn new(pipeline: &str, name: &str) -> Self {
        let labels = [
            ("pipeline", pipeline.to_owned()),
            ("component", name.to_owned()),
        ];
        ComponentCounters {
            received: metrics::counter!(EVENTS_RECEIVED, &labels),
            sent: metrics::counter!(EVENTS_SENT, &labels),
            failed: metrics::counter!(EVENTS_FAILED, &labels),
            bytes_received: metrics::counter!(BYTES_RECEIVED, &labels),
            bytes_sent: metrics::counter!(BYTES_SENT, &labels),
            batch_seconds: None,
        }
    }

    /// As [`Self::new`], with the component's batch durations ([`BATCH_SECONDS`]).
    pub fn timed(pipeline: &str, name: &str) -> Self {
        let labels = [
            ("pipeline", pipeline.to_owned()),
            ("component", name.to_owned()),
        ];
        ComponentCounters {
            batch_seconds: Some(metrics::histogram!(BATCH_SECONDS, &labels)),
            ..Self::new(pipeline, name)
        }
    }

    /// Records one batch's duration (when timed).
    pub fn batch_took(&self, took: std::time::Duration) {
        if let Some(h) = &self.batch_seconds {
            h.record(took);
        }
    }
}
