//! The binlog stream: ROW events of the captured tables from the snapshot's (or the committed)
//! position on, as Debezium's MySQL connector emits them. A transaction's events carry the
//! position before it until its commit (XID), whose batch carries the position after it: a
//! restart reads an interrupted transaction again (at least once, nothing lost).
//!
//! Not built yet (issue 17): schema history (a DDL on a captured database stops the stream
//! with that reason rather than decode rows with a wrong schema), GTIDs, transaction metadata,
//! heartbeats, signals and incremental snapshots, exact resume inside a transaction.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use mysql_async::binlog::events::{EventData, RowsEventData, TableMapEvent};
use mysql_async::binlog::row::BinlogRow;
use mysql_async::binlog::value::BinlogValue;
use mysql_async::BinlogStreamRequest;
use sluice_engine::event::{BatchCut, SourceTimestamps};
use sluice_engine::{Batch, ChangeEvent, Op, Position, SourceContext, Struct};

use super::ddl::Model;
use super::error::MysqlError;
use super::schema::Schemas;
use super::snapshot::Table;
use super::table_map::{self, Charsets};
use super::{At, MysqlOffset, MysqlSource, Offset};

/// Where the stream stands.
struct Cursor {
    file: String,
    /// The position after the last committed transaction.
    done: Position,
}

/// MariaDB's GTID event (type 162), which mysql_common does not decode.
const MARIADB_GTID_EVENT: u8 = 162;

/// `domain-server-sequence` of a MariaDB GTID event's body (sequence number u64, domain id
/// u32, little-endian) written by `server_id`.
fn mariadb_gtid(body: &[u8], server_id: u32) -> Option<String> {
    let sequence = u64::from_le_bytes(body.get(..8)?.try_into().ok()?);
    let domain = u32::from_le_bytes(body.get(8..12)?.try_into().ok()?);
    Some(format!("{domain}-{server_id}-{sequence}"))
}

/// The `source` block's facts of a binlog event at `start` of `file`: its own position (as
/// Debezium's `source.pos`), writer, time and transaction GTID.
fn streamed(
    header: &mysql_async::binlog::events::BinlogEventHeader,
    file: &str,
    start: u64,
    gtid: &Option<Arc<str>>,
) -> At {
    At {
        ts_ms: i64::from(header.timestamp()) * 1000,
        snapshot: "false",
        server_id: i64::from(header.server_id()),
        file: file.to_owned(),
        pos: start,
        row: 0,
        gtid: gtid.clone(),
    }
}

fn position(file: &str, pos: u64) -> Position {
    Offset {
        at: MysqlOffset {
            file: file.to_owned(),
            pos,
            row: 0,
            snapshot_completed: true,
        },
        incremental: None,
    }
    .position()
}

/// The file a rotate event names, or `None` for the one a stream starts with: it comes
/// before the format description event, so its 4 checksum bytes are still on the name (and
/// they may be digits); the server starts where it was asked, and that name is kept.
fn rotated_file(raw: &[u8], seen_format: bool) -> Option<String> {
    seen_format.then(|| String::from_utf8_lossy(raw).into_owned())
}

/// What the stream knows of a table id.
enum Mapped {
    /// Not captured.
    Skip,
    /// Described by its TABLE_MAP's full metadata.
    Own(Box<Table>),
    /// Its TABLE_MAP has no column names: the snapshot's table is used.
    Snapshot,
}

/// The columns of `db.name`'s PRIMARY key, in key order.
pub(super) async fn primary_key(
    conn: &mut mysql_async::Conn,
    db: &str,
    name: &str,
) -> Result<Vec<String>, MysqlError> {
    use mysql_async::prelude::Queryable;
    conn.exec("SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION", (db, name))
        .await
        .map_err(|e| MysqlError::query(format!("reading the primary key of `{db}.{name}`"), e))
}

/// Whether a statement is a `TRUNCATE [TABLE]`.
fn is_truncate(statement: &str) -> bool {
    statement
        .split_whitespace()
        .next()
        .is_some_and(|w| w.eq_ignore_ascii_case("truncate"))
}

