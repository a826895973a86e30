//! The admin endpoint (`admin: { bind: 127.0.0.1:8083 }`; off by default): one HTTP/1.1
//! route, `POST /pipelines/{name}/signals` with a Debezium signal as the JSON body
//! (`{"id": .., "type": .., "data": {..}}`), answered `202` once the source has it queued.
//! The source reads queued signals through [`crate::SourceContext::external_signals`].
//!
//! Only this route exists, so the server reads one request per connection by hand (request
//! line, headers, `Content-Length` body, 64 KiB at most) rather than pulling in a web
//! framework; anything else gets a plain status line and a one-line reason.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Mutex};

/// Largest request body accepted.
const MAX_BODY: usize = 64 * 1024;

/// `admin:` in a pipeline file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// Address to listen on, e.g. `127.0.0.1:8083`.
    pub bind: String,
}

/// Signals received over HTTP, waiting for the source (shared by restarts of the pipeline).
pub type SignalQueue = Arc<Mutex<mpsc::Receiver<String>>>;

/// Binds the endpoint; the returned queue feeds the source.
pub async fn start(
    config: &AdminConfig,
    pipeline: &str,
) -> Result<(SignalQueue, SocketAddr), std::io::Error> {
    let listener = TcpListener::bind(&config.bind).await.map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("admin endpoint: cannot listen on `{}`: {e}", config.bind),
        )
    })?;
    let addr = listener.local_addr()?;
    let (tx, rx) = mpsc::channel::<String>(64);
    let path: Arc<str> = format!("/pipelines/{pipeline}/signals").into();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let tx = tx.clone();
            let path = path.clone();
            tokio::spawn(async move {
                let _ =
                    tokio::time::timeout(Duration::from_secs(10), serve(stream, &path, &tx)).await;
            });
        }
    });
    tracing::info!(address = %addr, "Admin endpoint listening.");
    Ok((Arc::new(Mutex::new(rx)), addr))
}

async fn serve(stream: TcpStream, path: &str, tx: &mpsc::Sender<String>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let (status, reason) = match request(&mut reader, path).await {
        Ok(body) => match tx.try_send(body) {
            Ok(()) => (202, "signal queued".to_owned()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                (503, "too many signals waiting: retry later".to_owned())
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                (503, "the pipeline is stopping".to_owned())
            }
        },
        Err((status, reason)) => (status, reason),
    };
    let text = match status {
        202 => "Accepted",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        411 => "Length Required",
        413 => "Payload Too Large",
        _ => "Service Unavailable",
    };
    let response = format!(
        "HTTP/1.1 {status} {text}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reason}\n",
        reason.len() + 1
    );
    write.write_all(response.as_bytes()).await?;
    write.shutdown().await
}

/// Reads one request; returns the signal line to queue, or the status and reason to answer.
async fn request<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    path: &str,
) -> Result<String, (u16, String)> {
    let bad = |reason: &str| (400, reason.to_owned());
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .await
        .map_err(|_| bad("unreadable request"))?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let mut length: Option<usize> = None;
    loop {
        let mut header = String::new();
        let n = reader
            .read_line(&mut header)
            .await
            .map_err(|_| bad("unreadable headers"))?;
        if n == 0 || header == "\r\n" || header == "\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = Some(
                    value
                        .trim()
                        .parse()
                        .map_err(|_| bad("bad content-length"))?,
                );
            }
        }
    }
    if target != path {
        return Err((404, format!("no such route: use POST {path}")));
    }
    if method != "POST" {
        return Err((405, format!("use POST {path}")));
    }
    let length = length.ok_or((411, "a content-length is required".to_owned()))?;
    if length > MAX_BODY {
        return Err((413, format!("a signal is at most {MAX_BODY} bytes")));
    }
    let mut body = vec![0u8; length];
    reader
        .read_exact(&mut body)
        .await
        .map_err(|_| bad("the body is shorter than its content-length"))?;
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

/// Sends `signal` to a running pipeline's endpoint (`sluice signal`); returns the server's
/// answer, or a one-line reason.
pub fn send_signal(bind: &str, pipeline: &str, signal: &str) -> Result<String, String> {
    use std::io::{Read, Write};
    check_signal(signal)?;
    let mut stream = std::net::TcpStream::connect(bind).map_err(|e| {
        format!(
            "cannot reach the admin endpoint at {bind} ({e}): is pipeline `{pipeline}` running?"
        )
    })?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let request = format!(
        "POST /pipelines/{pipeline}/signals HTTP/1.1\r\nhost: {bind}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{signal}",
        signal.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("sending the signal to {bind}: {e}"))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| format!("reading the answer from {bind}: {e}"))?;
    let status = response.split_whitespace().nth(1).unwrap_or("");
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .trim()
        .to_owned();
    if status == "202" {
        Ok(body)
    } else {
        Err(format!(
            "the pipeline refused the signal ({status}): {body}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn ask(raw: &str) -> Result<String, (u16, String)> {
        let mut reader = BufReader::new(raw.as_bytes());
        request(&mut reader, "/pipelines/p/signals").await
    }

    #[tokio::test]
    async fn requests_are_checked() {
        let body = r#"{"id":"s1","type":"log","data":{"message":"hi"}}"#;
        let ok = format!(
            "POST /pipelines/p/signals HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        assert_eq!(ask(&ok).await.unwrap(), body);
        assert_eq!(
            ask("GET /pipelines/p/signals HTTP/1.1\r\n\r\n")
                .await
                .unwrap_err()
                .0,
            405
        );
        assert_eq!(
            ask("POST /pipelines/q/signals HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
                .await
                .unwrap_err()
                .0,
            404
        );
        assert_eq!(
            ask("POST /pipelines/p/signals HTTP/1.1\r\n\r\n")
                .await
                .unwrap_err()
                .0,
            411
        );
        let (status, reason) =
            ask("POST /pipelines/p/signals HTTP/1.1\r\nContent-Length: 8\r\n\r\n{\"id\":1}")
                .await
                .unwrap_err();
        assert_eq!(status, 400);
        assert!(reason.contains("string `id`"), "{reason}");
        assert_eq!(
            ask("POST /pipelines/p/signals HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n")
                .await
                .unwrap_err()
                .0,
            413
        );
    }

    proptest::proptest! {
        /// Any bytes get an answer, never a panic.
        #[test]
        fn arbitrary_requests_never_panic(raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let _ = runtime.block_on(async {
                let mut reader = BufReader::new(&raw[..]);
                request(&mut reader, "/pipelines/p/signals").await
            });
        }
    }
}
