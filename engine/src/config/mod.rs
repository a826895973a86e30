//! The pipeline configuration model: one YAML file, one pipeline.
//!
//! ```yaml
//! name: orders                  # pipeline name; keys the committed offsets
//! data_dir: ./.sluice/orders    # default: ./.sluice/<name>
//! max_queue_size: 8192          # events per queue (source queue and each sink queue)
//! max_queue_size_bytes: 4MiB    # bytes per queue
//! max_batch_size: 2048          # events per batch
//! poll_interval: 500ms          # how long an idle stage waits before re-checking
//! source: { type: datagen, ... }
//! transforms: [ { type: ..., ... } ]
//! sinks:
//!   - { name: out, type: file, path: out.jsonl, transforms: [...] }
//! ```
//!
//! Component blocks are tagged by `type`; the engine is generic over the closed enums of
//! sources, transforms and sinks that the binary assembles ([`ComponentSpec`]).

pub mod admin;
mod fields;
mod load;
mod node;
mod units;

use std::path::PathBuf;

use serde::Deserialize;

pub use fields::{fields_of, from_node_parts};
pub use load::{load_pipeline, parse_pipeline, LoadError};
pub use node::{from_node, ConfigError, Loc, Node, NodeDeserializer, NodeKind};
pub use units::{
    is_secret_property, split_list, AnchoredRegex, ByteSize, DurationSpec, Properties, RegexList,
    Secret,
};

/// A closed set of component kinds of one role (sources, transforms or sinks), tagged by `type`.
pub trait ComponentSpec: Sized {
    /// The role, for messages: `source`, `transform`, `sink`.
    const ROLE: &'static str;
    /// Every accepted `type` value.
    const KINDS: &'static [&'static str];
    /// The kinds this build left out, with the cargo feature that brings each in.
    const NOT_BUILT: &'static [(&'static str, &'static str)] = &[];
    /// Deserializes the component of kind `kind` from `node`, ignoring the keys in `skip`
    /// (the tag and keys common to every component of the role). `Ok(None)`: unknown kind.
    fn from_node(kind: &str, node: &Node, skip: &[&str]) -> Result<Option<Self>, ConfigError>;
}

/// Queue and batch limits shared by every queue of a pipeline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Events a queue holds at most (`max_queue_size`, default 8192).
    pub max_queue_size: usize,
    /// Bytes a queue holds at most (`max_queue_size_bytes`, default 4 MiB).
    pub max_queue_size_bytes: u64,
    /// Events per batch (`max_batch_size`, default 2048).
    pub max_batch_size: usize,
    /// How long an idle stage waits before re-checking (`poll_interval`, default 500ms).
    pub poll_interval: DurationSpec,
}

impl Limits {
    /// Estimated bytes at which a batch is cut: a quarter of `max_queue_size_bytes`, so that a
    /// queue holds several batches and a stage never holds much more than its queue, whatever
    /// the row size (a single larger event travels alone).
    pub fn max_batch_bytes(&self) -> usize {
        usize::try_from(self.max_queue_size_bytes / 4)
            .unwrap_or(usize::MAX)
            .max(1)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_queue_size: default_max_queue_size(),
            max_queue_size_bytes: default_max_queue_size_bytes().0,
            max_batch_size: default_max_batch_size(),
            poll_interval: default_poll_interval(),
        }
    }
}

pub(crate) fn default_max_queue_size() -> usize {
    8192
}
pub(crate) fn default_max_queue_size_bytes() -> ByteSize {
    ByteSize(4 << 20)
}
pub(crate) fn default_max_batch_size() -> usize {
    2048
}
pub(crate) fn default_poll_interval() -> DurationSpec {
    DurationSpec(std::time::Duration::from_millis(500))
}
pub(crate) fn default_shutdown_timeout() -> DurationSpec {
    DurationSpec(std::time::Duration::from_secs(30))
}

/// The offset stores the engine has itself; any other `offsets.store` names a store a
/// component provides (the binary builds it: `PipelinePlan::offset_store` in the runtime).
pub const ENGINE_OFFSET_STORES: [&str; 2] = ["file", "memory"];

