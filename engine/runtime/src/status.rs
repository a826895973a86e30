//! A pipeline's status as the admin endpoint shows it (`GET /pipelines/<name>`, the health
//! routes): the supervisor writes it at each change of state, the endpoint reads it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

/// Where a pipeline is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Building its stages (the first time, or after a failure).
    Starting,
    /// Its stages run.
    Running,
    /// A stage failed; it waits to start again from its committed position.
    Restarting,
    /// Stopping on request.
    Stopping,
    /// Stopped after a request or at its end.
    Stopped,
    /// Stopped by a failure it does not retry.
    Failed,
    /// Stopped on request, to be resumed from its committed position (`sluice serve`).
    Paused,
}

/// The last failure: what it said and when (milliseconds since the epoch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastError {
    pub stage: String,
    pub message: String,
    pub at_ms: u64,
}

/// What the supervisor writes.
#[derive(Debug, Clone, Serialize)]
struct Written {
    state: State,
    restarts: u32,
    last_error: Option<LastError>,
    /// The committed position, as the offsets file holds it.
    committed: Option<serde_json::Value>,
    started_ms: u64,
    /// Sinks whose writes fail (retried with backoff): their last error.
    failing_sinks: std::collections::BTreeMap<String, LastError>,
    /// How long the oldest event read but not yet durable in every sink has waited.
    commit_lag_ms: u64,
}

/// A generation's queues and their limits (events, bytes).
type Queues = (Vec<Arc<sluice_engine::queue::BoundedQueue>>, (usize, usize));

/// A pipeline's status, shared by its supervisor and the admin endpoint.
#[derive(Clone)]
pub struct Status {
    name: Arc<str>,
    written: Arc<Mutex<Written>>,
    emitted: Arc<AtomicU64>,
    last_event_ms: Arc<AtomicU64>,
    /// Whether the current generation's source has reached its database.
    connected: Arc<std::sync::atomic::AtomicBool>,
    /// The live views of the sinks' events (`sluice tap`).
    taps: super::tap::Taps,
    /// The recorder of the pipeline's metrics (the snapshot's progress, the lag).
    recorder: Arc<Mutex<Option<crate::metrics::Recorder>>>,
    /// The snapshot's tables, as the source announced them.
    plan: sluice_engine::component::SnapshotPlan,
    /// What the source left out.
    source_counters: Arc<sluice_engine::component::SourceCounters>,
    /// The current generation's queues, with their limits (events, bytes).
    queues: Arc<Mutex<Queues>>,
    /// The position of the last event each sink has durably taken.
    acknowledged: Arc<Mutex<std::collections::BTreeMap<String, crate::Position>>>,
}

impl Status {
    /// A starting pipeline `name`; `emitted` and `last_event_ms` are the supervisor's counters.
    pub fn new(name: &str, emitted: Arc<AtomicU64>, last_event_ms: Arc<AtomicU64>) -> Self {
        Status {
            name: name.into(),
            written: Arc::new(Mutex::new(Written {
                state: State::Starting,
                restarts: 0,
                last_error: None,
                committed: None,
                started_ms: sluice_engine::component::now_ms(),
                failing_sinks: Default::default(),
                commit_lag_ms: 0,
            })),
            emitted,
            last_event_ms,
            connected: Arc::default(),
            taps: super::tap::Taps::default(),
            recorder: Arc::default(),
            plan: Arc::default(),
            source_counters: Arc::default(),
            queues: Arc::default(),
            acknowledged: Arc::default(),
        }
    }

