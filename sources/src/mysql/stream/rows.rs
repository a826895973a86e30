//! Row events: a TABLE_MAP's table as the stream decodes it, and a rows event's change events
//! as Debezium's MySQL connector emits them.

use mysql_async::binlog::events::{RowsEventData, TableMapEvent};
use mysql_async::binlog::row::BinlogRow;
use mysql_async::binlog::value::BinlogValue;
use sluice_engine::{ChangeEvent, Op, Position, Struct};
use sluice_kit::failure::{Refusal, RowError};

use super::decode::Image;
use super::Out;
use crate::mysql::ddl::Model;
use crate::mysql::error::MysqlError;
use crate::mysql::snapshot::Table;
use crate::mysql::table_map::{self, Charsets};
use crate::mysql::{At, MysqlSource};

/// What the stream knows of a table id.
pub(super) enum Mapped {
    /// Not captured.
    Skip,
    /// Described by its TABLE_MAP's full metadata.
    Own(Box<Table>),
    /// Its TABLE_MAP has no column names: the snapshot's table is used.
    Snapshot,
}

/// The columns of `db.name`'s PRIMARY key, in key order.
pub(in crate::mysql) async fn primary_key(
    conn: &mut mysql_async::Conn,
    db: &str,
    name: &str,
) -> Result<Vec<String>, MysqlError> {
    use mysql_async::prelude::Queryable;
    conn.exec("SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION", (db, name))
        .await
        .map_err(|e| MysqlError::query(format!("reading the primary key of `{db}.{name}`"), e))
}

/// The `TABLE_TYPE` of `db`.`name` (`BASE TABLE`, MariaDB's `SEQUENCE` and `SYSTEM
/// VERSIONED`), if the server still has it.
async fn table_type(
    conn: &mut mysql_async::Conn,
    db: &str,
    name: &str,
) -> Result<Option<String>, MysqlError> {
    use mysql_async::prelude::Queryable;
    let kind: Option<String> = conn
        .exec_first(
            "SELECT TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (db, name),
        )
        .await
        .map_err(|e| MysqlError::query(format!("reading the kind of `{db}.{name}`"), e))?;
    Ok(kind)
}

impl MysqlSource {
    /// The rows of `db.name` at `file:start`, a table the source knows no structure of (the
    /// TABLE_MAP names no columns, and the table was not there when the stream started):
    /// passed over when it is not captured, else `inconsistent.schema.handling.mode` says.
    pub(super) fn inconsistent(
        &self,
        db: &str,
        name: &str,
        file: &str,
        start: u64,
    ) -> Result<(), MysqlError> {
        if !self.config.selects(db, name) {
            return Ok(());
        }
        let what = format!("the rows of `{db}.{name}` at {file}:{start}: the source knows no structure of the table (it was made without the binlog, or its CREATE TABLE was not read) and the server writes no column names (`binlog_row_metadata` is not FULL)");
        match self.config.inconsistent_schema {
            sluice_engine::FailureMode::Fail => Err(MysqlError::Setup(format!(
                "{what}; set `binlog_row_metadata=FULL` on the server, or `inconsistent.schema.handling.mode: warn` (or `skip`) to pass over such rows"
            ))),
            sluice_engine::FailureMode::Warn => {
                tracing::warn!(table = %format!("{db}.{name}"), at = %format!("{file}:{start}"), "Rows of a table of unknown structure passed over (inconsistent.schema.handling.mode: warn).");
                Ok(())
            }
            sluice_engine::FailureMode::Skip => Ok(()),
        }
    }

