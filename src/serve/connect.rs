//! Kafka Connect's REST API, the part users' tooling calls, over `sluice serve`'s pipelines:
//! Debezium connector configurations are taken unchanged (`sluice import`'s mapping), and
//! pipelines from the watched directory show as connectors too (their configuration is their
//! file). Bodies and status codes are Kafka Connect 3.9's; errors are
//! `{"error_code", "message"}`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};
use sluice_engine::config::ComponentSpec;
use sluice_runtime::admin::http::{self, Answer};
use sluice_runtime::admin::{Extension, Request};
use sluice_runtime::status::State;

use super::manager::{Manager, Origin, Refusal, Target, View};
use super::saved;
use crate::registry::SourceSpec;

/// The Kafka Connect API level `GET /` reports.
const CONNECT_VERSION: &str = "3.9.0";

/// What a secret's value is shown as.
const HIDDEN: &str = "[hidden]";

/// The API over a server's pipelines.
pub(crate) struct Connect {
    manager: Arc<Manager>,
    /// `host:port` of the endpoint (Kafka Connect's `worker_id`).
    worker_id: String,
    /// Held by the calls that read a connector's configuration to write it back (`PUT` and
    /// `PATCH` config) and those that add or remove one: one at a time.
    writing: std::sync::Mutex<()>,
}

pub(super) fn error(status: u16, message: impl Into<String>) -> Answer {
    let message: String = message.into();
    http::json(status, &json!({"error_code": status, "message": message}))
}

pub(super) fn refused(refusal: Refusal) -> Answer {
    match refusal {
        Refusal::NotFound(m) => error(404, m),
        Refusal::Conflict(m) => error(409, m),
        Refusal::Invalid(m) => error(400, m),
        Refusal::Failed(m) => error(500, m),
    }
}

fn empty(status: u16) -> Answer {
    (status, "application/json", String::new())
}

impl Extension for Connect {
    fn answer(&self, request: &Request) -> Option<Answer> {
        let path = request.target.trim_end_matches('/');
        let parts: Vec<&str> = path.split('/').skip(1).collect();
        let method = request.method.as_str();
        let answer = match (parts.as_slice(), method) {
            ([] | [""], "GET") => http::json(
                200,
                &json!({"version": CONNECT_VERSION, "commit": concat!("sluice-", env!("CARGO_PKG_VERSION")), "kafka_cluster_id": "sluice"}),
            ),
            (["connectors"], "GET") => self.list(request),
            (["connectors"], "POST") => self.create(&request.body),
            (["connector-plugins"], "GET") => plugins(),
            (["connector-plugins", plugin, "config", "validate"], "PUT") => {
                validate(plugin, &request.body)
            }
            (["connectors", name, rest @ ..], _) => self.connector(name, rest, request),
            ([] | [""] | ["connectors"] | ["connector-plugins"], _)
            | (["connector-plugins", _, "config", "validate"], _) => {
                error(405, "HTTP 405 Method Not Allowed")
            }
            _ => return None,
        };
        Some(answer)
    }
}

impl Connect {
    pub(crate) fn new(manager: Arc<Manager>, worker_id: String) -> Self {
        Connect {
            manager,
            worker_id,
            writing: std::sync::Mutex::default(),
        }
    }

    /// The API's connectors kept by an earlier run of the server, registered again.
    pub(crate) fn restore(&self, dir: &std::path::Path) {
        let (found, problems) = saved::load(dir);
        for problem in problems {
            tracing::error!("Kept connector not restored: {problem}");
        }
        for (name, config, state) in found {
            match self.register(&name, config, (state, true)) {
                Ok(_) => tracing::info!(connector = %name, "Kept connector restored."),
                Err((_, _, body)) => {
                    tracing::error!(connector = %name, "Kept connector not restored: {}", body.trim())
                }
            }
        }
    }

