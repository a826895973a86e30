//! Incremental snapshots of the change-table sources (Debezium's `execute-snapshot` signal):
//! DBLog with LSNs for watermarks. A chunk is read (by key, after the last chunk's last key, up
//! to the table's maximum key when its scan started) after reading the highest LSN `P` the
//! capture job has written, in the same transaction: every change committed at or before `P`
//! is in the chunk, and any change in it from after `P` is streamed after the window closes.
//! The window lasts until a poll has delivered everything up to `P`: a change streamed
//! meanwhile drops the chunk's row of its key, the rows left go out as `r` events with
//! `snapshot: incremental`. Signals come from the signaling table (a captured table: its
//! inserts arrive in the stream) and from the kit's `file`, `http` and `kafka` channels. The
//! kit's tracker keeps the progress, carried in the positions so a restart goes on from the
//! chunk after the last delivered.

use serde_json::value::RawValue;
use sluice_engine::{ChangeEvent, Position, SourceContext};

use crate::incremental::{next_window, Abilities, ChunkSource, Progress, Step, Tracker, Window};
use crate::signal::{ChannelError, Channels, Signal};

/// What the change-table sources' snapshots do beyond the plain incremental one: blocking
/// snapshots, `additional-conditions`, `surrogate-key`.
pub const ABILITIES: Abilities = Abilities {
    blocking: true,
    conditions: true,
    surrogate_key: true,
};

/// The incremental snapshot's state in a change-table stream; `L` is the server's LSN.
pub struct Incremental<L> {
    pub tracker: Tracker<String>,
    channels: Channels,
    /// The chunk read, waiting for the stream to pass the LSN it was read at.
    pub window: Option<Window<String, L>>,
    /// Whether any signal can come.
    enabled: bool,
    /// Rows per chunk (`incremental.snapshot.chunk.size`).
    chunk: usize,
    /// What may stand before a table's name in a signal's `data-collections` (the database).
    qualifier: String,
    /// A blocking snapshot asked for, run between polls.
    pub blocking: Option<crate::signal::BlockingRequest>,
}

impl<L: PartialOrd + Clone + Send> Incremental<L> {
    /// The channels of `common`, resuming `resumed`; `table`: whether a signaling table is
    /// read; `qualifier`: what may stand before a table's name in a signal (the database).
    pub async fn new(
        common: &crate::config::SourceCommon,
        resumed: Option<Progress<String>>,
        (table, qualifier): (bool, &str),
        ctx: &SourceContext,
    ) -> Result<Self, ChannelError> {
        let channels = Channels::open(common, ctx).await?;
        // A blocking snapshot a restart interrupted (or that had not started) runs again.
        let mut inc = Self::routed(common, resumed, (table, qualifier));
        inc.enabled = table || !channels.is_empty();
        inc.channels = channels;
        Ok(inc)
    }

    /// As [`Self::new`], for one of several partitions (a source's databases) whose `file`,
    /// `http` and `kafka` channels the source reads once and routes
    /// ([`crate::signal::route`], then [`Self::act`]).
    pub fn routed(
        common: &crate::config::SourceCommon,
        resumed: Option<Progress<String>>,
        (table, qualifier): (bool, &str),
    ) -> Self {
        let (resumed, blocking) = match resumed {
            Some(mut p) => {
                let blocking = p.blocking.take().map(|b| *b);
                (Some(p).filter(|p| !p.tables.is_empty()), blocking)
            }
            None => (None, None),
        };
        if let Some(b) = &blocking {
            tracing::info!(id = %b.id, tables = ?b.tables, "A blocking snapshot not finished before the restart runs again.");
        }
        Incremental {
            tracker: Tracker::new(resumed, common.notifications()),
            enabled: table,
            channels: Channels::none(),
            window: None,
            chunk: common.incremental_chunk_size,
            qualifier: qualifier.to_owned(),
            blocking,
        }
    }

    /// Whether anything can need a look between polls.
    pub fn active(&self) -> bool {
        self.enabled
            || self.tracker.ahead().is_some()
            || self.window.is_some()
            || self.blocking.is_some()
    }

    /// The delivered progress, for the positions (`None`: no snapshot running), with the
    /// blocking snapshot asked for and not done yet, so that a restart runs it.
    pub fn progress(&self) -> Option<Box<RawValue>> {
        let Some(blocking) = &self.blocking else {
            return self.tracker.delivered_json().map(ToOwned::to_owned);
        };
        let mut progress: Progress<String> = (self.tracker.delivered().cloned())
            .unwrap_or_else(|| Progress::new(&blocking.id, Vec::new(), Default::default(), None));
        progress.blocking = Some(Box::new(blocking.clone()));
        crate::position::render(&progress)
    }

    /// Carries out the `file`, `http` and `kafka` channels' signals.
    pub fn signals(&mut self, names: &[String]) {
        for received in self.channels.take() {
            if let Some(signal) = received.signal() {
                self.act(&signal, names);
            }
            self.channels.handled(&received);
        }
    }

