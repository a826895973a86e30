//! The admin endpoint (`admin: { bind: 127.0.0.1:8083 }`; off by default), HTTP/1.1:
//!
//! - `POST /pipelines/{name}/signals` with a Debezium signal as the JSON body (`{"id": ..,
//!   "type": .., "data": {..}}`), answered `202` once the source has it queued (the source
//!   reads queued signals through [`crate::SourceContext::external_signals`]);
//! - `GET /pipelines/{name}`: the pipeline's status as JSON ([`Status`]);
//! - `GET /health/live` (the process answers) and `GET /health/ready` (the pipeline runs and no
//!   sink's writes are failing: `503` while it starts, restarts after a failure, retries a
//!   sink, stops or has failed), as Quarkus' health checks answer them in Debezium Server
//!   (`{"status": "UP"|"DOWN", "checks": [...]}`);
//! - `GET /`: a status page (plain HTML and a script that reads `/pipelines/{name}` every
//!   second: state, throughput over the last five minutes, snapshot progress, errors);
//! - `GET /metrics`: the process's metrics in Prometheus' text format;
//! - `GET /pipelines/{name}/tap?sink=..&topic=..&limit=..`: the events the sinks are handed,
//!   after their transforms, one JSON line each as they come (`sluice tap`; [`super::tap`]).
//!
//! Access: the endpoint listens where `bind` says; an address other than this machine's own
//! (`127.0.0.1`, `::1`, `localhost`) needs a `token` (or `token.file`), and then every request but
//! the health checks carries `Authorization: Bearer <token>` (`401` without it). A `POST` must
//! say `content-type: application/json` (`415`), so that no web page can post a form to it.
//! Nothing answered holds a secret (the status has no configuration).
//!
//! The server reads one request per connection by hand (request line, headers,
//! `Content-Length` body, 64 KiB at most) rather than pulling in a web framework; anything else
//! gets a plain status line and a one-line reason.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Mutex};

use super::status::Status;

/// Connections served at once (taps included).
const MAX_CONNECTIONS: usize = 32;

/// Largest request body accepted.
const MAX_BODY: usize = 64 * 1024;
/// Largest request line and headers accepted, in bytes and in header lines.
const MAX_HEAD: usize = 16 * 1024;
const MAX_HEADERS: usize = 100;

/// `admin:` in a pipeline file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// Address to listen on, e.g. `127.0.0.1:8083`.
    pub bind: String,
    /// The bearer token every request but the health checks must carry (`${VAR}` reads it
    /// from the environment); required to listen on an address other than this machine's.
    #[serde(default)]
    pub token: Option<crate::config::Secret>,
    /// A file whose first line is the token, instead of `token`.
    #[serde(rename = "token.file", default)]
    pub token_file: Option<std::path::PathBuf>,
}

impl AdminConfig {
    /// The token, from `token` or `token.file` (`None`: no token asked for).
    pub fn token(&self) -> Result<Option<String>, String> {
        let token = match (&self.token, &self.token_file) {
            (Some(_), Some(_)) => {
                return Err("admin: give `token` or `token.file`, not both".into())
            }
            (Some(t), None) => t.expose().trim().to_owned(),
            (None, Some(path)) => std::fs::read_to_string(path)
                .map_err(|e| format!("admin: cannot read `token.file` `{}`: {e}", path.display()))?
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_owned(),
            (None, None) => return Ok(None),
        };
        if token.len() < 16 {
            return Err("admin: the token is shorter than 16 characters: use a long random one (`openssl rand -hex 32`)".into());
        }
        Ok(Some(token))
    }

    /// Checks that an endpoint reachable from other machines has a token.
    pub fn check(&self) -> Result<(), String> {
        let token = self.token()?;
        if token.is_none() && !is_local(&self.bind) {
            return Err(format!(
                "admin: `bind: {}` listens beyond this machine: set `token` (or `token.file`) so that requests must carry `Authorization: Bearer <token>`, or bind 127.0.0.1",
                self.bind
            ));
        }
        Ok(())
    }
}

