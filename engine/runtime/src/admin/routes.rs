//! The engine's routes: health, metrics, the page, and each pipeline's status, signals and tap.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use tokio::sync::{mpsc, Mutex};

use super::http::{json, plain, Answer, Request};
use super::SignalQueue;
use crate::status::{State, Status};

/// A pipeline as the endpoint reaches it.
#[derive(Clone)]
pub struct Attached {
    /// Its sinks, by name (what a tap may name).
    pub sinks: Vec<String>,
    /// Where its signals go.
    pub signals: mpsc::Sender<String>,
    /// Its status.
    pub status: Status,
}

impl Attached {
    /// A pipeline's entry and the queue its source reads the signals from.
    pub fn new(sinks: Vec<String>, status: Status) -> (Self, SignalQueue) {
        let (tx, rx) = mpsc::channel::<String>(64);
        let attached = Attached {
            sinks,
            signals: tx,
            status,
        };
        (attached, Arc::new(Mutex::new(rx)))
    }
}

/// The pipelines an endpoint serves, by name.
pub type Directory = Arc<RwLock<BTreeMap<String, Attached>>>;

/// Routes beyond the engine's own (`sluice serve`'s Kafka Connect API).
pub trait Extension: Send + Sync + 'static {
    /// The answer to `request`, or `None` when it is not one of these routes either. Called on
    /// a thread that may block (stopping a pipeline waits for it).
    fn answer(&self, request: &Request) -> Option<Answer>;
}

