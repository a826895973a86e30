//! What an incremental snapshot has done and what it tells: the [`Tracker`] holds the progress
//! read ahead and the progress delivered (what positions carry), carries out the signals that
//! drive a snapshot (`execute-snapshot`, `stop-snapshot`, `pause-snapshot`,
//! `resume-snapshot`), and makes Debezium's notifications (`STARTED`, `IN_PROGRESS`,
//! `TABLE_SCAN_COMPLETED`, `COMPLETED`, `ABORTED`, `PAUSED`, `RESUMED`) as it goes. A source
//! reads the chunks and runs the windows; the bookkeeping is here, once.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::value::RawValue;

use super::Progress;
use sluice_engine::{ChangeEvent, Position};

use crate::notification::{Notification, Notifications};
use crate::signal::{select_captured, Action, BlockingRequest, Collections, Signal, SignalRefused};

/// What a source can do with a signal beyond a plain incremental snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Abilities {
    /// Blocking snapshots (`"type": "blocking"`).
    pub blocking: bool,
    /// `additional-conditions`.
    pub conditions: bool,
    /// `surrogate-key`.
    pub surrogate_key: bool,
}

/// What a signal carried out asks of the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing more (a log line, a no-op, or the tracker changed and the source reads on).
    Done,
    /// The progress changed under the chunks read ahead: drop them (the tracker already reads
    /// again from what was delivered).
    Restart,
    /// A blocking snapshot of `tables` (by the source's table names), with their conditions.
    Blocking {
        /// The tables selected, in the signal's order.
        tables: Vec<String>,
        /// Extra WHERE conditions by table.
        conditions: BTreeMap<String, String>,
    },
}

/// A chunk whose rows went out.
#[derive(Debug, Clone)]
pub struct Emitted<K> {
    /// The progress after the chunk.
    pub next: Progress<K>,
    /// The chunk's table (the source's name for it).
    pub table: String,
    /// Rows the chunk query returned.
    pub read: u64,
    /// Whether it was the table's last chunk.
    pub last_of_table: bool,
    /// The chunk's last key and the table's maximum key, as notifications show them.
    pub last_key: String,
    /// See `last_key`.
    pub max_key: String,
    /// Tables passed over after this chunk, found empty: their `TABLE_SCAN_COMPLETED` follows
    /// this chunk's.
    pub empty_after: Vec<String>,
}

/// An incremental snapshot's state between chunks (see the module's documentation).
#[derive(Debug)]
pub struct Tracker<K> {
    ahead: Option<Progress<K>>,
    delivered: Option<Progress<K>>,
    delivered_json: Option<Box<RawValue>>,
    paused: bool,
    /// The snapshot's tables, as notifications list them.
    collections: String,
    /// Rows read of the current table.
    scanned: u64,
    /// Notifications made and not yet taken (`true`: after the rows they come with).
    notes: Vec<(bool, Notification)>,
    /// The records notifications become (`notification.enabled.channels: sink`).
    sink: Option<Notifications>,
    /// What notifications put before a table's name (`main.` for SQLite).
    qualifier: String,
}

impl<K: Clone + Serialize> Tracker<K> {
    /// A tracker resuming `resumed` (from a committed position); notifications are logged,
    /// and become `sink`'s records when the sink channel is on.
    pub fn new(resumed: Option<Progress<K>>, sink: Option<Notifications>) -> Self {
        // A progress without tables is no running snapshot (a change-table source's position
        // may carry only a pending blocking snapshot).
        let resumed = resumed.filter(|p| !p.tables.is_empty());
        let mut t = Tracker {
            collections: resumed
                .as_ref()
                .map(|p| p.tables.join(","))
                .unwrap_or_default(),
            ahead: resumed.clone(),
            delivered: resumed,
            delivered_json: None,
            paused: false,
            scanned: 0,
            notes: Vec::new(),
            sink,
            qualifier: String::new(),
        };
        t.render();
        t
    }

    /// Notifications name a table `<qualifier>.<table>` (where the source's table names have
    /// no schema: SQLite's `main`).
    pub fn qualified(mut self, qualifier: &str) -> Self {
        self.qualifier = format!("{qualifier}.");
        self.collections = self.names(self.ahead.iter().flat_map(|p| &p.tables));
        self
    }

    fn name(&self, table: &str) -> String {
        format!("{}{table}", self.qualifier)
    }