    /// A streamed change: the open window's row of its key is dropped.
    pub fn evict(&mut self, change: &ChangeEvent) {
        if let Some(window) = &mut self.window {
            window.evict_by(change);
        }
    }

    /// Carries out `signal` for the captured tables `names`; the window is dropped when the
    /// progress changed under it.
    pub fn act(&mut self, signal: &Signal, names: &[String]) {
        let blocking = &mut self.blocking;
        if (self.tracker).handle(signal, names, &self.qualifier, ABILITIES, blocking) {
            self.window = None;
        }
    }

    /// Between polls, the stream having delivered everything up to `reached`: the channels'
    /// signals (for the captured tables `names`), the window closed once passed (its rows),
    /// the next chunks read (a few, so that the stream goes on in between; `find` gives a
    /// table by name). The events to deliver, at the positions `position` makes of the
    /// delivered progress.
    pub async fn step<'t, S>(
        &mut self,
        source: &mut S,
        (find, names): (
            impl Fn(&str) -> Option<&'t S::Table> + Send + Sync,
            &[String],
        ),
        reached: &L,
        position: impl Fn(Option<&RawValue>) -> Position,
    ) -> Result<Vec<ChangeEvent>, S::Error>
    where
        S: ChunkSource<Key = String, At = L>,
        S::Table: 't,
    {
        self.signals(names);
        let mut out = Vec::new();
        for _ in 0..16 {
            if let Some(window) = &self.window {
                if !window.passed_by(reached) {
                    break;
                }
            }
            if let Some(window) = self.window.take() {
                let rows = window.close(&mut self.tracker);
                out.extend(self.tracker.around(rows, &position));
                continue;
            }
            if !self.tracker.wants_chunk() {
                break;
            }
            match next_window(source, &mut self.tracker, &find, self.chunk).await? {
                Step::Window(window) => self.window = Some(*window),
                Step::Passed => {}
                Step::Later => break,
            }
        }
        out.extend(self.tracker.around(Vec::new(), &position));
        Ok(out)
    }
}

/// What a poll's delivery does for the incremental snapshot: streamed changes evict the open
/// window's rows of their keys, and the signaling table's inserts are gathered, to be carried
/// out once the poll is delivered ([`Self::finish`]). Shared by the delivery's `&self` calls.
pub struct PollWatch<L> {
    window: std::sync::Mutex<Option<Window<String, L>>>,
    signals: std::sync::Mutex<Vec<Signal>>,
}

impl<L: PartialOrd + Clone + Send> PollWatch<L> {
    /// Takes `inc`'s window for the poll.
    pub fn take(inc: &mut Incremental<L>) -> Self {
        PollWatch {
            window: std::sync::Mutex::new(inc.window.take()),
            signals: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// A change's `events` of a table that is the signaling table (`signals`) and/or captured
    /// (`captured`): the events to deliver (none for a table only read for its signals).
    pub fn pass(
        &self,
        events: Vec<ChangeEvent>,
        (signals, captured): (bool, bool),
    ) -> Vec<ChangeEvent> {
        if signals {
            if let Ok(mut found) = self.signals.lock() {
                found.extend(events.iter().filter_map(crate::signal::from_insert));
            }
        }
        if !captured {
            return Vec::new();
        }
        if let Ok(mut window) = self.window.lock() {
            if let Some(window) = window.as_mut() {
                events.iter().for_each(|e| window.evict_by(e));
            }
        }
        events
    }

    /// The poll delivered: the window back in `inc`, the signals carried out for the captured
    /// tables `names`.
    pub fn finish(self, inc: &mut Incremental<L>, names: &[String]) {
        inc.window = self.window.into_inner().unwrap_or_default();
        for signal in self.signals.into_inner().unwrap_or_default() {
            inc.act(&signal, names);
        }
    }
}

/// `(k1, k2, …) > (v1, v2, …)` written out for servers without row comparisons:
/// `(k1 > v1) OR (k1 = v1 AND k2 > v2) …`; `keys` are the quoted key columns, `literal` writes
/// the value of key column `i` back into the query (`None`: not a value of its kind).
pub fn key_after(
    keys: &[String],
    values: &[String],
    literal: impl Fn(usize, &str) -> Option<String>,
) -> Option<String> {
    let mut alternatives = Vec::new();
    for i in 0..keys.len() {
        let mut terms = Vec::new();
        for (j, (k, v)) in keys.iter().zip(values).take(i).enumerate() {
            terms.push(format!("{k} = {}", literal(j, v)?));
        }
        terms.push(format!("{} > {}", keys[i], literal(i, values.get(i)?)?));
        alternatives.push(format!("({})", terms.join(" AND ")));
    }
    Some(format!("({})", alternatives.join(" OR ")))
}

/// The `additional-conditions` filter of `p` for the table `name` (`schema.table`), whichever
/// way the signal named it: as is, with the database `qualifier` in front, in another case.
pub fn condition<'p>(p: &'p Progress<String>, name: &str, qualifier: &str) -> Option<&'p String> {
    condition_in(&p.conditions, name, qualifier)
}