/// Whether `bind` (`host:port`) is this machine's own address only.
fn is_local(bind: &str) -> bool {
    let host = match bind.rsplit_once(':') {
        Some((host, _)) => host.trim_start_matches('[').trim_end_matches(']'),
        None => bind,
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Signals received over HTTP, waiting for the source (shared by restarts of the pipeline).
pub type SignalQueue = Arc<Mutex<mpsc::Receiver<String>>>;

/// What the routes need.
struct Routes {
    /// The bearer token requests must carry (`None`: none asked for).
    token: Option<String>,
    /// The address listened on, as configured (a `Host` it may be asked by).
    bind: String,
    /// `/pipelines/{name}`.
    pipeline: String,
    /// The pipeline's sinks, by name (what a tap may name).
    sinks: Vec<String>,
    signals: mpsc::Sender<String>,
    status: Status,
    metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

/// The process's Prometheus recorder, installed once (by the first pipeline with an admin
/// endpoint), with its upkeep running; `None` when another recorder was installed first.
fn prometheus() -> Option<metrics_exporter_prometheus::PrometheusHandle> {
    static HANDLE: std::sync::OnceLock<Option<metrics_exporter_prometheus::PrometheusHandle>> =
        std::sync::OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
                .install_recorder()
                .map_err(|e| tracing::warn!(error = %e, "No Prometheus metrics: another metrics recorder is installed."))
                .ok()?;
            let upkeep = handle.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    upkeep.run_upkeep();
                }
            });
            Some(handle)
        })
        .clone()
}

/// Binds the endpoint; the returned queue feeds the source.
pub async fn start(
    config: &AdminConfig,
    (pipeline, sinks): (&str, Vec<String>),
    status: Status,
) -> Result<(SignalQueue, SocketAddr), std::io::Error> {
    config.check().map_err(std::io::Error::other)?;
    let token = config.token().map_err(std::io::Error::other)?;
    let listener = TcpListener::bind(&config.bind).await.map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("admin endpoint: cannot listen on `{}`: {e}", config.bind),
        )
    })?;
    let addr = listener.local_addr()?;
    let (tx, rx) = mpsc::channel::<String>(64);
    let routes = Arc::new(Routes {
        token,
        bind: config.bind.clone(),
        pipeline: format!("/pipelines/{pipeline}"),
        sinks,
        signals: tx,
        status,
        metrics: prometheus(),
    });
    let connections = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // Out of descriptors, say: not a busy loop.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            // At most MAX_CONNECTIONS at a time: more wait to be accepted (the pipeline's own
            // connections keep their descriptors).
            let Ok(permit) = Arc::clone(&connections).acquire_owned().await else {
                return;
            };
            let routes = routes.clone();
            tokio::spawn(async move {
                let _ = serve(stream, &routes).await;
                drop(permit);
            });
        }
    });
    tracing::info!(address = %addr, "Admin endpoint listening.");
    Ok((Arc::new(Mutex::new(rx)), addr))
}

/// An answer: status, content type, body.
pub(super) type Answer = (u16, &'static str, String);

/// How long reading a request and writing its answer may take (a tap streams longer).
const EXCHANGE: Duration = Duration::from_secs(10);

async fn serve(stream: TcpStream, routes: &Routes) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let Ok(request) = tokio::time::timeout(EXCHANGE, read_request(&mut reader)).await else {
        return Ok(());
    };
    let (status, content_type, body) = match request {
        Ok(request) => match admit(routes, &request) {
            Some(refusal) => refusal,
            None if request.target == format!("{}/tap", routes.pipeline) => {
                return super::tap_http::serve(routes_tap(routes), &request.query, reader, write)
                    .await;
            }
            None => route(routes, &request.method, &request.target, request.body),
        },
        Err((status, reason)) => (status, "text/plain", format!("{reason}\n")),
    };
    tokio::time::timeout(EXCHANGE, respond(&mut write, (status, content_type, body)))
        .await
        .unwrap_or(Ok(()))
}

/// What a tap needs of the routes.
fn routes_tap(routes: &Routes) -> (&super::tap::Taps, &[String]) {
    (routes.status.taps(), &routes.sinks)
}

/// Writes `answer` and closes.
pub(super) async fn respond(
    write: &mut tokio::net::tcp::OwnedWriteHalf,
    (status, content_type, body): Answer,
) -> std::io::Result<()> {
    let text = match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        415 => "Unsupported Media Type",
        404 => "Not Found",
        405 => "Method Not Allowed",
        411 => "Length Required",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    };
    let challenge = if status == 401 {
        "www-authenticate: Bearer\r\n"
    } else {
        ""
    };
    let response = format!(
        "HTTP/1.1 {status} {text}\r\ncontent-type: {content_type}\r\n{challenge}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    write.write_all(response.as_bytes()).await?;
    write.shutdown().await
}