    /// `/connectors/{name}/...`.
    fn connector(&self, name: &str, rest: &[&str], request: &Request) -> Answer {
        let method = request.method.as_str();
        match (rest, method) {
            ([], "GET") => self.info(name),
            ([], "DELETE") => self.delete(name),
            (["config"], "GET") => match self.manager.view(name) {
                Some(view) => http::json(200, &Value::Object(shown_config(name, &view.origin))),
                None => error(404, format!("Connector {name} not found")),
            },
            (["config"], "PUT") => self.put_config(name, &request.body),
            (["config"], "PATCH") => self.patch_config(name, &request.body),
            (["status"], "GET") => match self.manager.view(name) {
                Some(view) => http::json(200, &self.status(name, &view, false)),
                None => error(404, format!("No status found for connector {name}")),
            },
            (["tasks"], "GET") => match self.manager.view(name) {
                Some(view) => {
                    let config = Value::Object(shown_config(name, &view.origin));
                    http::json(
                        200,
                        &json!([{"id": {"connector": name, "task": 0}, "config": config}]),
                    )
                }
                None => error(404, format!("Connector {name} not found")),
            },
            (["tasks", "0", "status"], "GET") => match self.manager.view(name) {
                Some(view) => http::json(200, &self.task(&view, false)),
                None => error(404, format!("No status found for task {name}-0")),
            },
            (["tasks", id, "status"], "GET") => {
                error(404, format!("No status found for task {name}-{id}"))
            }
            (["pause"], "PUT") => self.target(name, Target::Paused, 202),
            (["resume"], "PUT") => self.target(name, Target::Running, 202),
            (["stop"], "PUT") => self.target(name, Target::Stopped, 204),
            (["restart"], "POST") => self.restart(name, request),
            (["tasks", "0", "restart"], "POST") => match self.manager.view(name) {
                Some(view) => {
                    let result = self.manager.set_target(name, view.target, true);
                    result.map_or_else(refused, |()| empty(204))
                }
                None => error(404, format!("Unknown connector: {name}")),
            },
            (["tasks", id, "restart"], "POST") => error(404, format!("Unknown task: {name}-{id}")),
            (["offsets"], _) => super::offsets::answer(&self.manager, name, method, &request.body),
            ([] | ["config" | "status" | "tasks" | "pause" | "resume" | "stop" | "restart"], _) => {
                error(405, "HTTP 405 Method Not Allowed")
            }
            _ => error(404, "HTTP 404 Not Found"),
        }
    }

    /// `GET /connectors[?expand=status|info]`.
    fn list(&self, request: &Request) -> Answer {
        let expand: Vec<&str> = (request.query.split('&'))
            .filter_map(|p| p.strip_prefix("expand="))
            .collect();
        let names = self.manager.names();
        if expand.is_empty() {
            return http::json(200, &json!(names));
        }
        let mut out = serde_json::Map::new();
        for name in names {
            let Some(view) = self.manager.view(&name) else {
                continue;
            };
            let mut entry = serde_json::Map::new();
            if expand.contains(&"status") {
                entry.insert("status".into(), self.status(&name, &view, false));
            }
            if expand.contains(&"info") {
                entry.insert("info".into(), info_of(&name, &view));
            }
            out.insert(name, Value::Object(entry));
        }
        http::json(200, &Value::Object(out))
    }

    fn info(&self, name: &str) -> Answer {
        match self.manager.view(name) {
            Some(view) => http::json(200, &info_of(name, &view)),
            None => error(404, format!("Connector {name} not found")),
        }
    }

