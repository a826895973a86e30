//! MariaDB GTID positions: per replication domain the last transaction done
//! (`domain-server-sequence`, comma-separated: `0-1-42,1-7-3`), as MariaDB's
//! `@@gtid_binlog_pos`, `BINLOG_GTID_POS()` and `@slave_connect_state` write them and as
//! Debezium's MariaDB connector keeps them in its offsets (`gtids`).

use std::collections::BTreeMap;

/// One MariaDB GTID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Gtid {
    pub domain: u32,
    pub server: u32,
    pub sequence: u64,
}

impl Gtid {
    /// `domain-server-sequence`.
    pub(super) fn parse(text: &str) -> Option<Gtid> {
        let mut parts = text.trim().splitn(3, '-');
        Some(Gtid {
            domain: parts.next()?.parse().ok()?,
            server: parts.next()?.parse().ok()?,
            sequence: parts.next()?.parse().ok()?,
        })
    }
}

impl std::fmt::Display for Gtid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}-{}", self.domain, self.server, self.sequence)
    }
}

/// A GTID position: per domain, the last GTID done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct GtidPosition {
    last: BTreeMap<u32, Gtid>,
}

impl GtidPosition {
    /// A position as MariaDB writes it; `Err` names the part that is not a GTID.
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        let mut position = GtidPosition::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let gtid =
                Gtid::parse(part).ok_or_else(|| format!("`{part}` is not a MariaDB GTID"))?;
            position.done(gtid);
        }
        Ok(position)
    }

    /// `gtid` is done: the last of its domain.
    pub(super) fn done(&mut self, gtid: Gtid) {
        self.last.insert(gtid.domain, gtid);
    }

    /// Whether every transaction up to `other` is done here too (per domain, a sequence at
    /// least `other`'s).
    pub(super) fn covers(&self, other: &GtidPosition) -> bool {
        other.last.iter().all(|(domain, theirs)| {
            self.last
                .get(domain)
                .is_some_and(|ours| ours.sequence >= theirs.sequence)
        })
    }

    /// Whether no GTID is known.
    pub(super) fn is_empty(&self) -> bool {
        self.last.is_empty()
    }
}

impl std::fmt::Display for GtidPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, gtid) in self.last.values().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{gtid}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_keep_the_last_gtid_of_each_domain() {
        let mut p = GtidPosition::parse("1-7-3, 0-1-42").unwrap();
        assert_eq!(p.to_string(), "0-1-42,1-7-3");
        p.done(Gtid::parse("0-2-43").unwrap());
        assert_eq!(p.to_string(), "0-2-43,1-7-3");
        assert!(GtidPosition::parse("").unwrap().is_empty());
        let at = |t: &str| GtidPosition::parse(t).unwrap();
        assert!(at("0-1-42,1-7-3").covers(&at("0-1-40")));
        assert!(at("0-1-42").covers(&at("")));
        assert!(!at("0-1-42").covers(&at("0-1-43")));
        assert!(!at("0-1-42").covers(&at("0-1-1,1-1-1")));
        assert!(GtidPosition::parse("0-1").is_err());
        assert!(GtidPosition::parse("0-1-x").is_err());
    }

    proptest::proptest! {
        #[test]
        fn positions_print_and_parse_back(gtids in proptest::collection::vec((0u32..4, proptest::num::u32::ANY, proptest::num::u64::ANY), 0..6)) {
            let mut p = GtidPosition::default();
            for (domain, server, sequence) in gtids {
                p.done(Gtid { domain, server, sequence });
            }
            proptest::prop_assert_eq!(GtidPosition::parse(&p.to_string()), Ok(p.clone()));
        }

        #[test]
        fn any_text_parses_or_is_refused_without_a_panic(text in ".{0,40}") {
            let _ = GtidPosition::parse(&text);
        }
    }
}