/// What the routes need.
pub(super) struct Routes {
    /// The bearer token requests must carry (`None`: none asked for).
    pub(super) token: Option<String>,
    /// The address listened on, as configured (a `Host` it may be asked by).
    pub(super) bind: String,
    /// The pipelines served.
    pub(super) pipelines: Directory,
    /// `sluice run`'s one pipeline (`None`: `sluice serve`'s many).
    pub(super) single: Option<String>,
    /// Further routes.
    pub(super) extension: Option<Arc<dyn Extension>>,
    pub(super) metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

/// What a request under `/pipelines/` asks for.
pub(super) enum Under<'a> {
    Status(&'a str),
    Signals(&'a str),
    Tap(&'a str),
}

/// The pipeline route `target` names (`None`: not under `/pipelines/`).
pub(super) fn under(target: &str) -> Option<Under<'_>> {
    let rest = target.strip_prefix("/pipelines/")?;
    Some(if let Some(name) = rest.strip_suffix("/signals") {
        Under::Signals(name)
    } else if let Some(name) = rest.strip_suffix("/tap") {
        Under::Tap(name)
    } else {
        Under::Status(rest)
    })
}

impl Routes {
    /// Pipeline `name`'s entry.
    pub(super) fn pipeline(&self, name: &str) -> Option<Attached> {
        let pipelines = self.pipelines.read().unwrap_or_else(|p| p.into_inner());
        pipelines.get(name).cloned()
    }

    fn all(&self) -> Vec<(String, Attached)> {
        let pipelines = self.pipelines.read().unwrap_or_else(|p| p.into_inner());
        pipelines
            .iter()
            .map(|(n, a)| (n.clone(), a.clone()))
            .collect()
    }

    fn routes_line(&self) -> String {
        let one = self.single.as_deref().unwrap_or("<name>");
        format!("no such route: GET /, /metrics, /health/live, /health/ready, /pipelines, /pipelines/{one}, /pipelines/{one}/tap; POST /pipelines/{one}/signals")
    }
}

/// The engine's answer to `request` (`None`: not an engine route).
pub(super) fn route(routes: &Routes, request: &Request) -> Option<Answer> {
    let (method, target) = (request.method.as_str(), request.target.as_str());
    if let Some(under) = under(target) {
        let name = match &under {
            Under::Status(n) | Under::Signals(n) | Under::Tap(n) => *n,
        };
        let Some(pipeline) = routes.pipeline(name) else {
            return Some(plain(404, format!("no pipeline `{name}` here")));
        };
        return Some(match under {
            Under::Signals(_) if method != "POST" => {
                plain(405, format!("use POST /pipelines/{name}/signals"))
            }
            Under::Signals(_) => queue_signal(&pipeline, &request.body),
            _ if method != "GET" => plain(405, format!("use GET {target}")),
            _ => json(200, &pipeline.status.json()),
        });
    }
    let known = [
        "/",
        "/metrics",
        "/health/live",
        "/health/ready",
        "/pipelines",
    ];
    if !known.contains(&target) {
        return match routes.extension {
            Some(_) => None,
            None => Some(plain(404, routes.routes_line())),
        };
    }
    // Kafka Connect's `GET /` (its version) is for clients; browsers get the page.
    if target == "/" && routes.extension.is_some() && !request.wants_html() {
        return None;
    }
    if method != "GET" {
        return Some(plain(405, format!("use GET {target}")));
    }
    Some(match target {
        "/metrics" => match &routes.metrics {
            Some(handle) => {
                // Every pipeline's recorder is up to date with the batches passed so far.
                for (_, attached) in routes.all() {
                    attached.status.sync_metrics();
                }
                (200, "text/plain; version=0.0.4", handle.render())
            }
            None => plain(503, "another metrics recorder is installed in this process"),
        },
        "/" => (
            200,
            "text/html; charset=utf-8",
            page(routes.single.as_deref().unwrap_or("")),
        ),
        "/health/live" => json(200, &serde_json::json!({"status": "UP", "checks": []})),
        "/health/ready" => ready(routes),
        _ => {
            let all: Vec<serde_json::Value> =
                routes.all().iter().map(|(_, a)| a.status.json()).collect();
            json(200, &serde_json::Value::Array(all))
        }
    })
}

/// `/health/ready`: the pipeline runs, has reached its database and writes; `sluice serve`:
/// the server answers, with a check per pipeline that should run (paused and stopped ones are
/// left out) saying whether it does.
fn ready(routes: &Routes) -> Answer {
    let mut checks = Vec::new();
    let mut all_up = true;
    for (name, pipeline) in routes.all() {
        let (up, mut data) = pipeline.status.readiness();
        let state = data.get("state").cloned();
        let resting = [State::Paused, State::Stopped]
            .iter()
            .any(|s| serde_json::to_value(s).ok() == state);
        if routes.single.is_none() && resting {
            continue;
        }
        all_up &= up;
        // Behind a token the health check answers anyone: the sinks' names, not their errors.
        if routes.token.is_some() {
            if let Some(failing) = data
                .get_mut("failing_sinks")
                .and_then(|f| f.as_object_mut())
            {
                failing
                    .values_mut()
                    .for_each(|v| *v = serde_json::Value::Bool(true));
            }
        }
        let check_name = if routes.single.is_some() {
            "pipeline".to_owned()
        } else {
            format!("pipeline:{name}")
        };
        checks.push(serde_json::json!({"name": check_name, "status": if up { "UP" } else { "DOWN" }, "data": data}));
    }
    // Many pipelines: the server is ready whatever one of them does (a load balancer in front
    // of its API must not drop it for a failed pipeline); each check says how its pipeline is.
    let all_up = all_up || routes.single.is_none();
    let status = if all_up { "UP" } else { "DOWN" };
    let body = serde_json::json!({"status": status, "checks": checks});
    json(if all_up { 200 } else { 503 }, &body)
}

/// Queues a signal request's body for the pipeline's source.
fn queue_signal(pipeline: &Attached, body: &[u8]) -> Answer {
    let line = match signal(body) {
        Ok(line) => line,
        Err((status, reason)) => return plain(status, reason),
    };
    match pipeline.signals.try_send(line) {
        Ok(()) => plain(202, "signal queued"),
        Err(mpsc::error::TrySendError::Full(_)) => {
            plain(503, "too many signals waiting: retry later")
        }
        Err(mpsc::error::TrySendError::Closed(_)) => plain(503, "the pipeline is not running"),
    }
}

/// The status page; `name`: the pipeline it shows (empty: it lists the pipelines and shows
/// the one picked).
pub(super) fn page(name: &str) -> String {
    // A JavaScript string literal that cannot end the script element.
    let literal = serde_json::to_string(name)
        .unwrap_or_else(|_| "\"\"".into())
        .replace('<', "\\u003c");
    include_str!("page/status.html").replace("\"__PIPELINE__\"", &literal)
}

/// A signal request's body as the line to queue.
fn signal(body: &[u8]) -> Result<String, (u16, String)> {
    let bad = |reason: &str| (400, reason.to_owned());
    let text = std::str::from_utf8(body).map_err(|_| bad("the body is not UTF-8"))?;
    super::check_signal(text).map_err(|e| bad(&e))?;
    Ok(text.replace(['\r', '\n'], " "))
}
