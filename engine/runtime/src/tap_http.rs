//! `GET /pipelines/{name}/tap` on the admin endpoint, and `sluice tap`'s side of it: the
//! events the sinks are handed, one JSON line each (`{"sink":..,"topic":..,"key":..,
//! "value":..}`, values without schemas), as they come, until `limit` lines, the client
//! leaves, or the pipeline ends. The last line says how many events the tap missed when its
//! buffer was full (`{"missed": n}`), when it missed any.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::tap::Taps;

/// What a tap asks for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Wanted {
    sink: Option<String>,
    topic: Option<String>,
    limit: Option<u64>,
}

/// The query string's `sink`, `topic` and `limit`.
fn wanted(query: &str, sinks: &[String]) -> Result<Wanted, String> {
    let mut w = Wanted::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = decode(v).ok_or_else(|| format!("`{k}` is not percent-encoded text"))?;
        match k {
            "sink" if !sinks.contains(&v) => {
                return Err(format!(
                    "no sink named `{v}`: the sinks are {}",
                    sinks.join(", ")
                ))
            }
            "sink" => w.sink = Some(v),
            "topic" => w.topic = Some(v),
            "limit" => {
                w.limit = Some(
                    v.parse()
                        .map_err(|_| format!("`limit` `{v}` is not a number"))?,
                )
            }
            other => return Err(format!("unknown parameter `{other}`: sink, topic, limit")),
        }
    }
    Ok(w)
}

/// `%XX` and `+` decoded (`None`: not UTF-8 or a bad escape).
pub(crate) fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// `%XX` for every byte but unreserved ones.
pub(super) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Streams the tap `query` asks for on `write` until its limit, the client's leaving (read
/// from `reader`) or the pipeline's end.
pub(super) async fn serve(
    (taps, sinks): (&Taps, &[String]),
    query: &str,
    mut reader: impl AsyncRead + Unpin,
    mut write: impl AsyncWrite + Unpin,
) -> std::io::Result<()> {
    let listening = wanted(query, sinks)
        .and_then(|w| Ok((taps.listen(w.sink.clone(), w.topic.as_deref())?, w.limit)));
    let (mut tap, limit) = match listening {
        Ok(found) => found,
        Err(reason) => {
            let answer = (400, "text/plain", format!("{reason}\n"));
            return super::admin::http::respond(&mut write, answer).await;
        }
    };
    write
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\nconnection: close\r\n\r\n",
        )
        .await?;
    let mut sent = 0u64;
    let mut probe = [0u8; 64];
    while limit.is_none_or(|l| sent < l) {
        tokio::select! {
            line = tap.lines.recv() => {
                let Some(line) = line else { break };
                // A client that stops reading is let go (its tap missing nothing meanwhile).
                tokio::time::timeout(Duration::from_secs(10), write.write_all(&line))
                    .await
                    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
                sent += 1;
            }
            // The client left (or sent more, which a tap does not read).
            gone = reader.read(&mut probe) => {
                if gone.map_or(true, |n| n == 0) {
                    return Ok(());
                }
            }
        }
    }
    let missed = tap.missed.load(Ordering::Relaxed);
    if missed > 0 {
        write
            .write_all(format!("{{\"missed\":{missed}}}\n").as_bytes())
            .await?;
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), write.shutdown()).await;
    Ok(())
}

/// What `sluice tap` asks a running pipeline for.
#[derive(Debug, Default, Clone)]
pub struct TapRequest {
    /// One sink's events (all sinks' when `None`).
    pub sink: Option<String>,
    /// Topics matching this regex only.
    pub topic: Option<String>,
    /// Stop after this many events.
    pub limit: Option<u64>,
}

/// Follows the tap of the pipeline `pipeline` at `bind` (with the endpoint's `token`): each
/// event's line to `out` as it comes, the count of missed events to `missed`; returns the
/// events written once the tap ends, or a one-line reason.
pub fn follow(
    endpoint: &super::admin::Endpoint,
    pipeline: &str,
    request: &TapRequest,
    (out, missed): (&mut dyn std::io::Write, &mut dyn std::io::Write),
) -> Result<u64, String> {
    use std::io::{BufRead, Read, Write};
    let mut query = Vec::new();
    if let Some(s) = &request.sink {
        query.push(format!("sink={}", encode(s)));
    }
    if let Some(t) = &request.topic {
        query.push(format!("topic={}", encode(t)));
    }
    if let Some(l) = request.limit {
        query.push(format!("limit={l}"));
    }
    let (bind, auth) = (&endpoint.bind, endpoint.bearer());
    // A tap waits as long as no event comes.
    let mut stream = endpoint.connect(pipeline, None)?;
    write!(
        stream,
        "GET /pipelines/{pipeline}/tap?{} HTTP/1.1\r\nhost: {bind}\r\n{auth}connection: close\r\n\r\n",
        query.join("&")
    )
    .map_err(|e| format!("sending the request to {bind}: {e}"))?;
    let mut reader = std::io::BufReader::new(stream);
    let mut status = String::new();
    reader
        .read_line(&mut status)
        .map_err(|e| format!("reading the answer from {bind}: {e}"))?;
    let code = status.split_whitespace().nth(1).unwrap_or("").to_owned();
    let mut line = String::new();
    // The head, to its empty line.
    loop {
        line.clear();
        let n = reader.read_line(&mut line).map_err(|e| e.to_string())?;
        if n == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    if code != "200" {
        let mut body = String::new();
        let _ = reader.read_to_string(&mut body);
        return Err(format!(
            "the endpoint at {bind} answered {code}: {}",
            body.trim()
        ));
    }
    let mut events = 0;
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) => return Ok(events),
            // A TLS peer that closed without its close_notify: the tap ended all the same.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(events),
            Ok(_) if line.starts_with("{\"missed\":") => {
                let _ = missed.write_all(line.as_bytes());
            }
            Ok(_) => {
                out.write_all(line.as_bytes())
                    .and_then(|()| out.flush())
                    .map_err(|e| format!("writing the events: {e}"))?;
                events += 1;
            }
            Err(e) => return Err(format!("reading the tap from {bind}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_says_what_to_tap() {
        let sinks = ["file".to_owned(), "kafka".to_owned()];
        assert_eq!(
            wanted("sink=kafka&topic=inv%5C..%2A&limit=3", &sinks),
            Ok(Wanted {
                sink: Some("kafka".into()),
                topic: Some("inv\\..*".into()),
                limit: Some(3)
            })
        );
        assert_eq!(wanted("", &sinks), Ok(Wanted::default()));
        assert!(wanted("sink=nope", &sinks)
            .unwrap_err()
            .contains("the sinks are file, kafka"));
        assert!(wanted("limit=x", &sinks).is_err());
        assert!(wanted("colour=red", &sinks).is_err());
        assert!(wanted("topic=%zz", &sinks).is_err());
        assert_eq!(decode(&encode("a b/ü.*")).as_deref(), Some("a b/ü.*"));
    }
}
