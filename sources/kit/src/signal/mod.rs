//! Signals (Debezium's signaling), one model for every source: what a signal is, what it asks
//! for, and the channels it arrives by. A malformed or unknown signal is logged with its id and
//! ignored; it never stops the pipeline.
//!
//! Channels: `source` (rows of the signaling table, read from the source's own log: the source
//! hands their `id`, `type` and `data` to [`Signal`]), [`file`](mod@file) (JSON lines of `signal.file`),
//! [`kafka`] (records of a topic) and `http` (the admin endpoint, one JSON line per signal).

pub mod blocking;
pub mod channels;
mod error;
pub mod file;
#[cfg(feature = "kafka-signals")]
pub mod kafka;

use std::collections::BTreeMap;

use serde::Deserialize;
use sluice_engine::{ChangeEvent, Op, Value};

pub use blocking::BlockingRequest;
pub use channels::{ChannelError, Channels, Received};
pub use error::SignalRefused;
pub use file::{FileChannel, PolledFile};

/// Prefix of the `kafka` channel's consumer properties passed through
/// (`signal.consumer.security.protocol`, ...).
pub const SIGNAL_CONSUMER_PREFIX: &str = "signal.consumer.";

/// Where the `kafka` channel reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSignalSettings {
    /// `signal.kafka.bootstrap.servers`.
    pub bootstrap_servers: String,
    /// `signal.kafka.topic`.
    pub topic: String,
    /// `signal.kafka.groupId`.
    pub group_id: String,
    /// The key signals must carry (`topic.prefix`).
    pub key: String,
    /// `signal.consumer.*` properties, without the prefix.
    pub consumer: sluice_engine::config::Properties,
}

/// Watermark rows written by the incremental snapshot (not signals).
pub const WINDOW_OPEN: &str = "snapshot-window-open";
/// See [`WINDOW_OPEN`].
pub const WINDOW_CLOSE: &str = "snapshot-window-close";

/// One signal as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    /// Free-form id (labels log lines).
    pub id: String,
    /// `execute-snapshot`, `stop-snapshot`, `pause-snapshot`, `resume-snapshot`, `log`.
    pub kind: String,
    /// JSON text.
    pub data: Option<String>,
}

/// What a signal asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Snapshot the tables matching `collections` (regexes on `schema.table` or
    /// `db.schema.table`).
    Execute {
        /// `true`: blocking (pause the stream), `false`: incremental.
        blocking: bool,
        /// Table regexes.
        collections: Vec<String>,
        /// Extra WHERE conditions by table (as written in the signal).
        conditions: BTreeMap<String, String>,
        /// Column used as the key instead of the primary key.
        surrogate_key: Option<String>,
    },
    /// Stop the incremental snapshot (`None`: all of it).
    Stop(Option<Vec<String>>),
    /// Pause the incremental snapshot.
    Pause,
    /// Resume it.
    Resume,
    /// Write a message to the log.
    Log(String),
}

#[derive(Deserialize)]
struct Condition {
    #[serde(rename = "data-collection")]
    collection: String,
    filter: String,
}

#[derive(Deserialize)]
struct ExecuteData {
    #[serde(rename = "data-collections")]
    collections: Option<Vec<String>>,
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(rename = "additional-conditions", default)]
    conditions: Vec<Condition>,
    #[serde(rename = "surrogate-key")]
    surrogate_key: Option<String>,
}

#[derive(Deserialize)]
struct StopData {
    #[serde(rename = "data-collections")]
    collections: Option<Vec<String>>,
    #[serde(rename = "type")]
    kind: Option<String>,
}

#[derive(Deserialize)]
struct LogData {
    message: String,
}

/// A file-channel line: `{"id": .., "type": .., "data": {..}}` (`data` may also be a string).
#[derive(Deserialize)]
struct FileLine {
    #[serde(default)]
    id: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Option<serde_json::Value>,
}

/// The tables a signal's `data-collections` select: anchored regexes on the source's table
/// name (`schema.table`, or `table` where the database has no schemas), which match the name
/// with the database's qualifier in front (`db.schema.table`, `main.table`) too.
#[derive(Debug)]
pub struct Collections {
    regexes: Vec<regex::Regex>,
    qualifier: String,
}