impl MysqlSource {
    /// Streams from `from` until the pipeline stops.
    pub(super) async fn stream(
        &self,
        tables: &[Table],
        mut schemas: Schemas,
        from: MysqlOffset,
        ctx: &mut SourceContext,
    ) -> Result<(), MysqlError> {
        let by_name: HashMap<(&str, &str), &Table> = tables
            .iter()
            .map(|t| ((t.db.as_str(), t.name.as_str()), t))
            .collect();
        let mut conn = self.connect().await?;
        // With the full row metadata, each TABLE_MAP event says the schema its rows have.
        let charsets = self.full_metadata(&mut conn).await?;
        if self.flavour == super::Flavour::Mariadb {
            // A replica that says it reads MariaDB GTIDs gets each transaction's GTID event
            // (older replicas get a `BEGIN` in its place).
            use mysql_async::prelude::Queryable;
            conn.query_drop("SET @mariadb_slave_capability = 4")
                .await
                .map_err(|e| MysqlError::query("announcing the MariaDB GTID capability", e))?;
        }
        let mut mapped: HashMap<u64, Mapped> = HashMap::new();
        // A connection for what the binlog does not say (a mapped table's primary key).
        let mut lookup: Option<mysql_async::Conn> = None;
        let request = BinlogStreamRequest::new(self.config.server_id)
            .with_filename(from.file.as_bytes())
            .with_pos(from.pos);
        let mut stream = conn.get_binlog_stream(request).await.map_err(|e| {
            MysqlError::query(
                format!(
                    "starting the binlog stream at {}:{} as server id {}",
                    from.file, from.pos, self.config.server_id
                ),
                e,
            )
        })?;
        tracing::info!(file = %from.file, pos = from.pos, "Binlog stream started.");
        let mut at = Cursor {
            file: from.file.clone(),
            done: position(&from.file, from.pos),
        };
        let mut batch: Vec<ChangeEvent> = Vec::new();
        let mut cut = BatchCut::for_limits(ctx.limits());
        let heartbeats = self.config.common.heartbeats();
        let period = self.config.common.heartbeat_period();
        let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut action: Option<mysql_async::Conn> = None;
        let mut gtid: Option<Arc<str>> = None;
        let mut seen_format = false;
        loop {
            let next = tokio::select! {
                biased;
                _ = ctx.stopping() => return Ok(()),
                _ = beat.tick(), if heartbeats.is_some() => {
                    if let Some(beats) = &heartbeats {
                        self.heartbeat(beats, &mut action, &at.done, ctx).await;
                    }
                    continue;
                }
                next = stream.next() => next,
            };
            let Some(event) = next else {
                return Err(MysqlError::Query {
                    context: "reading the binlog".into(),
                    source: mysql_async::Error::Other("the server closed the binlog stream".into()),
                });
            };
            let event = event.map_err(|e| super::error::binlog(e, self.config.server_id))?;
            let header = event.header();
            let end = u64::from(header.log_pos());
            let start = end.saturating_sub(u64::from(header.event_size()));
            if header.event_type_raw() == MARIADB_GTID_EVENT {
                // A transaction (or DDL statement) begins: its GTID, for `source.gtid`.
                gtid = mariadb_gtid(event.data(), header.server_id()).map(Arc::from);
                continue;
            }
            let data = event.read_data().map_err(|e| {
                MysqlError::Value(format!(
                    "a binlog event at {}:{start} cannot be decoded: {e}",
                    at.file
                ))
            })?;
            match data {
                Some(EventData::FormatDescriptionEvent(_)) => seen_format = true,
                Some(EventData::RotateEvent(r)) => {
                    if let Some(file) = rotated_file(r.name_raw(), seen_format) {
                        at.file = file;
                    }
                    // Table ids start again after a server restart (a new binlog file).
                    mapped.clear();
                }
                Some(EventData::QueryEvent(q)) => {
                    let query = q.query();
                    let trimmed = query.trim();
                    if trimmed.eq_ignore_ascii_case("BEGIN") {
                        // The transaction's events follow.
                    } else if trimmed.eq_ignore_ascii_case("COMMIT") {
                        // A non-transactional engine's statement ends with COMMIT, not XID.
                        at.done = position(&at.file, end);
                        self.commit(&mut batch, &at.done, ctx).await;
                    } else if is_truncate(trimmed) {
                        // `skipped.operations` keeps `t` (checked at start): as Debezium's
                        // default, a TRUNCATE gives no event.
                    } else {
                        let session = q.schema();
                        let after = position(&at.file, end);
                        let source = streamed(&header, &at.file, start, &gtid);
                        // The session's database, or a captured database named in the text.
                        let touches = tables
                            .iter()
                            .any(|t| t.db == session || query.contains(t.db.as_str()));
                        if touches && charsets.is_some() {
                            // Rows decode with their TABLE_MAP's schema: a table changed here
                            // gets a new table id, and is described again.
                            tracing::info!(
                                database = %session,
                                at = %format!("{}:{start}", at.file),
                                "A schema change; the rows that follow are decoded with the schema their TABLE_MAP events give."
                            );
                            mapped.clear();
                        } else if touches {
                            return Err(MysqlError::Setup(format!("a schema change in `{session}` at {}:{start} (`{}`): without `binlog_row_metadata=FULL` on the server the mysql source stops rather than decode rows with a wrong schema; set `binlog_row_metadata=FULL` (rows then decode with their own schema), or take a new snapshot (remove the offsets) after the change", at.file, trimmed.chars().take(120).collect::<String>())));
                        }
                        let events = self
                            .streamed_ddl(&mut schemas, &session, trimmed, (&source, end), &after)
                            .await?;
                        if !events.is_empty() {
                            // A DDL statement is its own transaction: committed at its end.
                            for e in events {
                                cut.add(&e);
                                batch.push(e);
                            }
                            at.done = after;
                            self.commit(&mut batch, &at.done, ctx).await;
                        }
                    }
                }
                Some(EventData::XidEvent(_)) => {
                    at.done = position(&at.file, end);
                    self.commit(&mut batch, &at.done, ctx).await;
                }
                Some(EventData::RowsEvent(rows)) => {
                    let Some(tme) = stream.get_tme(rows.table_id()) else {
                        return Err(MysqlError::Value(format!(
                            "a rows event at {}:{start} names a table the binlog did not map",
                            at.file
                        )));
                    };
                    if let Some(charsets) = &charsets {
                        if let Entry::Vacant(e) = mapped.entry(rows.table_id()) {
                            e.insert(
                                self.mapped_table(tme, charsets, &mut lookup, &schemas.model)
                                    .await?,
                            );
                        }
                    }
                    let table = if let Some(Mapped::Own(t)) = mapped.get(&rows.table_id()) {
                        t
                    } else if let Some(Mapped::Skip) = mapped.get(&rows.table_id()) {
                        continue;
                    } else {
                        let Some(table) = by_name
                            .get(&(tme.database_name().as_ref(), tme.table_name().as_ref()))
                            .copied()
                        else {
                            continue;
                        };
                        if usize::try_from(tme.columns_count()).ok() != Some(table.columns.len()) {
                            return Err(MysqlError::Setup(format!("`{}.{}` has {} columns in the binlog at {}:{start} but {} when the source started: its schema changed; with `binlog_row_metadata=FULL` on the server the rows of a changed table decode with their own schema, without it the mysql source stops", table.db, table.name, tme.columns_count(), at.file, table.columns.len())));
                        }
                        table
                    };
                    let source = streamed(&header, &at.file, start, &gtid);
                    for e in self.row_changes(table, tme, &rows, &source, &at.done)? {
                        cut.add(&e);
                        batch.push(e);
                    }
                    if cut.is_full(&batch) {
                        cut.taken();
                        let events = std::mem::take(&mut batch);
                        let _ = ctx
                            .emit(Batch {
                                events,
                                position: Some(at.done.clone()),
                            })
                            .await;
                    }
                }
                _ => {}
            }
        }
    }

