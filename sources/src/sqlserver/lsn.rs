//! SQL Server log sequence numbers and the source's position in the change tables.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A 10-byte LSN (`binary(10)`), ordered as its bytes; printed as Debezium prints it,
/// `00000027:00000758:0003` (lower-case hex).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Lsn(pub [u8; 10]);

impl Lsn {
    /// The LSN in `bytes`; `None` unless it is 10 bytes long.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<Lsn> {
        bytes.try_into().ok().map(Lsn)
    }

    /// Parses Debezium's printed form (colons optional).
    pub(crate) fn parse(text: &str) -> Option<Lsn> {
        let hex: String = text.chars().filter(|c| *c != ':').collect();
        if hex.len() != 20 {
            return None;
        }
        let mut out = [0u8; 10];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Lsn(out))
    }
}

impl Ord for Lsn {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp(&other.0)
    }
}

impl PartialOrd for Lsn {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Lsn {
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

impl Serialize for Lsn {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Lsn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Lsn::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("not an LSN: {text}")))
    }
}

/// Where the source is, as Debezium's SQL Server offsets say it: the last change delivered
/// (`commit_lsn`, `change_lsn`, `event_serial_no`: the events at that pair already delivered),
/// or, after a snapshot or a poll with nothing to deliver, only `commit_lsn` (everything up to
/// it read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SqlServerOffset {
    pub commit_lsn: Lsn,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_lsn: Option<Lsn>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_serial_no: Option<i64>,
    pub snapshot_completed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsns_print_and_parse_as_debezium() {
        let lsn = Lsn([0, 0, 0, 0x27, 0, 0, 0x07, 0x58, 0, 3]);
        assert_eq!(lsn.to_string(), "00000027:00000758:0003");
        assert_eq!(Lsn::parse("00000027:00000758:0003"), Some(lsn));
        assert_eq!(Lsn::parse("0000002700000758"), None);
        assert!(Lsn::parse("00000027:00000759:0000") > Some(lsn));
    }
}