/// One request, as read.
#[derive(Debug, Default)]
struct Request {
    method: String,
    target: String,
    /// What follows `?` in the target.
    query: String,
    body: Vec<u8>,
    content_type: Option<String>,
    authorization: Option<String>,
    host: Option<String>,
}

/// The answer to `request`: refused (see [`admit`]) or routed.
#[cfg(test)]
fn answer(routes: &Routes, request: Request) -> Answer {
    match admit(routes, &request) {
        Some(refusal) => refusal,
        None => route(routes, &request.method, &request.target, request.body),
    }
}

/// Why `request` is not served (`None`: it is): the token where one is asked for (the health
/// checks need none), a JSON body for a `POST`.
fn admit(routes: &Routes, request: &Request) -> Option<Answer> {
    let plain = |status: u16, reason: &str| (status, "text/plain", format!("{reason}\n"));
    // The health checks, and the page (no data in it: its script asks with the token).
    let health = request.target.starts_with("/health/") || request.target == "/";
    if let (Some(token), false) = (&routes.token, health) {
        let given = (request.authorization.as_deref())
            .and_then(|a| {
                a.strip_prefix("Bearer ")
                    .or_else(|| a.strip_prefix("bearer "))
            })
            .map(str::trim);
        if !given.is_some_and(|g| same(g.as_bytes(), token.as_bytes())) {
            return Some(plain(401, "this endpoint needs `Authorization: Bearer <token>` (the pipeline's `admin.token`)"));
        }
    }
    // Without a token the endpoint is this machine's: a request naming another host is a web
    // page's (DNS rebinding), not a local client's.
    if routes.token.is_none() {
        if let Some(host) = &request.host {
            if !is_local(host) && !is_local(&format!("{host}:0")) && *host != routes.bind {
                return Some(plain(403, "this endpoint answers requests to this machine only (`Host` names another): bind it elsewhere with a `token`"));
            }
        }
    }
    if request.method == "POST" {
        let json = (request.content_type.as_deref())
            .and_then(|c| c.split(';').next())
            .is_some_and(|c| c.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return Some(plain(
                415,
                "send the body as `content-type: application/json`",
            ));
        }
    }
    None
}

/// `a == b` in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The answer to `method target` with `body`.
fn route(routes: &Routes, method: &str, target: &str, body: Vec<u8>) -> Answer {
    let plain = |status: u16, reason: String| (status, "text/plain", format!("{reason}\n"));
    let json =
        |status: u16, value: serde_json::Value| (status, "application/json", format!("{value}\n"));
    let signals = format!("{}/signals", routes.pipeline);
    let get = [
        "/",
        "/metrics",
        "/health/live",
        "/health/ready",
        routes.pipeline.as_str(),
    ];
    if target == signals {
        if method != "POST" {
            return plain(405, format!("use POST {signals}"));
        }
        return match signal(body) {
            Ok(line) => match routes.signals.try_send(line) {
                Ok(()) => plain(202, "signal queued".into()),
                Err(mpsc::error::TrySendError::Full(_)) => {
                    plain(503, "too many signals waiting: retry later".into())
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    plain(503, "the pipeline is stopping".into())
                }
            },
            Err((status, reason)) => plain(status, reason),
        };
    }
    if !get.contains(&target) {
        return plain(
            404,
            format!(
                "no such route: GET /, /metrics, /health/live, /health/ready, {0}, {0}/tap; POST {signals}",
                routes.pipeline
            ),
        );
    }
    if method != "GET" {
        return plain(405, format!("use GET {target}"));
    }
    match target {
        "/metrics" => match &routes.metrics {
            Some(handle) => (200, "text/plain; version=0.0.4", handle.render()),
            None => plain(
                503,
                "another metrics recorder is installed in this process".into(),
            ),
        },
        "/" => (200, "text/html; charset=utf-8", page(&routes.pipeline)),
        "/health/live" => json(200, serde_json::json!({"status": "UP", "checks": []})),
        "/health/ready" => {
            let (up, mut data) = routes.status.readiness();
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
            let check = serde_json::json!({"name": "pipeline", "status": if up { "UP" } else { "DOWN" }, "data": data});
            let body =
                serde_json::json!({"status": if up { "UP" } else { "DOWN" }, "checks": [check]});
            json(if up { 200 } else { 503 }, body)
        }
        _ => json(200, routes.status.json()),
    }
}

