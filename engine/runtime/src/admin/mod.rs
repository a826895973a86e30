//! The admin endpoint (`admin: { bind: 127.0.0.1:8083 }`; off by default), HTTP/1.1:
//!
//! - `POST /pipelines/{name}/signals` with a Debezium signal as the JSON body (`{"id": ..,
//!   "type": .., "data": {..}}`), answered `202` once the source has it queued (the source
//!   reads queued signals through [`sluice_engine::SourceContext::external_signals`]);
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
//! The server is hyper's HTTP/1.1, one request per connection: a head of at most 16 KiB and 100
//! lines, a `Content-Length` body of at most 64 KiB, the whole exchange within 10 s (but a tap
//! and a Kafka Connect call that waits for a pipeline); what is refused gets its status and a
//! one-line reason.

mod client;
pub mod http;
mod routes;
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

pub(crate) use client::Call;
pub use client::{send_signal, status, ClientError, ClientTls, Endpoint};
pub use http::{Answer, Request};
pub use routes::{Attached, Directory, Extension};

use super::status::Status;
use http::{plain, read_request, response, MAX_HEAD, MAX_HEADERS};
use routes::{route, under, Routes, Under};

/// Connections served at once (taps included).
const MAX_CONNECTIONS: usize = 32;

/// The TLS acceptor of `config`'s `tls.*` (`None`: plain HTTP), or what is wrong with the
/// files.
pub fn acceptor(config: &AdminConfig) -> Result<Option<tokio_rustls::TlsAcceptor>, String> {
    let (Some(certificate), Some(key)) = (&config.tls_certificate, &config.tls_key) else {
        return Ok(None);
    };
    tls::acceptor(certificate, key, config.tls_client_ca.as_deref()).map(Some)
}

pub use sluice_engine::component::SignalQueue;
pub use sluice_engine::config::admin::{is_local, AdminConfig};

/// The process's Prometheus recorder, installed once (by the first endpoint), with its upkeep
/// running; `None` when another recorder was installed first.
fn prometheus() -> Option<metrics_exporter_prometheus::PrometheusHandle> {
    static HANDLE: std::sync::OnceLock<Option<metrics_exporter_prometheus::PrometheusHandle>> =
        std::sync::OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let builder = metrics_exporter_prometheus::PrometheusBuilder::new()
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Full(sluice_engine::metrics::BATCH_SECONDS.into()),
                    sluice_engine::metrics::BATCH_BUCKETS,
                )
                .map_err(|e| tracing::warn!(error = %e, "No Prometheus metrics: the histograms' buckets are refused."))
                .ok()?;
            let handle = builder
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

/// Binds the endpoint of one pipeline (`sluice run`); the returned queue feeds the source.
pub async fn start(
    config: &AdminConfig,
    (pipeline, sinks): (&str, Vec<String>),
    status: Status,
) -> Result<(SignalQueue, SocketAddr), std::io::Error> {
    let (attached, queue) = Attached::new(sinks, status);
    let directory = Directory::default();
    directory
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .insert(pipeline.to_owned(), attached);
    let addr = listen(config, directory, Serving::One(pipeline.to_owned())).await?;
    Ok((queue, addr))
}

/// What an endpoint serves.
pub enum Serving {
    /// `sluice run`'s one pipeline, by name.
    One(String),
    /// `sluice serve`'s pipelines, with further routes.
    Many(Option<Arc<dyn Extension>>),
}

/// Binds the endpoint for the pipelines of `directory` (which may change while it runs).
pub async fn listen(
    config: &AdminConfig,
    directory: Directory,
    serving: Serving,
) -> Result<SocketAddr, std::io::Error> {
    config.check().map_err(std::io::Error::other)?;
    let token = config.token().map_err(std::io::Error::other)?;
    let acceptor = acceptor(config).map_err(std::io::Error::other)?;
    let listener = TcpListener::bind(&config.bind).await.map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("admin endpoint: cannot listen on `{}`: {e}", config.bind),
        )
    })?;
    let addr = listener.local_addr()?;
    let (single, extension) = match serving {
        Serving::One(name) => (Some(name), None),
        Serving::Many(extension) => (None, extension),
    };
    let routes = Arc::new(Routes {
        token,
        bind: config.bind.clone(),
        pipelines: directory,
        single,
        extension,
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
            let (routes, acceptor) = (routes.clone(), acceptor.clone());
            tokio::spawn(async move {
                match acceptor {
                    // The handshake within the time a request gets.
                    Some(acceptor) => {
                        match tokio::time::timeout(EXCHANGE, acceptor.accept(stream)).await {
                            Ok(Ok(tls)) => serve(tls, routes).await,
                            Ok(Err(e)) => {
                                tracing::debug!(error = %e, "Admin endpoint: TLS handshake refused.");
                            }
                            Err(_) => {}
                        }
                    }
                    None => serve(stream, routes).await,
                }
                drop(permit);
            });
        }
    });
    tracing::info!(address = %addr, "Admin endpoint listening.");
    Ok(addr)
}

