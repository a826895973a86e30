//! A pipeline's metrics recorder: a thread of its own owns Debezium's metrics and the
//! snapshot's progress, and everything else tells it what happened by typed observations
//! ([`Observation`]) over a bounded channel. The transform stage sends each batch's facts
//! ([`Batch`], worked out where the events are), the supervisor's clock its ticks, the status
//! asks it what to show; nothing on the path of the events takes a lock.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TrySendError};

use super::debezium::DebeziumMetrics;
use super::facts::Batch;
use super::progress::{ProgressView, SnapshotProgress};
use sluice_engine::component::{SnapshotPlan, SourceCounters};
use sluice_engine::queue::BoundedQueue;

/// Observations waiting for the recorder, at most: a stage that gets this far ahead waits for
/// it (each is handled in microseconds).
const CAPACITY: usize = 1024;
/// How long a reader of the status waits for the recorder's answer, all told.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// What the recorder is told.
pub(crate) enum Observation {
    /// A batch of the source's events passed the transform stage's input.
    Batch(Batch),
    /// The transform stage waited a poll interval and no event came.
    Idle,
    /// The supervisor's clock: time passes, events or not (a sink may hold the pipeline back).
    Clock,
    /// A new generation of stages starts, its source feeding `queue` (`capacity`: its limits
    /// of events and bytes).
    Generation {
        queue: Arc<BoundedQueue>,
        capacity: (usize, usize),
    },
    /// The generation's source stopped.
    Disconnected,
    /// The pipeline ended: the progress says its last (bars become lines).
    Ended,
    /// A reader of the status asks what to show (answered after what was observed before).
    Read(Sender<View>),
    /// A reader of the exported metrics waits for what was observed before (answered once it
    /// is recorded).
    Sync(Sender<()>),
}

/// What the status shows of the metrics.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// The snapshot's progress (`null` without Debezium's metrics or before the first event).
    pub snapshot: serde_json::Value,
    /// Debezium's `MilliSecondsBehindSource` (`None` before a streamed change).
    pub behind_ms: Option<i64>,
}

/// What a recorder is started with.
pub struct RecorderSettings {
    /// The pipeline's name (its thread's and its log lines' label).
    pub pipeline: String,
    /// How the snapshot's progress is shown.
    pub progress: ProgressView,
    /// The snapshot's tables, as the source announces them.
    pub plan: SnapshotPlan,
    /// What the source leaves out.
    pub counters: Arc<SourceCounters>,
    /// Whether Debezium's metrics are kept (an admin endpoint serves them).
    pub debezium: bool,
}

/// The sending end of a pipeline's recorder; its thread ends when the last one is dropped.
#[derive(Clone)]
pub struct Recorder {
    sender: Sender<Observation>,
}

impl Recorder {
    /// Starts the recorder's thread.
    pub fn start(settings: RecorderSettings) -> std::io::Result<Recorder> {
        let (sender, receiver) = crossbeam_channel::bounded(CAPACITY);
        let span = tracing::info_span!("metrics", pipeline = %settings.pipeline);
        std::thread::Builder::new()
            .name(format!("metrics:{}", settings.pipeline))
            .spawn(move || span.in_scope(|| Recording::new(settings).run(&receiver)))?;
        Ok(Recorder { sender })
    }

    /// Tells the recorder what a batch of the source's events holds (the events stay here).
    pub(crate) fn observe(&self, seq: u64, events: &[sluice_engine::event::ChangeEvent]) {
        self.send(Observation::Batch(Batch::of(seq, events)));
    }

    /// Tells the recorder something that must not be lost (waiting while it is behind).
    pub(crate) fn send(&self, observation: Observation) {
        // An error: the recorder's thread is gone (it said why when it went).
        let _ = self.sender.send(observation);
    }

    /// Tells the recorder time passes: dropped when it is behind (the next tick will do).
    pub(crate) fn tick(&self, observation: Observation) {
        if let Err(TrySendError::Full(_)) = self.sender.try_send(observation) {
            tracing::trace!("The metrics recorder is behind; a tick was left out.");
        }
    }

    /// The pipeline ended: returns once the recorder has recorded everything before and its
    /// progress said its last.
    pub(crate) fn finish(&self) {
        self.send(Observation::Ended);
        self.sync();
    }

    /// What the status shows, once every observation sent before is recorded (`None`: the
    /// recorder did not answer in time).
    pub fn view(&self) -> Option<View> {
        self.ask(Observation::Read)
    }

    /// Waits until every observation sent before is recorded (`false`: the recorder did not
    /// answer in time): the exported metrics are then up to date.
    pub fn sync(&self) -> bool {
        self.ask(Observation::Sync).is_some()
    }

    /// Sends the question `asking` makes of an answer channel and waits for the answer, within
    /// the read timeout in all.
    fn ask<T>(&self, asking: impl FnOnce(Sender<T>) -> Observation) -> Option<T> {
        let (answer, answered) = crossbeam_channel::bounded(1);
        let asked = std::time::Instant::now();
        (self.sender.send_timeout(asking(answer), READ_TIMEOUT)).ok()?;
        answered
            .recv_timeout(READ_TIMEOUT.saturating_sub(asked.elapsed()))
            .ok()
    }
}

/// What the recorder's thread owns.
struct Recording {
    settings: RecorderSettings,
    debezium: Option<DebeziumMetrics>,
    progress: SnapshotProgress,
}

impl Recording {
    fn new(settings: RecorderSettings) -> Self {
        let progress = SnapshotProgress::new(settings.progress, settings.plan.clone());
        Recording {
            settings,
            debezium: None,
            progress,
        }
    }

