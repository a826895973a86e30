//! The open transaction and where the stream stands between transactions: a transaction
//! begins (skipping what was delivered before a restart or reconnect inside it), a statement
//! alone in its GTID group ends its own.

use mysql_async::binlog::events::BinlogEventHeader;
use sluice_kit::records::transaction::TxCounts;

use super::State;
use crate::mysql::gtid::Gtid;

/// An open transaction.
pub(super) struct Tx {
    /// Where its first event (the GTID event, or BEGIN) starts.
    pub(super) file: String,
    pub(super) pos: u64,
    /// The current event's index from the first (0).
    pub(super) event: u64,
    /// Whether its first event was a GTID event.
    pub(super) by_gtid: bool,
    /// Its MariaDB GTID.
    pub(super) gtid: Option<Gtid>,
    /// Before a restart inside it: the events handled and the rows of the next delivered.
    pub(super) skip: Option<(u64, u32)>,
    /// Transaction metadata: the id, BEGIN's time, the counts.
    pub(super) id: String,
    pub(super) ts_ms: i64,
    pub(super) counts: TxCounts,
}

impl Tx {
    /// The rows of the current event delivered before a restart (all of them: `usize::MAX`).
    pub(super) fn delivered_rows(&self) -> usize {
        match self.skip {
            Some((events, _)) if self.event < events => usize::MAX,
            Some((events, rows)) if self.event == events => rows as usize,
            _ => 0,
        }
    }
}

impl State<'_> {
    /// The statement whose rows follow (`include.query`); one naming the signaling table is
    /// not taken (the rows before keep theirs), as Debezium's MariaDB connector does.
    pub(super) fn annotate(&mut self, statement: String) {
        if let Some((db, table)) = &self.signal_table {
            let name = format!("`{db}`.`{table}`").to_lowercase();
            if statement.to_lowercase().contains(&name) {
                return;
            }
        }
        self.query = Some(statement.into());
    }

    /// A statement alone in its GTID group (a DDL or TRUNCATE right after its GTID event) is
    /// over without events: its transaction with it (a reconnect must not read it again).
    pub(super) fn standalone_done(&mut self) {
        if self
            .out
            .tx
            .as_ref()
            .is_some_and(|tx| tx.by_gtid && tx.event == 1)
        {
            self.out.gtid_done();
            self.out.tx = None;
        }
    }

    /// Whether the stream is between transactions: none open, and none to read again (after
    /// a reconnect or a restart inside one, until it begins again).
    pub(super) fn between_transactions(&self) -> bool {
        self.out.tx.is_none() && self.resume.is_none()
    }

    /// A transaction begins with the event `header` at `start`.
    pub(super) fn begin(
        &mut self,
        header: &BinlogEventHeader,
        start: u64,
        by_gtid: bool,
        flavour: &str,
    ) {
        // A transaction still open has no commit of its own (a DDL statement): done.
        self.out.gtid_done();
        self.query = None;
        let skip = match self.resume.take() {
            Some(r) if r.file == self.file && r.pos == start => Some((r.event, r.row)),
            _ => None,
        };
        let id = match (&self.gtid, flavour) {
            (Some(gtid), "mariadb") => gtid.to_string(),
            _ => format!("file={},pos={start}", self.file),
        };
        self.out.tx = Some(Tx {
            file: self.file.clone(),
            pos: start,
            event: 0,
            by_gtid,
            gtid: if by_gtid {
                self.gtid.as_deref().and_then(Gtid::parse)
            } else {
                None
            },
            skip,
            id,
            ts_ms: i64::from(header.timestamp()) * 1000,
            counts: TxCounts::default(),
        });
    }
}