/// How long reading a request and writing its answer may take (a tap streams longer; a
/// Kafka Connect call that stops a pipeline waits for it).
const EXCHANGE: Duration = Duration::from_secs(10);

/// Serves one connection with hyper: one request, one answer, closed. The exchange must end
/// within [`EXCHANGE`] (head, body, answer), except while a Kafka Connect call is answered and
/// while a tap streams; a tap's client that stops reading is let go.
async fn serve<S>(stream: S, routes: Arc<Routes>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let deadline = Deadline::new();
    let service = {
        let deadline = deadline.clone();
        hyper::service::service_fn(move |request| {
            let (routes, deadline) = (Arc::clone(&routes), deadline.clone());
            async move { Ok::<_, std::convert::Infallible>(answer(request, routes, deadline).await) }
        })
    };
    let mut http = hyper::server::conn::http1::Builder::new();
    // A client may close its side once it has asked.
    http.keep_alive(false)
        .half_close(true)
        .max_buf_size(MAX_HEAD)
        .max_headers(MAX_HEADERS);
    let connection = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    if let Err(e) = deadline.bound(connection).await {
        tracing::debug!(error = %e, "Admin endpoint: a connection ended early.");
    }
}

/// The answer to one request hyper read.
async fn answer(
    request: hyper::Request<hyper::body::Incoming>,
    routes: Arc<Routes>,
    deadline: Deadline,
) -> hyper::Response<http::Body> {
    let request = match read_request(request).await {
        Ok(request) => request,
        Err((status, reason)) => return response(plain(status, reason)),
    };
    if let Some(refusal) = admit(&routes, &request) {
        return response(refusal);
    }
    if let (Some(Under::Tap(name)), "GET") = (under(&request.target), request.method.as_str()) {
        if let Some(pipeline) = routes.pipeline(name) {
            let tap = (pipeline.status.taps(), pipeline.sinks.as_slice());
            return super::tap_http::open(tap, &request.query, deadline);
        }
    }
    if let Some(answer) = route(&routes, &request) {
        return response(answer);
    }
    // Only routes with an extension get here; it may block (a pipeline stopping), for as long
    // as it takes.
    deadline.lift();
    let answered = tokio::task::spawn_blocking(move || match &routes.extension {
        Some(extension) => extension.answer(&request),
        None => None,
    })
    .await;
    deadline.renew();
    response(answered.ok().flatten().unwrap_or_else(|| {
        // Kafka Connect's way of saying it.
        let message = serde_json::json!({"error_code": 404, "message": "HTTP 404 Not Found"});
        http::json(404, &message)
    }))
}

/// When a connection is cut: [`EXCHANGE`] after it opened (or after its answer was ready),
/// never while lifted, at once when cut.
#[derive(Clone)]
pub(crate) struct Deadline(Arc<tokio::sync::watch::Sender<Option<tokio::time::Instant>>>);

impl Deadline {
    fn new() -> Self {
        let first = tokio::time::Instant::now() + EXCHANGE;
        Deadline(Arc::new(tokio::sync::watch::Sender::new(Some(first))))
    }

    /// No deadline (a tap streaming, a long call answered).
    pub(crate) fn lift(&self) {
        self.0.send_replace(None);
    }

    /// [`EXCHANGE`] from now.
    fn renew(&self) {
        self.0
            .send_replace(Some(tokio::time::Instant::now() + EXCHANGE));
    }

    /// Now (a tap's client that stopped reading).
    pub(crate) fn cut(&self) {
        self.0.send_replace(Some(tokio::time::Instant::now()));
    }

