//! How the kit's merge reads SQL Server's change tables: a piece of a change table is
//! Debezium's change query (`data.query.mode`) from the last row's (commit LSN, change LSN,
//! operation), `SELECT TOP n`: at most `streaming.fetch.size` rows, fewer when the rows are
//! large (the kit's `PieceLimits`).

use async_trait::async_trait;
use sluice_kit::change_tables::merge::Key;
use tiberius::{Row, ToSql};

use super::config::QueryMode;
use super::connection::{lsn_at, rows, Conn, Statements};
use super::error::SqlServerError;
use super::lsn::Lsn;
use super::Table;

/// One change table row.
pub(crate) type Change = sluice_kit::change_tables::Change<Lsn, Row>;

/// A poll's change queries on the connection.
pub(crate) struct Reader<'a> {
    pub conn: &'a mut Conn,
    pub tables: &'a [Table],
    pub q: &'a Statements,
    pub mode: QueryMode,
    /// The operations `skipped.operations` leaves out, filtered by the query as Debezium does.
    pub skip_ops: Vec<i32>,
    /// The poll's upper bound (inclusive).
    pub to: Lsn,
}

#[async_trait]
impl sluice_kit::change_tables::Pieces for Reader<'_> {
    type Lsn = Lsn;
    type Row = Row;
    type Error = SqlServerError;
    const PAIRED_BY_CHANGE_LSN: bool = true;

    async fn piece(
        &mut self,
        i: usize,
        (from, seq, op): Key<Lsn>,
        top: Option<usize>,
    ) -> Result<Vec<Change>, SqlServerError> {
        let t = &self.tables[i];
        let columns: Vec<String> = t.columns.iter().map(|(c, _)| c.clone()).collect();
        let sql = self.q.changes(
            self.mode,
            &t.change_table.name,
            &columns,
            top,
            &self.skip_ops,
        );
        let (f, z, to) = (&from.0[..], &seq.0[..], &self.to.0[..]);
        let params: Vec<&dyn ToSql> = match self.mode {
            QueryMode::Direct => vec![&f, &z, &op, &f, &z, &f, &to],
            // The function reads from the capture instance's range: from the piece's LSN.
            QueryMode::Function => vec![&f, &to, &f, &z, &op, &f, &z, &f, &to],
        };
        let what = format!(
            "reading the changes of {}.{} (capture instance {})",
            t.schema, t.name, t.change_table.name
        );
        let found = rows(self.conn, &what, &sql, &params).await?;
        let mut out = Vec::with_capacity(found.len());
        for row in found {
            let commit = lsn_at(&row, 0)?.ok_or_else(|| {
                SqlServerError::Setup(format!("{what}: a change without a commit LSN"))
            })?;
            let seq = lsn_at(&row, 1)?.ok_or_else(|| {
                SqlServerError::Setup(format!("{what}: a change without a change LSN (__$seqval)"))
            })?;
            let op: i32 = row
                .try_get(2)
                .map_err(|e| SqlServerError::query(&what, e))?
                .unwrap_or_default();
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
        row.cells().map(|(_, cell)| cell_bytes(cell)).sum()
    }
}

/// About the bytes a cell holds: a string's or a binary's length, 16 for other values.
fn cell_bytes(cell: &tiberius::ColumnData<'_>) -> usize {
    use tiberius::ColumnData;
    match cell {
        ColumnData::String(Some(s)) => s.len(),
        ColumnData::Binary(Some(b)) => b.len(),
        ColumnData::Xml(Some(x)) => x.as_ref().to_string().len(),
        _ => 16,
    }
}
