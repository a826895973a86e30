//! The PostgreSQL source's position, stored as a small JSON document.

use serde::{Deserialize, Serialize};
use sluice_engine::event::{push_u64, shared_text};
use sluice_engine::Position;

/// Where the source resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PgOffset {
    /// End LSN of the last transaction delivered in full (or the snapshot's consistent point):
    /// the stream restarts here and the slot may be confirmed up to here.
    pub lsn: u64,
    /// Inside a transaction: the last event delivered, by its own place in the WAL. A position
    /// of an earlier version (`tx`: a count of events) is ignored, so the transaction is read
    /// again from its start: duplicates, never a loss.
    #[serde(default, rename = "in_tx", skip_serializing_if = "Option::is_none")]
    pub tx: Option<TxPoint>,
    /// Whether the initial snapshot completed (absent: streaming position, so yes).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub snapshot_completed: bool,
}

/// One event's identity inside a transaction, which no configuration changes: a restart skips
/// exactly the events at or before it, whatever tables, operations or tombstones it emits now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
pub struct TxPoint {
    /// The transaction's commit LSN (Debezium's `lsn_commit`).
    pub lsn_commit: u64,
    /// The LSN of the change the event came from (Debezium's `lsn_proc`); `u64::MAX` for the
    /// transaction's END record.
    pub lsn_proc: u64,
    /// Which event of that change: the change's rank among the changes at the same LSN (a
    /// multi-row insert shares one) in the high 32 bits, the event's role in the low ones.
    pub part: u64,
}

impl TxPoint {
    /// Whether an event at `lsn`/`part` of transaction `commit` was delivered before this point.
    pub fn covers(&self, commit: u64, lsn: u64, part: u64) -> bool {
        self.lsn_commit == commit && (lsn, part) <= (self.lsn_proc, self.part)
    }
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

impl PgOffset {
    /// The engine position.
    pub fn position(&self) -> Position {
        // Every streamed event carries one: written by hand, as serde_json writes it (one
        // allocation, the shared text's).
        Position::Opaque(shared_text(|text| {
            text.push_str("{\"lsn\":");
            push_u64(text, self.lsn);
            if let Some(at) = self.tx {
                text.push_str(",\"in_tx\":{\"lsn_commit\":");
                push_u64(text, at.lsn_commit);
                text.push_str(",\"lsn_proc\":");
                push_u64(text, at.lsn_proc);
                text.push_str(",\"part\":");
                push_u64(text, at.part);
                text.push('}');
            }
            if !self.snapshot_completed {
                text.push_str(",\"snapshot_completed\":false");
            }
            text.push('}');
        }))
    }

    /// Reads a committed position.
    pub fn parse(position: &Position) -> Result<Self, sluice_kit::position::PositionError> {
        sluice_kit::position::parse_as(position, "postgres")
    }
}

/// `0/16B3748` → u64.
pub(super) fn parse_lsn(text: &str) -> Option<u64> {
    let (hi, lo) = text.split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

/// u64 → `0/16B3748`.
#[cfg(test)]
pub(super) fn format_lsn(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xffff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn positions_are_written_as_serde_writes_them(
            lsn: u64, tx: Option<(u64, u64, u64)>, snapshot_completed: bool
        ) {
            let tx = tx.map(|(lsn_commit, lsn_proc, part)| TxPoint { lsn_commit, lsn_proc, part });
            let offset = PgOffset { lsn, tx, snapshot_completed };
            let serde = serde_json::to_string(&offset).unwrap_or_default();
            proptest::prop_assert_eq!(offset.position(), Position::Opaque(serde.into()));
        }
    }

    #[test]
    fn offsets_and_lsns_round_trip() {
        let o = PgOffset {
            lsn: 42,
            tx: Some(TxPoint {
                lsn_commit: 50,
                lsn_proc: 44,
                part: (1 << 32) | 2,
            }),
            snapshot_completed: true,
        };
        assert_eq!(PgOffset::parse(&o.position()).ok(), Some(o));
        // An earlier version's count inside a transaction is ignored: the transaction is read
        // again from its start.
        let counted = Position::Opaque(r#"{"lsn":42,"tx":[50,3]}"#.into());
        assert_eq!(
            PgOffset::parse(&counted).ok(),
            Some(PgOffset {
                lsn: 42,
                tx: None,
                snapshot_completed: true
            })
        );
        let s = PgOffset {
            lsn: 7,
            tx: None,
            snapshot_completed: false,
        };
        assert_eq!(PgOffset::parse(&s.position()).ok(), Some(s));
        assert_eq!(parse_lsn("0/16B3748"), Some(0x16B3748));
        assert_eq!(parse_lsn(&format_lsn(0x1_0000_00FF)), Some(0x1_0000_00FF));
    }

    #[test]
    fn a_point_covers_what_came_before_it_in_its_transaction_only() {
        let at = TxPoint {
            lsn_commit: 100,
            lsn_proc: 60,
            part: 3,
        };
        assert!(at.covers(100, 50, 9));
        assert!(at.covers(100, 60, 3));
        assert!(!at.covers(100, 60, 4));
        assert!(!at.covers(100, 61, 0));
        assert!(!at.covers(90, 10, 0), "another transaction");
    }

    #[test]
    fn the_progress_is_a_field_of_the_position() {
        let offset = PgOffset {
            lsn: 42,
            tx: Some(TxPoint {
                lsn_commit: 40,
                lsn_proc: 30,
                part: 2,
            }),
            snapshot_completed: true,
        };
        let progress = serde_json::value::RawValue::from_string(
            r#"{"id":"s-1","tables":["public.a"]}"#.to_owned(),
        )
        .unwrap();
        let Position::Opaque(text) = sluice_kit::position::with_progress(&offset, &progress) else {
            panic!("not opaque");
        };
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["incremental"]["id"], "s-1");
        assert_eq!(
            PgOffset::parse(&Position::Opaque(text.clone())).unwrap(),
            offset
        );
    }
}
