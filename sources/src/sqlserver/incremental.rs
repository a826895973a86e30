//! Incremental snapshots (Debezium's `execute-snapshot` signal) on the kit's change-table
//! snapshots (`sluice_kit::change_tables::snapshots`): a chunk of a table is read by primary
//! key in a transaction that first reads `sys.fn_cdc_get_max_lsn()`, the LSN its window waits
//! for. Chunks go by the primary key or the signal's `surrogate-key` column, of any type but
//! floating point (a table keyed so is refused with a notification): each key value is kept as
//! text and written back as a literal SQL Server converts to the column's type.

use std::sync::Arc;

use sluice_engine::Op;
use sluice_kit::change_tables::snapshots::{
    chunk_columns, condition, hex_literal, integer_literal, key_after, number_literal,
};
use sluice_kit::change_tables::source::{At, Dialect};
use sluice_kit::incremental::{ChunkSource, Read};
use tiberius::ColumnData;

use super::connection::{quote, rows, run, Conn};
use super::error::{SqlServerError, TdsError};
use super::lsn::Lsn;
use super::types::{key_text, Kind};
use super::{SqlServerSource, Table};

/// The progress of an incremental snapshot: key values as text.
type Progress = sluice_kit::incremental::Progress<String>;

/// The source's side of the kit's chunks.
pub(crate) struct Chunks<'a> {
    pub source: &'a SqlServerSource,
    pub conn: &'a mut Conn,
}

/// How a chunk key column's values go back into a query.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Lit {
    Integer,
    Number,
    /// Quoted: character columns, `uniqueidentifier`s, dates and times.
    Text,
    /// `0x…`.
    Hex,
}

/// A column chunks are read by.
#[derive(Debug)]
struct KeyColumn {
    /// Its position among the table's captured columns.
    at: usize,
    quoted: String,
    lit: Lit,
}

/// The columns chunks of `table` are read by for progress `p` (its primary key, or the
/// signal's `surrogate-key`); `Err` says why the table cannot be read in chunks.
fn key_columns(table: &Table, p: &Progress) -> Result<Vec<KeyColumn>, String> {
    let shape = &table.shape;
    let full = format!("{}.{}", table.schema, table.name);
    let kept: Vec<&str> = (shape.kept.iter())
        .map(|&i| table.columns[i].0.as_str())
        .collect();
    chunk_columns(&full, &shape.key, &kept, p)?
        .into_iter()
        .map(|j| {
            let (name, kind) = &table.columns[shape.kept[j]];
            if shape.mappers.get(j).is_some_and(Option::is_some) {
                return Err(format!("the key column `{name}` of {full} is masked, hashed or truncated: its values cannot order chunks"));
            }
            let declared = (table.def.columns.iter())
                .find(|c| &c.name == name)
                .map(|c| c.type_name.to_ascii_lowercase())
                .unwrap_or_default();
            if ["text", "ntext", "xml", "image"].contains(&declared.as_str()) {
                return Err(format!("the key column `{name}` of {full} is of type {declared}, which SQL Server does not order by"));
            }
            let lit = match kind {
                Kind::Boolean | Kind::Int16 | Kind::Int32 | Kind::Int64 => Lit::Integer,
                Kind::Decimal(..) | Kind::Money(_) => Lit::Number,
                Kind::String | Kind::Date | Kind::Time(_) | Kind::Timestamp(_) | Kind::Zoned(_) => Lit::Text,
                Kind::Bytes => Lit::Hex,
                Kind::Float32 | Kind::Float64 => return Err(format!("the key column `{name}` of {full} is a floating-point column: its values cannot be written back exactly to read chunks by")),
            };
            Ok(KeyColumn { at: j, quoted: quote(name), lit })
        })
        .collect()
}

/// A key value written back into a query.
fn literal(value: &str, lit: Lit) -> Option<String> {
    match lit {
        // An N'…' literal would convert a varchar column to Unicode in the comparison (other
        // rules than its ORDER BY under a SQL_* collation, no index seek): plain text where
        // the value is ASCII, which compares the same against char and nchar columns.
        Lit::Text => {
            let n = if value.is_ascii() { "" } else { "N" };
            Some(format!("{n}'{}'", value.replace('\'', "''")))
        }
        Lit::Integer => integer_literal(value),
        Lit::Number => number_literal(value),
        Lit::Hex => hex_literal(value, "0x"),
    }
}

/// `(k1, k2, …) > (v1, v2, …)` (SQL Server has no row comparison).
fn greater(keys: &[KeyColumn], values: &[String]) -> Option<String> {
    let names: Vec<String> = keys.iter().map(|k| k.quoted.clone()).collect();
    key_after(&names, values, |i, v| literal(v, keys.get(i)?.lit))
}

