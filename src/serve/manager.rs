//! The pipelines of `sluice serve`, each on a thread of its own: started, stopped and replaced
//! by the directory watcher and the Kafka Connect API. One failing never stops another; their
//! queues together stay under the process's limit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sluice_engine::Position;
use sluice_runtime::admin::{Attached, Directory, SignalQueue};
use sluice_runtime::status::{State, Status};
use sluice_runtime::{PipelinePlan, RunOptions};

use crate::import::Worker;
use crate::registry::{Pipeline, SinkSpec, SourceSpec, TransformSpec};

/// What the pipelines share (no `Debug`: the worker's settings may hold secrets).
#[derive(Clone)]
pub(crate) struct Settings {
    /// Where the API's connectors are kept (`connectors/<name>.json`) and their offsets
    /// (`pipelines/<name>/`).
    pub(crate) data_dir: PathBuf,
    /// The Kafka Connect worker's settings the API's connectors write with.
    pub(crate) worker: Worker,
    /// Bytes all running pipelines' queues may hold together.
    pub(crate) max_queue_bytes: u64,
}

/// What a pipeline should be doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum Target {
    Running,
    Paused,
    Stopped,
}

/// Where a pipeline is defined.
#[derive(Clone)]
pub(crate) enum Origin {
    /// A file of the watched directory.
    File(PathBuf),
    /// The API, with the connector's configuration as it was given.
    Api(BTreeMap<String, String>),
}

/// Without the configuration: it may hold secrets.
impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File(path) => f.debug_tuple("File").field(path).finish(),
            Origin::Api(_) => f.write_str("Api(..)"),
        }
    }
}

/// Why a request is refused: not found (404), in conflict (409), invalid (400), or what
/// it needed failed (500).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    NotFound(String),
    Conflict(String),
    Invalid(String),
    Failed(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotFound(m)
            | Refusal::Conflict(m)
            | Refusal::Invalid(m)
            | Refusal::Failed(m) => f.write_str(m),
        }
    }
}

/// One pipeline.
struct Managed {
    origin: Origin,
    /// Its pipeline file's text (an API connector's as imported).
    yaml: String,
    target: Target,
    status: Status,
    /// Bytes its queues may hold.
    queue_bytes: u64,
    running: Option<Running>,
}

/// A pipeline's thread.
struct Running {
    stop: tokio::sync::watch::Sender<bool>,
    thread: std::thread::JoinHandle<()>,
}

impl Running {
    /// Whether its thread still runs (a finished or failed pipeline's queues are gone).
    fn alive(&self) -> bool {
        !self.thread.is_finished()
    }

    /// Asks for a graceful stop and waits for it (the pipeline's `shutdown_timeout` bounds it).
    fn stop(self) {
        let _ = self.stop.send(true);
        if self.thread.join().is_err() {
            tracing::error!("A pipeline's thread panicked while stopping.");
        }
    }
}

/// What the API shows of a pipeline.
#[derive(Debug, Clone)]
pub(crate) struct View {
    pub(crate) origin: Origin,
    pub(crate) target: Target,
    pub(crate) state: State,
    pub(crate) trace: Option<String>,
}

/// The pipelines of one `sluice serve`.
pub(crate) struct Manager {
    settings: Settings,
    pipelines: Mutex<BTreeMap<String, Managed>>,
    /// Held by whatever changes pipelines (one change at a time; reading needs only the map).
    changing: Mutex<()>,
    /// Set once the server stops: nothing starts any more.
    closing: AtomicBool,
    directory: Directory,
}

/// A pipeline file's text, checked as `validate` checks it (and with no `admin` of its own),
/// or what is wrong with it (one line).
pub(crate) fn check(label: &Path, yaml: &str) -> Result<Pipeline, String> {
    let env = std::env::vars().collect();
    let config = sluice_engine::config::parse_pipeline::<SourceSpec, TransformSpec, SinkSpec>(
        label, yaml, env,
    )
    .map_err(|e| e.to_string())?;
    crate::registry::check_offsets(&config.offsets)
        .map_err(|e| format!("{}: {e}", label.display()))?;
    if config.admin.is_some() {
        return Err(format!("{}: `admin`: under `sluice serve` the server's endpoint (`--bind`) serves every pipeline: remove `admin` from the file", label.display()));
    }
    Ok(config)
}