    fn names<'a>(&self, tables: impl IntoIterator<Item = &'a String>) -> String {
        tables
            .into_iter()
            .map(|t| self.name(t))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Where the next chunk is read from (`None`: nothing left to read).
    pub fn ahead(&self) -> Option<&Progress<K>> {
        self.ahead.as_ref()
    }

    /// The progress after the last chunk whose rows were delivered: what positions carry.
    pub fn delivered(&self) -> Option<&Progress<K>> {
        self.delivered.as_ref()
    }

    /// [`Self::delivered`] rendered for positions ([`crate::position::with_progress`]), once
    /// per change rather than once per event.
    pub fn delivered_json(&self) -> Option<&RawValue> {
        self.delivered_json.as_deref()
    }

    /// Whether a signal paused the snapshot: no new chunk starts.
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Whether a chunk should be read now.
    pub fn wants_chunk(&self) -> bool {
        self.ahead.is_some() && !self.paused
    }

    /// The chunks read ahead were dropped: reading starts again from what was delivered.
    pub fn halt(&mut self) {
        self.ahead = self.delivered.clone();
    }

    /// The chunks read ahead got to `next` (`None`: the last table was read).
    pub fn read_ahead(&mut self, next: Option<Progress<K>>) {
        self.ahead = next.filter(|p| !p.tables.is_empty());
    }

    fn render(&mut self) {
        self.delivered_json = self.delivered.as_ref().and_then(crate::position::render);
    }

    fn id(&self) -> String {
        self.delivered
            .as_ref()
            .or(self.ahead.as_ref())
            .map(|p| p.id.clone())
            .unwrap_or_default()
    }

    /// Logs a notification and keeps it for the sink channel when that is on.
    pub fn note(
        &mut self,
        id: &str,
        kind: &'static str,
        after_rows: bool,
        data: Vec<(&'static str, String)>,
    ) {
        tracing::info!(notification = kind, id, data = ?data, "Incremental snapshot.");
        if self.sink.is_some() {
            self.notes.push((
                after_rows,
                Notification {
                    id: id.to_owned(),
                    kind,
                    aggregate: "Incremental Snapshot",
                    data,
                },
            ));
        }
    }

    /// `rows` (a closed chunk's, or none) with the notifications made since the last call
    /// around them, those made before the rows first: all at the position `position` makes
    /// of [`Self::delivered_json`]. Empty when there is nothing, without making the position.
    pub fn around(
        &mut self,
        rows: Vec<ChangeEvent>,
        position: impl FnOnce(Option<&RawValue>) -> Position,
    ) -> Vec<ChangeEvent> {
        let notes = std::mem::take(&mut self.notes);
        if rows.is_empty() && notes.is_empty() {
            return Vec::new();
        }
        let position = position(self.delivered_json());
        let Some(sink) = &self.sink else {
            return (rows.into_iter())
                .map(|mut row| {
                    row.position = position.clone();
                    row
                })
                .collect();
        };
        let records = |after: bool| {
            notes
                .iter()
                .filter(move |(a, _)| *a == after)
                .map(|(_, n)| sink.event_now(n, position.clone()))
        };
        let mut events: Vec<ChangeEvent> = records(false).collect();
        events.extend(rows.into_iter().map(|mut row| {
            row.position = position.clone();
            row
        }));
        events.extend(records(true));
        events
    }

    #[cfg(test)]
    fn take_notes(&mut self) -> Vec<(bool, Notification)> {
        std::mem::take(&mut self.notes)
    }

    /// Refuses a signal that cannot be carried out: one warning with the reason, and an
    /// `ABORTED` notification naming it.
    pub fn refuse(&mut self, signal: &Signal, reason: &SignalRefused) {
        tracing::warn!(id = %signal.id, r#type = %signal.kind, %reason, "Signal refused.");
        self.note(
            &signal.id,
            "ABORTED",
            false,
            vec![("reason", reason.to_string())],
        );
    }

    /// Starts a snapshot of `tables`, or adds them to the running one.
    pub fn execute(
        &mut self,
        id: &str,
        tables: Vec<String>,
        conditions: BTreeMap<String, String>,
        surrogate_key: Option<String>,
    ) {
        if self.ahead.is_none() && self.delivered.is_none() {
            self.collections = self.names(&tables);
            self.scanned = 0;
        } else {
            for t in &tables {
                let t = self.name(t);
                if !self.collections.split(',').any(|c| c == t) {
                    self.collections = format!("{},{t}", self.collections);
                }
            }
        }
        let collections = self.collections.clone();
        self.note(
            id,
            "STARTED",
            false,
            vec![("data_collections", collections)],
        );
        let fresh = Progress::new(id, tables.clone(), conditions.clone(), surrogate_key);
        for state in [&mut self.ahead, &mut self.delivered] {
            match state {
                Some(p) => p.add(&tables, &conditions),
                None => *state = Some(fresh.clone()),
            }
        }
        self.render();
    }

    /// Stops the snapshot of the tables `matches` selects (`None`: all of it), with `extra`
    /// in the `ABORTED` notification; reading goes on from what was delivered. `false`:
    /// no snapshot was running.
    pub fn stop(
        &mut self,
        matches: Option<&dyn Fn(&str) -> bool>,
        extra: Vec<(&'static str, String)>,
    ) -> bool {
        let Some(mut p) = self.delivered.clone().or_else(|| self.ahead.clone()) else {
            return false;
        };
        let left = match matches {
            None => {
                self.note(&p.id, "ABORTED", false, extra);
                None
            }
            Some(m) => {
                let any_left = p.stop(m);
                let mut data = vec![("data_collections", self.names(&p.tables))];
                data.extend(extra);
                self.note(&p.id, "ABORTED", false, data);
                any_left.then_some(p)
            }
        };
        self.ahead = left.clone();
        self.delivered = left;
        self.render();
        true
    }

    /// Aborts the whole snapshot for `reason` (a filter the server refused): warned, and the
    /// `ABORTED` notification names it. The stream goes on.
    pub fn abort(&mut self, reason: String) {
        tracing::warn!(%reason, "Incremental snapshot aborted; the stream goes on.");
        self.stop(None, vec![("reason", reason)]);
    }

    /// Pauses (`true`) or resumes reading chunks (`PAUSED`, `RESUMED`).
    pub fn set_paused(&mut self, id: &str, paused: bool) {
        self.paused = paused;
        let kind = if paused { "PAUSED" } else { "RESUMED" };
        self.note(id, kind, false, Vec::new());
    }

    /// A table found empty, or passed over: its `TABLE_SCAN_COMPLETED`.
    pub fn table_scanned(&mut self, table: &str, rows: u64) {
        let (id, collections, table) = (self.id(), self.collections.clone(), self.name(table));
        self.note(
            &id,
            "TABLE_SCAN_COMPLETED",
            true,
            vec![
                ("scanned_collection", table),
                ("total_rows_scanned", rows.to_string()),
                ("status", "SUCCEEDED".to_owned()),
                ("data_collections", collections),
            ],
        );
    }

    /// A chunk's rows go out: `IN_PROGRESS` before them, `TABLE_SCAN_COMPLETED` after the
    /// table's last; the delivered progress moves past it. `more`: chunks read ahead still wait
    /// for their windows (the snapshot is not complete before they are out).
    pub fn emitted(&mut self, chunk: Emitted<K>, more: bool) {
        let id = chunk.next.id.clone();
        tracing::debug!(id = %id, table = %chunk.table, chunk = chunk.next.chunks, rows = chunk.read, "Incremental snapshot chunk emitted.");
        let collections = self.collections.clone();
        self.note(
            &id,
            "IN_PROGRESS",
            false,
            vec![
                ("current_collection_in_progress", self.name(&chunk.table)),
                ("maximum_key", chunk.max_key),
                ("last_processed_key", chunk.last_key),
                ("data_collections", collections),
            ],
        );
        self.scanned += chunk.read;
        if chunk.last_of_table {
            tracing::info!(table = %chunk.table, "Incremental snapshot of the table completed.");
            let scanned = std::mem::take(&mut self.scanned);
            self.table_scanned(&chunk.table, scanned);
        }
        for empty in &chunk.empty_after {
            self.table_scanned(empty, 0);
        }
        self.delivered = Some(chunk.next);
        self.render();
        if !more && self.ahead.is_none() {
            self.complete();
        }
    }

    /// A table passed over with nothing read ahead (empty, or no longer captured; `empty`:
    /// say so with its `TABLE_SCAN_COMPLETED`): reading and delivery move to `next`, and the
    /// snapshot completes when no table is left.
    pub fn pass_over(&mut self, table: &str, next: Progress<K>, empty: bool) {
        if empty {
            self.table_scanned(table, 0);
        }
        self.read_ahead(Some(next.clone()));
        self.delivered = Some(next);
        self.render();
        if self.ahead.is_none() {
            self.complete();
        }
    }

    /// Where the next chunk starts and the table it reads (`find` looks a table up by its
    /// name among the captured ones); `None` when no chunk is to be read now, or when the
    /// current table is no longer captured (warned, and passed over).
    pub fn next_chunk_of<'t, T>(
        &mut self,
        find: impl Fn(&str) -> Option<&'t T>,
    ) -> Option<(Progress<K>, &'t T)> {
        let p = self.ahead.clone()?;
        let name = p.current()?;
        match find(name) {
            Some(table) => Some((p, table)),
            None => {
                tracing::warn!(table = %name, "A table to snapshot is no longer captured; skipped.");
                self.pass_over_current(false);
                None
            }
        }
    }

    /// The current table of the progress read ahead is passed over ([`Self::pass_over`]): the
    /// next one starts from its beginning.
    pub fn pass_over_current(&mut self, empty: bool) {
        let Some(mut next) = self.ahead.clone() else {
            return;
        };
        let Some(table) = next.current().map(str::to_owned) else {
            return;
        };
        next.table_done();
        self.pass_over(&table, next, empty);
    }

    /// The snapshot is over (`COMPLETED`, once).
    pub fn complete(&mut self) {
        let id = self.id();
        if self.delivered.take().is_some() {
            tracing::info!(signal = %id, "Incremental snapshot completed.");
            self.note(&id, "COMPLETED", true, Vec::new());
            self.render();
        }
    }

    /// Interprets `signal` and carries it out ([`Self::carry_out`]), whichever channel brought
    /// it.
    pub fn handle(
        &mut self,
        signal: &Signal,
        captured: &[String],
        qualifier: &str,
        can: Abilities,
        blocking: &mut Option<BlockingRequest>,
    ) -> bool {
        match crate::signal::interpret(signal) {
            Ok(None) => {
                tracing::info!(id = %signal.id, r#type = %signal.kind, "Signal with nothing to do.");
                false
            }
            Ok(Some(action)) => {
                self.carry_out(signal, action, (captured, qualifier), can, blocking)
            }
            Err(reason) => {
                self.refuse(signal, &reason);
                false
            }
        }
    }

    /// Carries out `action` ([`Self::act`]): a refusal is logged and notified (`ABORTED`), a
    /// blocking snapshot joins the one pending in `blocking`. `true`: the progress changed under
    /// the chunks read ahead, which the source drops (the tracker already reads again from what
    /// was delivered).
    pub fn carry_out(
        &mut self,
        signal: &Signal,
        action: Action,
        (captured, qualifier): (&[String], &str),
        can: Abilities,
        blocking: &mut Option<BlockingRequest>,
    ) -> bool {
        match self.act(signal, action, captured, qualifier, can) {
            Ok(Outcome::Restart) => {
                self.halt();
                true
            }
            Ok(Outcome::Blocking { tables, conditions }) => {
                BlockingRequest::add(blocking, &signal.id, tables, conditions);
                false
            }
            Ok(Outcome::Done) => false,
            Err(reason) => {
                self.refuse(signal, &reason);
                false
            }
        }
    }

    /// Carries out `action` (from `signal`, already [interpreted](crate::signal::interpret)
    /// and with its conditions keyed by the source's table names); `captured` are the tables a
    /// signal may select, `qualifier` what may stand before their names (the database). `Err`:
    /// why it cannot be done, for [`Self::refuse`].
    pub fn act(
        &mut self,
        signal: &Signal,
        action: Action,
        captured: &[String],
        qualifier: &str,
        can: Abilities,
    ) -> Result<Outcome, SignalRefused> {
        let unsupported = |what| Err(SignalRefused::Unsupported { what });
        match action {
            Action::Execute { blocking: true, .. } if !can.blocking => {
                unsupported("blocking snapshots (use `type: incremental`)")
            }
            Action::Execute { conditions, .. } if !conditions.is_empty() && !can.conditions => {
                unsupported("`additional-conditions`")
            }
            Action::Execute {
                surrogate_key: Some(_),
                ..
            } if !can.surrogate_key => unsupported("surrogate keys"),
            Action::Execute {
                blocking,
                collections,
                conditions,
                surrogate_key,
            } => {
                let tables = select_captured(&collections, captured, qualifier)?;
                tracing::info!(signal = %signal.id, tables = %tables.join(","), blocking, "Snapshot requested.");
                if blocking {
                    return Ok(Outcome::Blocking { tables, conditions });
                }
                // The tables a running snapshot adds are read by its surrogate key: another one
                // would read them by a column the signal did not name.
                let running = self.delivered.as_ref().or(self.ahead.as_ref());
                if let Some(p) = running.filter(|p| p.surrogate_key != surrogate_key) {
                    let by = |k: &Option<String>| match k {
                        Some(k) => format!("the surrogate key `{k}`"),
                        None => "the primary key".to_owned(),
                    };
                    return Err(SignalRefused::OtherKeyRunning {
                        running: by(&p.surrogate_key),
                        asked: by(&surrogate_key),
                    });
                }
                self.execute(&signal.id, tables, conditions, surrogate_key);
                Ok(Outcome::Restart)
            }
            Action::Stop(collections) => {
                let stop = collections.map(|c| Collections::new(&c, qualifier));
                let matches = stop.as_ref().map(|s| move |t: &str| s.matches(t));
                let matches = matches.as_ref().map(|m| m as &dyn Fn(&str) -> bool);
                Ok(if self.stop(matches, Vec::new()) {
                    tracing::info!(id = %signal.id, "Incremental snapshot stopped by a signal.");
                    Outcome::Restart
                } else {
                    Outcome::Done
                })
            }
            Action::Pause | Action::Resume => {
                let pause = action == Action::Pause;
                self.set_paused(&signal.id, pause);
                Ok(if pause {
                    Outcome::Restart
                } else {
                    Outcome::Done
                })
            }
            Action::Log(message) => {
                tracing::info!(id = %signal.id, %message, "Log signal.");
                Ok(Outcome::Done)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signal(kind: &str, data: &str) -> (Signal, Action) {
        let s = Signal {
            id: "s-1".into(),
            kind: kind.into(),
            data: Some(data.into()),
        };
        let a = match crate::signal::interpret(&s) {
            Ok(Some(a)) => a,
            other => panic!("{kind} {data}: {other:?}"),
        };
        (s, a)
    }

    fn kinds(t: &mut Tracker<i64>) -> Vec<&'static str> {
        t.take_notes().into_iter().map(|(_, n)| n.kind).collect()
    }

    fn act(
        t: &mut Tracker<i64>,
        kind: &str,
        data: &str,
        can: Abilities,
    ) -> Result<Outcome, String> {
        let (s, a) = signal(kind, data);
        let captured = ["t".to_owned(), "u".to_owned(), "sig".to_owned()];
        t.act(&s, a, &captured, "main", can)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn signals_drive_the_progress_and_the_notifications() {
        let mut t: Tracker<i64> = Tracker::new(None, Some(Notifications::new("n", "p")));
        let all = r#"{"data-collections": ["main.u", "t"]}"#;
        assert_eq!(
            act(&mut t, "execute-snapshot", all, Abilities::default()),
            Ok(Outcome::Restart)
        );
        assert_eq!(
            t.ahead().map(|p| p.tables.clone()),
            Some(vec!["u".into(), "t".into()]),
            "in the signal's order"
        );
        assert_eq!(kinds(&mut t), ["STARTED"]);
        // A chunk of u read and emitted, then u's last.
        let mut next = t.ahead().cloned().unwrap();
        next.last_key = Some(vec![3]);
        t.read_ahead(Some(next.clone()));
        let chunk = |next: Progress<i64>, last| Emitted {
            next,
            table: "main.u".into(),
            read: 3,
            last_of_table: last,
            last_key: "3".into(),
            max_key: "5".into(),
            empty_after: Vec::new(),
        };
        t.emitted(chunk(next.clone(), false), false);
        assert_eq!(
            t.delivered().and_then(|p| p.last_key.clone()),
            Some(vec![3])
        );
        next.table_done();
        t.read_ahead(Some(next.clone()));
        t.emitted(chunk(next.clone(), true), false);
        let notes = t.take_notes();
        assert_eq!(
            notes.iter().map(|(a, n)| (*a, n.kind)).collect::<Vec<_>>(),
            [
                (false, "IN_PROGRESS"),
                (false, "IN_PROGRESS"),
                (true, "TABLE_SCAN_COMPLETED")
            ]
        );
        assert_eq!(notes[2].1.data[1], ("total_rows_scanned", "6".to_owned()));
        // Paused and resumed; then t's only chunk ends the snapshot.
        assert_eq!(
            act(&mut t, "pause-snapshot", "{}", Abilities::default()),
            Ok(Outcome::Restart)
        );
        assert!(!t.wants_chunk());
        assert_eq!(
            act(&mut t, "resume-snapshot", "{}", Abilities::default()),
            Ok(Outcome::Done)
        );
        assert!(t.wants_chunk());
        next.table_done();
        t.read_ahead(Some(next.clone()));
        assert!(t.ahead().is_none());
        t.emitted(
            Emitted {
                table: "main.t".into(),
                ..chunk(next, true)
            },
            false,
        );
        assert_eq!(
            kinds(&mut t),
            [
                "PAUSED",
                "RESUMED",
                "IN_PROGRESS",
                "TABLE_SCAN_COMPLETED",
                "COMPLETED"
            ]
        );
        assert!(t.delivered().is_none() && t.delivered_json().is_none());
    }

    #[test]
    fn a_snapshot_by_another_key_waits_until_the_running_one_is_done() {
        let mut t: Tracker<i64> = Tracker::new(None, None);
        let can = Abilities {
            surrogate_key: true,
            ..Abilities::default()
        };
        let by_n = r#"{"data-collections": ["t"], "surrogate-key": "n"}"#;
        assert_eq!(
            act(&mut t, "execute-snapshot", by_n, can),
            Ok(Outcome::Restart)
        );
        let by_key = r#"{"data-collections": ["u"]}"#;
        let refused = act(&mut t, "execute-snapshot", by_key, can).unwrap_err();
        assert!(
            refused.contains("surrogate key `n`") && refused.contains("the primary key"),
            "{refused}"
        );
        let also_by_n = r#"{"data-collections": ["u"], "surrogate-key": "n"}"#;
        assert_eq!(
            act(&mut t, "execute-snapshot", also_by_n, can),
            Ok(Outcome::Restart)
        );
        assert_eq!(
            t.ahead().map(|p| p.tables.clone()),
            Some(vec!["t".into(), "u".into()])
        );
    }

    #[test]
    fn what_a_source_cannot_do_is_refused_and_stop_drops_tables() {
        let mut t: Tracker<i64> = Tracker::new(None, None);
        let blocking = r#"{"data-collections": ["t"], "type": "blocking"}"#;
        assert!(act(&mut t, "execute-snapshot", blocking, Abilities::default()).is_err());
        let can = Abilities {
            blocking: true,
            ..Abilities::default()
        };
        assert_eq!(
            act(&mut t, "execute-snapshot", blocking, can),
            Ok(Outcome::Blocking {
                tables: vec!["t".into()],
                conditions: BTreeMap::new()
            })
        );
        let filtered = r#"{"data-collections": ["t"], "additional-conditions": [{"data-collection": "t", "filter": "id > 1"}]}"#;
        assert!(
            act(&mut t, "execute-snapshot", filtered, Abilities::default())
                .unwrap_err()
                .contains("additional-conditions")
        );
        assert!(act(
            &mut t,
            "execute-snapshot",
            r#"{"data-collections": ["nope"]}"#,
            Abilities::default()
        )
        .unwrap_err()
        .contains("no captured table"));
        assert_eq!(
            act(
                &mut t,
                "stop-snapshot",
                r#"{"type": "incremental"}"#,
                Abilities::default()
            ),
            Ok(Outcome::Done),
            "nothing runs"
        );
        act(
            &mut t,
            "execute-snapshot",
            r#"{"data-collections": ["t", "u"]}"#,
            Abilities::default(),
        )
        .unwrap();
        act(
            &mut t,
            "stop-snapshot",
            r#"{"data-collections": ["main.t"], "type": "incremental"}"#,
            Abilities::default(),
        )
        .unwrap();
        assert_eq!(
            t.delivered().map(|p| p.tables.clone()),
            Some(vec!["u".into()])
        );
        act(
            &mut t,
            "stop-snapshot",
            r#"{"type": "incremental"}"#,
            Abilities::default(),
        )
        .unwrap();
        assert!(t.ahead().is_none() && t.delivered().is_none());
        // A resumed snapshot lists its tables.
        let resumed: Tracker<i64> = Tracker::new(
            Some(Progress::new("r", vec!["t".into()], BTreeMap::new(), None)),
            None,
        );
        assert!(resumed
            .delivered_json()
            .is_some_and(|j| j.get().contains("\"r\"")));
    }
}
