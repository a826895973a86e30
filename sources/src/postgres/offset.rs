//! The PostgreSQL source's position, stored as a small JSON document.

use serde::{Deserialize, Serialize};
use sluice_engine::Position;

/// Where the source resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PgOffset {
    /// End LSN of the last transaction delivered in full (or the snapshot's consistent point):
    /// the stream restarts here and the slot may be confirmed up to here.
    pub lsn: u64,
    /// Inside a transaction: its commit LSN and how many of its events were delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx: Option<(u64, u64)>,
    /// Whether the initial snapshot completed (absent: streaming position, so yes).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub snapshot_completed: bool,
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
        // Every streamed event carries one: written by hand, as serde_json writes it.
        let mut text = String::with_capacity(64);
        let mut number = itoa::Buffer::new();
        text.push_str("{\"lsn\":");
        text.push_str(number.format(self.lsn));
        if let Some((commit, delivered)) = self.tx {
            text.push_str(",\"tx\":[");
            text.push_str(number.format(commit));
            text.push(',');
            text.push_str(number.format(delivered));
            text.push(']');
        }
        if !self.snapshot_completed {
            text.push_str(",\"snapshot_completed\":false");
        }
        text.push('}');
        Position::Opaque(text.into())
    }

    /// Reads a committed position.
    pub fn parse(position: &Position) -> Result<Self, String> {
        match position {
            Position::Opaque(text) => serde_json::from_str(text)
                .map_err(|e| format!("the committed position `{text}` is not a postgres position ({e}); remove the offsets file or rename the pipeline")),
            Position::Offset(n) => Err(format!(
                "the committed position `{n}` is not a postgres position; remove the offsets file or rename the pipeline"
            )),
        }
    }
}

/// `0/16B3748` → u64.
pub fn parse_lsn(text: &str) -> Option<u64> {
    let (hi, lo) = text.split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

/// u64 → `0/16B3748`.
#[cfg(test)]
pub fn format_lsn(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xffff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn positions_are_written_as_serde_writes_them(
            lsn: u64, tx: Option<(u64, u64)>, snapshot_completed: bool
        ) {
            let offset = PgOffset { lsn, tx, snapshot_completed };
            let serde = serde_json::to_string(&offset).unwrap_or_default();
            proptest::prop_assert_eq!(offset.position(), Position::Opaque(serde.into()));
        }
    }

    #[test]
    fn offsets_and_lsns_round_trip() {
        let o = PgOffset {
            lsn: 42,
            tx: Some((50, 3)),
            snapshot_completed: true,
        };
        assert_eq!(PgOffset::parse(&o.position()), Ok(o));
        let s = PgOffset {
            lsn: 7,
            tx: None,
            snapshot_completed: false,
        };
        assert_eq!(PgOffset::parse(&s.position()), Ok(s));
        assert_eq!(parse_lsn("0/16B3748"), Some(0x16B3748));
        assert_eq!(parse_lsn(&format_lsn(0x1_0000_00FF)), Some(0x1_0000_00FF));
    }
}
