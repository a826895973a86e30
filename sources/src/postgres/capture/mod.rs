//! Capture: the initial snapshot, the log stream with its transactions and row changes, the
//! signals it carries, and the incremental and blocking snapshots they start.

pub(crate) mod blocking;
pub(crate) mod change;
pub(crate) mod incremental;
pub(crate) mod relations;
pub(crate) mod signaling;
pub(crate) mod snapshot;
pub(crate) mod stream;
