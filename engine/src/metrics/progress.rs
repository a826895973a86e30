//! Snapshot progress as log lines (issue 20's "plain periodic log lines"): while the source
//! emits snapshot rows, a line every [`EVERY`] with the rows so far, the rate and the table
//! being read; one when the snapshot's last row passes. Worked out per batch from its last
//! event (two field reads a batch), so it costs nothing measurable.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::event::{ChangeEvent, Op};

/// Time between progress lines.
const EVERY: Duration = Duration::from_secs(10);

/// The initial (or blocking) snapshot's progress, as the source's events show it.
#[derive(Default)]
pub struct SnapshotProgress {
    rows: u64,
    started: Option<Instant>,
    logged: Option<Instant>,
    table: Option<Arc<str>>,
}

impl SnapshotProgress {
    /// Counts a batch of the source's events.
    pub fn observe(&mut self, events: &[ChangeEvent]) {
        let Some(last) = events.last() else { return };
        if last.op() != Some(Op::Read) {
            return;
        }
        let phase = last.source_field("snapshot").and_then(|v| v.as_str());
        if !super::debezium::is_snapshot(phase) {
            return;
        }
        let now = Instant::now();
        let started = *self.started.get_or_insert(now);
        self.rows += events.len() as u64;
        self.table = Some(last.topic.clone());
        let rate = |rows: u64| rows as f64 / now.duration_since(started).as_secs_f64().max(0.001);
        if phase == Some("last") {
            tracing::info!(
                rows = self.rows,
                seconds = format!("{:.1}", now.duration_since(started).as_secs_f64()),
                rows_per_second = format!("{:.0}", rate(self.rows)),
                "Snapshot read."
            );
            *self = SnapshotProgress::default();
            return;
        }
        if self.logged.is_none_or(|t| now.duration_since(t) >= EVERY) {
            if self.logged.is_some() {
                tracing::info!(
                    rows = self.rows,
                    rows_per_second = format!("{:.0}", rate(self.rows)),
                    reading = %self.table.as_deref().unwrap_or(""),
                    "Snapshot in progress."
                );
            }
            self.logged = Some(now);
        }
    }
}