impl Collections {
    /// The patterns of a signal, already checked by [`interpret`] (an invalid one matches
    /// nothing); `qualifier` is what may stand before a name (a database name).
    pub fn new(patterns: &[String], qualifier: &str) -> Self {
        Collections {
            regexes: patterns
                .iter()
                .filter_map(|p| regex::Regex::new(&format!("^(?:{p})$")).ok())
                .collect(),
            qualifier: format!("{qualifier}."),
        }
    }

    /// Whether the table named `name` is selected.
    pub fn matches(&self, name: &str) -> bool {
        self.regexes
            .iter()
            .any(|r| r.is_match(name) || r.is_match(&format!("{}{name}", self.qualifier)))
    }

    /// The names of `tables` selected, in the order of the patterns that select them (the
    /// order a signal lists its collections in, as Debezium snapshots them), each once.
    pub fn select<'a>(&self, tables: impl IntoIterator<Item = &'a String> + Clone) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in &self.regexes {
            for t in tables.clone() {
                let hit = r.is_match(t) || r.is_match(&format!("{}{t}", self.qualifier));
                if hit && !out.contains(t) {
                    out.push(t.clone());
                }
            }
        }
        out
    }
}

/// The tables of `captured` a signal's `collections` select ([`Collections::select`]);
/// `Err` says none does.
pub fn select_captured(
    collections: &[String],
    captured: &[String],
    qualifier: &str,
) -> Result<Vec<String>, SignalRefused> {
    let tables = Collections::new(collections, qualifier).select(captured);
    if tables.is_empty() {
        return Err(SignalRefused::NothingSelected(collections.to_vec()));
    }
    Ok(tables)
}

/// Which of a source's partitions (each its qualifier, the database name, and its captured
/// tables) carry out `signal`, when one source reads several databases: a snapshot signal the
/// databases whose tables its `data-collections` select (`db.schema.table` names one database,
/// `schema.table` the table of that name in each); pausing, resuming and stopping without
/// collections, every database; a log message, a no-op and a signal that selects nothing or
/// is not understood, the first, which logs it or refuses it once.
pub fn route(signal: &Signal, partitions: &[(&str, &[String])]) -> Vec<usize> {
    let selecting = |collections: &[String]| -> Vec<usize> {
        (partitions.iter().enumerate())
            .filter(|(_, (qualifier, captured))| {
                !Collections::new(collections, qualifier)
                    .select(captured.iter())
                    .is_empty()
            })
            .map(|(i, _)| i)
            .collect()
    };
    let all = || (0..partitions.len()).collect();
    let targets: Vec<usize> = match interpret(signal) {
        Ok(Some(Action::Execute { collections, .. })) => selecting(&collections),
        Ok(Some(Action::Stop(Some(collections)))) => selecting(&collections),
        Ok(Some(Action::Stop(None) | Action::Pause | Action::Resume)) => all(),
        Ok(Some(Action::Log(_)) | None) | Err(_) => Vec::new(),
    };
    if targets.is_empty() && !partitions.is_empty() {
        return vec![0];
    }
    targets
}

