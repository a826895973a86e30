//! Incremental snapshots (Debezium's `execute-snapshot` signal) of a change-table source, on
//! the kit's change-table snapshots ([`crate::change_tables::snapshots`]): a chunk of a table is
//! read by key in a transaction that first reads the LSN its window waits for
//! ([`Dialect::chunk_begin`]). Chunks go by the primary key or the signal's `surrogate-key`
//! column, of the kinds the dialect can write back into a query ([`Dialect::key_literal`]):
//! each key value is kept as the driver's text and written back as a literal.

use std::sync::Arc;

use sluice_engine::{Op, Position};

use super::{At, ChangeTableError, ChangeTableSource, Dialect, ErrorOf, Progress, TableOf};
use crate::change_tables::snapshots::{chunk_columns, condition, key_after};
use crate::incremental::{ChunkSource, Read};

/// The chunk queries of a change-table source on its stream's connection.
pub struct Chunks<'a, D: Dialect> {
    pub source: &'a ChangeTableSource<D>,
    pub conn: &'a mut D::Conn,
}

/// A column chunks are read by: its position among the table's captured columns, quoted, and
/// how its values go back into a query.
struct KeyColumn<L> {
    at: usize,
    quoted: String,
    literal: L,
}

/// The columns chunks of `table` are read by for progress `p` (its primary key, or the
/// signal's `surrogate-key`); `Err` says why the table cannot be read in chunks.
fn key_columns<D: Dialect>(
    table: &TableOf<D>,
    p: &Progress,
) -> Result<Vec<KeyColumn<D::KeyLiteral>>, String> {
    let shape = &table.shape;
    let full = table.full_name();
    let kept: Vec<&str> = (shape.kept.iter())
        .map(|&i| table.columns[i].0.as_str())
        .collect();
    chunk_columns(&full, &shape.key, &kept, p)?
        .into_iter()
        .map(|j| {
            let (name, kind) = &table.columns[shape.kept[j]];
            let refused = |why: &str| format!("the key column `{name}` of {full} {why}");
            if shape.mappers.get(j).is_some_and(Option::is_some) {
                return Err(refused(
                    "is masked, hashed or truncated: its values cannot order chunks",
                ));
            }
            let declared = (table.def.columns.iter())
                .find(|c| &c.name == name)
                .map(|c| c.type_name.as_str())
                .unwrap_or_default();
            let literal = D::key_literal(kind, declared).map_err(|why| refused(&why))?;
            Ok(KeyColumn {
                at: j,
                quoted: D::quote(name),
                literal,
            })
        })
        .collect()
}

/// `(k1, k2, …) > (v1, v2, …)` written out (not every server compares rows).
fn greater<D: Dialect>(keys: &[KeyColumn<D::KeyLiteral>], values: &[String]) -> Option<String> {
    let names: Vec<String> = keys.iter().map(|k| k.quoted.clone()).collect();
    key_after(&names, values, |i, v| D::literal(v, keys.get(i)?.literal))
}

impl<D: Dialect> ChunkSource for Chunks<'_, D> {
    type Key = String;
    type At = D::Lsn;
    type Table = TableOf<D>;
    type Error = ErrorOf<D>;

    fn topic(table: &TableOf<D>) -> Arc<str> {
        table.topic.clone()
    }

    fn unreadable(table: &TableOf<D>, p: &Progress) -> Option<String> {
        key_columns::<D>(table, p).err()
    }

    async fn read(
        &mut self,
        table: &TableOf<D>,
        p: &Progress,
        limit: usize,
    ) -> Result<Read<String, D::Lsn>, ErrorOf<D>> {
        let dialect = &self.source.dialect;
        let read = match dialect.chunk_begin(self.conn).await {
            Ok(at) => self.read_in(table, p, (at, limit)).await,
            Err(e) => Err(e),
        };
        dialect.chunk_end(self.conn).await;
        match read {
            // A condition or a surrogate key the server refuses aborts the snapshot, not the
            // stream.
            Err(ChangeTableError::Query { context, source })
                if !p.conditions.is_empty() || p.surrogate_key.is_some() =>
            {
                match D::refusal(&source) {
                    Some(message) => Ok(Read::Refused(format!("{context}: {message}"))),
                    None => Err(ChangeTableError::Query { context, source }),
                }
            }
            other => other,
        }
    }
}

impl<D: Dialect> Chunks<'_, D> {
    /// The chunk after `p`'s last key up to its maximum key (read first when not known yet),
    /// at most `limit` rows, read at `at`.
    async fn read_in(
        &mut self,
        table: &TableOf<D>,
        p: &Progress,
        (at, limit): (D::Lsn, usize),
    ) -> Result<Read<String, D::Lsn>, ErrorOf<D>> {
        let dialect = &self.source.dialect;
        let keys = key_columns::<D>(table, p).map_err(ChangeTableError::Setup)?;
        let name = table.full_name();
        let from = dialect.table_ref(table);
        let condition = condition(p, &name, dialect.qualifier()).map(|c| format!("({c})"));
        let what = format!("reading a chunk of {name}");
        let names: Vec<&str> = keys.iter().map(|k| k.quoted.as_str()).collect();
        let max = match &p.max_key {
            Some(max) => max.clone(),
            None => {
                let desc: Vec<String> = names.iter().map(|k| format!("{k} DESC")).collect();
                let filter = (condition.as_ref())
                    .map(|c| format!(" WHERE {c}"))
                    .unwrap_or_default();
                let rest = format!("FROM {from}{filter} ORDER BY {}", desc.join(", "));
                let sql = D::first_rows(1, &names.join(", "), &rest);
                let found = dialect.query(self.conn, &what, &sql).await?;
                let Some(row) = found.first() else {
                    return Ok(Read::Empty);
                };
                let max = (0..keys.len()).map(|i| D::key_text(row, i));
                match max.collect::<Option<Vec<String>>>() {
                    Some(max) => max,
                    None => {
                        let null = format!("{name}: a key value that is NULL or of another kind");
                        return Ok(Read::Refused(null));
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
            match greater::<D>(&keys, last) {
                Some(f) => filters.push(f),
                None => return Ok(refused(last)),
            }
        }
        match greater::<D>(&keys, &max) {
            Some(f) => filters.push(format!("NOT {f}")),
            None => return Ok(refused(&max)),
        }
        filters.extend(condition);
        let cols: Vec<String> = table.columns.iter().map(|(c, _)| D::quote(c)).collect();
        let rest = format!(
            "FROM {from} WHERE {} ORDER BY {}",
            filters.join(" AND "),
            names.join(", ")
        );
        let sql = D::first_rows(limit, &cols.join(", "), &rest);
        let found = dialect.query(self.conn, &what, &sql).await?;
        let source = At::now("incremental", at);
        let mut out = Vec::with_capacity(found.len());
        for row in &found {
            let key = (keys.iter()).map(|k| D::key_text(row, table.shape.kept[k.at]));
            let Some(key) = key.collect::<Option<Vec<String>>>() else {
                return Ok(Read::Refused(format!("{name}: a key value that is NULL")));
            };
            let event = match self.source.image(table, row, 0)? {
                Some(after) => Some(self.source.event(
                    table,
                    (Op::Read, None, Some(after)),
                    &source,
                    Position::Offset(0),
                )),
                None => None,
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
