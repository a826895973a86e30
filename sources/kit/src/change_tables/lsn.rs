//! Binary log sequence numbers as change-table servers keep them (SQL Server's `binary(10)`,
//! Db2's `VARCHAR(16) FOR BIT DATA`) and the position a change-table source stores.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An `N`-byte LSN, ordered as its bytes; printed as Debezium prints both servers' LSNs: lower
/// case hex with a colon after the 4th and the 8th byte (`00000027:00000758:0003`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lsn<const N: usize>(pub [u8; N]);

impl<const N: usize> Default for Lsn<N> {
    fn default() -> Self {
        Lsn([0; N])
    }
}

impl<const N: usize> Lsn<N> {
    /// The LSN in `bytes`; `None` unless it is `N` bytes long.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Lsn)
    }

    /// Parses Debezium's printed form (colons optional).
    pub fn parse(text: &str) -> Option<Self> {
        let hex: String = text.chars().filter(|c| *c != ':').collect();
        if hex.len() != 2 * N {
            return None;
        }
        let mut out = [0u8; N];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Lsn(out))
    }

    /// The next LSN (Db2's `Lsn.increment`: the bytes as one unsigned number, plus one);
    /// `None` past the largest.
    pub fn increment(self) -> Option<Self> {
        let mut out = self.0;
        for b in out.iter_mut().rev() {
            let (v, carry) = b.overflowing_add(1);
            *b = v;
            if !carry {
                return Some(Lsn(out));
            }
        }
        None
    }

    /// Whether it is the zero LSN (nothing captured yet).
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|b| *b == 0)
    }
}

impl<const N: usize> Ord for Lsn<N> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp(&other.0)
    }
}

impl<const N: usize> PartialOrd for Lsn<N> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<const N: usize> fmt::Display for Lsn<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i == 4 || i == 8 {
                f.write_str(":")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl<const N: usize> Serialize for Lsn<N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de, const N: usize> Deserialize<'de> for Lsn<N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Lsn::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("not an LSN: {text}")))
    }
}

/// What the change-table core needs of a server's LSN: ordered, copied, printed and stored as
/// Debezium prints it, zero before anything was captured.
pub trait ChangeLsn:
    Copy
    + Ord
    + Default
    + fmt::Display
    + fmt::Debug
    + Send
    + Sync
    + Serialize
    + serde::de::DeserializeOwned
    + 'static
{
    /// The next LSN; `None` past the largest.
    fn increment(self) -> Option<Self>;
    /// Whether it is the zero LSN (nothing captured yet).
    fn is_zero(&self) -> bool;
}

impl<const N: usize> ChangeLsn for Lsn<N> {
    fn increment(self) -> Option<Self> {
        Lsn::increment(self)
    }
    fn is_zero(&self) -> bool {
        Lsn::is_zero(self)
    }
}

/// Where a change-table source is, as Debezium's SQL Server and Db2 offsets say it: the last
/// change delivered (`commit_lsn`, `change_lsn`, `event_serial_no`: the events at that pair
/// already delivered), or, after a snapshot or a poll with nothing to deliver, only
/// `commit_lsn` (everything up to it read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeOffset<L> {
    pub commit_lsn: L,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_lsn: Option<L>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_serial_no: Option<i64>,
    pub snapshot_completed: bool,
    /// With transaction metadata, inside a transaction: its counts so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction: Option<crate::records::transaction::TxState>,
}

impl<L: ChangeLsn> ChangeOffset<L> {
    /// Everything up to `commit_lsn` read.
    pub fn at(commit_lsn: L, snapshot_completed: bool) -> Self {
        ChangeOffset {
            commit_lsn,
            change_lsn: None,
            event_serial_no: None,
            snapshot_completed,
            transaction: None,
        }
    }

    /// The pipeline position it is with an incremental snapshot's delivered `progress`.
    pub fn position_with(
        &self,
        progress: Option<&serde_json::value::RawValue>,
    ) -> sluice_engine::Position {
        match progress {
            Some(p) => crate::position::with_progress(self, p),
            None => self.position(),
        }
    }

    /// The pipeline position it is (no incremental snapshot in progress).
    pub fn position(&self) -> sluice_engine::Position {
        crate::position::Resume::<&Self, serde_json::Value> {
            at: self,
            incremental: None,
        }
        .position()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsns_print_parse_and_increment_as_debezium() {
        let lsn = Lsn([0, 0, 0, 0x27, 0, 0, 0x07, 0x58, 0, 3]);
        assert_eq!(lsn.to_string(), "00000027:00000758:0003");
        assert_eq!(Lsn::parse("00000027:00000758:0003"), Some(lsn));
        assert_eq!(Lsn::<10>::parse("0000002700000758"), None);
        assert!(Lsn::parse("00000027:00000759:0000") > Some(lsn));
        let db2 = Lsn::<16>([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff]);
        assert_eq!(db2.to_string(), "00000000:00000000:00000000000001ff");
        assert_eq!(
            db2.increment().map(|l| l.0[14..].to_vec()),
            Some(vec![2, 0])
        );
        assert_eq!(Lsn([0xff; 4]).increment(), None);
        assert!(Lsn::<16>::default().is_zero());
    }

    #[test]
    fn offsets_read_back_what_they_wrote() {
        let o = ChangeOffset {
            commit_lsn: Lsn([0, 0, 0, 1]),
            change_lsn: Some(Lsn([0, 0, 0, 2])),
            event_serial_no: Some(2),
            snapshot_completed: true,
            transaction: None,
        };
        let text = serde_json::to_string(&o).unwrap();
        assert_eq!(
            text,
            r#"{"commit_lsn":"00000001","change_lsn":"00000002","event_serial_no":2,"snapshot_completed":true}"#
        );
        assert_eq!(
            serde_json::from_str::<ChangeOffset<Lsn<4>>>(&text).unwrap(),
            o
        );
    }
}
