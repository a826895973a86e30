//! `GET /pipelines/{name}/tap` on the admin endpoint, and `sluice tap`'s side of it: the
//! events the sinks are handed, one JSON line each (`{"sink":..,"topic":..,"key":..,
//! "value":..}`, values without schemas), as they come, until `limit` lines, the client
//! leaves, or the pipeline ends. The last line says how many events the tap missed when its
//! buffer was full (`{"missed": n}`), when it missed any. A tap silent for a while sends an
//! empty line, which `sluice tap` skips: writing it is how a client that left is noticed.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;

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
pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// How long a tap may stay silent: then it sends an empty line, which tells whether its
/// client is still there (a client that left is let go at the next write).
const IDLE: Duration = Duration::from_secs(5);

/// How long a tap waits for its client to take a line before letting it go.
const STALLED: Duration = Duration::from_secs(10);

/// The answer to a tap `query` asks for: its lines as they come, until its limit, the
/// client's leaving or the pipeline's end, then the count of events it missed (if any).
pub(super) fn open(
    (taps, sinks): (&Taps, &[String]),
    query: &str,
    deadline: super::admin::Deadline,
) -> hyper::Response<super::admin::http::Body> {
    let listening = wanted(query, sinks)
        .and_then(|w| Ok((taps.listen(w.sink.clone(), w.topic.as_deref())?, w.limit)));
    let (mut tap, limit) = match listening {
        Ok(found) => found,
        Err(reason) => {
            return super::admin::http::response(super::admin::http::plain(400, reason));
        }
    };
    deadline.lift();
    let (lines, body) = tokio::sync::mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        let mut sent = 0u64;
        while limit.is_none_or(|l| sent < l) {
            let next = tokio::select! {
                // The connection is gone (its client left): so is the tap.
                () = lines.closed() => return,
                next = tokio::time::timeout(IDLE, tap.lines.recv()) => next,
            };
            let line = match next {
                Ok(Some(line)) => {
                    sent += 1;
                    Bytes::from(line)
                }
                Ok(None) => break,
                Err(_) => Bytes::from_static(b"\n"),
            };
            match tokio::time::timeout(STALLED, lines.send(line)).await {
                Ok(Ok(())) => {}
                // The client left: the connection is gone, and the tap with it.
                Ok(Err(_)) => return,
                // A client that stops reading is let go (its tap missing nothing meanwhile).
                Err(_) => return deadline.cut(),
            }
        }
        let missed = tap.missed.load(Ordering::Relaxed);
        if missed > 0 {
            let _ = lines
                .send(Bytes::from(format!("{{\"missed\":{missed}}}\n")))
                .await;
        }
    });
    let mut response = hyper::Response::new(super::admin::http::Body::Lines(body));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/x-ndjson"),
    );
    response
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
) -> Result<u64, super::admin::ClientError> {
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
    let bind = &endpoint.bind;
    let target = format!("/pipelines/{}/tap?{}", encode(pipeline), query.join("&"));
    let mut events = 0;
    let mut pending = Vec::new();
    // A tap waits as long as no event comes.
    let mut each = |chunk: &[u8]| -> Result<(), super::admin::ClientError> {
        pending.extend_from_slice(chunk);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if line == b"\n" {
                // The tap's sign of life.
            } else if line.starts_with(b"{\"missed\":") {
                let _ = missed.write_all(&line);
            } else {
                out.write_all(&line)
                    .and_then(|()| out.flush())
                    .map_err(super::admin::ClientError::Output)?;
                events += 1;
            }
        }
        Ok(())
    };
    let call = super::admin::Call {
        pipeline,
        method: "GET",
        target: &target,
        body: None,
        timeout: None,
    };
    let (status, body) = endpoint.stream(&call, &mut each)?;
    if status != 200 {
        return Err(super::admin::ClientError::Answered {
            bind: bind.clone(),
            status,
            body: body.trim().to_owned(),
        });
    }
    Ok(events)
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