    /// `POST /connectors`: `{"name", "config", "initial_state"}`.
    fn create(&self, body: &[u8]) -> Answer {
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let request: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return error(400, format!("the body is not JSON: {e}")),
        };
        let name = request["name"].as_str().unwrap_or("").trim().to_owned();
        let Some(config) = request["config"].as_object() else {
            return error(
                400,
                "the body needs `config`: {\"name\": .., \"config\": {..}}",
            );
        };
        let initial = match request["initial_state"].as_str() {
            None | Some("RUNNING") => Target::Running,
            Some("PAUSED") => Target::Paused,
            Some("STOPPED") => Target::Stopped,
            Some(other) => {
                return error(
                    400,
                    format!("`initial_state` {other}: RUNNING, PAUSED or STOPPED"),
                )
            }
        };
        let config = crate::import::props_of(config);
        match self.register(&name, config, (initial, true)) {
            Ok(_) => self.created(&name, 201),
            Err(answer) => answer,
        }
    }

    /// `PUT /connectors/{name}/config`: 201 when new, 200 when changed.
    fn put_config(&self, name: &str, body: &[u8]) -> Answer {
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let config: serde_json::Map<String, Value> = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return error(400, format!("the body is not a JSON object: {e}")),
        };
        let mut config = crate::import::props_of(&config);
        if let Some(view) = self.manager.view(name) {
            match view.origin {
                Origin::File(path) => {
                    return error(
                        409,
                        format!(
                            "Connector {name} is defined by the file {}: edit the file",
                            path.display()
                        ),
                    )
                }
                // A secret shown hidden and sent back unchanged keeps its value.
                Origin::Api(old) => {
                    for (k, v) in config.iter_mut() {
                        if v == HIDDEN {
                            if let Some(kept) = old.get(k) {
                                v.clone_from(kept);
                            }
                        }
                    }
                }
            }
        }
        match self.register(name, config, (Target::Running, false)) {
            Ok(true) => self.created(name, 201),
            Ok(false) => self.created(name, 200),
            Err(answer) => answer,
        }
    }

    /// `PATCH /connectors/{name}/config` (Kafka Connect 3.9): the given properties replace
    /// theirs, a `null` removes one, the rest stay; the connector restarts from its position.
    fn patch_config(&self, name: &str, body: &[u8]) -> Answer {
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let patch: serde_json::Map<String, Value> = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return error(400, format!("the body is not a JSON object: {e}")),
        };
        let mut config = match self.manager.view(name).map(|v| v.origin) {
            None => return error(404, format!("Connector {name} not found")),
            Some(Origin::File(path)) => {
                return error(
                    409,
                    format!(
                        "Connector {name} is defined by the file {}: edit the file",
                        path.display()
                    ),
                )
            }
            Some(Origin::Api(config)) => config,
        };
        let (removed, set): (Vec<_>, Vec<_>) = patch.into_iter().partition(|(_, v)| v.is_null());
        for (key, _) in removed {
            config.remove(&key);
        }
        let set: serde_json::Map<String, Value> = set.into_iter().collect();
        for (key, value) in crate::import::props_of(&set) {
            // A secret shown hidden and sent back unchanged keeps its value.
            if value != HIDDEN || !config.contains_key(&key) {
                config.insert(key, value);
            }
        }
        match self.register(name, config, (Target::Running, false)) {
            Ok(_) => self.created(name, 200),
            Err(answer) => answer,
        }
    }

    /// Checks and (re)starts connector `name` (`create`: only a new one), which keeps its
    /// configuration.
    fn register(
        &self,
        name: &str,
        mut config: BTreeMap<String, String>,
        (initial, create): (Target, bool),
    ) -> Result<bool, Answer> {
        if let Some(given) = config.get("name") {
            if given != name {
                return Err(error(400, format!("Connector name configuration ({given}) doesn't match connector name in the URL ({name})")));
            }
        }
        saved::check_name(name).map_err(|e| error(400, e))?;
        config.insert("name".into(), name.to_owned());
        let settings = self.manager.settings();
        let data_dir = settings.data_dir.join("pipelines").join(name);
        let mut props = config.clone();
        props.remove("name");
        let header = format!("Connector {name} registered through the REST API");
        let invalid = |e: String| {
            error(400, format!("Connector configuration is invalid and contains the following 1 error(s):\n{}\nYou can also find the above list of errors at the endpoint `/connector-plugins/{{connectorType}}/config/validate`", strip_location(&e, name)))
        };
        let yaml = crate::import::yaml(name, props, &settings.worker, (&header, Some(&data_dir)))
            .map_err(invalid)?;
        self.manager
            .put(name, (Origin::Api(config), yaml), initial, create)
            .map_err(|r| match r {
                Refusal::Invalid(e) => invalid(e),
                other => refused(other),
            })
    }

    /// The connector's info, as a creation answers it.
    fn created(&self, name: &str, status: u16) -> Answer {
        match self.manager.view(name) {
            Some(view) => http::json(status, &info_of(name, &view)),
            None => error(500, format!("Connector {name} went away")),
        }
    }

    fn delete(&self, name: &str) -> Answer {
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        match self.manager.remove(name, true) {
            Ok(()) => empty(204),
            Err(r) => refused(r),
        }
    }

    /// Pause, resume, stop.
    fn target(&self, name: &str, target: Target, status: u16) -> Answer {
        if self.manager.view(name).is_none() {
            return error(404, format!("Unknown connector {name}"));
        }
        match self.manager.set_target(name, target, false) {
            Ok(()) => empty(status),
            Err(r) => refused(r),
        }
    }

    /// `POST /connectors/{name}/restart[?includeTasks=..&onlyFailed=..]`: the pipeline stops
    /// and starts again from its committed position (a paused or stopped one stays so).
    fn restart(&self, name: &str, request: &Request) -> Answer {
        let Some(view) = self.manager.view(name) else {
            return error(404, format!("Unknown connector: {name}"));
        };
        let flag = |p: &str| {
            request
                .param(p)
                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        };
        let (tasks, only_failed) = (flag("includeTasks"), flag("onlyFailed"));
        let restarting =
            view.target == Target::Running && (!only_failed || view.state == State::Failed);
        let answer = self.status(name, &view, restarting);
        if restarting {
            if let Err(r) = self.manager.set_target(name, Target::Running, true) {
                return refused(r);
            }
        }
        if tasks || only_failed {
            http::json(202, &answer)
        } else {
            empty(204)
        }
    }

    /// `GET /connectors/{name}/status`; `restarting`: as a restart answers it.
    fn status(&self, name: &str, view: &View, restarting: bool) -> Value {
        let state = if restarting {
            "RESTARTING"
        } else {
            state_of(view)
        };
        let tasks = if view.target == Target::Stopped {
            json!([])
        } else {
            json!([self.task(view, restarting)])
        };
        json!({
            "name": name,
            "connector": {"state": state, "worker_id": self.worker_id},
            "tasks": tasks,
            "type": "source",
        })
    }

    /// The one task's status.
    fn task(&self, view: &View, restarting: bool) -> Value {
        let state = if restarting {
            "RESTARTING"
        } else {
            state_of(view)
        };
        let mut task = json!({"id": 0, "state": state, "worker_id": self.worker_id});
        if state == "FAILED" {
            if let Some(trace) = &view.trace {
                task["trace"] = json!(trace);
            }
        }
        task
    }
}

