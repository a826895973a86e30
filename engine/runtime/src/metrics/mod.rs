//! What the runtime measures beside the engine's metric names: Debezium's connector metrics
//! (`debezium`) and the snapshot's progress (`progress`: bars on a terminal, log lines
//! elsewhere), both kept by a pipeline's recorder (`recorder`) from the facts of each batch
//! (`facts`).

mod debezium;
mod facts;
pub mod progress;
mod recorder;

pub use debezium::DebeziumMetrics;
pub use facts::{Batch, Changes, Identity, Run, TableRows};
pub use progress::{ProgressView, SnapshotProgress};
pub(crate) use recorder::Observation;
pub use recorder::{Recorder, RecorderSettings, View};
