//! Snapshot progress (initial, blocking and incremental snapshots), as the source's events show
//! it: per-table progress bars (rows, the estimated total the source announced, rate, ETA) when
//! the run asks for them ([`ProgressView::Bars`]: `sluice run` on a terminal), else plain log
//! lines: one every 10 seconds with the rows so far, the rate and the table being read (also
//! while a sink holds the snapshot back and no row passes: the pipeline's clock ticks it), one
//! when the snapshot's last row passes. Worked out from each batch's facts ([`Batch`]) on the
//! metrics recorder's thread.

mod bars;

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::facts::Batch;
use sluice_engine::component::SnapshotPlan;

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
    /// The rows seen last were an incremental snapshot's (which says no end: its lines come
    /// only with its rows).
    incremental: bool,
    bars: Option<bars::Bars>,
}

impl SnapshotProgress {
    /// Progress shown as `view` says, against the tables `plan` announces.
    pub fn new(view: ProgressView, plan: SnapshotPlan) -> Self {
        SnapshotProgress {
            bars: (view == ProgressView::Bars).then(|| bars::Bars::new(plan)),
            ..SnapshotProgress::default()
        }
    }

    /// Counts the snapshot rows of a batch of the source's events.
    pub fn record(&mut self, batch: &Batch) {
        if let Some(bars) = &mut self.bars {
            bars.record(batch);
            return;
        }
        let mut last = None;
        let mut rows = 0;
        for (table, incremental) in batch.snapshot_rows() {
            rows += table.rows;
            last = Some((table, incremental));
        }
        let Some((last, incremental)) = last else {
            return;
        };
        let now = Instant::now();
        let started = *self.started.get_or_insert(now);
        self.rows += rows;
        self.table = Some(last.topic.clone());
        self.incremental = incremental;
        if batch.ends_snapshot() {
            let seconds = now.duration_since(started).as_secs_f64();
            tracing::info!(
                rows = self.rows,
                seconds = format!("{seconds:.1}"),
                rows_per_second = format!("{:.0}", self.rows as f64 / seconds.max(0.001)),
                "Snapshot read."
            );
            *self = SnapshotProgress::default();
            return;
        }
        self.log_every(now);
    }

    /// The line of the last 10 seconds, if not written yet (the first one starts the clock).
    fn log_every(&mut self, now: Instant) {
        let Some(started) = self.started else { return };
        if self.logged.is_some_and(|t| now.duration_since(t) < EVERY) {
            return;
        }
        if self.logged.is_some() {
            let seconds = now.duration_since(started).as_secs_f64().max(0.001);
            tracing::info!(
                rows = self.rows,
                rows_per_second = format!("{:.0}", self.rows as f64 / seconds),
                reading = %self.table.as_deref().unwrap_or(""),
                incremental = self.incremental,
                "Snapshot in progress."
            );
        }
        self.logged = Some(now);
    }

    /// No event came for a while: an incremental snapshot's bars that saw no row for some
    /// seconds are done; an initial or blocking snapshot under way still says where it is.
    pub fn tick(&mut self) {
        match &mut self.bars {
            Some(bars) => bars.tick(),
            None => self.clock(),
        }
    }

    /// Time passes, events or not (a sink may hold the pipeline back): an initial or blocking
    /// snapshot under way says where it is every 10 seconds (log lines only; bars stay as
    /// they are).
    pub fn clock(&mut self) {
        if self.bars.is_none() && !self.incremental {
            self.log_every(Instant::now());
        }
    }
}