    /// The change events of one rows event of `table` (`at`: its `source` block, `done`: the
    /// position they carry until their commit). A row with a value its schema cannot hold
    /// follows `event.processing.failure.handling.mode`.
    fn row_changes(
        &self,
        table: &Table,
        tme: &TableMapEvent<'_>,
        rows: &RowsEventData<'_>,
        at: &At,
        done: &Position,
    ) -> Result<Vec<ChangeEvent>, MysqlError> {
        let mut out = Vec::new();
        for (i, row) in rows.rows(tme).enumerate() {
            let (before, after) = row.map_err(|e| {
                MysqlError::Value(format!(
                    "a row of `{}` at {}:{} cannot be decoded: {e}",
                    table.full_name(),
                    at.file,
                    at.pos
                ))
            })?;
            let images = match (
                self.image(table, before.as_ref()),
                self.image(table, after.as_ref()),
            ) {
                (Ok(b), Ok(a)) => (b, a),
                (Err(e), _) | (_, Err(e)) => {
                    let image = after.as_ref().or(before.as_ref());
                    let key = || {
                        table.key_text(|i| {
                            image.and_then(|r| r.as_ref(i)).map(|v| match v {
                                BinlogValue::Value(v) => v.as_sql(true),
                                other => format!("{other:?}"),
                            })
                        })
                    };
                    let what = format!("{e} (at {}:{}, row {i})", at.file, at.pos);
                    self.config
                        .common
                        .unrepresentable(&table.full_name(), key, &what)
                        .map_err(MysqlError::Value)?;
                    continue;
                }
            };
            let source = At {
                row: i32::try_from(i).unwrap_or(i32::MAX),
                ..at.clone()
            };
            out.extend(self.changes(table, rows, images, &source, done));
        }
        Ok(out)
    }

