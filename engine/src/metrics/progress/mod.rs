//! Snapshot progress (initial, blocking and incremental snapshots), as the source's events show
//! it: per-table progress bars (rows, the estimated total the source announced, rate, ETA) when
//! the run asks for them ([`ProgressView::Bars`]: `sluice run` on a terminal), else plain log
//! lines: one every 10 seconds with the rows so far, the rate and the table being read, one when
//! the snapshot's last row passes. Worked out per batch (log lines: from its last event, two
//! field reads), so it costs nothing measurable.

mod bars;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::component::SnapshotPlan;
use crate::event::{ChangeEvent, Op};

pub use bars::suspend;

/// Time between progress lines.
const EVERY: Duration = Duration::from_secs(10);

/// How snapshot progress is shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProgressView {
    /// Log lines (stderr is no terminal, or many pipelines share it).
    #[default]
    Log,
    /// Progress bars per table on stderr, log lines printed above them.
    Bars,
}

/// A snapshot's progress, as the source's events show it.
#[derive(Default)]
pub struct SnapshotProgress {
    rows: u64,
    started: Option<Instant>,
    logged: Option<Instant>,
    table: Option<Arc<str>>,
    bars: Option<bars::Bars>,
}

/// The snapshot phase of a row of a snapshot (`None`: not one): the initial or a blocking
/// snapshot's (`true`, `first`, `last`, ...) or an incremental one's.
fn phase(event: &ChangeEvent) -> Option<&str> {
    if event.op() != Some(Op::Read) {
        return None;
    }
    let phase = event.source_field("snapshot").and_then(|v| v.as_str());
    (super::debezium::is_snapshot(phase) || phase == Some("incremental"))
        .then_some(phase)
        .flatten()
}

impl SnapshotProgress {
    /// Progress shown as `view` says, against the tables `plan` announces.
    pub fn new(view: ProgressView, plan: SnapshotPlan) -> Self {
        SnapshotProgress {
            bars: (view == ProgressView::Bars).then(|| bars::Bars::new(plan)),
            ..SnapshotProgress::default()
        }
    }

    /// Counts a batch of the source's events.
    pub fn observe(&mut self, events: &[ChangeEvent]) {
        if let Some(bars) = &mut self.bars {
            bars.observe(events);
            return;
        }
        let Some(last) = events.last() else { return };
        let Some(phase) = phase(last) else { return };
        let now = Instant::now();
        let started = *self.started.get_or_insert(now);
        self.rows += events.len() as u64;
        self.table = Some(last.topic.clone());
        let rate = |rows: u64| rows as f64 / now.duration_since(started).as_secs_f64().max(0.001);
        if phase == "last" {
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
                    incremental = phase == "incremental",
                    "Snapshot in progress."
                );
            }
            self.logged = Some(now);
        }
    }

    /// No event came for a while: an incremental snapshot's bars that saw no row for some
    /// seconds are done.
    pub fn tick(&mut self) {
        if let Some(bars) = &mut self.bars {
            bars.tick();
        }
    }
}
