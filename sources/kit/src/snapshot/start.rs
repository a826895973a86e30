//! Where a snapshot's rows go out and where the stream after it starts: the rule that makes a
//! snapshot cut off (kill -9, a crash) lose nothing, kept here so that no source has to
//! remember it.
//!
//! A snapshot's rows reflect the tables at the position it reads at; the stream starts there.
//! If a first snapshot is cut off after some rows went out, the next start takes a new
//! snapshot at a later position: a row delivered by the first and deleted in between is in
//! neither the second snapshot nor the stream after it, so its delete would never arrive.
//! Hence, as Debezium's PostgreSQL connector (whose slot keeps the position) and Sluice's
//! SQLite source do:
//! - a **first** snapshot commits the position it reads at before its first row goes out
//!   ([`pin`]: a batch with no event, committed as soon as every sink has what came before it);
//! - a snapshot taken **again** after one was cut off (a stored position whose snapshot is not
//!   completed and can still be read from the log) leaves that stored position in place: its
//!   rows go out at it, and the stream after it starts there, so the changes made between the
//!   two snapshots (the deletes among them) follow. Changes the new snapshot already holds may
//!   come again: at least once, never lost.

use sluice_engine::{Position, SourceContext, Stopped};

use super::{Plan, Stored};

/// Where a snapshot's rows go out and the stream after it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start<P> {
    /// A first snapshot (or one whose earlier position is gone from the log): its own
    /// position, committed before its first row ([`pin`]).
    Pin(P),
    /// A snapshot taken again after one was cut off at this stored position: the rows go out
    /// at it and the stream starts from it.
    Resume(P),
}

impl<P> Start<P> {
    /// Decides where a snapshot read at `read_at` starts; `cut_off`: the stored position of a
    /// snapshot that did not complete and whose position the log still holds.
    pub fn of(cut_off: Option<P>, read_at: P) -> Self {
        match cut_off {
            Some(stored) => Start::Resume(stored),
            None => Start::Pin(read_at),
        }
    }

    /// The stored position a snapshot about to be taken resumes: `stored_at`, when the `plan`
    /// reads the data and the `stored` offset is a snapshot's that did not complete and whose
    /// position the log still holds; else `None` (the snapshot's own position is pinned).
    pub fn cut_off(plan: &Plan, stored: Stored, stored_at: Option<P>) -> Option<P> {
        let cut =
            plan.data && stored.offset && !stored.snapshot_completed && stored.position_available;
        stored_at.filter(|_| cut)
    }

    /// Begins a snapshot read at `read_at`: decides where it starts ([`Self::of`]) and, for a
    /// first snapshot, commits that position before the first row goes out ([`pin`]);
    /// `under_way(p)`: the pipeline position of `p` while a snapshot is under way.
    /// `Err(Stopped)`: the pipeline stops meanwhile.
    pub async fn begin(
        ctx: &mut SourceContext,
        cut_off: Option<P>,
        read_at: P,
        under_way: impl Fn(&P) -> Position,
    ) -> Result<Self, Stopped> {
        let start = Start::of(cut_off, read_at);
        match &start {
            Start::Pin(at) => pin(ctx, under_way(at)).await?,
            Start::Resume(at) => {
                tracing::info!(position = %under_way(at), "An earlier snapshot was cut off: this one goes out at its position and the log is read again from there, so the changes made since (deletes too) follow.");
            }
        }
        Ok(start)
    }

    /// The position the rows go out at and the stream starts from.
    pub fn position(&self) -> &P {
        match self {
            Start::Pin(p) | Start::Resume(p) => p,
        }
    }

    /// The same start with its position mapped (marked completed, say).
    pub fn map<Q>(self, f: impl FnOnce(P) -> Q) -> Start<Q> {
        match self {
            Start::Pin(p) => Start::Pin(f(p)),
            Start::Resume(p) => Start::Resume(f(p)),
        }
    }
}

/// Commits `position` before a first snapshot's first row: sends it in a batch with no event
/// and waits until it is committed (every sink has what came before it), asking the runtime
/// to commit at once ([`SourceContext::commit_position`]). `Err(Stopped)`: the pipeline stops
/// meanwhile.
pub async fn pin(ctx: &mut SourceContext, position: Position) -> Result<(), Stopped> {
    tracing::debug!(%position, "Waiting for the snapshot's position to be committed.");
    ctx.commit_position(position).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_off_snapshot_keeps_its_stored_position() {
        assert_eq!(Start::of(Some(3), 9), Start::Resume(3));
        assert_eq!(*Start::of(Some(3), 9).position(), 3);
        assert_eq!(Start::of(Some(3), 9).map(|p| p + 1), Start::Resume(4));
    }

    #[test]
    fn a_first_snapshot_pins_its_own_position() {
        assert_eq!(Start::of(None, 9), Start::Pin(9));
    }

    #[test]
    fn only_a_cut_off_snapshot_still_in_the_log_is_resumed() {
        let data = Plan {
            data: true,
            schema: true,
            stream: true,
        };
        let cut = Stored {
            offset: true,
            snapshot_completed: false,
            position_available: true,
            history_available: true,
        };
        assert_eq!(Start::cut_off(&data, cut, Some(3)), Some(3));
        let done = Stored {
            snapshot_completed: true,
            ..cut
        };
        assert_eq!(Start::cut_off(&data, done, Some(3)), None);
        let gone = Stored {
            position_available: false,
            ..cut
        };
        assert_eq!(Start::cut_off(&data, gone, Some(3)), None);
        let stream_only = Plan {
            data: false,
            ..data
        };
        assert_eq!(Start::cut_off(&stream_only, cut, Some(3)), None);
    }
}