    /// The collations' character sets when the server writes the full row metadata
    /// (`binlog_row_metadata=FULL`), `None` otherwise.
    async fn full_metadata(
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
    async fn mapped_table(
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
        let structure = model.table(&db, &name);
        let key_names = match structure {
            Some(t) => t.primary_key_column_names.clone(),
            None => {
                let conn = match lookup {
                    Some(conn) => conn,
                    None => lookup.insert(self.connect().await?),
                };
                primary_key(conn, &db, &name).await?
            }
        };
        let key_names: Vec<String> = key_names
            .into_iter()
            .filter(|k| described.iter().any(|d| &d.name == k))
            .collect();
        self.table_of(db, name, described, &key_names, structure)
            .map(|t| Mapped::Own(Box::new(t)))
    }

    /// A heartbeat tick: `heartbeat.action.query` runs (on a connection of its own), then a
    /// heartbeat record goes out at the last committed position, so a quiet stream still
    /// commits its progress.
    async fn heartbeat(
        &self,
        beats: &sluice_kit::records::heartbeat::Heartbeats,
        action: &mut Option<mysql_async::Conn>,
        done: &Position,
        ctx: &mut SourceContext,
    ) {
        if let Some(query) = &self.config.common.heartbeat_action_query {
            use mysql_async::prelude::Queryable;
            if action.is_none() {
                match self.connect().await {
                    Ok(conn) => *action = Some(conn),
                    Err(e) => tracing::warn!(error = %e, "heartbeat.action.query: cannot connect."),
                }
            }
            if let Some(conn) = action.as_mut() {
                if let Err(e) = conn.query_drop(query).await {
                    tracing::warn!(error = %e, "heartbeat.action.query failed.");
                    *action = None;
                }
            }
        }
        let record = beats.event(SourceTimestamps::now().millis(), done.clone());
        let _ = ctx.emit(Batch::new(vec![record])).await;
    }

    /// A transaction committed: its events go out with the position after it.
    async fn commit(&self, batch: &mut Vec<ChangeEvent>, done: &Position, ctx: &mut SourceContext) {
        let mut events = std::mem::take(batch);
        for e in &mut events {
            e.position = done.clone();
        }
        let _ = ctx
            .emit(Batch {
                events,
                position: Some(done.clone()),
            })
            .await;
    }

    /// A row image as the table's struct.
    fn image(&self, table: &Table, row: Option<&BinlogRow>) -> Result<Option<Struct>, String> {
        let Some(row) = row else {
            return Ok(None);
        };
        if row.len() != table.columns.len() {
            return Err(format!(
                "`{}`: a row image holds {} of its {} columns: the change was written with `binlog_row_image` other than FULL (a session can set it); the mysql source needs full images",
                table.full_name(),
                row.len(),
                table.columns.len()
            ));
        }
        let modes = self.modes();
        let shape = &table.shape;
        let mut values = Vec::with_capacity(shape.kept.len());
        for (j, &i) in shape.kept.iter().enumerate() {
            let value = table.columns[i]
                .binlog_value(row.as_ref(i), modes)
                .map_err(|e| format!("`{}` {e}", table.full_name()))?;
            values.push(shape.map(j, value));
        }
        Struct::from_values(table.envelope.row.clone(), values)
            .map(Some)
            .ok_or_else(|| format!("`{}`: a row does not fit its schema", table.full_name()))
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

#[cfg(test)]
mod tests {
    use super::mariadb_gtid;

    #[test]
    fn a_mariadb_gtid_reads_domain_server_and_sequence() {
        let mut body = 42u64.to_le_bytes().to_vec();
        body.extend(7u32.to_le_bytes());
        body.push(0);
        assert_eq!(mariadb_gtid(&body, 1).as_deref(), Some("7-1-42"));
        assert_eq!(mariadb_gtid(&body[..10], 1), None);
    }

    #[test]
    fn the_first_rotate_keeps_the_requested_file_and_later_ones_name_theirs() {
        // Checksum bytes that happen to be digits ("binlog.000001" + "3..."): not a name.
        assert_eq!(
            super::rotated_file(b"binlog.0000013\x01\x02\x03", false),
            None
        );
        assert_eq!(
            super::rotated_file(b"mysql-bin.000123", true).as_deref(),
            Some("mysql-bin.000123")
        );
    }
}