/// The status page of the pipeline at `path` (`/pipelines/<name>`).
fn page(path: &str) -> String {
    let name = path.strip_prefix("/pipelines/").unwrap_or(path);
    // A JavaScript string literal that cannot end the script element.
    let literal = serde_json::to_string(name)
        .unwrap_or_else(|_| "\"\"".into())
        .replace('<', "\\u003c");
    include_str!("page/status.html").replace("\"__PIPELINE__\"", &literal)
}

/// Reads one request: its method, target and body (at most [`MAX_BODY`] bytes), or the
/// status and reason to answer.
async fn read_request<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
) -> Result<Request, (u16, String)> {
    let bad = |reason: &str| (400, reason.to_owned());
    // The request line and the headers: at most MAX_HEAD bytes and MAX_HEADERS lines.
    let mut head = (&mut *reader).take(MAX_HEAD as u64);
    let mut line = String::new();
    head.read_line(&mut line)
        .await
        .map_err(|_| bad("unreadable request"))?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    // The path (percent-decoded: the page asks for its pipeline's encoded name), and the query
    // string apart.
    let (target, query) = target.split_once('?').unwrap_or((target, ""));
    let target = super::tap_http::decode(target)
        .ok_or_else(|| bad("the path is not percent-encoded UTF-8"))?;
    let target = target.as_str();
    let mut length: Option<usize> = None;
    let (mut content_type, mut authorization, mut host) = (None, None, None);
    let (mut complete, mut ended) = (false, false);
    for _ in 0..MAX_HEADERS {
        let mut header = String::new();
        let n = head
            .read_line(&mut header)
            .await
            .map_err(|_| bad("unreadable headers"))?;
        if n == 0 {
            ended = head.limit() > 0;
            break;
        }
        if header == "\r\n" || header == "\n" {
            complete = true;
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let name = name.trim();
            if name.eq_ignore_ascii_case("content-type") {
                content_type = Some(value.trim().to_owned());
            }
            if name.eq_ignore_ascii_case("authorization") {
                authorization = Some(value.trim().to_owned());
            }
            if name.eq_ignore_ascii_case("host") {
                host = Some(value.trim().to_owned());
            }
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(
                    value
                        .trim()
                        .parse()
                        .map_err(|_| bad("bad content-length"))?,
                );
            }
        }
    }
    if !complete && !ended {
        return Err((
            431,
            format!("the request's head is over {MAX_HEAD} bytes or {MAX_HEADERS} lines"),
        ));
    }
    let mut body = Vec::new();
    if method == "POST" {
        let length = length.ok_or((411, "a content-length is required".to_owned()))?;
        if length > MAX_BODY {
            return Err((413, format!("a request body is at most {MAX_BODY} bytes")));
        }
        body = vec![0u8; length];
        reader
            .read_exact(&mut body)
            .await
            .map_err(|_| bad("the body is shorter than its content-length"))?;
    }
    Ok(Request {
        method: method.to_owned(),
        target: target.to_owned(),
        query: query.to_owned(),
        body,
        content_type,
        authorization,
        host,
    })
}

/// A signal request's body as the line to queue.
fn signal(body: Vec<u8>) -> Result<String, (u16, String)> {
    let bad = |reason: &str| (400, reason.to_owned());
    let text = String::from_utf8(body).map_err(|_| bad("the body is not UTF-8"))?;
    check_signal(&text).map_err(|e| bad(&e))?;
    Ok(text.replace(['\r', '\n'], " "))
}

/// A signal must be a JSON object with string `id` and `type` (what the source then does with
/// it is the source's business, and a bad `data` is logged there).
pub fn check_signal(text: &str) -> Result<(), String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("the body is not JSON: {e}"))?;
    for field in ["id", "type"] {
        if !value.get(field).is_some_and(serde_json::Value::is_string) {
            return Err(format!(
                "a signal needs a string `{field}`: {{\"id\": \"..\", \"type\": \"execute-snapshot\", \"data\": {{..}}}}"
            ));
        }
    }
    Ok(())
}

