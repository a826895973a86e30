//! A Confluent Schema Registry for tests: the REST calls a serializer makes, with Confluent's
//! semantics (ids shared by identical schemas, versions per subject, BACKWARD compatibility
//! checked on registration) and error codes (40401, 40403, 42201, 409), in memory.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value as Json};

#[derive(Default)]
struct State {
    /// Schema texts by id (index + 1).
    schemas: Vec<String>,
    /// Per subject, the ids of its versions (version = index + 1).
    subjects: BTreeMap<String, Vec<u32>>,
}

/// A running registry; it stops with the test process.
pub struct Registry {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl Registry {
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// A registry that answers 401 unless requests carry `Authorization: Basic <user:password>`.
    pub fn start_with_auth(user_info: &str) -> Self {
        use base64::Engine as _;
        Self::start_with(Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_info)
        )))
    }

    fn start_with(auth: Option<String>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (state, auth) = (shared.clone(), auth.clone());
                std::thread::spawn(move || serve(stream, &state, auth.as_deref()));
            }
        });
        Registry { url, state }
    }

    /// Kafka sink keys for Avro through this registry, then `extra` (indented by four spaces).
    pub fn avro_sink(&self, extra: &str) -> String {
        format!(
            "    format: avro\n    schema.registry.url: {}\n{extra}",
            self.url
        )
    }

    /// The schema registered under `id`.
    pub fn schema(&self, id: u32) -> Option<String> {
        let state = self.state.lock().unwrap();
        state.schemas.get(id as usize - 1).cloned()
    }

    /// The ids of a subject's versions, oldest first.
    pub fn versions(&self, subject: &str) -> Vec<u32> {
        let state = self.state.lock().unwrap();
        state.subjects.get(subject).cloned().unwrap_or_default()
    }

    /// Every subject.
    pub fn subjects(&self) -> Vec<String> {
        self.state
            .lock()
            .unwrap()
            .subjects
            .keys()
            .cloned()
            .collect()
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>, auth: Option<&str>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut stream = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        let mut authorized = auth.is_none();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((k, v)) = header.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if k.eq_ignore_ascii_case("authorization") && Some(v.trim()) == auth {
                    authorized = true;
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let mut parts = request_line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let path = target.split('?').next().unwrap_or("");
        let (status, answer) = if authorized {
            handle(method, path, &body, state)
        } else {
            error(401, 40101, "Unauthorized")
        };
        let text = answer.to_string();
        let response = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/vnd.schemaregistry.v1+json\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if stream.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn error(status: u16, code: u32, message: &str) -> (u16, Json) {
    (status, json!({"error_code": code, "message": message}))
}

fn decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&segment[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn handle(method: &str, path: &str, body: &[u8], state: &Mutex<State>) -> (u16, Json) {
    let mut state = state.lock().unwrap();
    let segments: Vec<String> = path.trim_matches('/').split('/').map(decode).collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    match (method, segments.as_slice()) {
        ("GET", ["subjects"]) => (200, json!(state.subjects.keys().collect::<Vec<_>>())),
        ("GET", ["schemas", "ids", id]) => match id
            .parse::<usize>()
            .ok()
            .and_then(|i| state.schemas.get(i.wrapping_sub(1)))
        {
            Some(s) => (200, json!({"schema": s})),
            None => error(404, 40403, "Schema not found"),
        },
        ("GET", ["subjects", subject, "versions"]) => match state.subjects.get(*subject) {
            Some(v) => (200, json!((1..=v.len()).collect::<Vec<_>>())),
            None => error(404, 40401, &format!("Subject '{subject}' not found.")),
        },
        ("GET", ["subjects", subject, "versions", version]) => {
            let Some(ids) = state.subjects.get(*subject) else {
                return error(404, 40401, &format!("Subject '{subject}' not found."));
            };
            let index = if *version == "latest" {
                ids.len()
            } else {
                version.parse().unwrap_or(0)
            };
            match ids.get(index.wrapping_sub(1)) {
                Some(id) => (
                    200,
                    json!({"subject": subject, "version": index, "id": id, "schema": state.schemas[*id as usize - 1]}),
                ),
                None => error(404, 40402, "Version not found."),
            }
        }
        ("POST", ["subjects", subject, "versions"]) | ("POST", ["subjects", subject]) => {
            let request: Json = match serde_json::from_slice(body) {
                Ok(r) => r,
                Err(_) => return error(422, 42201, "Invalid schema"),
            };
            let Some(text) = request["schema"].as_str() else {
                return error(422, 42201, "Invalid schema");
            };
            let Ok(parsed) = apache_avro::Schema::parse_str(text) else {
                return error(422, 42201, "Invalid schema");
            };
            let existing = state.subjects.get(*subject).cloned().unwrap_or_default();
            let same = |id: &u32| {
                apache_avro::Schema::parse_str(&state.schemas[*id as usize - 1])
                    .is_ok_and(|s| s == parsed)
            };
            if let Some((i, id)) = existing.iter().enumerate().find(|(_, id)| same(id)) {
                return (
                    200,
                    json!({"subject": subject, "version": i + 1, "id": id, "schema": text}),
                );
            }
            if segments.len() == 2 {
                return error(404, 40403, "Schema not found");
            }
            if let Some(latest) = existing.last() {
                let old =
                    apache_avro::Schema::parse_str(&state.schemas[*latest as usize - 1]).unwrap();
                // BACKWARD: consumers with the new schema read data written with the old one.
                if apache_avro::schema_compatibility::SchemaCompatibility::can_read(&old, &parsed)
                    .is_err()
                {
                    return error(409, 409, "Schema being registered is incompatible with an earlier schema for subject");
                }
            }
            let id = match state
                .schemas
                .iter()
                .position(|s| apache_avro::Schema::parse_str(s).is_ok_and(|s| s == parsed))
            {
                Some(i) => i as u32 + 1,
                None => {
                    state.schemas.push(text.to_owned());
                    state.schemas.len() as u32
                }
            };
            state
                .subjects
                .entry((*subject).to_owned())
                .or_default()
                .push(id);
            (200, json!({"id": id}))
        }
        _ => error(404, 404, "HTTP 404 Not Found"),
    }
}