    /// The change events of one rows event of `table` (`at`: its `source` block) into `out`,
    /// each row's at the position after it; the first `delivered` rows were delivered before a
    /// restart: only counted. A row with a value its schema cannot hold follows
    /// `event.processing.failure.handling.mode`.
    pub(super) fn row_changes(
        &self,
        table: &Table,
        tme: &TableMapEvent<'_>,
        rows: &RowsEventData<'_>,
        at: &At,
        out: &mut Out,
        delivered: usize,
    ) -> Result<(), MysqlError> {
        let collection = table.full_name();
        let undecodable = |e: String| {
            MysqlError::Value(format!(
                "a row of `{collection}` at {}:{} cannot be decoded: {e}",
                at.file, at.pos
            ))
        };
        let decoded = match super::decode::rows(rows, tme) {
            Some(decoded) => decoded.map_err(undecodable)?,
            // MySQL's partial JSON updates: mysql_common's rows.
            None => {
                let own = |row: Option<BinlogRow>| {
                    row.map(|r| r.unwrap().into_iter().map(Some).collect::<Image>())
                };
                let mut list = Vec::new();
                for row in rows.rows(tme) {
                    let (before, after) = row.map_err(|e| undecodable(e.to_string()))?;
                    list.push((own(before), own(after)));
                }
                list
            }
        };
        for (i, (before, after)) in decoded.into_iter().enumerate() {
            let images = match (
                self.image(table, before.as_ref()),
                self.image(table, after.as_ref()),
            ) {
                (Ok(b), Ok(a)) => (b, a),
                (Err(e), _) | (_, Err(e)) => {
                    let image = after.as_ref().or(before.as_ref());
                    let key = || {
                        (table.shape).key_text(|i| {
                            image.and_then(|r| r.get(i)?.as_ref()).map(|v| match v {
                                BinlogValue::Value(mysql_async::Value::Bytes(b)) => {
                                    String::from_utf8_lossy(b).into_owned()
                                }
                                BinlogValue::Value(v) => {
                                    v.as_sql(true).trim_matches('\'').to_owned()
                                }
                                other => format!("{other:?}"),
                            })
                        })
                    };
                    let place = format!("{}:{}, row {i}", at.file, at.pos);
                    let refusal = Refusal {
                        at: Some(&place),
                        ..Refusal::of(&collection, &e)
                    };
                    (self.config.common).refuse(refusal, key)?;
                    continue;
                }
            };
            let source = At {
                row: i32::try_from(i).unwrap_or(i32::MAX),
                ..at.clone()
            };
            let position = out.row_position(i);
            for e in self.changes(table, rows, images, &source, &position) {
                out.place(&collection, e, i >= delivered);
            }
        }
        Ok(())
    }

    /// The collations' character sets when the server writes the full row metadata
    /// (`binlog_row_metadata=FULL`), `None` otherwise.
    pub(in crate::mysql) async fn full_metadata(
        &self,
        conn: &mut mysql_async::Conn,
    ) -> Result<Option<Charsets>, MysqlError> {
        use mysql_async::prelude::Queryable;
        let metadata: Option<String> = conn
            .query_first("SELECT @@binlog_row_metadata")
            .await
            .ok()
            .flatten();
        if !metadata.is_some_and(|m| m.eq_ignore_ascii_case("FULL")) {
            tracing::info!("binlog_row_metadata is not FULL: a schema change of a captured table will stop the stream.");
            return Ok(None);
        }
        let q = |e| MysqlError::query("reading the collations", e);
        let mut rows: Vec<(Option<u16>, Option<String>, Option<u32>)> = conn
            .query("SELECT co.ID, co.CHARACTER_SET_NAME, cs.MAXLEN FROM information_schema.COLLATIONS co JOIN information_schema.CHARACTER_SETS cs ON cs.CHARACTER_SET_NAME = co.CHARACTER_SET_NAME")
            .await
            .map_err(q)?;
        // MariaDB 10.10+ numbers its UCA 14.0 collations per character set here.
        if let Ok(more) = conn
            .query::<(Option<u16>, Option<String>, Option<u32>), _>("SELECT a.ID, a.CHARACTER_SET_NAME, cs.MAXLEN FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY a JOIN information_schema.CHARACTER_SETS cs ON cs.CHARACTER_SET_NAME = a.CHARACTER_SET_NAME WHERE a.ID IS NOT NULL")
            .await
        {
            rows.extend(more);
        }
        Ok(Some(
            rows.into_iter()
                .filter_map(|(id, name, max)| Some((id?, (name?.to_ascii_lowercase(), max?))))
                .collect(),
        ))
    }