/// The keys of the `offsets` block the engine reads; a provided store reads the others.
pub const OFFSETS_KEYS: [&str; 3] = ["store", "type", "flush_interval"];

/// The `offsets` block.
#[derive(Debug, Clone, PartialEq)]
pub struct OffsetsConfig {
    /// `file` (default: one file under the data directory, replaced atomically), `memory`
    /// (nothing survives a restart: tests, benchmarks), or a store a component provides
    /// (`kafka`). `type` is accepted for it too.
    pub store: String,
    /// How often acknowledged positions are committed (default 1s; always on shutdown).
    pub flush_interval: DurationSpec,
    /// The block as written, for a provided store's own keys (`None`: no block).
    pub node: Option<Node>,
}

impl OffsetsConfig {
    /// Whether the engine keeps these offsets itself.
    pub fn is_engine_store(&self) -> bool {
        ENGINE_OFFSET_STORES.contains(&self.store.as_str())
    }
}

pub(crate) fn default_flush_interval() -> DurationSpec {
    DurationSpec(std::time::Duration::from_secs(1))
}

impl Default for OffsetsConfig {
    fn default() -> Self {
        OffsetsConfig {
            store: "file".to_owned(),
            flush_interval: default_flush_interval(),
            node: None,
        }
    }
}

/// Exponential backoff with a cap and a budget.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backoff {
    /// Attempts after the first failure before giving up.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// First wait.
    #[serde(default = "default_initial_backoff")]
    pub initial_backoff: DurationSpec,
    /// Longest wait.
    #[serde(default = "default_max_backoff")]
    pub max_backoff: DurationSpec,
}

fn default_max_retries() -> u32 {
    10
}
fn default_initial_backoff() -> DurationSpec {
    DurationSpec(std::time::Duration::from_millis(200))
}
fn default_max_backoff() -> DurationSpec {
    DurationSpec(std::time::Duration::from_secs(30))
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            max_retries: default_max_retries(),
            initial_backoff: default_initial_backoff(),
            max_backoff: default_max_backoff(),
        }
    }
}

impl Backoff {
    /// The wait before retry number `attempt` (1-based): initial × 2^(attempt-1), capped.
    pub fn delay(&self, attempt: u32) -> std::time::Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(20));
        self.initial_backoff
            .0
            .saturating_mul(factor)
            .min(self.max_backoff.0)
    }
}

/// One entry of `sinks`: a sink block tagged by `type` (`stdout`, `file`, `kafka`, …: its
/// keys are the sink's, see [Sinks](sinks.md)), with these keys beside.
#[derive(Debug, Clone)]
pub struct SinkEntry<K, T> {
    /// Unique name within the pipeline (default: the type, `<type>-N` after the first).
    pub name: String,
    /// The sink's own configuration.
    pub spec: K,
    /// Transforms applied for this sink only, after the pipeline's (default none).
    pub transforms: Vec<T>,
    /// Retry policy for failed writes; past it the pipeline stops without committing past the
    /// failure.
    pub retry: Backoff,
}

/// A whole pipeline.
#[derive(Debug, Clone)]
pub struct PipelineConfig<S, T, K> {
    /// Pipeline name.
    pub name: String,
    /// Directory for offsets and other state.
    pub data_dir: PathBuf,
    /// The source.
    pub source: S,
    /// Transforms applied to every event, in order.
    pub transforms: Vec<T>,
    /// Sinks (fan-out).
    pub sinks: Vec<SinkEntry<K, T>>,
    /// Queue and batch limits.
    pub limits: Limits,
    /// Offset store.
    pub offsets: OffsetsConfig,
    /// How long a graceful shutdown may take before stages are cut off.
    pub shutdown_timeout: DurationSpec,
    /// Restarts of the pipeline after a retryable failure.
    pub restart: Backoff,
    /// The admin endpoint (signals over HTTP), off when absent.
    pub admin: Option<admin::AdminConfig>,
}