/// Kafka Connect's name of where a pipeline is.
fn state_of(view: &View) -> &'static str {
    match (view.target, view.state) {
        (Target::Paused, _) => "PAUSED",
        (Target::Stopped, _) => "STOPPED",
        (_, State::Failed) => "FAILED",
        (_, State::Restarting) => "RESTARTING",
        (_, State::Running | State::Stopping) => "RUNNING",
        (_, State::Starting | State::Stopped | State::Paused) => "UNASSIGNED",
    }
}

/// `{"name", "config", "tasks", "type"}`.
fn info_of(name: &str, view: &View) -> Value {
    let tasks = if view.target == Target::Stopped {
        json!([])
    } else {
        json!([{"connector": name, "task": 0}])
    };
    json!({"name": name, "config": Value::Object(shown_config(name, &view.origin)), "tasks": tasks, "type": "source"})
}

/// The configuration as shown: the API's as given, secrets hidden (a `${...}` reference holds
/// none and shows as it is); a file's pipeline as its file.
fn shown_config(name: &str, origin: &Origin) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    match origin {
        Origin::File(path) => {
            out.insert("name".into(), json!(name));
            out.insert(
                "sluice.pipeline.file".into(),
                json!(path.display().to_string()),
            );
        }
        Origin::Api(config) => {
            for (k, v) in config {
                out.insert(k.clone(), json!(redacted(k, v)));
            }
        }
    }
    out
}

/// `value` of property `key` as it may be shown.
pub(crate) fn redacted<'a>(key: &str, value: &'a str) -> &'a str {
    let lower = key.to_ascii_lowercase();
    let secret = sluice_engine::config::is_secret_property(key)
        || ["jaas", "private.key", "api.key", "apikey"]
            .iter()
            .any(|s| lower.contains(s));
    // A reference holds no secret; its default (`${VAR:-default}`) may.
    let reference = value.starts_with("${")
        && value.ends_with('}')
        && value.matches("${").count() == 1
        && !value.contains(":-");
    if secret && !reference && !value.is_empty() {
        HIDDEN
    } else {
        value
    }
}

/// `GET /connector-plugins`: Debezium's connectors this build has a source for.
fn plugins() -> Answer {
    let list: Vec<Value> = (crate::import::connectors().iter())
        .filter(|(_, source)| <SourceSpec as ComponentSpec>::KINDS.contains(source))
        .map(|(class, _)| json!({"class": class, "type": "source", "version": env!("CARGO_PKG_VERSION")}))
        .collect();
    http::json(200, &Value::Array(list))
}