/// One request to a running pipeline's endpoint at `bind`: the status code and the body, or
/// a one-line reason.
fn call(bind: &str, pipeline: &str, request: &str) -> Result<(String, String), String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(bind).map_err(|e| {
        format!(
            "cannot reach the admin endpoint at {bind} ({e}): is pipeline `{pipeline}` running?"
        )
    })?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("sending the request to {bind}: {e}"))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| format!("reading the answer from {bind}: {e}"))?;
    let status = response.split_whitespace().nth(1).unwrap_or("").to_owned();
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .trim()
        .to_owned();
    Ok((status, body))
}

/// The `authorization` header line of `token` (empty without one).
fn bearer(token: Option<&str>) -> String {
    token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"))
}

/// Sends `signal` to a running pipeline's endpoint (`sluice signal`, with the endpoint's
/// `token`); returns the server's answer, or a one-line reason.
pub fn send_signal(
    (bind, token): (&str, Option<&str>),
    pipeline: &str,
    signal: &str,
) -> Result<String, String> {
    check_signal(signal)?;
    let request = format!(
        "POST /pipelines/{pipeline}/signals HTTP/1.1\r\nhost: {bind}\r\n{}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{signal}",
        bearer(token),
        signal.len()
    );
    let (status, body) = call(bind, pipeline, &request)?;
    if status == "202" {
        Ok(body)
    } else {
        Err(format!(
            "the pipeline refused the signal ({status}): {body}"
        ))
    }
}

