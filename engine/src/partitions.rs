//! The positions of a source that reads several partitions in one pipeline (a SQL Server
//! source's databases, as Debezium's task reads several source partitions): each partition has
//! its own position, and the pipeline's committed position holds the latest one of every
//! partition, so that each resumes after what was delivered of it.
//!
//! The committed text is `{"partitions": {"<name>": <position>, …}}`: a partition's position
//! as its JSON (a number for [`Position::Offset`], a string for opaque text that is not JSON).
//! A stored partition the source no longer lists is carried along unchanged, so that listing
//! it again resumes it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::value::RawValue;

use crate::event::Position;

/// Why a committed position cannot be split into the source's partitions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PartitionError(String);

/// The partitions' positions, as the source emits them.
#[derive(Debug, Clone)]
pub(crate) struct Partitions {
    /// The partitions the source reads, in its order.
    names: Vec<String>,
    /// The one the source emits for now.
    current: usize,
    /// What the pipeline resumed from, by partition.
    stored: Vec<Option<Position>>,
    /// The latest position of each partition (the stored one until it emits).
    latest: Vec<Option<Position>>,
    /// Stored partitions the source does not list, carried along.
    others: BTreeMap<String, Position>,
}

impl Partitions {
    /// The partitions `names`, resuming from `committed`. A position without partitions (a
    /// source that read one partition before) is the one partition's; with several, `Err`.
    pub(crate) fn new(
        names: &[String],
        committed: Option<&Position>,
    ) -> Result<Self, PartitionError> {
        let mut stored: Vec<Option<Position>> = vec![None; names.len()];
        let mut others = BTreeMap::new();
        match committed.map(split) {
            None => {}
            Some(Some(parts)) => {
                for (name, position) in parts {
                    // Database names, as the servers compare them, regardless of case.
                    match names.iter().position(|n| n.eq_ignore_ascii_case(&name)) {
                        Some(i) => stored[i] = Some(position),
                        None => {
                            tracing::info!(partition = %name, "A stored partition the source no longer reads: its position is kept.");
                            others.insert(name, position);
                        }
                    }
                }
            }
            Some(None) if names.len() == 1 => stored[0] = committed.cloned(),
            Some(None) => {
                return Err(PartitionError(format!(
                    "the committed position was written by a source reading one of {} alone, and which one it does not say: list that one alone for a run, or remove the offsets file to start over",
                    names.join(", ")
                )))
            }
        }
        Ok(Partitions {
            names: names.to_vec(),
            current: 0,
            latest: stored.clone(),
            stored,
            others,
        })
    }

    /// Emits for partition `i` from here on (ignored when out of range).
    pub(crate) fn select(&mut self, i: usize) {
        if i < self.names.len() {
            self.current = i;
        }
    }

    /// What the current partition resumes after.
    pub(crate) fn stored(&self) -> Option<&Position> {
        self.stored.get(self.current).and_then(Option::as_ref)
    }

    /// The current partition reached `position`: the pipeline's position that holds it.
    pub(crate) fn reached(&mut self, position: Position) -> Position {
        if let Some(slot) = self.latest.get_mut(self.current) {
            *slot = Some(position);
        }
        let mut entries: Vec<(&str, &Position)> = (self.names.iter())
            .zip(&self.latest)
            .filter_map(|(n, p)| Some((n.as_str(), p.as_ref()?)))
            .chain(self.others.iter().map(|(n, p)| (n.as_str(), p)))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        composite(&entries)
    }

    /// An event's position as the current partition's alone (`{"partitions": {name: …}}`),
    /// when there are several: events of two partitions at equal positions stay apart (the
    /// sinks' replay ids). `None`: one partition, the position as it is.
    pub(crate) fn event_position(&self, position: &Position) -> Option<Position> {
        if self.names.len() < 2 {
            return None;
        }
        let name = self.names.get(self.current)?;
        Some(composite(&[(name, position)]))
    }
}

/// `{"partitions": {…}}` of `entries`: objects as they are, numbers for offsets, other text as
/// a JSON string (read back as it was).
fn composite(entries: &[(&str, &Position)]) -> Position {
    let mut text = String::from(r#"{"partitions":{"#);
    for (k, (name, position)) in entries.iter().enumerate() {
        if k > 0 {
            text.push(',');
        }
        text.push_str(&quoted(name));
        text.push(':');
        match position {
            Position::Offset(n) => text.push_str(&n.to_string()),
            Position::Opaque(s) if is_object(s) => text.push_str(s),
            Position::Opaque(s) => text.push_str(&quoted(s)),
        }
    }
    text.push_str("}}");
    Position::Opaque(Arc::from(text))
}

/// Whether `s` is a JSON object.
fn is_object(s: &str) -> bool {
    s.trim_start().starts_with('{') && serde_json::from_str::<&RawValue>(s).is_ok()
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{}\"", s.escape_default()))
}

