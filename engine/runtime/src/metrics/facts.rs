//! What a batch of the source's events tells the metrics, worked out where the events are (the
//! transform stage, before its transforms) and sent to the recorder as a typed [`Batch`]: no
//! lock and no allocation per event, a few field reads per event at most. The recorder keeps
//! the counts, the gauges and the progress; the events themselves never leave the stage.
//!
//! A batch whose first and last events are rows of an initial or blocking snapshot is read as
//! one snapshot run, its rows counted by runs of one topic (two field reads per run); else it is
//! read event by event (the kind of each; the phase of each row read), cut into runs of one
//! phase: a snapshot's batch may begin and end with its notifications.

use std::sync::Arc;

use sluice_engine::event::{ChangeEvent, Op, Value};

/// The source's connector type and logical name (`source.connector`, `source.name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub connector: Arc<str>,
    pub name: Arc<str>,
}

/// Rows of one table, read one after the other under one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRows {
    pub topic: Arc<str>,
    /// `db.schema.table` (or `db.table`), from the first row's `source` block.
    pub table: String,
    pub rows: u64,
}

/// Streamed changes by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changes {
    /// Every change event (`op` set): the kinds below, reads and the rest (truncates,
    /// messages). Tombstones, heartbeats and schema changes are no change events.
    pub all: u64,
    pub creates: u64,
    pub updates: u64,
    pub deletes: u64,
}

/// Events of one phase, in the order the source emitted them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Run {
    /// Rows of an initial or blocking snapshot (`source.snapshot` `true`, `first`, `last`, ...).
    Snapshot {
        tables: Vec<TableRows>,
        /// The run's last row is the snapshot's last (`last`).
        ended: bool,
    },
    /// Everything else: streamed changes, and the rows of incremental snapshots among them.
    Stream {
        changes: Changes,
        incremental: Vec<TableRows>,
        /// `source.ts_ms` of the run's last event.
        ts_ms: Option<i64>,
    },
}

/// What one batch of the source's events tells the metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The batch's sequence number in its generation.
    pub seq: u64,
    /// Who the first event with a `source` block says the source is (`None`: none has one).
    pub identity: Option<Identity>,
    pub runs: Vec<Run>,
}

fn text(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

/// Whether a `source.snapshot` value marks an initial (or blocking) snapshot's row.
pub(super) fn is_snapshot(phase: Option<&str>) -> bool {
    matches!(
        phase,
        Some("true" | "first" | "last" | "first_in_data_collection" | "last_in_data_collection")
    )
}

fn in_snapshot(event: &ChangeEvent) -> bool {
    is_snapshot(text(event.source_field("snapshot")))
}

/// An event's table as `db.schema.table` (or `db.table`), from its `source` block.
pub(super) fn table_of(event: &ChangeEvent) -> String {
    [
        event.source_field("db"),
        event.source_field("schema"),
        event.source_field("table"),
    ]
    .into_iter()
    .filter_map(text)
    .collect::<Vec<_>>()
    .join(".")
}

/// Counts `event` as a row of its topic: one more of the last run when the topic is the same.
fn add_row(tables: &mut Vec<TableRows>, event: &ChangeEvent) {
    match tables.last_mut() {
        Some(last) if Arc::ptr_eq(&last.topic, &event.topic) || last.topic == event.topic => {
            last.rows += 1;
        }
        _ => tables.push(TableRows {
            topic: event.topic.clone(),
            table: table_of(event),
            rows: 1,
        }),
    }
}

impl Batch {
    /// What `events` (batch `seq`) tell the metrics.
    pub fn of(seq: u64, events: &[ChangeEvent]) -> Batch {
        let mut batch = Batch {
            seq,
            // The first event says it, unless the batch begins with a notification.
            identity: events.iter().find_map(identity),
            runs: Vec::new(),
        };
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return batch;
        };
        if in_snapshot(first) && in_snapshot(last) {
            batch.runs.push(snapshot_run(events));
            return batch;
        }
        let mut i = 0;
        while i < events.len() {
            let snapshot = (events[i..].iter()).take_while(|e| in_snapshot(e)).count();
            let (run, len) = match snapshot {
                0 => stream_run(&events[i..]),
                n => (snapshot_run(&events[i..i + n]), n),
            };
            batch.runs.push(run);
            i += len;
        }
        batch
    }

    /// The rows of snapshots (initial, blocking and incremental) the batch holds.
    pub fn snapshot_rows(&self) -> impl Iterator<Item = (&TableRows, bool)> {
        self.runs.iter().flat_map(|run| {
            let (tables, incremental) = match run {
                Run::Snapshot { tables, .. } => (tables, false),
                Run::Stream { incremental, .. } => (incremental, true),
            };
            tables.iter().map(move |t| (t, incremental))
        })
    }

    /// Whether the batch holds the snapshot's last row.
    pub fn ends_snapshot(&self) -> bool {
        (self.runs.iter()).any(|run| matches!(run, Run::Snapshot { ended: true, .. }))
    }
}

