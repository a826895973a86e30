//! The endpoint's HTTP/1.1, by hand: one request per connection (request line, headers, a
//! `Content-Length` body of at most 64 KiB), one answer, then the connection
//! closes.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

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
    /// The body (read for `POST` and `PUT`).
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

/// Writes `answer` and closes.
pub(crate) async fn respond(
    write: &mut (impl tokio::io::AsyncWrite + Unpin),
    (status, content_type, body): Answer,
) -> std::io::Result<()> {
    let text = match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        _ => "Service Unavailable",
    };
    let challenge = if status == 401 {
        "www-authenticate: Bearer\r\n"
    } else {
        ""
    };
    // A 204 has no body, and says nothing of one.
    let response = if status == 204 {
        format!("HTTP/1.1 204 {text}\r\nconnection: close\r\n\r\n")
    } else {
        format!(
            "HTTP/1.1 {status} {text}\r\ncontent-type: {content_type}\r\n{challenge}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    write.write_all(response.as_bytes()).await?;
    write.shutdown().await
}

/// Reads one request: its method, target and body (at most [`MAX_BODY`] bytes), or the
/// status and reason to answer.
pub(crate) async fn read_request<R: tokio::io::AsyncBufRead + Unpin>(
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
    let target = crate::tap_http::decode(target)
        .ok_or_else(|| bad("the path is not percent-encoded UTF-8"))?;
    let mut request = Request {
        method: method.to_owned(),
        target,
        query: query.to_owned(),
        ..Request::default()
    };
    let mut length: Option<usize> = None;
    let mut chunked = false;
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
        let Some((name, value)) = header.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_owned());
        match name.as_str() {
            "content-type" => request.content_type = Some(value),
            "authorization" => request.authorization = Some(value),
            "host" => request.host = Some(value),
            "origin" => request.origin = Some(value),
            "accept" => request.accept = Some(value),
            "transfer-encoding" => chunked = true,
            "content-length" => {
                length = Some(value.parse().map_err(|_| bad("bad content-length"))?)
            }
            _ => {}
        }
    }
    if !complete && !ended {
        return Err((
            431,
            format!("the request's head is over {MAX_HEAD} bytes or {MAX_HEADERS} lines"),
        ));
    }
    // A body says how long it is; without a length there is none (curl's `-X POST`).
    if chunked {
        return Err((411, "send the body with a content-length".to_owned()));
    }
    let length = match (method, length) {
        ("POST" | "PUT" | "PATCH", Some(length)) => length,
        _ => 0,
    };
    if length > MAX_BODY {
        return Err((413, format!("a request body is at most {MAX_BODY} bytes")));
    }
    request.body = vec![0u8; length];
    reader
        .read_exact(&mut request.body)
        .await
        .map_err(|_| bad("the body is shorter than its content-length"))?;
    Ok(request)
}