/// [`condition`] in a map of conditions by table (a blocking snapshot's).
pub fn condition_in<'c>(
    conditions: &'c std::collections::BTreeMap<String, String>,
    name: &str,
    qualifier: &str,
) -> Option<&'c String> {
    let qualified = format!("{qualifier}.{name}");
    (conditions.iter())
        .find(|(k, _)| k.eq_ignore_ascii_case(name) || k.eq_ignore_ascii_case(&qualified))
        .map(|(_, c)| c)
}

/// An integer key value as a literal (`None` unless it is one).
pub fn integer_literal(value: &str) -> Option<String> {
    let digits = value.strip_prefix('-').unwrap_or(value);
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| value.to_owned())
}

/// A decimal number key value (`-12.50`, `1E+3`: a `DECIMAL`'s or a `DECFLOAT`'s text) as a
/// literal (`None` unless it is one).
pub fn number_literal(value: &str) -> Option<String> {
    let unsigned = value.strip_prefix('-').unwrap_or(value);
    let (mantissa, exponent) = match unsigned.find(['E', 'e']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    let some = !int.is_empty() || !frac.is_empty();
    (some && digits(int) && digits(frac) && exponent_ok).then(|| value.to_owned())
}

/// Bytes kept as lower-case hexadecimal text, as `prefix` + the digits (`0x` for SQL Server;
/// `None` unless `value` is such text).
pub fn hex_literal(value: &str, prefix: &str) -> Option<String> {
    (value.len().is_multiple_of(2) && value.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("{prefix}{value}"))
}

/// The columns chunks of `table` are read by, as positions among its captured columns (`kept`
/// names them): its primary key (`key`), or the signal's `surrogate-key` column (a unique
/// column, the user's word for it, compared without regard to case). `Err` says why the table
/// cannot be read in chunks: no primary key (a streamed change finds a chunk's row by the
/// events' key, whatever the chunks are read by), or a surrogate key it does not capture.
pub fn chunk_columns(
    table: &str,
    key: &[usize],
    kept: &[&str],
    p: &Progress<String>,
) -> Result<Vec<usize>, String> {
    if key.is_empty() {
        return Err(format!(
            "{table} has no primary key to read it by in chunks"
        ));
    }
    match &p.surrogate_key {
        None => Ok(key.to_vec()),
        Some(name) => match kept.iter().position(|k| k.eq_ignore_ascii_case(name)) {
            Some(j) => Ok(vec![j]),
            None => Err(format!(
                "the surrogate key `{name}` is not a captured column of {table}"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_as_tuples_written_out() {
        let keys = ["[a]".to_owned(), "[b]".to_owned()];
        let literal = |i: usize, v: &str| match i {
            0 => integer_literal(v),
            _ => Some(format!("N'{}'", v.replace('\'', "''"))),
        };
        assert_eq!(
            key_after(&keys, &["1".into(), "x'y".into()], literal).as_deref(),
            Some("(([a] > 1) OR ([a] = 1 AND [b] > N'x''y'))")
        );
        assert_eq!(
            key_after(&keys, &["1 OR 1=1".into(), "x".into()], literal),
            None
        );
        assert_eq!(integer_literal("-12").as_deref(), Some("-12"));
        for good in ["-12.50", "0.5", ".5", "1E+3", "12", "-1.5e-7"] {
            assert_eq!(number_literal(good).as_deref(), Some(good));
        }
        for bad in ["", ".", "-", "1E", "1 OR 1=1", "0x1", "1.2.3", "NaN"] {
            assert_eq!(number_literal(bad), None, "{bad}");
        }
        assert_eq!(hex_literal("00ff", "0x").as_deref(), Some("0x00ff"));
        assert_eq!(hex_literal("0f'", "0x"), None);
        assert_eq!(hex_literal("abc", "0x"), None);
    }

    #[test]
    fn chunks_go_by_the_primary_key_or_the_surrogate_key() {
        let mut p = Progress::new("s", vec!["dbo.t".into()], Default::default(), None);
        let kept = ["id", "Code", "n"];
        assert_eq!(chunk_columns("dbo.t", &[0], &kept, &p), Ok(vec![0]));
        p.surrogate_key = Some("CODE".into());
        assert_eq!(chunk_columns("dbo.t", &[0], &kept, &p), Ok(vec![1]));
        p.surrogate_key = Some("nope".into());
        assert_eq!(
            chunk_columns("dbo.t", &[0], &kept, &p),
            Err("the surrogate key `nope` is not a captured column of dbo.t".into())
        );
        assert!(chunk_columns("dbo.t", &[], &kept, &p).is_err_and(|e| e.contains("no primary key")));
        assert_eq!(integer_literal("-"), None);
    }
}