    /// `work`'s outcome, or an error once the deadline passes first.
    async fn bound<F, E>(&self, work: F) -> Result<(), String>
    where
        F: std::future::Future<Output = Result<(), E>>,
        E: std::fmt::Display,
    {
        let mut changes = self.0.subscribe();
        tokio::pin!(work);
        loop {
            let until = *changes.borrow_and_update();
            let expired = async {
                match until {
                    Some(until) => tokio::time::sleep_until(until).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                done = &mut work => return done.map_err(|e| e.to_string()),
                () = expired => return Err("the exchange took too long".to_owned()),
                _ = changes.changed() => {}
            }
        }
    }
}

/// Why `request` is not served (`None`: it is): the token where one is asked for (the health
/// checks need none), this machine's `Host` without one, no other web page's calls, and JSON
/// for a body.
fn admit(routes: &Routes, request: &Request) -> Option<Answer> {
    // The health checks, and the page (no data in it: its script asks with the token).
    let page = request.target == "/" && (routes.extension.is_none() || request.wants_html());
    let open = request.target.starts_with("/health/") || page;
    if let (Some(token), false) = (&routes.token, open) {
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
    if request.method == "GET" {
        return None;
    }
    // A browser says which page calls: another site's page may not change anything.
    if let (Some(origin), Some(host)) = (&request.origin, &request.host) {
        let from = origin.split_once("://").map_or(origin.as_str(), |(_, h)| h);
        if !from.eq_ignore_ascii_case(host) {
            return Some(plain(
                403,
                "calls from another site's page are refused (`Origin` differs from `Host`)",
            ));
        }
    }
    // A body is JSON, and no form's (a form always sends its content type).
    if (request.content_type.is_some() || !request.body.is_empty()) && !request.is_json() {
        return Some(plain(
            415,
            "send the body as `content-type: application/json`",
        ));
    }
    None
}

/// `a == b` in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
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

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> (Routes, SignalQueue) {
        let counters = (
            Arc::new(std::sync::atomic::AtomicU64::new(0)),
            Arc::new(std::sync::atomic::AtomicU64::new(0)),
        );
        let status = Status::new("p", counters.0, counters.1);
        let (attached, rx) = Attached::new(vec!["file".into()], status);
        let pipelines = Directory::default();
        pipelines.write().unwrap().insert("p".into(), attached);
        let routes = Routes {
            token: None,
            bind: "127.0.0.1:8083".into(),
            pipelines,
            single: Some("p".into()),
            extension: None,
            metrics: None,
        };
        (routes, rx)
    }

    /// The answer to `request`: refused or routed (no extension: every request is routed).
    fn answer(routes: &Routes, request: Request) -> Answer {
        admit(routes, &request)
            .or_else(|| route(routes, &request))
            .unwrap()
    }

    /// `raw` sent on a connection the endpoint serves: the answer's status, content type
    /// (JSON or not) and body, or `(0, "", "")` when the connection closed unanswered.
    async fn exchange(routes: Routes, raw: &[u8]) -> Answer {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let served = tokio::spawn(serve(server, Arc::new(routes)));
        // A peer that stopped reading: whatever it sent before.
        let _ = client.write_all(raw).await;
        let _ = client.shutdown().await;
        let mut answer = Vec::new();
        let _ = client.read_to_end(&mut answer).await;
        served.await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        let status = (answer.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let kind = if head.contains("content-type: application/json") {
            "application/json"
        } else {
            ""
        };
        (status, kind, body.to_owned())
    }

    async fn ask(raw: &str) -> Answer {
        let (routes, _rx) = routes();
        exchange(routes, raw.as_bytes()).await
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
            400,
            "no body"
        );
        assert_eq!(
            ask("POST /pipelines/p/signals HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n")
                .await
                .0,
            411
        );
        let elsewhere = ok.replace(
            "Host: 127.0.0.1",
            "Host: 127.0.0.1\r\nOrigin: http://evil.example",
        );
        assert_eq!(ask(&elsewhere).await.0, 403, "another site's page");
        let same = ok.replace(
            "Host: 127.0.0.1",
            "Host: 127.0.0.1\r\nOrigin: http://127.0.0.1",
        );
        assert_eq!(ask(&same).await.0, 202, "the status page's own");
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
        let html = routes::page("a</script>b");
        assert!(
            html.contains(r#"const PIPELINE = "a\u003c/script>b";"#),
            "{html}"
        );
        assert!(!html.contains("__PIPELINE__"));
    }

    use super::super::status::State;

    #[tokio::test]
    async fn health_and_status_follow_the_pipeline() {
        let (routes, _rx) = routes();
        let call = |method: &str, target: &str| {
            let request = Request {
                method: method.into(),
                target: target.into(),
                ..Request::default()
            };
            route(&routes, &request).unwrap()
        };
        let get = |target: &str| call("GET", target);
        let pipeline = routes.pipeline("p").unwrap().status;
        assert_eq!(get("/health/live").0, 200);
        let (status, _, body) = get("/health/ready");
        assert_eq!(status, 503, "starting: {body}");
        assert!(body.contains("\"starting\""), "{body}");
        pipeline.set_state(State::Running);
        let (status, _, body) = get("/health/ready");
        assert_eq!(status, 503, "the source not connected yet: {body}");
        assert!(body.contains("\"source_connected\":false"), "{body}");
        pipeline
            .fresh_connected()
            .store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(get("/health/ready").0, 200);
        let (status, content_type, body) = get("/pipelines/p");
        assert_eq!((status, content_type), (200, "application/json"));
        let j: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(j["state"], "running");
        assert_eq!(call("POST", "/health/live").0, 405);
        assert_eq!(get("/nothing").0, 404);
        // No recorder in unit tests: said plainly.
        assert_eq!(get("/metrics").0, 503);
    }

    /// A tap outlives the exchange's deadline, sends an empty line when silent, and ends (its
    /// listener gone) once its client has left.
    #[tokio::test(start_paused = true)]
    async fn a_silent_tap_lives_until_its_client_leaves() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (routes, _rx) = routes();
        let taps = routes.pipeline("p").unwrap().status.taps().clone();
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let served = tokio::spawn(serve(server, Arc::new(routes)));
        let ask = b"GET /pipelines/p/tap HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";
        client.write_all(ask).await.unwrap();
        let mut seen = String::new();
        let mut buffer = [0u8; 256];
        // Three signs of life: 15 s, past the 10 s an exchange gets.
        while seen.matches("1\r\n\n\r\n").count() < 3 {
            let n = client.read(&mut buffer).await.unwrap();
            assert!(n > 0, "closed: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
        assert!(seen.starts_with("HTTP/1.1 200 OK\r\n"), "{seen}");
        assert!(
            seen.contains("content-type: application/x-ndjson"),
            "{seen}"
        );
        assert_eq!(taps.listening(), 1);
        drop(client);
        tokio::time::timeout(Duration::from_secs(60), served)
            .await
            .expect("the tap ends once its client has left")
            .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(taps.listening(), 0);
    }

    /// A tap whose client stops reading is let go.
    #[tokio::test(start_paused = true)]
    async fn a_tap_whose_client_stops_reading_is_let_go() {
        use tokio::io::AsyncWriteExt;
        let (routes, _rx) = routes();
        let taps = routes.pipeline("p").unwrap().status.taps().clone();
        let (mut client, server) = tokio::io::duplex(64);
        let served = tokio::spawn(serve(server, Arc::new(routes)));
        let ask = b"GET /pipelines/p/tap HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";
        client.write_all(ask).await.unwrap();
        tokio::time::timeout(Duration::from_secs(600), served)
            .await
            .expect("cut once the tap's lines wait")
            .unwrap();
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert_eq!(taps.listening(), 0);
        drop(client);
    }

    /// Half a request, then nothing: closed unanswered once the exchange's time is up.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_request_is_closed_unanswered() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (routes, _rx) = routes();
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let served = tokio::spawn(serve(server, Arc::new(routes)));
        let t0 = tokio::time::Instant::now();
        client
            .write_all(b"GET /pipelines/p HTTP/1.1\r\nhost: 127.0.0.1\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.unwrap();
        assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
        assert_eq!(t0.elapsed(), EXCHANGE);
        served.await.unwrap();
    }

    proptest::proptest! {
        /// Any bytes get an answer or a closed connection, never a panic.
        #[test]
        fn arbitrary_requests_never_panic(raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let (routes, _rx) = routes();
            runtime.block_on(exchange(routes, &raw));
        }
    }
}
