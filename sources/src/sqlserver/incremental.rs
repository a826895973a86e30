//! Incremental snapshots (Debezium's `execute-snapshot` signal) on the kit's change-table
//! snapshots (`sluice_kit::change_tables::snapshots`): a chunk of a table is read by primary
//! key in a transaction that first reads `sys.fn_cdc_get_max_lsn()`, the LSN its window waits
//! for. Keys of integer and character columns are read in chunks; a table keyed otherwise is
//! refused with a notification.

use std::sync::Arc;

use sluice_engine::event::SourceTimestamps;
use sluice_engine::Op;
use sluice_kit::change_tables::snapshots::{condition, integer_literal, key_after};
use sluice_kit::incremental::{ChunkSource, Read};
use tiberius::ColumnData;

use super::connection::{quote, rows, run, Conn};
use super::error::SqlServerError;
use super::lsn::Lsn;
use super::tables::Table;
use super::types::Kind;
use super::{At, SqlServerSource};

/// The progress of an incremental snapshot: key values as text.
pub(super) type Progress = sluice_kit::incremental::Progress<String>;

/// The source's side of the kit's chunks.
pub(super) struct Chunks<'a> {
    pub source: &'a SqlServerSource,
    pub conn: &'a mut Conn,
}

/// The primary key's columns of `table` (quoted) and whether each is text; `Err` says why
/// the table cannot be read in chunks.
fn key_columns(table: &Table) -> Result<Vec<(String, bool)>, String> {
    let shape = &table.shape;
    if shape.key.is_empty() {
        return Err(format!(
            "{}.{} has no primary key to read it by in chunks",
            table.schema, table.name
        ));
    }
    shape
        .key
        .iter()
        .map(|&j| {
            let (name, kind) = &table.columns[shape.kept[j]];
            if shape.mappers.get(j).is_some_and(Option::is_some) {
                return Err(format!("the key column `{name}` of {}.{} is masked, hashed or truncated: its values cannot order chunks", table.schema, table.name));
            }
            match kind {
                Kind::Int16 | Kind::Int32 | Kind::Int64 => Ok((quote(name), false)),
                Kind::String => Ok((quote(name), true)),
                other => Err(format!("the key column `{name}` of {}.{} is of a kind ({other:?}) chunks are not read by yet (integers and character columns are)", table.schema, table.name)),
            }
        })
        .collect()
}

/// A key value written back into a query.
fn literal(value: &str, text: bool) -> Option<String> {
    if text {
        // An N'…' literal would convert a varchar column to Unicode in the comparison (other
        // rules than its ORDER BY under a SQL_* collation, no index seek): plain text where
        // the value is ASCII, which compares the same against char and nchar columns.
        let n = if value.is_ascii() { "" } else { "N" };
        return Some(format!("{n}'{}'", value.replace('\'', "''")));
    }
    integer_literal(value)
}

/// `(k1, k2, …) > (v1, v2, …)` (SQL Server has no row comparison).
fn greater(keys: &[(String, bool)], values: &[String]) -> Option<String> {
    let names: Vec<String> = keys.iter().map(|(k, _)| k.clone()).collect();
    key_after(&names, values, |i, v| literal(v, keys.get(i)?.1))
}

/// A key column's value as text.
fn cell_text(cell: &ColumnData<'_>) -> Option<String> {
    match cell {
        ColumnData::U8(Some(v)) => Some(v.to_string()),
        ColumnData::I16(Some(v)) => Some(v.to_string()),
        ColumnData::I32(Some(v)) => Some(v.to_string()),
        ColumnData::I64(Some(v)) => Some(v.to_string()),
        ColumnData::String(Some(v)) => Some(v.to_string()),
        ColumnData::Guid(Some(v)) => Some(v.to_string().to_uppercase()),
        _ => None,
    }
}

impl ChunkSource for Chunks<'_> {
    type Key = String;
    type At = Lsn;
    type Table = Table;
    type Error = SqlServerError;

    fn topic(table: &Table) -> Arc<str> {
        table.topic.clone()
    }

    fn unreadable(table: &Table, _p: &Progress) -> Option<String> {
        key_columns(table).err()
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
            // A condition the server refuses aborts the snapshot, not the stream.
            Err(SqlServerError::Query {
                context,
                source: tiberius::error::Error::Server(e),
            }) if !p.conditions.is_empty() => {
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
        let keys = key_columns(table).map_err(SqlServerError::Setup)?;
        let name = format!("{}.{}", table.schema, table.name);
        let at = self.source.max_transaction_lsn(self.conn).await?;
        let from = format!(
            "{}.{}.{}",
            quote(&self.source.config.database),
            quote(&table.schema),
            quote(&table.name)
        );
        let condition = condition(p, &name, &self.source.config.database).map(|c| format!("({c})"));
        let what = format!("reading a chunk of {name}");
        let names: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
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
                    .map(|c| cell_text(c))
                    .collect::<Option<Vec<String>>>()
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
        let mut filters = Vec::new();
        if let Some(last) = &p.last_key {
            filters.push(greater(&keys, last).ok_or_else(|| {
                SqlServerError::Setup(format!("{name}: a stored key that is not a key"))
            })?);
        }
        filters.push(format!(
            "NOT {}",
            greater(&keys, &max)
                .ok_or_else(|| SqlServerError::Setup(format!("{name}: a key that is not a key")))?
        ));
        filters.extend(condition);
        let cols: Vec<String> = table.columns.iter().map(|(c, _)| quote(c)).collect();
        let sql = format!(
            "SELECT TOP ({limit}) {} FROM {from} WHERE {} ORDER BY {}",
            cols.join(", "),
            filters.join(" AND "),
            names.join(", ")
        );
        let found = rows(self.conn, &what, &sql, &[]).await?;
        let source = At {
            ts_ms: SourceTimestamps::now().millis(),
            snapshot: "incremental",
            commit_lsn: at,
            change_lsn: None,
            event_serial_no: None,
        };
        let mut out = Vec::with_capacity(found.len());
        for row in &found {
            let cells: Vec<&ColumnData<'_>> = row.cells().map(|(_, d)| d).collect();
            let key: Vec<String> = (table.shape.key.iter())
                .filter_map(|&j| cells.get(table.shape.kept[j]).and_then(|c| cell_text(c)))
                .collect();
            let event = match self.source.row(table, &cells) {
                Ok(after) => Some(self.source.event(
                    table,
                    (Op::Read, None, Some(after)),
                    &source,
                    sluice_engine::Position::Offset(0),
                )),
                Err(e) => {
                    self.source
                        .config
                        .common
                        .unrepresentable(&name, String::new, &e)
                        .map_err(SqlServerError::Setup)?;
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
