//! How the kit's merge reads Db2's change-data tables, as Debezium's
//! `Db2StreamingChangeEventSource` reads them: a piece of a change-data table is its rows after
//! the last row's (commit LSN, intent LSN), up to the poll's bound, at most
//! `streaming.fetch.size` (fewer when the rows are large); an update's 'D' and 'I' rows
//! (operations 3 and 4) follow each other.

use async_trait::async_trait;
use sluice_kit::change_tables::merge::Key;
use sluice_kit::change_tables::Pieces;

use super::connection::{lsn_at, row_bytes, text, Conn, Row, Statements};
use super::error::Db2Error;
use super::{Lsn, Table};

/// One change-data table row: the operation code, the commit and intent LSNs, the
/// transaction's log time, then the table's columns.
type Change = sluice_kit::change_tables::Change<Lsn, Row>;

/// A poll's change queries.
pub(crate) struct Reader<'a> {
    pub conn: &'a Conn,
    pub tables: &'a [Table],
    pub q: &'a Statements,
    /// The poll's upper bound (inclusive).
    pub to: Lsn,
}

#[async_trait]
impl Pieces for Reader<'_> {
    type Lsn = Lsn;
    type Row = Row;
    type Error = Db2Error;
    const PAIRED_BY_CHANGE_LSN: bool = false;

    async fn piece(
        &mut self,
        i: usize,
        (commit, intent, _): Key<Lsn>,
        limit: Option<usize>,
    ) -> Result<Vec<Change>, Db2Error> {
        let t = &self.tables[i];
        let columns: Vec<String> = t.columns.iter().map(|(c, _)| c.clone()).collect();
        let sql = self.q.changes(&t.change_table, &columns, limit);
        let what = format!(
            "reading the changes of {}.{} ({})",
            t.schema, t.name, t.change_table
        );
        let found = self
            .conn
            .rows(&what, &sql, &[commit, self.to, commit, commit, intent])
            .await?;
        let mut out = Vec::with_capacity(found.len());
        for row in found {
            let op = text(&row, 0)
                .and_then(|o| o.trim().parse::<i32>().ok())
                .ok_or_else(|| {
                    Db2Error::Setup(format!(
                        "{what}: a change whose IBMSNAP_OPERATION is neither 'I' nor 'D'"
                    ))
                })?;
            let commit = lsn_at(&row, 1, &what)?.ok_or_else(|| {
                Db2Error::Setup(format!("{what}: a change without IBMSNAP_COMMITSEQ"))
            })?;
            let seq = lsn_at(&row, 2, &what)?.ok_or_else(|| {
                Db2Error::Setup(format!("{what}: a change without IBMSNAP_INTENTSEQ"))
            })?;
            out.push(Change {
                commit,
                seq,
                op,
                table: i,
                row,
            });
        }
        Ok(out)
    }

    fn row_bytes(row: &Row) -> usize {
        row_bytes(row)
    }
}
