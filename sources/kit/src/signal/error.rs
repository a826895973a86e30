//! Why a signal is refused, whichever channel brought it and whichever source carries it out.
//! Its message is the warning's `reason` and the `ABORTED` notification's; a refused signal
//! never stops the stream.

/// A signal that cannot be carried out.
#[derive(Debug, thiserror::Error)]
pub enum SignalRefused {
    /// A line of a channel that is no signal.
    #[error("not a signal (JSON with `type`): {0}")]
    NotASignal(#[source] serde_json::Error),
    /// The signal's `data` does not fit its type.
    #[error("`data` is not valid: {0}")]
    InvalidData(#[source] serde_json::Error),
    /// A type no source knows.
    #[error("unknown signal type `{0}`")]
    UnknownType(String),
    /// `execute-snapshot` without `data-collections`.
    #[error("`data-collections` is missing (an empty list is a no-op)")]
    NoCollections,
    /// A data collection that is not a regular expression.
    #[error("data collection `{collection}` is not a valid regex: {reason}")]
    InvalidCollection {
        collection: String,
        /// The regex crate's last line (where and what).
        reason: String,
        #[source]
        cause: regex::Error,
    },
    /// A snapshot `type` other than incremental and blocking.
    #[error("snapshot type `{0}` is not supported: use incremental or blocking")]
    SnapshotType(String),
    /// Two `additional-conditions` for one table.
    #[error("two additional conditions for `{0}`: give one")]
    TwoConditions(String),
    /// `stop-snapshot` of a kind that cannot be stopped.
    #[error("cannot stop a `{0}` snapshot")]
    CannotStop(String),
    /// `stop-snapshot` without its `type`.
    #[error("`type` is required (incremental)")]
    StopWithoutType,
    /// No captured table matches the signal's collections.
    #[error("no captured table matches {0:?}")]
    NothingSelected(Vec<String>),
    /// What the signal asks this source cannot do (`what` names it, with what to do instead).
    #[error("{what} are not supported by this source")]
    Unsupported { what: &'static str },
    /// A snapshot read by another key runs.
    #[error("a snapshot read by {running} is running; this one asks for {asked}: send it once that one is done")]
    OtherKeyRunning { running: String, asked: String },
    /// The source cannot take incremental snapshots as configured.
    #[error(
        "incremental snapshots need `signal.data.collection` (the watermarks are written there)"
    )]
    NoSignalingTable,
    /// The database refused an additional condition (`reason`: its message).
    #[error("the additional condition `{filter}` for {table} is not a valid filter: {reason}")]
    InvalidCondition {
        table: String,
        filter: String,
        reason: String,
    },
    /// The additional conditions could not be checked.
    #[error("cannot check the additional conditions: {0}")]
    ConditionsUnchecked(#[source] Box<dyn std::error::Error + Send + Sync>),
}