/// The signal an insert into the signaling table carries (its after image's `id`, `type`
/// and `data` columns): the `source` channel of a source that turns the signaling table's
/// rows into change events first. `None`: not an insert, or no `type`.
pub fn from_insert(event: &ChangeEvent) -> Option<Signal> {
    if event.op() != Some(Op::Create) {
        return None;
    }
    let after = event
        .value
        .as_ref()?
        .value
        .as_struct()?
        .get("after")?
        .as_struct()?;
    // By name in any case (Db2 and Oracle keep names in upper case), else by position:
    // Debezium requires the three columns in this order, whatever their names.
    let fields = after.schema().fields();
    let text = |name: &str, position: usize| {
        let i = (fields.iter())
            .position(|f| f.name.eq_ignore_ascii_case(name))
            .unwrap_or(position);
        match after.values().get(i) {
            Some(Value::String(s)) => Some(s.to_string()),
            Some(Value::Bytes(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    };
    Some(Signal {
        id: text("id", 0).unwrap_or_default(),
        kind: text("type", 1)?,
        data: text("data", 2).filter(|d| !d.trim().is_empty()),
    })
}

/// Parses a line of `signal.file`.
pub fn from_json_line(line: &str) -> Result<Signal, SignalRefused> {
    let parsed: FileLine = serde_json::from_str(line).map_err(SignalRefused::NotASignal)?;
    let data = parsed.data.map(|d| match d {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    });
    Ok(Signal {
        id: parsed.id.unwrap_or_else(|| "file".into()),
        kind: parsed.kind,
        data,
    })
}

fn data<'a, T: Deserialize<'a>>(signal: &'a Signal) -> Result<T, SignalRefused> {
    let text = signal.data.as_deref().unwrap_or("{}");
    serde_json::from_str(text).map_err(SignalRefused::InvalidData)
}

/// What `signal` asks for; `Ok(None)` for a no-op (an empty collection list).
pub fn interpret(signal: &Signal) -> Result<Option<Action>, SignalRefused> {
    match signal.kind.as_str() {
        "execute-snapshot" => {
            let d: ExecuteData = data(signal)?;
            let collections = d.collections.ok_or(SignalRefused::NoCollections)?;
            if collections.is_empty() {
                return Ok(None);
            }
            for c in &collections {
                regex::Regex::new(c).map_err(|cause| SignalRefused::InvalidCollection {
                    collection: c.clone(),
                    reason: cause.to_string().lines().last().unwrap_or_default().into(),
                    cause,
                })?;
            }
            let blocking = match d.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
                None | Some("incremental") => false,
                Some("blocking") => true,
                Some(other) => return Err(SignalRefused::SnapshotType(other.into())),
            };
            let mut conditions = BTreeMap::new();
            for c in d.conditions {
                if conditions.insert(c.collection.clone(), c.filter).is_some() {
                    return Err(SignalRefused::TwoConditions(c.collection));
                }
            }
            Ok(Some(Action::Execute {
                blocking,
                collections,
                conditions,
                surrogate_key: d.surrogate_key,
            }))
        }
        "stop-snapshot" => {
            let d: StopData = data(signal)?;
            match d.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
                Some("incremental") => {}
                Some(other) => return Err(SignalRefused::CannotStop(other.into())),
                None => return Err(SignalRefused::StopWithoutType),
            }
            Ok(Some(Action::Stop(d.collections.filter(|c| !c.is_empty()))))
        }
        "pause-snapshot" => Ok(Some(Action::Pause)),
        "resume-snapshot" => Ok(Some(Action::Resume)),
        "log" => {
            let d: LogData = data(signal)?;
            Ok(Some(Action::Log(d.message)))
        }
        other => Err(SignalRefused::UnknownType(other.into())),
    }
}

/// The admin endpoint's signal queue, when `signal.enabled.channels` has `http`; `Err` says
/// how to turn the endpoint on when it is off.
pub fn http_queue(
    common: &crate::config::SourceCommon,
    ctx: &sluice_engine::SourceContext,
) -> Result<Option<sluice_engine::component::SignalQueue>, String> {
    if !common.signal_channel("http") {
        return Ok(None);
    }
    ctx.external_signals().map(Some).ok_or_else(|| {
        "the `http` signal channel needs the pipeline's admin endpoint: add `admin: { bind: \"127.0.0.1:8083\" }` at the top of the pipeline file".to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_go_to_the_databases_they_name() {
        let signal = |kind: &str, data: &str| Signal {
            id: "s".into(),
            kind: kind.into(),
            data: Some(data.into()),
        };
        let a = ["dbo.orders".to_owned(), "dbo.users".to_owned()];
        let b = ["dbo.orders".to_owned()];
        let parts: [(&str, &[String]); 2] = [("a", &a), ("b", &b)];
        let exec = |c: &str| {
            signal(
                "execute-snapshot",
                &format!(r#"{{"data-collections": ["{c}"]}}"#),
            )
        };
        assert_eq!(route(&exec("b.dbo.orders"), &parts), [1]);
        assert_eq!(route(&exec("dbo.orders"), &parts), [0, 1]);
        assert_eq!(route(&exec("a.dbo.users"), &parts), [0]);
        assert_eq!(route(&exec("b.dbo.users"), &parts), [0], "refused once");
        let stop = r#"{"type": "incremental", "data-collections": ["b.dbo.orders"]}"#;
        assert_eq!(route(&signal("stop-snapshot", stop), &parts), [1]);
        let all = r#"{"type": "incremental"}"#;
        assert_eq!(route(&signal("stop-snapshot", all), &parts), [0, 1]);
        assert_eq!(route(&signal("pause-snapshot", "{}"), &parts), [0, 1]);
        assert_eq!(route(&signal("log", r#"{"message": "hi"}"#), &parts), [0]);
        assert_eq!(route(&signal("nonsense", "{}"), &parts), [0]);
        assert!(route(&exec("x"), &[]).is_empty());
    }

    fn interpret_text(signal: &Signal) -> Result<Option<Action>, String> {
        interpret(signal).map_err(|e| e.to_string())
    }

    fn signal(kind: &str, data: &str) -> Signal {
        Signal {
            id: "s1".into(),
            kind: kind.into(),
            data: Some(data.into()),
        }
    }

    #[test]
    fn debezium_payloads_parse() {
        let a = interpret(&signal(
            "execute-snapshot",
            r#"{"data-collections": ["public.a", "public.b"], "type": "INCREMENTAL", "additional-conditions": [{"data-collection": "public.a", "filter": "color='blue'"}]}"#,
        ));
        let Ok(Some(Action::Execute {
            blocking,
            collections,
            conditions,
            ..
        })) = a
        else {
            panic!("{a:?}")
        };
        assert!(!blocking);
        assert_eq!(collections, ["public.a", "public.b"]);
        assert_eq!(conditions["public.a"], "color='blue'");
        assert_eq!(
            interpret_text(&signal("execute-snapshot", r#"{"data-collections": []}"#)),
            Ok(None)
        );
        assert_eq!(
            interpret_text(&signal("stop-snapshot", r#"{"type": "incremental"}"#)),
            Ok(Some(Action::Stop(None)))
        );
        assert_eq!(
            interpret_text(&signal("log", r#"{"message": "hello"}"#)),
            Ok(Some(Action::Log("hello".into())))
        );
        let line = from_json_line(r#"{"id": "f1", "type": "pause-snapshot", "data": {}}"#).unwrap();
        assert!(matches!(interpret(&line), Ok(Some(Action::Pause))));
    }

    #[test]
    fn malformed_signals_are_errors_with_a_reason() {
        let cases = [
            ("execute-snapshot", "{not json", "not valid"),
            (
                "execute-snapshot",
                r#"{"type": "incremental"}"#,
                "`data-collections` is missing",
            ),
            (
                "execute-snapshot",
                r#"{"data-collections": ["public.(x"]}"#,
                "not a valid regex",
            ),
            (
                "execute-snapshot",
                r#"{"data-collections": ["a"], "type": "sideways"}"#,
                "not supported",
            ),
            (
                "stop-snapshot",
                r#"{"data-collections": ["a"]}"#,
                "`type` is required",
            ),
            ("reboot", "{}", "unknown signal type"),
            ("log", "{}", "not valid"),
        ];
        for (kind, data, reason) in cases {
            let e = interpret(&signal(kind, data)).unwrap_err().to_string();
            assert!(e.contains(reason), "{kind} {data}: {e}");
        }
        assert!(from_json_line("[1, 2]").is_err());
    }

    #[test]
    fn collections_match_names_with_or_without_the_qualifier() {
        let c = Collections::new(
            &["public.a".into(), "inventory.public.b.*".into()],
            "inventory",
        );
        assert!(c.matches("public.a"));
        assert!(c.matches("public.bc"));
        assert!(!c.matches("public.ab"), "anchored");
        let tables = ["public.a".to_owned(), "public.c".to_owned()];
        assert_eq!(c.select(&tables), ["public.a"]);
        let main = Collections::new(&["main.orders".into(), "c.*".into()], "main");
        assert_eq!(
            main.select(&["customers".to_owned(), "orders".to_owned(), "x".to_owned()]),
            ["orders", "customers"],
            "in the signal's order"
        );
    }
}