/// A running pipeline's status (`sluice status`, with the endpoint's `token`), or a one-line
/// reason.
pub fn status(
    (bind, token): (&str, Option<&str>),
    pipeline: &str,
) -> Result<serde_json::Value, String> {
    let request = format!(
        "GET /pipelines/{pipeline} HTTP/1.1\r\nhost: {bind}\r\n{}connection: close\r\n\r\n",
        bearer(token)
    );
    let (status, body) = call(bind, pipeline, &request)?;
    if status != "200" {
        return Err(format!("the endpoint at {bind} answered {status}: {body}"));
    }
    serde_json::from_str(&body)
        .map_err(|e| format!("the endpoint at {bind} answered no status ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> (Routes, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(4);
        let counters = (
            Arc::new(std::sync::atomic::AtomicU64::new(0)),
            Arc::new(std::sync::atomic::AtomicU64::new(0)),
        );
        let routes = Routes {
            token: None,
            bind: "127.0.0.1:8083".into(),
            pipeline: "/pipelines/p".into(),
            sinks: vec!["file".into()],
            signals: tx,
            status: Status::new("p", counters.0, counters.1),
            metrics: None,
        };
        (routes, rx)
    }

    async fn ask(raw: &str) -> Answer {
        let (routes, _rx) = routes();
        let mut reader = BufReader::new(raw.as_bytes());
        match read_request(&mut reader).await {
            Ok(request) => answer(&routes, request),
            Err((status, reason)) => (status, "text/plain", reason),
        }
    }

    #[tokio::test]
    async fn requests_are_checked() {
        let body = r#"{"id":"s1","type":"log","data":{"message":"hi"}}"#;
        let ok = format!(
            "POST /pipelines/p/signals HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        assert_eq!(ask(&ok).await.0, 202);
        assert_eq!(
            ask("GET /pipelines/p/signals HTTP/1.1\r\n\r\n").await.0,
            405
        );
        let form = ok.replace("application/json", "application/x-www-form-urlencoded");
        assert_eq!(ask(&form).await.0, 415);
        let wrong = "POST /pipelines/q/signals HTTP/1.1\r\ncontent-type: application/json\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(ask(wrong).await.0, 404);
        assert_eq!(
            ask("POST /pipelines/p/signals HTTP/1.1\r\n\r\n").await.0,
            411
        );
        let (status, _, reason) =
            ask("POST /pipelines/p/signals HTTP/1.1\r\ncontent-type: application/json; charset=utf-8\r\nContent-Length: 8\r\n\r\n{\"id\":1}").await;
        assert_eq!(status, 400);
        assert!(reason.contains("string `id`"), "{reason}");
        let huge = "POST /pipelines/p/signals HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n";
        assert_eq!(ask(huge).await.0, 413);
        let long_head = format!(
            "GET /health/live HTTP/1.1\r\nx: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        );
        assert_eq!(ask(&long_head).await.0, 431);
        let many = format!(
            "GET /health/live HTTP/1.1\r\n{}\r\n",
            "x: 1\r\n".repeat(MAX_HEADERS + 1)
        );
        assert_eq!(ask(&many).await.0, 431);
        assert_eq!(
            ask("GET /health/live?verbose HTTP/1.1\r\n\r\n").await.0,
            200
        );
    }

    #[tokio::test]
    async fn a_token_guards_everything_but_the_health_checks() {
        let (mut routes, _rx) = routes();
        routes.token = Some("0123456789abcdef-token".into());
        let get = |target: &str, auth: Option<&str>| Request {
            method: "GET".into(),
            target: target.into(),
            authorization: auth.map(str::to_owned),
            ..Request::default()
        };
        assert_eq!(answer(&routes, get("/pipelines/p", None)).0, 401);
        assert_eq!(answer(&routes, get("/metrics", Some("Bearer nope"))).0, 401);
        let right = Some("Bearer 0123456789abcdef-token");
        assert_eq!(answer(&routes, get("/pipelines/p", right)).0, 200);
        assert_eq!(answer(&routes, get("/health/live", None)).0, 200);
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"ab", b"abc"));
    }

    #[tokio::test]
    async fn without_a_token_only_this_machines_names_are_answered() {
        let ok = "GET /pipelines/p HTTP/1.1\r\nHost: 127.0.0.1:8083\r\n\r\n";
        assert_eq!(ask(ok).await.0, 200);
        assert_eq!(
            ask(&ok.replace("127.0.0.1:8083", "localhost:8083")).await.0,
            200
        );
        assert_eq!(
            ask(&ok.replace("127.0.0.1:8083", "evil.example:8083"))
                .await
                .0,
            403
        );
        assert_eq!(
            ask("GET /pipelines/%70 HTTP/1.1\r\n\r\n").await.0,
            200,
            "decoded"
        );
    }

    #[test]
    fn the_page_names_its_pipeline_safely() {
        let html = page("/pipelines/a</script>b");
        assert!(
            html.contains(r#"const PIPELINE = "a\u003c/script>b";"#),
            "{html}"
        );
        assert!(!html.contains("__PIPELINE__"));
    }

    #[test]
    fn binding_beyond_this_machine_needs_a_long_token() {
        let config = |bind: &str, token: Option<&str>| AdminConfig {
            bind: bind.into(),
            token: token.map(|t| crate::config::Secret::from(t.to_owned())),
            token_file: None,
        };
        for local in ["127.0.0.1:8083", "localhost:1", "[::1]:8083", "127.1.2.3:9"] {
            assert_eq!(config(local, None).check(), Ok(()), "{local}");
        }
        let e = config("0.0.0.0:8083", None).check().unwrap_err();
        assert!(e.contains("set `token`"), "{e}");
        assert!(config("0.0.0.0:8083", Some("short")).check().is_err());
        assert_eq!(
            config("0.0.0.0:8083", Some("0123456789abcdef")).check(),
            Ok(())
        );
    }

    use super::super::status::State;

    #[tokio::test]
    async fn health_and_status_follow_the_pipeline() {
        let (routes, _rx) = routes();
        let get = |target: &str| route(&routes, "GET", target, Vec::new());
        assert_eq!(get("/health/live").0, 200);
        let (status, _, body) = get("/health/ready");
        assert_eq!(status, 503, "starting: {body}");
        assert!(body.contains("\"starting\""), "{body}");
        routes.status.set_state(State::Running);
        let (status, _, body) = get("/health/ready");
        assert_eq!(status, 503, "the source not connected yet: {body}");
        assert!(body.contains("\"source_connected\":false"), "{body}");
        routes
            .status
            .fresh_connected()
            .store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(get("/health/ready").0, 200);
        let (status, content_type, body) = get("/pipelines/p");
        assert_eq!((status, content_type), (200, "application/json"));
        let j: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(j["state"], "running");
        assert_eq!(route(&routes, "POST", "/health/live", Vec::new()).0, 405);
        assert_eq!(get("/nothing").0, 404);
        // No recorder in unit tests: said plainly.
        assert_eq!(get("/metrics").0, 503);
    }

    proptest::proptest! {
        /// Any bytes get an answer, never a panic.
        #[test]
        fn arbitrary_requests_never_panic(raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let (routes, _rx) = routes();
            let _ = runtime.block_on(async {
                let mut reader = BufReader::new(&raw[..]);
                read_request(&mut reader).await.map(|r| answer(&routes, r))
            });
        }
    }
}