    /// Records observations until every sender is gone. A panic here (a bug) ends the
    /// recording with an error line; the pipeline goes on without its metrics.
    fn run(mut self, receiver: &Receiver<Observation>) {
        let recorded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for observation in receiver {
                self.record(observation);
            }
        }));
        if let Err(panic) = recorded {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(panic = %what, "The metrics recorder stopped (a bug; please report it).");
        }
    }

    fn record(&mut self, observation: Observation) {
        match observation {
            Observation::Batch(batch) => {
                if let Some(d) = &mut self.debezium {
                    d.record(&batch);
                }
                self.progress.record(&batch);
            }
            Observation::Idle => {
                if let Some(d) = &mut self.debezium {
                    d.tick();
                }
                self.progress.tick();
            }
            Observation::Clock => {
                if let Some(d) = &mut self.debezium {
                    d.tick();
                }
                self.progress.clock();
            }
            Observation::Generation { queue, capacity } => self.generation(queue, capacity),
            Observation::Ended => {
                let s = &self.settings;
                self.progress = SnapshotProgress::new(s.progress, s.plan.clone());
            }
            Observation::Disconnected => {
                if let Some(d) = &mut self.debezium {
                    d.disconnected();
                }
            }
            Observation::Read(answer) => {
                let view = View {
                    snapshot: (self.debezium.as_ref())
                        .map_or(serde_json::Value::Null, DebeziumMetrics::snapshot_json),
                    behind_ms: self.debezium.as_ref().and_then(DebeziumMetrics::behind_ms),
                };
                let _ = answer.send(view);
            }
            Observation::Sync(answer) => {
                let _ = answer.send(());
            }
        }
    }

    /// A new generation: its progress shown afresh; Debezium's metrics (created with the
    /// first) read its queue, their counts going on.
    fn generation(&mut self, queue: Arc<BoundedQueue>, capacity: (usize, usize)) {
        let s = &self.settings;
        self.progress = SnapshotProgress::new(s.progress, s.plan.clone());
        if !s.debezium {
            return;
        }
        let metrics = self.debezium.get_or_insert_with(|| {
            DebeziumMetrics::new(queue.clone(), capacity)
                .with_plan(s.plan.clone())
                .with_counters(s.counters.clone())
        });
        metrics.generation(queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::facts::tests::event;

    fn recorder(debezium: bool) -> Recorder {
        let settings = RecorderSettings {
            pipeline: "recorded".into(),
            progress: ProgressView::Log,
            plan: SnapshotPlan::default(),
            counters: Arc::default(),
            debezium,
        };
        Recorder::start(settings).unwrap()
    }

    #[test]
    fn a_view_shows_every_batch_sent_before_it() {
        let recorder = recorder(true);
        let queue = BoundedQueue::new("source", 10, 1 << 20);
        recorder.send(Observation::Generation {
            queue,
            capacity: (10, 1 << 20),
        });
        let t: Arc<str> = "p.public.t".into();
        let rows: Vec<_> = (0..3).map(|_| event(&t, Some("r"), "true", "t")).collect();
        recorder.observe(0, &rows);
        let view = recorder.view().unwrap();
        assert_eq!(view.snapshot["running"], true, "{}", view.snapshot);
        assert_eq!(view.snapshot["tables"]["inventory.public.t"], 3);
        recorder.observe(1, &[event(&t, Some("r"), "last", "t")]);
        recorder.observe(2, &[event(&t, Some("c"), "false", "t")]);
        let view = recorder.view().unwrap();
        assert_eq!(view.snapshot["completed"], true, "{}", view.snapshot);
        assert_eq!(view.snapshot["tables"]["inventory.public.t"], 4);
        assert!(view.behind_ms.is_some());
    }

    #[test]
    fn a_sync_is_answered_after_the_batches_sent_before_it() {
        let recorder = recorder(true);
        recorder.send(Observation::Generation {
            queue: BoundedQueue::new("source", 10, 1 << 20),
            capacity: (10, 1 << 20),
        });
        let t: Arc<str> = "p.public.t".into();
        recorder.observe(0, &[event(&t, Some("r"), "true", "t")]);
        assert!(recorder.sync(), "answered");
        let view = recorder.view().unwrap();
        assert_eq!(view.snapshot["tables"]["inventory.public.t"], 1);
    }

    #[test]
    fn a_snapshots_notifications_between_its_rows_neither_end_nor_restart_it() {
        let recorder = recorder(true);
        recorder.send(Observation::Generation {
            queue: BoundedQueue::new("source", 10, 1 << 20),
            capacity: (10, 1 << 20),
        });
        let (t, notes): (Arc<str>, Arc<str>) = ("p.public.t".into(), "notes".into());
        let mut note = event(&notes, None, "false", "t");
        note.value = None;
        let row = |phase| event(&t, Some("r"), phase, "t");
        recorder.observe(0, &[note.clone(), row("first"), row("true")]);
        recorder.observe(1, &[note.clone(), row("true")]);
        let view = recorder.view().unwrap();
        assert_eq!(view.snapshot["running"], true, "{}", view.snapshot);
        assert_eq!(view.snapshot["tables"]["inventory.public.t"], 3);
        recorder.observe(2, &[row("last"), note]);
        let view = recorder.view().unwrap();
        assert_eq!(view.snapshot["completed"], true, "{}", view.snapshot);
        assert_eq!(view.snapshot["tables"]["inventory.public.t"], 4);
    }

    #[test]
    fn without_debeziums_metrics_the_view_is_empty() {
        let recorder = recorder(false);
        let t: Arc<str> = "p.public.t".into();
        recorder.observe(0, &[event(&t, Some("r"), "last", "t")]);
        let view = recorder.view().unwrap();
        assert!(view.snapshot.is_null() && view.behind_ms.is_none());
        recorder.finish();
    }
}
