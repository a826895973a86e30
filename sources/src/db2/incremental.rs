//! Incremental snapshots (Debezium's `execute-snapshot` signal) on the kit's change-table
//! snapshots (`sluice_kit::change_tables::snapshots`): a chunk of a table is read by primary
//! key (`FETCH FIRST n ROWS ONLY`) in a transaction that first reads the highest synchpoint,
//! the LSN its window waits for. Chunks go by the primary key or the signal's `surrogate-key`
//! column: numbers, character columns, dates and times (a table keyed otherwise is refused
//! with a notification), each value kept as the driver's text and written back as a literal.

use std::sync::Arc;

use sluice_engine::Op;
use sluice_kit::change_tables::snapshots::{
    chunk_columns, condition, integer_literal, key_after, number_literal,
};
use sluice_kit::change_tables::source::{At, ChangeTableSource, Dialect};
use sluice_kit::incremental::{ChunkSource, Read};

use super::connection::{literal, quote, text, Conn};
use super::error::Db2Error;
use super::lsn::Lsn;
use super::types::Kind;
use super::{Db2Dialect, Table};

/// The progress of an incremental snapshot: key values as text.
type Progress = sluice_kit::incremental::Progress<String>;

/// The source's side of the kit's chunks.
pub(crate) struct Chunks<'a> {
    pub source: &'a ChangeTableSource<Db2Dialect>,
    pub conn: &'a mut Conn,
}

/// A column chunks are read by: its position among the table's captured columns, quoted, and
/// whether its values are numbers (written back as they are; else quoted).
#[derive(Debug)]
struct KeyColumn {
    at: usize,
    quoted: String,
    number: Option<Number>,
}

/// The kinds of number a key value is checked as.
#[derive(Debug, Clone, Copy)]
enum Number {
    Integer,
    /// `DECIMAL`: digits and a point (an exponent would make it a `DOUBLE` constant).
    Decimal,
    /// `DECFLOAT`: written `DECFLOAT('…')`, exact whatever its exponent.
    DecFloat,
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
                .map(|c| c.type_name.to_ascii_uppercase())
                .unwrap_or_default();
            if ["CLOB", "DBCLOB", "LONG"].iter().any(|t| declared.starts_with(t)) {
                return Err(format!("the key column `{name}` of {full} is of type {declared}, which Db2 does not order by"));
            }
            let number = match kind {
                Kind::SmallInt | Kind::Integer | Kind::BigInt => Some(Number::Integer),
                Kind::Decimal { .. } => Some(Number::Decimal),
                Kind::DecFloat => Some(Number::DecFloat),
                Kind::Text | Kind::Date | Kind::Time | Kind::Timestamp { .. } => None,
                other => return Err(format!("the key column `{name}` of {full} is of a kind ({other:?}) chunks are not read by (numbers, character columns, dates and times are)")),
            };
            Ok(KeyColumn { at: j, quoted: quote(name), number })
        })
        .collect()
}

/// `(k1, k2, …) > (v1, v2, …)` written out.
fn greater(keys: &[KeyColumn], values: &[String]) -> Option<String> {
    let names: Vec<String> = keys.iter().map(|k| k.quoted.clone()).collect();
    key_after(&names, values, |i, v| match keys.get(i)?.number {
        None => Some(literal(v)),
        Some(Number::Integer) => integer_literal(v),
        Some(Number::Decimal) => number_literal(v.trim()).filter(|n| !n.contains(['E', 'e'])),
        Some(Number::DecFloat) => number_literal(v.trim()).map(|n| format!("DECFLOAT('{n}')")),
    })
}

impl ChunkSource for Chunks<'_> {
    type Key = String;
    type At = Lsn;
    type Table = Table;
    type Error = Db2Error;

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
    ) -> Result<Read<String, Lsn>, Db2Error> {
        let read = self.read_in(table, p, limit).await;
        let _ = self.conn.end("ending a chunk's transaction").await;
        match read {
            // A condition or a surrogate key the server refuses aborts the snapshot, not the
            // stream.
            Err(e @ Db2Error::Query { .. })
                if !p.conditions.is_empty() || p.surrogate_key.is_some() =>
            {
                Ok(Read::Refused(e.to_string()))
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
    ) -> Result<Read<String, Lsn>, Db2Error> {
        let keys = key_columns(table, p).map_err(Db2Error::Setup)?;
        let name = format!("{}.{}", table.schema, table.name);
        let at = self.source.dialect.chunk_lsn(self.conn).await?;
        let from = format!("{}.{}", quote(&table.schema), quote(&table.name));
        let condition = condition(p, &name, "").map(|c| format!("({c})"));
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
                    "SELECT {} FROM {from}{filter} ORDER BY {} FETCH FIRST 1 ROWS ONLY",
                    names.join(", "),
                    desc.join(", ")
                );
                let found = self.conn.rows(&what, &sql, &[]).await?;
                let Some(row) = found.first() else {
                    return Ok(Read::Empty);
                };
                match (0..keys.len())
                    .map(|i| text(row, i))
                    .collect::<Option<Vec<String>>>()
                {
                    Some(max) => max,
                    None => return Ok(Read::Refused(format!("{name}: a key value that is NULL"))),
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
            "SELECT {} FROM {from} WHERE {} ORDER BY {} FETCH FIRST {limit} ROWS ONLY",
            cols.join(", "),
            filters.join(" AND "),
            names.join(", ")
        );
        let found = self.conn.rows(&what, &sql, &[]).await?;
        let source = At::now("incremental", at);
        let mut out = Vec::with_capacity(found.len());
        for cells in &found {
            let key = (keys.iter()).map(|k| text(cells, table.shape.kept[k.at]));
            let Some(key) = key.collect::<Option<Vec<String>>>() else {
                return Ok(Read::Refused(format!("{name}: a key value that is NULL")));
            };
            let event = match self.source.dialect.decode(table, cells, 0) {
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