/// Who `event` says the source is.
fn identity(event: &ChangeEvent) -> Option<Identity> {
    // The block's own strings, shared: no copy per batch.
    let shared = |field| match event.source_field(field) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    Some(Identity {
        connector: shared("connector")?,
        name: shared("name")?,
    })
}

/// Snapshot rows by runs of one topic (a run of schema change events, on their own topic and
/// with no `op`, is no table's rows).
fn snapshot_run(events: &[ChangeEvent]) -> Run {
    let mut tables: Vec<TableRows> = Vec::new();
    let mut last_row = None;
    let mut i = 0;
    while i < events.len() {
        let topic = &events[i].topic;
        let run = (events[i..].iter())
            .take_while(|e| Arc::ptr_eq(&e.topic, topic) || e.topic == *topic)
            .count();
        if events[i].op() == Some(Op::Read) {
            tables.push(TableRows {
                topic: topic.clone(),
                table: table_of(&events[i]),
                rows: run as u64,
            });
            last_row = events.get(i + run - 1);
        }
        i += run;
    }
    // The snapshot's notifications may follow its last row (in the snapshot's phase).
    let ended = last_row.and_then(|e| text(e.source_field("snapshot"))) == Some("last");
    Run::Snapshot { tables, ended }
}

/// Streamed changes by kind, and incremental snapshots' rows by table, up to the first row of
/// an initial or blocking snapshot; with the number of events read.
fn stream_run(events: &[ChangeEvent]) -> (Run, usize) {
    let mut changes = Changes::default();
    let mut incremental = Vec::new();
    let mut len = events.len();
    for (i, event) in events.iter().enumerate() {
        match event.op() {
            Some(Op::Create) => changes.creates += 1,
            Some(Op::Update) => changes.updates += 1,
            Some(Op::Delete) => changes.deletes += 1,
            Some(Op::Read) => match text(event.source_field("snapshot")) {
                Some("incremental") => add_row(&mut incremental, event),
                phase if is_snapshot(phase) => {
                    len = i;
                    break;
                }
                _ => {}
            },
            Some(_) => {}
            None => continue,
        }
        changes.all += 1;
    }
    let ts_ms = match events[..len].last().and_then(|e| e.source_field("ts_ms")) {
        Some(Value::Int64(ts)) => Some(*ts),
        _ => None,
    };
    let run = Run::Stream {
        changes,
        incremental,
        ts_ms,
    };
    (run, len)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use sluice_engine::event::{Record, Schema, SchemaType, Struct};
    use sluice_engine::Position;

    /// An event of `topic` with `op` (`None`: a schema change or heartbeat), `source.snapshot`
    /// and `source.ts_ms`, from `db.schema.table` `inventory.public.<table>`.
    pub(in crate::metrics) fn event(
        topic: &Arc<str>,
        op: Option<&str>,
        snapshot: &str,
        table: &str,
    ) -> ChangeEvent {
        let text = || Schema::primitive(SchemaType::String, true);
        let source_schema = Schema::struct_builder()
            .field("connector", text())
            .field("name", text())
            .field("ts_ms", Schema::primitive(SchemaType::Int64, false))
            .field("snapshot", text())
            .field("db", text())
            .field("schema", text())
            .field("table", text())
            .build();
        let s = |v: &str| Value::String(v.into());
        let source = [
            s("postgresql"),
            s("dbserver1"),
            Value::Int64(1_700_000_000_000),
            s(snapshot),
            s("inventory"),
            s("public"),
            s(table),
        ];
        let source = Struct::from_values(source_schema.clone(), source.to_vec());
        let envelope = Schema::struct_builder()
            .field("source", source_schema)
            .field("op", text())
            .build();
        let op = op.map_or(Value::Null, s);
        let value = source.map(|source| vec![Value::Struct(source), op]);
        let value = value.and_then(|v| Struct::from_values(envelope.clone(), v));
        ChangeEvent {
            topic: topic.clone(),
            key: None,
            value: value.map(|v| Record {
                schema: envelope,
                value: Value::Struct(v),
            }),
            headers: Vec::new(),
            position: Position::Offset(1),
        }
    }

    fn rows(topic: &Arc<str>, table: &str, rows: u64) -> TableRows {
        TableRows {
            topic: topic.clone(),
            table: format!("inventory.public.{table}"),
            rows,
        }
    }

    #[test]
    fn a_snapshot_batch_is_counted_by_table_and_its_last_row_ends_it() {
        let (a, b): (Arc<str>, Arc<str>) = ("p.public.a".into(), "p.public.b".into());
        let mut events = vec![event(&a, Some("r"), "first", "a")];
        events.extend((0..3).map(|_| event(&a, Some("r"), "true", "a")));
        events.push(event(&b, Some("r"), "last", "b"));
        // A notification after the last row, in the snapshot's phase.
        events.push(event(&"p.notes".into(), None, "true", "b"));
        let batch = Batch::of(7, &events);
        assert_eq!(batch.seq, 7);
        let identity = batch.identity.clone().map(|i| (i.connector, i.name));
        assert_eq!(identity, Some(("postgresql".into(), "dbserver1".into())));
        let tables = vec![rows(&a, "a", 4), rows(&b, "b", 1)];
        assert_eq!(
            batch.runs,
            vec![Run::Snapshot {
                tables,
                ended: true
            }]
        );
        assert!(batch.ends_snapshot());
        assert_eq!(batch.snapshot_rows().map(|(t, _)| t.rows).sum::<u64>(), 5);
    }

    #[test]
    fn streamed_changes_are_counted_by_kind_and_other_events_are_not_changes() {
        let t: Arc<str> = "p.public.t".into();
        let events = [
            event(&t, Some("c"), "false", "t"),
            event(&t, Some("u"), "false", "t"),
            event(&t, Some("u"), "false", "t"),
            event(&t, None, "false", "t"),
            event(&t, Some("t"), "false", "t"),
            event(&t, Some("d"), "false", "t"),
        ];
        let batch = Batch::of(1, &events);
        let changes = Changes {
            all: 5,
            creates: 1,
            updates: 2,
            deletes: 1,
        };
        let expected = Run::Stream {
            changes,
            incremental: Vec::new(),
            ts_ms: Some(1_700_000_000_000),
        };
        assert_eq!(batch.runs, vec![expected]);
        assert!(!batch.ends_snapshot());
    }

    #[test]
    fn a_batch_of_both_phases_is_cut_into_runs_in_order() {
        let (t, u): (Arc<str>, Arc<str>) = ("p.public.t".into(), "p.public.u".into());
        let events = [
            event(&t, Some("r"), "true", "t"),
            event(&t, Some("r"), "last", "t"),
            event(&u, Some("c"), "false", "u"),
        ];
        let batch = Batch::of(2, &events);
        let changes = Changes {
            all: 1,
            creates: 1,
            ..Changes::default()
        };
        let expected = vec![
            Run::Snapshot {
                tables: vec![rows(&t, "t", 2)],
                ended: true,
            },
            Run::Stream {
                changes,
                incremental: Vec::new(),
                ts_ms: Some(1_700_000_000_000),
            },
        ];
        assert_eq!(batch.runs, expected);
    }

    #[test]
    fn a_snapshot_between_its_notifications_is_read_as_one() {
        let (t, notes): (Arc<str>, Arc<str>) = ("p.public.t".into(), "notes".into());
        let mut note = event(&notes, None, "false", "t");
        note.value = None;
        let events = [
            note.clone(),
            event(&t, Some("r"), "first", "t"),
            event(&t, Some("r"), "last", "t"),
            note,
        ];
        let batch = Batch::of(4, &events);
        assert!(batch.ends_snapshot(), "{:?}", batch.runs);
        let rows: Vec<u64> = batch.snapshot_rows().map(|(t, _)| t.rows).collect();
        assert_eq!(rows, vec![2]);
        assert_eq!(batch.runs.len(), 3, "{:?}", batch.runs);
    }

    #[test]
    fn incremental_rows_are_counted_by_table_among_the_streamed_changes() {
        let (t, u): (Arc<str>, Arc<str>) = ("p.public.t".into(), "p.public.u".into());
        let events = [
            event(&t, Some("r"), "incremental", "t"),
            event(&t, Some("r"), "incremental", "t"),
            event(&u, Some("u"), "false", "u"),
            event(&u, Some("r"), "incremental", "u"),
            event(&u, None, "false", "u"),
        ];
        let batch = Batch::of(3, &events);
        let counted: Vec<(u64, bool)> = batch.snapshot_rows().map(|(t, i)| (t.rows, i)).collect();
        assert_eq!(counted, vec![(2, true), (1, true)]);
        assert!(!batch.ends_snapshot());
    }

    #[test]
    fn an_empty_batch_or_one_without_a_source_block_tells_nothing_of_who_the_source_is() {
        let batch = Batch::of(0, &[]);
        assert!(batch.runs.is_empty() && batch.identity.is_none());
        let t: Arc<str> = "p.t".into();
        let mut bare = event(&t, Some("c"), "false", "t");
        bare.value = None;
        let batch = Batch::of(0, &[bare]);
        assert!(batch.identity.is_none());
    }
}