/// The key values of a row's `cells` (`None`: one is NULL).
fn key_of(table: &Table, keys: &[KeyColumn], cells: &[&ColumnData<'_>]) -> Option<Vec<String>> {
    (keys.iter())
        .map(|k| key_text(cells.get(table.shape.kept[k.at])?))
        .collect()
}

impl ChunkSource for Chunks<'_> {
    type Key = String;
    type At = Lsn;
    type Table = Table;
    type Error = SqlServerError;

    fn topic(table: &Table) -> Arc<str> {
        table.topic.clone()
    }

    fn unreadable(table: &Table, p: &Progress) -> Option<String> {
        key_columns(table, p).err()
    }

    async fn read(
        &mut self,
        table: &Table,
        p: &Progress,
        limit: usize,
    ) -> Result<Read<String, Lsn>, SqlServerError> {
        run(
            self.conn,
            "starting a chunk's transaction",
            "BEGIN TRANSACTION",
        )
        .await?;
        let read = self.read_in(table, p, limit).await;
        let _ = run(
            self.conn,
            "ending a chunk's transaction",
            "COMMIT TRANSACTION",
        )
        .await;
        match read {
            // A condition or a surrogate key the server refuses aborts the snapshot, not the
            // stream.
            Err(SqlServerError::Query {
                context,
                source: TdsError(tiberius::error::Error::Server(e)),
            }) if !p.conditions.is_empty() || p.surrogate_key.is_some() => {
                Ok(Read::Refused(format!("{context}: {}", e.message())))
            }
            other => other,
        }
    }
}

impl Chunks<'_> {
    async fn read_in(
        &mut self,
        table: &Table,
        p: &Progress,
        limit: usize,
    ) -> Result<Read<String, Lsn>, SqlServerError> {
        let keys = key_columns(table, p).map_err(SqlServerError::Setup)?;
        let name = format!("{}.{}", table.schema, table.name);
        let db = &self.source.dialect.config.database;
        let at = self.source.dialect.max_transaction_lsn(self.conn).await?;
        let from = format!(
            "{}.{}.{}",
            quote(db),
            quote(&table.schema),
            quote(&table.name)
        );
        let condition = condition(p, &name, db).map(|c| format!("({c})"));
        let what = format!("reading a chunk of {name}");
        let names: Vec<&str> = keys.iter().map(|k| k.quoted.as_str()).collect();
        let max = match &p.max_key {
            Some(max) => max.clone(),
            None => {
                let desc: Vec<String> = names.iter().map(|k| format!("{k} DESC")).collect();
                let filter = condition
                    .as_ref()
                    .map(|c| format!(" WHERE {c}"))
                    .unwrap_or_default();
                let sql = format!(
                    "SELECT TOP (1) {} FROM {from}{filter} ORDER BY {}",
                    names.join(", "),
                    desc.join(", ")
                );
                let found = rows(self.conn, &what, &sql, &[]).await?;
                let Some(row) = found.first() else {
                    return Ok(Read::Empty);
                };
                let cells: Vec<&ColumnData<'_>> = row.cells().map(|(_, d)| d).collect();
                match cells
                    .iter()
                    .map(|c| key_text(c))
                    .collect::<Option<Vec<_>>>()
                {
                    Some(max) => max,
                    None => {
                        return Ok(Read::Refused(format!(
                            "{name}: a key value that is NULL or of another kind"
                        )))
                    }
                }
            }
        };
        // A key value that cannot be written back aborts the snapshot, not the stream.
        let refused = |what: &[String]| {
            Read::Refused(format!(
                "{name}: the key value {what:?} cannot be written back into a query"
            ))
        };
        let mut filters = Vec::new();
        if let Some(last) = &p.last_key {
            match greater(&keys, last) {
                Some(f) => filters.push(f),
                None => return Ok(refused(last)),
            }
        }
        match greater(&keys, &max) {
            Some(f) => filters.push(format!("NOT {f}")),
            None => return Ok(refused(&max)),
        }
        filters.extend(condition);
        let cols: Vec<String> = table.columns.iter().map(|(c, _)| quote(c)).collect();
        let sql = format!(
            "SELECT TOP ({limit}) {} FROM {from} WHERE {} ORDER BY {}",
            cols.join(", "),
            filters.join(" AND "),
            names.join(", ")
        );
        let found = rows(self.conn, &what, &sql, &[]).await?;
        let source = At::now("incremental", at);
        let mut out = Vec::with_capacity(found.len());
        for row in &found {
            let cells: Vec<&ColumnData<'_>> = row.cells().map(|(_, d)| d).collect();
            let Some(key) = key_of(table, &keys, &cells) else {
                return Ok(Read::Refused(format!("{name}: a key value that is NULL")));
            };
            let event = match self.source.dialect.decode(table, row, 0) {
                Ok(after) => Some(self.source.event(
                    table,
                    (Op::Read, None, Some(after)),
                    &source,
                    sluice_engine::Position::Offset(0),
                )),
                Err(e) => {
                    self.source.unrepresentable(table, &e)?;
                    None
                }
            };
            out.push((event, key));
        }
        Ok(Read::Rows {
            at,
            max_key: max,
            rows: out,
        })
    }
}
