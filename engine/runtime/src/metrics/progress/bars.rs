//! Progress bars per table (indicatif), drawn on stderr at the bottom of the terminal: one per
//! table being read, with its rows, the estimate the source announced, the rate and the time
//! left; a table done becomes one line above them. Log lines are printed above the bars
//! ([`suspend`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::metrics::facts::Batch;
use sluice_engine::component::SnapshotPlan;

/// Bars drawn at once, at most (the table idle longest gives its place to a new one).
const MAX_BARS: usize = 8;
/// A table with no row for this long, while nothing else is read, is done for now.
const IDLE: Duration = Duration::from_secs(3);

/// Whether a bar was ever drawn (log lines then go above them).
static DRAWN: AtomicBool = AtomicBool::new(false);

/// The process's bars (one terminal).
fn multi() -> &'static MultiProgress {
    static MULTI: OnceLock<MultiProgress> = OnceLock::new();
    MULTI.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
}

/// Runs `write` (a log line to stderr) with the bars cleared, and draws them again after.
pub fn suspend<R>(write: impl FnOnce() -> R) -> R {
    if DRAWN.load(Ordering::Relaxed) {
        multi().suspend(write)
    } else {
        write()
    }
}

/// One table's bar.
struct Table {
    bar: ProgressBar,
    started: Instant,
    last: Instant,
}

/// The bars of one pipeline's snapshots.
pub(super) struct Bars {
    plan: SnapshotPlan,
    tables: BTreeMap<Arc<str>, Table>,
    /// Rows of the tables whose bar is gone (a table read again goes on from there).
    done: BTreeMap<Arc<str>, u64>,
}

impl Bars {
    pub(super) fn new(plan: SnapshotPlan) -> Self {
        Bars {
            plan,
            tables: BTreeMap::new(),
            done: BTreeMap::new(),
        }
    }

    /// Counts the snapshot rows of a batch, table by table; the snapshot's last row ends it.
    pub(super) fn record(&mut self, batch: &Batch) {
        for (table, _) in batch.snapshot_rows() {
            self.add(&table.topic, table.rows);
        }
        if batch.ends_snapshot() {
            let all: Vec<Arc<str>> = self.tables.keys().cloned().collect();
            all.iter().for_each(|t| self.finish(t));
            self.done.clear();
        }
    }

    /// Nothing was read for a while: tables idle for [`IDLE`] are done for now.
    pub(super) fn tick(&mut self) {
        let idle: Vec<Arc<str>> = (self.tables.iter())
            .filter(|(_, t)| t.last.elapsed() >= IDLE)
            .map(|(k, _)| k.clone())
            .collect();
        idle.iter().for_each(|t| self.finish(t));
    }

    fn add(&mut self, topic: &Arc<str>, rows: u64) {
        let now = Instant::now();
        if !self.tables.contains_key(topic) {
            if self.tables.len() >= MAX_BARS {
                let oldest = (self.tables.iter())
                    .min_by_key(|(_, t)| t.last)
                    .map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    self.finish(&oldest);
                }
            }
            let bar = self.bar(topic);
            DRAWN.store(true, Ordering::Relaxed);
            let table = Table {
                bar,
                started: now,
                last: now,
            };
            self.tables.insert(topic.clone(), table);
        }
        if let Some(table) = self.tables.get_mut(topic) {
            table.last = now;
            table.bar.inc(rows);
            // An estimate is an estimate: a table holding more grows its bar.
            if let Some(length) = table.bar.length() {
                if table.bar.position() > length {
                    table.bar.set_length(table.bar.position());
                }
            }
        }
    }

    /// A new bar for `topic`: against the source's estimate when it announced one, else a
    /// counter; going on from the rows read before.
    fn bar(&self, topic: &Arc<str>) -> ProgressBar {
        let estimate = self.estimate(topic);
        let (bar, template) = match estimate {
            Some(total) => (
                ProgressBar::new(total),
                "{prefix} [{wide_bar}] {human_pos}/{human_len} {rate} ETA {eta}",
            ),
            None => (
                ProgressBar::no_length(),
                "{prefix} {spinner} {human_pos} rows read, {rate}, {elapsed}",
            ),
        };
        let rate = |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{:.0} rows/s", state.per_sec());
        };
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .with_key("rate", rate)
            .progress_chars("=> ");
        let bar = multi().add(bar.with_style(style));
        bar.set_prefix(topic.to_string());
        bar.set_position(self.done.get(topic).copied().unwrap_or(0));
        bar
    }

    /// The rows the source estimates `topic`'s table holds (its plan names `schema.table`).
    fn estimate(&self, topic: &str) -> Option<u64> {
        let plan = self.plan.lock().unwrap_or_else(|p| p.into_inner());
        (plan.as_ref()?.iter())
            .find(|(t, _)| topic == t || topic.ends_with(&format!(".{t}")))
            .and_then(|(_, e)| *e)
    }

    /// `topic`'s bar becomes a line above the others.
    fn finish(&mut self, topic: &Arc<str>) {
        let Some(table) = self.tables.remove(topic) else {
            return;
        };
        let rows = table.bar.position();
        let seconds = table.last.duration_since(table.started).as_secs_f64();
        let rate = rows as f64 / seconds.max(0.001);
        table.bar.finish_and_clear();
        multi().remove(&table.bar);
        let _ = multi().println(format!(
            "{topic}: {rows} rows read in {seconds:.1} s ({rate:.0} rows/s)"
        ));
        self.done.insert(topic.clone(), rows);
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        let all: Vec<Arc<str>> = self.tables.keys().cloned().collect();
        all.iter().for_each(|t| self.finish(t));
    }
}
