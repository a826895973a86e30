//! Sluice's engine: the contracts every source, transform and sink is written against. The
//! runtime that connects them (supervisor, stages, admin endpoint, metrics export, progress) is
//! the `sluice-runtime` crate, which only the binary uses.
//!
//! - [`event`]: the Debezium-compatible change-event model (Kafka Connect schemas and values).
//! - [`codec`]: encodings (JSON as Kafka Connect's JsonConverter writes it).
//! - [`config`]: the pipeline YAML model, with located errors.
//! - [`component`]: the `Source`, `Transform` and `Sink` traits.
//! - [`queue`], [`ack`], [`offsets`]: bounded queues, ordered acknowledgement, committed positions.
//! - [`registry`]: how components register themselves (one line each in the binary).

pub mod ack;
pub mod codec;
pub mod component;
pub mod config;
pub mod error;
pub mod event;
pub mod metrics;
pub mod offsets;
pub mod partitions;
pub mod queue;
pub mod registry;
pub mod tls;

pub use component::{
    delivered, BuildContext, BuildSink, BuildSource, BuildTransform, Delivery, Sink, SinkBatch,
    SnapshotPlan, Source, SourceContext, Stopped, Transform,
};
pub use error::{Classify, ComponentError, ErrorClass, FailureMode};
pub use event::{Batch, ChangeEvent, Op, Position, Record, Schema, SchemaType, Struct, Value};

/// `#[async_trait]`, for the build traits' implementations [`components!`] writes.
#[doc(hidden)]
pub use async_trait::async_trait;