/// A pipeline file's text as a plan, or what is wrong with it (one line).
fn plan_of(label: &Path, yaml: &str) -> Result<(Pipeline, PipelinePlan), String> {
    let config = check(label, yaml)?;
    let offsets = config.offsets.clone();
    let mut plan = PipelinePlan::from_config(config.clone());
    plan.offset_store = crate::registry::offset_store(&offsets)?;
    Ok((config, plan))
}

impl Manager {
    pub(crate) fn new(settings: Settings, directory: Directory) -> Self {
        Manager {
            settings,
            pipelines: Mutex::default(),
            changing: Mutex::default(),
            closing: AtomicBool::new(false),
            directory,
        }
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Managed>> {
        self.pipelines.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The right to change pipelines (one change at a time), unless the server is stopping.
    fn change(&self) -> Result<std::sync::MutexGuard<'_, ()>, Refusal> {
        let guard = self.changing.lock().unwrap_or_else(|p| p.into_inner());
        if self.closing.load(Ordering::Relaxed) {
            return Err(Refusal::Conflict("the server is stopping".into()));
        }
        Ok(guard)
    }

    /// The pipelines' names.
    pub(crate) fn names(&self) -> Vec<String> {
        self.map().keys().cloned().collect()
    }

    /// What the API shows of `name`.
    pub(crate) fn view(&self, name: &str) -> Option<View> {
        let map = self.map();
        let m = map.get(name)?;
        Some(View {
            origin: m.origin.clone(),
            target: m.target,
            state: m.status.state(),
            trace: m
                .status
                .last_error()
                .map(|e| format!("{}: {}", e.stage, e.message)),
        })
    }

    /// Where pipeline `name` comes from.
    pub(crate) fn origin_of(&self, name: &str) -> Option<Origin> {
        self.map().get(name).map(|m| m.origin.clone())
    }

    /// The name of the pipeline the file at `path` defines.
    pub(crate) fn name_of_file(&self, path: &Path) -> Option<String> {
        let map = self.map();
        map.iter()
            .find(|(_, m)| matches!(&m.origin, Origin::File(p) if p == path))
            .map(|(n, _)| n.clone())
    }

    /// Stops `name`'s thread, its entry staying in place meanwhile (the caller holds
    /// `changing`).
    fn stop_running(&self, name: &str) {
        let running = self.map().get_mut(name).and_then(|m| m.running.take());
        if let Some(running) = running {
            running.stop();
        }
    }

    /// Adds or replaces the pipeline `name` defined by `origin` as `yaml` (checked), and
    /// starts it unless it is paused or stopped (a new one: unless `initial` says so);
    /// `create`: only if there is none of that name. `Ok(true)`: it is new.
    pub(crate) fn put(
        &self,
        name: &str,
        (origin, yaml): (Origin, String),
        initial: Target,
        create: bool,
    ) -> Result<bool, Refusal> {
        let _changing = self.change()?;
        let label = label(&origin, name);
        let (config, plan) = plan_of(&label, &yaml).map_err(Refusal::Invalid)?;
        if config.name != name {
            return Err(Refusal::Invalid(format!(
                "{}: the pipeline is named `{}`, not `{name}`",
                label.display(),
                config.name
            )));
        }
        match self.origin_of(name) {
            Some(_) if create => {
                return Err(Refusal::Conflict(format!(
                    "Connector {name} already exists"
                )))
            }
            Some(old) if !same_origin(&old, &origin) => {
                return Err(Refusal::Conflict(format!(
                    "pipeline `{name}` already comes from {}",
                    describe(&old)
                )))
            }
            _ => {}
        }
        self.stop_running(name);
        let kept = (self.map().get(name)).map(|m| (m.target, m.status.clone(), m.yaml.is_empty()));
        let created = kept.is_none();
        // A file's pipeline (new, or its file did not load so far) paused or stopped through
        // the API before the server restarted.
        let kept = match (&origin, kept) {
            (Origin::File(_), None) => self.kept_target(name).map(|t| (t, Status::starting(name))),
            (Origin::File(_), Some((_, status, true))) => {
                self.kept_target(name).map(|t| (t, status))
            }
            (_, kept) => kept.map(|(target, status, _)| (target, status)),
        };
        let (target, status) = kept.unwrap_or_else(|| (initial, Status::starting(name)));
        let sinks: Vec<String> = config.sinks.iter().map(|s| s.name.clone()).collect();
        let queues = 1 + config.sinks.len() as u64;
        let mut managed = Managed {
            origin,
            yaml,
            target,
            status,
            queue_bytes: config.limits.max_queue_size_bytes.saturating_mul(queues),
            running: None,
        };
        if target == Target::Running {
            self.start(name, &mut managed, (plan, sinks));
        } else {
            self.attach(name, &managed, sinks);
        }
        self.map().insert(name.to_owned(), managed);
        self.keep(name);
        Ok(created)
    }

    /// Records a pipeline file that does not load, as a failed pipeline named after the file
    /// (`name`), unless a pipeline of that name exists.
    pub(crate) fn broken(&self, name: &str, path: &Path, error: &str) {
        let Ok(_changing) = self.change() else { return };
        let mut map = self.map();
        if map.contains_key(name) {
            return;
        }
        let status = Status::starting(name);
        status.failed("config", error.to_owned(), State::Failed, 0);
        let managed = Managed {
            origin: Origin::File(path.to_owned()),
            yaml: String::new(),
            target: Target::Running,
            status,
            queue_bytes: 0,
            running: None,
        };
        self.attach(name, &managed, Vec::new());
        map.insert(name.to_owned(), managed);
    }

    /// Stops and forgets `name` (its offsets stay where they are); `api`: only if it came
    /// from the API (else `409`).
    pub(crate) fn remove(&self, name: &str, api: bool) -> Result<(), Refusal> {
        let _changing = self.change()?;
        match self.origin_of(name) {
            None => return Err(not_found(name)),
            Some(Origin::File(path)) if api => {
                return Err(Refusal::Conflict(format!(
                    "Connector {name} is defined by the file {}: remove the file",
                    path.display()
                )))
            }
            _ => {}
        }
        self.stop_running(name);
        let removed = self.map().remove(name);
        self.directory
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        let forgotten = match removed.map(|m| m.origin) {
            Some(Origin::Api(_)) => super::saved::delete(&self.settings.data_dir, name),
            _ => super::saved::save_target(&self.settings.data_dir, name, Target::Running),
        };
        if let Err(e) = forgotten {
            tracing::error!(pipeline = name, error = %e, "Cannot forget what was kept of the pipeline.");
        }
        tracing::info!(pipeline = name, "Pipeline removed.");
        Ok(())
    }

    /// Moves `name` to `target`: stops it (paused, stopped) or starts it again from its
    /// committed position (running); `restart`: stops and starts it even when it runs.
    pub(crate) fn set_target(
        &self,
        name: &str,
        target: Target,
        restart: bool,
    ) -> Result<(), Refusal> {
        let _changing = self.change()?;
        let (yaml, origin, running) = match self.map().get_mut(name) {
            Some(m) => {
                m.target = target;
                (m.yaml.clone(), m.origin.clone(), m.running.is_some())
            }
            None => return Err(not_found(name)),
        };
        if restart || target != Target::Running {
            self.stop_running(name);
        }
        let result = match target {
            Target::Running if restart || !running => match plan_of(&label(&origin, name), &yaml) {
                Ok((config, plan)) => {
                    let sinks = config.sinks.iter().map(|s| s.name.clone()).collect();
                    let taken = self.map().remove(name);
                    if let Some(mut managed) = taken {
                        self.start(name, &mut managed, (plan, sinks));
                        self.map().insert(name.to_owned(), managed);
                    }
                    Ok(())
                }
                Err(e) => Err(Refusal::Invalid(e)),
            },
            Target::Running => Ok(()),
            Target::Paused | Target::Stopped => {
                let state = if target == Target::Paused {
                    State::Paused
                } else {
                    State::Stopped
                };
                if let Some(m) = self.map().get(name) {
                    m.status.set_state(state);
                }
                Ok(())
            }
        };
        self.keep(name);
        result
    }

    /// The committed position of `name`, from the offset store its pipeline names.
    pub(crate) fn committed(&self, name: &str) -> Result<Option<Position>, Refusal> {
        let store = self.offset_store(name)?;
        (store.load(name)).map_err(|e| Refusal::Failed(e.to_string()))
    }

    /// Sets (`Some`) or forgets (`None`: it starts as a new pipeline, with its snapshot) the
    /// committed position of `name`, which must be stopped (as Kafka Connect asks).
    pub(crate) fn set_committed(
        &self,
        name: &str,
        position: Option<&Position>,
    ) -> Result<(), Refusal> {
        // Opened first (a remote store may take a while), the state checked under the lock.
        let plan = self.offsets_plan(name)?;
        let store = (plan.open_offset_store()).map_err(|e| Refusal::Failed(e.to_string()))?;
        let _changing = self.change()?;
        match self.map().get(name) {
            None => return Err(not_found(name)),
            Some(m) if m.target == Target::Stopped && !m.running.as_ref().is_some_and(Running::alive) => {}
            Some(_) => return Err(Refusal::Invalid(format!("Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint"))),
        }
        // Nobody else (another process, another pipeline with the same data_dir) runs on it.
        let _held = (plan.lock_data_dir()).map_err(|e| Refusal::Invalid(e.to_string()))?;
        let done = match position {
            Some(position) => store.commit(name, position),
            None => store.reset(name),
        };
        done.map_err(|e| Refusal::Failed(e.to_string()))?;
        tracing::info!(pipeline = name, position = ?position.map(ToString::to_string), "Committed position changed through the API.");
        Ok(())
    }

    /// The offset store pipeline `name`'s configuration names.
    fn offset_store(
        &self,
        name: &str,
    ) -> Result<std::sync::Arc<dyn sluice_engine::offsets::OffsetStore>, Refusal> {
        (self.offsets_plan(name)?.open_offset_store()).map_err(|e| Refusal::Failed(e.to_string()))
    }

    /// Pipeline `name`'s plan, refused when it keeps no offsets between its runs.
    fn offsets_plan(&self, name: &str) -> Result<PipelinePlan, Refusal> {
        let (origin, yaml) = match self.map().get(name) {
            Some(m) => (m.origin.clone(), m.yaml.clone()),
            None => return Err(not_found(name)),
        };
        let (config, plan) = plan_of(&label(&origin, name), &yaml).map_err(Refusal::Invalid)?;
        if config.offsets.store == "memory" {
            return Err(Refusal::Invalid(format!(
                "pipeline `{name}` keeps its offsets in memory (`offsets.store: memory`): there are none to read or change between its runs"
            )));
        }
        Ok(plan)
    }

    /// Keeps an API connector's configuration and target, a file pipeline's target (its file
    /// has the rest); the caller holds `changing`.
    fn keep(&self, name: &str) {
        let dir = &self.settings.data_dir;
        let kept = match self.map().get(name) {
            Some(Managed {
                origin: Origin::Api(config),
                target,
                ..
            }) => super::saved::save(dir, name, &(config.clone(), *target)),
            Some(Managed {
                origin: Origin::File(_),
                target,
                ..
            }) => super::saved::save_target(dir, name, *target),
            None => return,
        };
        if let Err(e) = kept {
            tracing::error!(pipeline = name, error = %e, "Cannot keep the pipeline's state: it will not come back after a restart.");
        }
    }

    /// Forgets the kept targets of file pipelines not here after the first look at the
    /// directory (their file was removed or renamed while the server was down).
    pub(crate) fn prune_targets(&self) {
        let Ok(_changing) = self.change() else { return };
        let names: Vec<String> = (self.map().iter())
            .filter(|(_, m)| matches!(m.origin, Origin::File(_)))
            .map(|(n, _)| n.clone())
            .collect();
        for problem in super::saved::prune_targets(&self.settings.data_dir, &names) {
            tracing::error!("Cannot forget a kept pipeline state: {problem}");
        }
    }

    /// The target a file pipeline was left in by the API, if not running.
    fn kept_target(&self, name: &str) -> Option<Target> {
        match super::saved::kept_target(&self.settings.data_dir, name) {
            Ok(kept) => kept,
            Err(e) => {
                tracing::error!(pipeline = name, error = %e, "Cannot read the pipeline's kept state: it runs.");
                None
            }
        }
    }

    /// Stops every pipeline (all asked at once, then each waited for); nothing starts after.
    pub(crate) fn shutdown(&self) {
        let _changing = self.changing.lock().unwrap_or_else(|p| p.into_inner());
        self.closing.store(true, Ordering::Relaxed);
        let running: Vec<Running> = self
            .map()
            .values_mut()
            .filter_map(|m| m.running.take())
            .collect();
        for r in &running {
            let _ = r.stop.send(true);
        }
        for r in running {
            r.stop();
        }
    }

    /// Publishes `managed` on the endpoint (signals go nowhere while it is not running).
    fn attach(&self, name: &str, managed: &Managed, sinks: Vec<String>) -> SignalQueue {
        let (attached, queue) = Attached::new(sinks, managed.status.clone());
        self.directory
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), attached);
        queue
    }

    /// Starts `managed` on a thread of its own, unless the queues of the running pipelines
    /// leave no room for its own (then it is failed, saying so).
    fn start(&self, name: &str, managed: &mut Managed, (plan, sinks): (PipelinePlan, Vec<String>)) {
        let others: u64 = (self.map().iter())
            .filter(|(n, m)| *n != name && m.running.as_ref().is_some_and(Running::alive))
            .fold(0u64, |sum, (_, m)| sum.saturating_add(m.queue_bytes));
        if others.saturating_add(managed.queue_bytes) > self.settings.max_queue_bytes {
            let message = format!(
                "its queues may hold {} bytes and the running pipelines' {others}: over the server's --max-queue-bytes {}; lower its `max_queue_size_bytes` or raise the limit",
                managed.queue_bytes, self.settings.max_queue_bytes
            );
            tracing::error!(pipeline = name, "Not started: {message}");
            managed.status.failed("serve", message, State::Failed, 0);
            self.attach(name, managed, sinks);
            return;
        }
        let signals = self.attach(name, managed, sinks);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let options = RunOptions {
            stop: Some(stopped),
            ..RunOptions::default()
        };
        let status = managed.status.clone();
        let pipeline = name.to_owned();
        let spawned = std::thread::Builder::new()
            .name(format!("pipeline {name}"))
            .spawn(move || {
                let span = tracing::info_span!("pipeline", name = %pipeline);
                let _entered = span.enter();
                match sluice_runtime::run_attached(plan, options, (status, signals)) {
                    Ok(report) => tracing::info!(events = report.events, "Pipeline stopped."),
                    Err(e) => tracing::error!(error = %e, "Pipeline failed; the others go on."),
                }
            });
        match spawned {
            Ok(thread) => managed.running = Some(Running { stop, thread }),
            Err(e) => {
                let message = format!("cannot start a thread: {e}");
                managed.status.failed("serve", message, State::Failed, 0);
            }
        }
    }
}

/// What a pipeline's errors are said to come from: its file, or `connector <name>`.
fn label(origin: &Origin, name: &str) -> PathBuf {
    match origin {
        Origin::File(path) => path.clone(),
        Origin::Api(_) => PathBuf::from(format!("connector {name}")),
    }
}

pub(crate) fn same_origin(a: &Origin, b: &Origin) -> bool {
    match (a, b) {
        (Origin::File(a), Origin::File(b)) => a == b,
        (Origin::Api(_), Origin::Api(_)) => true,
        _ => false,
    }
}

/// Where a pipeline comes from, in words.
pub(crate) fn describe(origin: &Origin) -> String {
    match origin {
        Origin::File(path) => format!("the file {}", path.display()),
        Origin::Api(_) => "the REST API".into(),
    }
}

fn not_found(name: &str) -> Refusal {
    Refusal::NotFound(format!("Connector {name} not found"))
}
