//! Metric names (through the `metrics` crate; the exporter is chosen by the binary).
//!
//! Counters carry a `component` label (`source`, `transforms`, `sink:<name>`); queue gauges a
//! `queue` label.

/// Events a component received from upstream (or read, for a source).
pub const EVENTS_RECEIVED: &str = "sluice_events_received_total";
/// Events a component passed downstream (or wrote durably, for a sink).
pub const EVENTS_SENT: &str = "sluice_events_sent_total";
/// Events a component failed to process (failed write attempts count their events).
pub const EVENTS_FAILED: &str = "sluice_events_failed_total";
/// Events currently in a queue.
pub const QUEUE_EVENTS: &str = "sluice_queue_events";
/// Bytes currently in a queue.
pub const QUEUE_BYTES: &str = "sluice_queue_bytes";
/// Offset commits written.
pub const OFFSET_COMMITS: &str = "sluice_offset_commits_total";
/// Pipeline restarts after failures.
pub const RESTARTS: &str = "sluice_pipeline_restarts_total";

/// The three per-component counters, resolved once.
#[derive(Clone)]
pub struct ComponentCounters {
    /// Received.
    pub received: metrics::Counter,
    /// Sent.
    pub sent: metrics::Counter,
    /// Failed.
    pub failed: metrics::Counter,
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
        }
    }
}

mod debezium;
pub mod progress;
pub use debezium::DebeziumMetrics;
pub use progress::{ProgressView, SnapshotProgress};