    /// A starting pipeline `name` with counters of its own.
    pub fn starting(name: &str) -> Self {
        Status::new(
            name,
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(sluice_engine::component::now_ms())),
        )
    }

    /// The pipeline's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the pipeline is now.
    pub fn state(&self) -> State {
        self.written.lock().unwrap_or_else(|p| p.into_inner()).state
    }

    /// The last failure, if any.
    pub fn last_error(&self) -> Option<LastError> {
        let w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        w.last_error.clone()
    }

    /// The snapshot's tables, shared with the source and the metrics.
    pub(crate) fn snapshot_plan(&self) -> sluice_engine::component::SnapshotPlan {
        Arc::clone(&self.plan)
    }

    /// What the source left out, shared with the source and the metrics.
    pub(crate) fn source_counters(&self) -> Arc<sluice_engine::component::SourceCounters> {
        Arc::clone(&self.source_counters)
    }

    /// A new generation's queues (the source's, then one per sink), each holding at most
    /// `limits` (events, bytes).
    pub(crate) fn set_queues(
        &self,
        queues: Vec<Arc<sluice_engine::queue::BoundedQueue>>,
        limits: (usize, usize),
    ) {
        *self.queues.lock().unwrap_or_else(|p| p.into_inner()) = (queues, limits);
    }

    /// Sink `name` has durably taken everything up to `position`.
    pub(crate) fn sink_acknowledged(&self, name: &str, position: &crate::Position) {
        let mut acknowledged = self.acknowledged.lock().unwrap_or_else(|p| p.into_inner());
        match acknowledged.get_mut(name) {
            Some(p) => p.clone_from(position),
            None => {
                acknowledged.insert(name.to_owned(), position.clone());
            }
        }
    }

    /// Each queue's fill and limits, by name (`source`, `sink:<name>`).
    fn queues_json(&self) -> serde_json::Value {
        let guard = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        let (queues, (max_events, max_bytes)) = &*guard;
        let mut out = serde_json::Map::new();
        for queue in queues {
            let (events, bytes) = queue.depth();
            out.insert(
                queue.name().to_owned(),
                serde_json::json!({"events": events, "bytes": bytes, "max_events": max_events, "max_bytes": max_bytes}),
            );
        }
        serde_json::Value::Object(out)
    }

    /// Each sink's acknowledged position.
    fn sinks_json(&self) -> serde_json::Value {
        let acknowledged = self.acknowledged.lock().unwrap_or_else(|p| p.into_inner());
        let sinks = (acknowledged.iter())
            .map(|(name, p)| {
                (
                    name.clone(),
                    serde_json::json!({"acknowledged": position_json(p)}),
                )
            })
            .collect();
        serde_json::Value::Object(sinks)
    }

    /// The recorder the snapshot's progress and the lag are read from.
    pub(crate) fn metrics_from(&self, recorder: crate::metrics::Recorder) {
        *self.recorder.lock().unwrap_or_else(|p| p.into_inner()) = Some(recorder);
    }

    /// What the metrics recorder shows, once it has recorded every batch that passed before
    /// (default: no recorder, or it did not answer).
    pub(crate) fn metrics_view(&self) -> crate::metrics::View {
        self.recorder().and_then(|r| r.view()).unwrap_or_default()
    }

    /// Waits until the metrics recorder has recorded every batch that passed before (the
    /// exported metrics are then up to date; at once without a recorder).
    pub(crate) fn sync_metrics(&self) {
        if let Some(recorder) = self.recorder() {
            recorder.sync();
        }
    }

    fn recorder(&self) -> Option<crate::metrics::Recorder> {
        (self.recorder.lock())
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The live views of the sinks' events.
    pub fn taps(&self) -> &super::tap::Taps {
        &self.taps
    }

    /// The flag a new generation's source sets once it has reached its database (cleared
    /// here: the new source has not yet).
    pub(crate) fn fresh_connected(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.connected.store(false, Ordering::Relaxed);
        self.connected.clone()
    }

    /// The supervisor's event counter and last event time.
    pub(crate) fn counters(&self) -> (Arc<AtomicU64>, Arc<AtomicU64>) {
        (self.emitted.clone(), self.last_event_ms.clone())
    }

    fn write(&self, f: impl FnOnce(&mut Written)) {
        let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut w);
    }

    /// The pipeline is in `state` now.
    pub fn set_state(&self, state: State) {
        self.write(|w| w.state = state);
    }

    /// A stage failed with `message`; `state`: restarting or failed.
    pub fn failed(&self, stage: &str, message: String, state: State, restarts: u32) {
        self.write(|w| {
            w.state = state;
            w.restarts = restarts;
            w.last_error = Some(LastError {
                stage: stage.to_owned(),
                message,
                at_ms: sluice_engine::component::now_ms(),
            });
        });
    }

    /// Sink `name`'s writes fail with `message` (it retries).
    pub fn sink_failing(&self, name: &str, message: String) {
        let at_ms = sluice_engine::component::now_ms();
        self.write(|w| {
            let error = LastError {
                stage: format!("sink:{name}"),
                message,
                at_ms,
            };
            w.last_error = Some(error.clone());
            w.failing_sinks.insert(name.to_owned(), error);
        });
    }

    /// A new generation of stages starts: no sink is failing yet.
    pub fn generation_started(&self) {
        self.write(|w| {
            w.state = State::Running;
            w.failing_sinks.clear();
        });
    }

    /// Sink `name` wrote again.
    pub fn sink_ok(&self, name: &str) {
        self.write(|w| {
            w.failing_sinks.remove(name);
        });
    }

    /// Whether the pipeline runs, its source has reached its database and no sink's writes
    /// are failing (`/health/ready`), with the state, the source's connection and the failing
    /// sinks that say why.
    pub fn readiness(&self) -> (bool, serde_json::Value) {
        let w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        let connected = self.connected.load(Ordering::Relaxed);
        let ready = w.state == State::Running && connected && w.failing_sinks.is_empty();
        let data = serde_json::json!({"state": w.state, "source_connected": connected, "failing_sinks": w.failing_sinks});
        (ready, data)
    }

    /// How long the oldest event read but not yet durable in every sink has waited.
    pub fn commit_lag(&self, lag: std::time::Duration) {
        let ms = u64::try_from(lag.as_millis()).unwrap_or(u64::MAX);
        self.write(|w| w.commit_lag_ms = ms);
    }

    /// The committed position moved.
    pub fn committed(&self, position: &crate::Position) {
        let value = position_json(position);
        self.write(|w| w.committed = Some(value));
    }

    /// The status as JSON.
    pub fn json(&self) -> serde_json::Value {
        let w = self
            .written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let now = sluice_engine::component::now_ms();
        let last = self.last_event_ms.load(Ordering::Relaxed);
        let metrics = self.metrics_view();
        serde_json::json!({
            "name": &*self.name,
            "state": w.state,
            "source_connected": self.connected.load(Ordering::Relaxed),
            "restarts": w.restarts,
            "events": self.emitted.load(Ordering::Relaxed),
            "ms_since_last_event": now.saturating_sub(last),
            "uptime_ms": now.saturating_sub(w.started_ms),
            "committed": w.committed,
            "commit_lag_ms": w.commit_lag_ms,
            "ms_behind_source": metrics.behind_ms,
            "last_error": w.last_error,
            "failing_sinks": w.failing_sinks,
            "snapshot": metrics.snapshot,
            "queues": self.queues_json(),
            "sinks": self.sinks_json(),
        })
    }
}