/// `PUT /connector-plugins/{plugin}/config/validate`.
fn validate(plugin: &str, body: &[u8]) -> Answer {
    let config: serde_json::Map<String, Value> = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return error(400, format!("the body is not a JSON object: {e}")),
    };
    let config = crate::import::props_of(&config);
    let Some(class) = config.get("connector.class").cloned() else {
        return error(400, "Connector config contains no connector type");
    };
    let short = |c: &str| {
        let c = c.rsplit('.').next().unwrap_or(c);
        c.strip_suffix("Connector").unwrap_or(c).to_owned()
    };
    if !short(&class).ends_with(&short(plugin)) {
        return error(
            400,
            format!("Included connector type {class} does not match request type {plugin}"),
        );
    }
    let name = config
        .get("name")
        .cloned()
        .unwrap_or_else(|| "validate".into());
    let mut props = config.clone();
    props.remove("name");
    let worker = crate::import::Worker {
        bootstrap: "localhost:9092".into(),
        ..Default::default()
    };
    let problem = crate::import::yaml(&name, props, &worker, ("Validation", None))
        .and_then(|yaml| {
            super::manager::check(
                &std::path::PathBuf::from(format!("connector {name}")),
                &yaml,
            )
            .map(|_| ())
        })
        .err()
        .map(|e| strip_location(&e, &name));
    let blamed = problem.as_deref().map(|p| blame(p, &config));
    let mut configs: Vec<Value> = (config.iter())
        .map(|(k, v)| {
            config_info(
                k,
                Some(redacted(k, v)),
                blamed
                    .as_ref()
                    .filter(|(b, _)| b == k)
                    .map(|(_, m)| m.as_str()),
            )
        })
        .collect();
    if let Some((key, message)) = &blamed {
        if !config.contains_key(key) {
            configs.push(config_info(key, None, Some(message)));
        }
    }
    http::json(
        200,
        &json!({
            "name": class,
            "error_count": usize::from(problem.is_some()),
            "groups": ["Common"],
            "configs": configs,
        }),
    )
}

/// One property's entry of a validation.
fn config_info(key: &str, value: Option<&str>, error: Option<&str>) -> Value {
    json!({
        "definition": {"name": key, "type": "STRING", "required": false, "default_value": null,
            "importance": "MEDIUM", "documentation": "", "group": "Common", "width": "NONE",
            "display_name": key, "dependents": [], "order": -1},
        "value": {"name": key, "value": value, "recommended_values": [],
            "errors": error.map_or_else(Vec::new, |e| vec![e.to_owned()]), "visible": true},
    })
}

/// The property a problem is about: the longest given key it names in backticks, else the
/// first name in backticks, else `connector.class`.
fn blame(problem: &str, config: &BTreeMap<String, String>) -> (String, String) {
    let named = (config.keys())
        .filter(|k| problem.contains(&format!("`{k}`")) || problem.contains(&format!(".{k}`")))
        .max_by_key(|k| k.len())
        .cloned();
    let first = problem.split('`').nth(1).map(str::to_owned);
    let key = named.or(first).unwrap_or_else(|| "connector.class".into());
    (key, problem.to_owned())
}

/// `problem` without the location in the generated pipeline file (meaningless to the API).
fn strip_location(problem: &str, name: &str) -> String {
    let rest = problem
        .strip_prefix(&format!("connector {name}:"))
        .unwrap_or(problem);
    let mut parts = rest.splitn(3, ':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(l), Some(c), Some(tail))
            if l.trim().parse::<u64>().is_ok() && c.trim().parse::<u64>().is_ok() =>
        {
            tail.trim_start().to_owned()
        }
        _ => rest.trim_start().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_hidden_and_references_shown() {
        assert_eq!(redacted("database.password", "pw"), HIDDEN);
        assert_eq!(redacted("database.password", "${PGPASS}"), "${PGPASS}");
        assert_eq!(redacted("database.password", "${A}${B}"), HIDDEN);
        assert_eq!(redacted("database.password", "${PGPASS:-hunter2}"), HIDDEN);
        assert_eq!(redacted("sasl.jaas.config", "x"), HIDDEN);
        assert_eq!(redacted("database.user", "postgres"), "postgres");
        assert_eq!(redacted("database.password", ""), "");
    }

    #[test]
    fn problems_are_blamed_on_their_property() {
        let config: BTreeMap<String, String> = [("database.port", "x"), ("connector.class", "c")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (key, _) = blame("`source.database.port`: invalid digit", &config);
        assert_eq!(key, "database.port");
        let (key, _) = blame("missing field `database.hostname`", &config);
        assert_eq!(key, "database.hostname");
        assert_eq!(blame("nothing named", &config).0, "connector.class");
        assert_eq!(
            strip_location("connector c:5:3: `source.x`: bad", "c"),
            "`source.x`: bad"
        );
        assert_eq!(strip_location("`x`: bad", "c"), "`x`: bad");
    }
}
