//! What the runtime measures beside the engine's metric names: Debezium's connector metrics
//! (`debezium`) and the snapshot's progress (`progress`: bars on a terminal, log lines
//! elsewhere).

mod debezium;
pub mod progress;

pub use debezium::DebeziumMetrics;
pub use progress::{ProgressView, SharedProgress, SnapshotProgress};