    /// The captured table a TABLE_MAP event describes: `Skip` when it is not captured,
    /// `Snapshot` when the event has no column names (written before the server wrote the
    /// full metadata): the snapshot's table then.
    pub(super) async fn mapped_table(
        &self,
        tme: &TableMapEvent<'_>,
        charsets: &Charsets,
        lookup: &mut Option<mysql_async::Conn>,
        model: &Model,
    ) -> Result<Mapped, MysqlError> {
        let db = tme.database_name().into_owned();
        let name = tme.table_name().into_owned();
        if !self.config.selects(&db, &name) {
            return Ok(Mapped::Skip);
        }
        let described = table_map::describe(tme, charsets)
            .map_err(|e| MysqlError::Value(format!("`{db}.{name}`: {e}")))?;
        let Some((described, _)) = described else {
            return Ok(Mapped::Snapshot);
        };
        // The binlog's primary key is the server's, which promotes a unique NOT NULL key of a
        // table without one; Debezium's is the schema model's (the PRIMARY constraint as of
        // this position), else the server's PRIMARY constraint now.
        let modelled = model.known(&db, &name).map(|(k, t)| (k.1.as_str(), t));
        let structure = modelled.map(|(_, t)| t);
        let key_names = match structure {
            Some(t) => t.primary_key_column_names.clone(),
            None => {
                let conn = match lookup {
                    Some(conn) => conn,
                    None => lookup.insert(self.connect().await?),
                };
                // A MariaDB sequence's state row (`NEXTVAL`): no table's data, no event (no
                // DDL of it enters the model). A system-versioned table: refused.
                match table_type(conn, &db, &name).await?.as_deref() {
                    Some("SEQUENCE") => {
                        tracing::debug!(table = %format!("{db}.{name}"), "A sequence's row change, passed over.");
                        return Ok(Mapped::Skip);
                    }
                    Some("SYSTEM VERSIONED") => {
                        return Err(MysqlError::Setup(format!(
                            "`{db}.{name}` is a system-versioned table: its binlog rows carry hidden history columns, updates add history rows and deletes arrive as updates, which Sluice does not translate; leave the table out (table.exclude.list) or capture a table without system versioning"
                        )));
                    }
                    _ => {}
                }
                primary_key(conn, &db, &name).await?
            }
        };
        let key_names: Vec<String> = key_names
            .into_iter()
            .filter(|k| described.iter().any(|d| &d.name == k))
            .collect();
        self.table_of(db, name, described, &key_names, modelled)
            .map(|t| Mapped::Own(Box::new(t)))
    }

    /// A row image as the table's struct.
    fn image(&self, table: &Table, row: Option<&Image>) -> Result<Option<Struct>, RowError> {
        let Some(row) = row else {
            return Ok(None);
        };
        let present = row.iter().filter(|v| v.is_some()).count();
        if present != table.columns.len() || row.len() != table.columns.len() {
            let reason = format!(
                "a row image holds {present} of its {} columns: the change was written with `binlog_row_image` other than FULL (a session can set it); the mysql source needs full images",
                table.columns.len()
            );
            return Err(RowError::Row { reason });
        }
        let modes = self.modes();
        let shape = &table.shape;
        let mut values = Vec::with_capacity(shape.kept.len());
        for (j, &i) in shape.kept.iter().enumerate() {
            let column = &table.columns[i];
            let value = (column.binlog_value(row[i].as_ref(), modes))
                .map_err(|reason| RowError::column(&column.name, reason))?;
            values.push(shape.map(j, value));
        }
        Struct::from_values(table.envelope.row.clone(), values)
            .map(Some)
            .ok_or(RowError::Shape)
    }

    /// The events of one row change: an update of the key is a delete (and its tombstone) and
    /// a create, as Debezium emits it.
    fn changes(
        &self,
        table: &Table,
        rows: &RowsEventData<'_>,
        images: (Option<Struct>, Option<Struct>),
        at: &At,
        position: &Position,
    ) -> Vec<ChangeEvent> {
        let tombstones = self.config.common.tombstones_on_delete;
        // `skipped.operations` drops by the row change's kind: a key change is an update.
        let kind = match rows {
            RowsEventData::WriteRowsEvent(_) | RowsEventData::WriteRowsEventV1(_) => Op::Create,
            RowsEventData::DeleteRowsEvent(_) | RowsEventData::DeleteRowsEventV1(_) => Op::Delete,
            _ => Op::Update,
        };
        if self.skipped.skips(kind) {
            return Vec::new();
        }
        let delete = |before: Struct| {
            let e = self.event(table, Op::Delete, Some(before), None, at, position.clone());
            let mut out = vec![e];
            if tombstones {
                out.push(sluice_kit::records::tombstone(&out[0]));
            }
            out
        };
        match (rows, images) {
            (
                RowsEventData::WriteRowsEvent(_) | RowsEventData::WriteRowsEventV1(_),
                (_, Some(after)),
            ) => {
                vec![self.event(table, Op::Create, None, Some(after), at, position.clone())]
            }
            (
                RowsEventData::DeleteRowsEvent(_) | RowsEventData::DeleteRowsEventV1(_),
                (Some(before), _),
            ) => delete(before),
            (_, (Some(before), Some(after))) => {
                let key = |s: &Struct| {
                    table
                        .shape
                        .event_key
                        .iter()
                        .map(|&i| s.values()[i].clone())
                        .collect::<Vec<_>>()
                };
                if key(&before) == key(&after) {
                    vec![self.event(
                        table,
                        Op::Update,
                        Some(before),
                        Some(after),
                        at,
                        position.clone(),
                    )]
                } else {
                    let mut out = delete(before);
                    out.push(self.event(
                        table,
                        Op::Create,
                        None,
                        Some(after),
                        at,
                        position.clone(),
                    ));
                    out
                }
            }
            _ => Vec::new(),
        }
    }
}
