//! The endpoint's requests and answers over hyper's HTTP/1.1: one request per connection, its
//! head at most 16 KiB in 100 lines (hyper answers `431` beyond), a `Content-Length` body of
//! at most 64 KiB, one answer, then the connection closes.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Frame;
use tokio::sync::mpsc;

/// Largest request body accepted.
pub(crate) const MAX_BODY: usize = 64 * 1024;
/// Largest request line and headers accepted, in bytes and in header lines.
pub(crate) const MAX_HEAD: usize = 16 * 1024;
pub(crate) const MAX_HEADERS: usize = 100;

/// An answer: status, content type, body.
pub type Answer = (u16, &'static str, String);

/// A plain-text answer of one line.
pub fn plain(status: u16, reason: impl std::fmt::Display) -> Answer {
    (status, "text/plain", format!("{reason}\n"))
}

/// A JSON answer.
pub fn json(status: u16, value: &serde_json::Value) -> Answer {
    (status, "application/json", format!("{value}\n"))
}

/// One request, as read.
#[derive(Debug, Default, Clone)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, percent-decoded.
    pub target: String,
    /// What follows `?` in the target (not decoded).
    pub query: String,
    /// The body.
    pub body: Vec<u8>,
    pub(crate) content_type: Option<String>,
    pub(crate) authorization: Option<String>,
    pub(crate) host: Option<String>,
    pub(crate) origin: Option<String>,
    pub(crate) accept: Option<String>,
}

impl Request {
    /// The value of `name` in the query string (percent-decoded), if given.
    pub fn param(&self, name: &str) -> Option<String> {
        self.query
            .split('&')
            .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| crate::tap_http::decode(&v.replace('+', " ")))
    }

    /// Whether the body is declared JSON.
    pub(crate) fn is_json(&self) -> bool {
        (self.content_type.as_deref())
            .and_then(|c| c.split(';').next())
            .is_some_and(|c| c.trim().eq_ignore_ascii_case("application/json"))
    }

    /// Whether the client is a browser asking for a page (browsers accept XHTML too; Java's
    /// `HttpURLConnection`, which names `text/html` by default, does not).
    pub(crate) fn wants_html(&self) -> bool {
        self.accept
            .as_deref()
            .is_some_and(|a| a.contains("text/html") && a.contains("application/xhtml+xml"))
    }
}

/// The body of an answer: all of it at once, or lines as they come (a tap).
pub enum Body {
    Full(Full<Bytes>),
    Lines(mpsc::Receiver<Bytes>),
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(full) => Pin::new(full).poll_frame(cx),
            Body::Lines(lines) => lines.poll_recv(cx).map(|l| l.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Full(full) => full.is_end_stream(),
            Body::Lines(_) => false,
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            Body::Full(full) => full.size_hint(),
            Body::Lines(_) => hyper::body::SizeHint::default(),
        }
    }
}

/// `answer` as hyper's response (a `401` says which scheme it asks for).
pub(crate) fn response((status, content_type, body): Answer) -> hyper::Response<Body> {
    let mut response = hyper::Response::new(Body::Full(Full::new(Bytes::from(body))));
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::SERVICE_UNAVAILABLE);
    let headers = response.headers_mut();
    if status != 204 {
        headers.insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static(content_type),
        );
    }
    if status == 401 {
        headers.insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Bearer"),
        );
    }
    response
}

/// The request hyper read: its method, decoded path, query, the headers the routes look at,
/// and its body (at most `MAX_BODY` bytes), or the status and reason to answer.
pub(crate) async fn read_request(
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<Request, (u16, String)> {
    let bad = |reason: &str| (400, reason.to_owned());
    let (parts, body) = request.into_parts();
    // The path (percent-decoded: the page asks for its pipeline's encoded name), and the query
    // string apart.
    let target = crate::tap_http::decode(parts.uri.path())
        .ok_or_else(|| bad("the path is not percent-encoded UTF-8"))?;
    let header = |name: hyper::header::HeaderName| {
        (parts.headers.get(name))
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_owned())
    };
    let mut request = Request {
        method: parts.method.as_str().to_owned(),
        target,
        query: parts.uri.query().unwrap_or_default().to_owned(),
        body: Vec::new(),
        content_type: header(hyper::header::CONTENT_TYPE),
        authorization: header(hyper::header::AUTHORIZATION),
        host: header(hyper::header::HOST),
        origin: header(hyper::header::ORIGIN),
        accept: header(hyper::header::ACCEPT),
    };
    // A body says how long it is; without a length there is none (curl's `-X POST`).
    if parts.headers.contains_key(hyper::header::TRANSFER_ENCODING) {
        return Err((411, "send the body with a content-length".to_owned()));
    }
    let length = match header(hyper::header::CONTENT_LENGTH) {
        Some(length) => (length.parse::<usize>()).map_err(|_| bad("bad content-length"))?,
        None => 0,
    };
    if length > MAX_BODY {
        return Err((413, format!("a request body is at most {MAX_BODY} bytes")));
    }
    let body = http_body_util::Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map_err(|_| bad("the body is shorter than its content-length"))?;
    request.body = body.to_bytes().to_vec();
    Ok(request)
}