/// A position as the offsets file holds it: a number, or the source's JSON.
fn position_json(position: &crate::Position) -> serde_json::Value {
    match position {
        crate::Position::Offset(n) => serde_json::Value::from(*n),
        crate::Position::Opaque(text) => serde_json::from_str(text)
            .unwrap_or_else(|_| serde_json::Value::String(text.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_follows_what_the_supervisor_writes() {
        let s = Status::new(
            "p",
            Arc::new(AtomicU64::new(5)),
            Arc::new(AtomicU64::new(0)),
        );
        assert_eq!(s.json()["state"], "starting");
        s.set_state(State::Running);
        s.committed(&crate::Position::Opaque(r#"{"lsn":"0/1"}"#.into()));
        s.failed("source", "boom".into(), State::Restarting, 1);
        let j = s.json();
        assert_eq!(j["state"], "restarting");
        assert_eq!(j["events"], 5);
        assert_eq!(j["committed"]["lsn"], "0/1");
        assert_eq!(j["last_error"]["message"], "boom");
        assert_eq!(j["restarts"], 1);
        s.set_state(State::Running);
        let connected = s.fresh_connected();
        assert!(!s.readiness().0, "running, the source not connected yet");
        assert_eq!(s.json()["source_connected"], false);
        connected.store(true, Ordering::Relaxed);
        assert!(s.readiness().0);
        // A new generation's source has not connected yet.
        let again = s.fresh_connected();
        assert!(!s.readiness().0);
        again.store(true, Ordering::Relaxed);
        s.sink_failing("kafka", "broker away".into());
        assert!(!s.readiness().0);
        assert_eq!(s.json()["failing_sinks"]["kafka"]["message"], "broker away");
        s.sink_ok("kafka");
        assert!(s.readiness().0);
    }
}