/// The partitions of a committed position (`None`: it has none).
fn split(position: &Position) -> Option<Vec<(String, Position)>> {
    let Position::Opaque(text) = position else {
        return None;
    };
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Whole<'a> {
        #[serde(borrow)]
        partitions: BTreeMap<String, &'a RawValue>,
    }
    let whole: Whole<'_> = serde_json::from_str(text).ok()?;
    let parts = whole.partitions.into_iter().map(|(name, raw)| {
        let text = raw.get();
        let position = match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Number(n)) => match n.as_u64() {
                Some(n) => Position::Offset(n),
                None => Position::Opaque(Arc::from(text)),
            },
            Ok(serde_json::Value::String(s)) => Position::Opaque(Arc::from(s)),
            _ => Position::Opaque(Arc::from(text)),
        };
        (name, position)
    });
    Some(parts.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| (*s).to_owned()).collect()
    }

    fn opaque(s: &str) -> Position {
        Position::Opaque(Arc::from(s))
    }

    /// The partitioned position `docs/positions.md` shows, as a SQL Server source wrote it:
    /// its database resumes from its own, and writing it back gives the same text.
    #[test]
    fn the_documented_partitioned_position_resumes_each_database() {
        let page = include_str!("../../docs/positions.md");
        let written = (page.lines())
            .find(|l| l.starts_with(r#"{"partitions":"#))
            .expect("the page shows a partitioned position");
        let mut p = Partitions::new(&names(&["multiSales"]), Some(&opaque(written))).unwrap();
        let own = r#"{"commit_lsn":"00000027:00000065:0001","snapshot_completed":false}"#;
        assert_eq!(p.stored(), Some(&opaque(own)));
        assert_eq!(p.reached(opaque(own)).to_string(), written);
    }

    #[test]
    fn each_partition_resumes_from_its_own_position() {
        let mut p = Partitions::new(&names(&["b", "a"]), None).unwrap();
        assert_eq!(p.stored(), None);
        let one = p.reached(opaque(r#"{"lsn":1}"#));
        assert_eq!(one.to_string(), r#"{"partitions":{"b":{"lsn":1}}}"#);
        p.select(1);
        p.reached(Position::Offset(7));
        p.select(0);
        let both = p.reached(opaque("not json"));
        assert_eq!(both.to_string(), r#"{"partitions":{"a":7,"b":"not json"}}"#);
        let mut again = Partitions::new(&names(&["a", "b", "c"]), Some(&both)).unwrap();
        assert_eq!(again.stored(), Some(&Position::Offset(7)));
        again.select(1);
        assert_eq!(again.stored(), Some(&opaque("not json")));
        again.select(2);
        assert_eq!(again.stored(), None);
        again.select(9);
        assert_eq!(again.stored(), None, "out of range keeps the current one");
    }

    #[test]
    fn unlisted_partitions_are_kept_and_plain_positions_belong_to_one() {
        let stored = opaque(r#"{"partitions":{"gone":{"x":1},"a":{"y":2}}}"#);
        let mut p = Partitions::new(&names(&["a"]), Some(&stored)).unwrap();
        assert_eq!(p.stored(), Some(&opaque(r#"{"y":2}"#)));
        assert_eq!(
            p.reached(opaque(r#"{"y":3}"#)).to_string(),
            r#"{"partitions":{"a":{"y":3},"gone":{"x":1}}}"#
        );
        let plain = opaque(r#"{"commit_lsn":"00"}"#);
        let p = Partitions::new(&names(&["a"]), Some(&plain)).unwrap();
        assert_eq!(p.stored(), Some(&plain));
        let e = Partitions::new(&names(&["a", "b"]), Some(&plain)).unwrap_err();
        assert!(e.to_string().contains("a, b"), "{e}");
        let mut p = Partitions::new(&names(&["A", "b"]), Some(&stored)).unwrap();
        assert_eq!(p.stored(), Some(&opaque(r#"{"y":2}"#)), "names in any case");
        for text in ["123", r#""quoted""#, "[1]", "plain"] {
            let again = Partitions::new(&names(&["A"]), Some(&p.reached(opaque(text)))).unwrap();
            assert_eq!(
                again.stored(),
                Some(&opaque(text)),
                "{text} read back as it was"
            );
        }
        p.select(1);
        assert_eq!(
            p.event_position(&opaque(r#"{"lsn":1}"#))
                .map(|p| p.to_string()),
            Some(r#"{"partitions":{"b":{"lsn":1}}}"#.to_owned())
        );
        let one = Partitions::new(&names(&["a"]), None).unwrap();
        assert_eq!(one.event_position(&Position::Offset(1)), None);
        let e = Partitions::new(&names(&["a", "b"]), Some(&Position::Offset(3))).unwrap_err();
        assert!(e.to_string().contains("remove the offsets file"), "{e}");
    }
}
