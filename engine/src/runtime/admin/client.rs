//! Clients of a running endpoint: `sluice signal` and `sluice status`.

use std::time::Duration;

use super::check_signal;

/// One request to a running pipeline's endpoint at `bind`: the status code and the body, or
/// a one-line reason.
pub(crate) fn call(bind: &str, pipeline: &str, request: &str) -> Result<(String, String), String> {
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
pub(crate) fn bearer(token: Option<&str>) -> String {
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
