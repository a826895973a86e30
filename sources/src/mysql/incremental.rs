//! Incremental snapshots for MySQL and MariaDB (Debezium's `execute-snapshot` signal), started
//! by an insert into the signaling table (`signal.data.collection`, a captured table: its rows
//! arrive in binlog order), the `file` channel or the admin endpoint (`http`).
//!
//! DBLog with binlog positions for watermarks, as Debezium's MySQL `read.only` mode (nothing is
//! written to the server): a chunk (by primary key, after the previous chunk's last key, up to
//! the table's maximum key when its scan started, with the signal's `additional-conditions`) is
//! read in a `START TRANSACTION WITH CONSISTENT SNAPSHOT` whose binlog position MariaDB reports
//! (`binlog_snapshot_file`/`_position`), so the chunk is the table's state at that position `P`.
//! The window runs from the read until the stream has passed `P` between transactions: a chunk
//! row whose key a change streamed in the window touched is dropped (the change is as new or
//! newer), the rest follow as `r` events with `snapshot: incremental`. The kit's tracker keeps
//! the progress (in each position after the chunk, so a restart continues with the next chunk),
//! carries out the signals and makes Debezium's notifications.

use mysql_async::prelude::Queryable;
use sluice_engine::event::SourceTimestamps;
use sluice_engine::{Op, SourceContext};
use sluice_kit::incremental::{next_window, Abilities, ChunkSource, Read, Step};
use sluice_kit::signal::{Channels, Signal};

use super::error::MysqlError;
use super::snapshot::Table;
use super::{quote, At, MysqlSource};

/// The progress of an incremental snapshot: the kit's, with each key column's value as the
/// server's text (hex for a binary column).
pub(super) type Progress = sluice_kit::incremental::Progress<String>;

/// The kit's tracker, with keys as [`Progress`] has them.
pub(super) type Tracker = sluice_kit::incremental::Tracker<String>;

/// What the mysql source's snapshots do beyond the plain incremental one: blocking snapshots
/// (`blocking`), `additional-conditions` and `surrogate-key` (chunks read by another unique
/// column than the primary key; changes still match a chunk's rows by the events' key).
const ABILITIES: Abilities = Abilities {
    blocking: true,
    conditions: true,
    surrogate_key: true,
};

/// A chunk read, waiting for the stream to pass the binlog position it was read at (the
/// kit's window).
pub(super) type Window = sluice_kit::incremental::Window<String, BinlogPos>;

/// A binlog position, ordered by the file's sequence number, then the offset in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BinlogPos {
    file: u64,
    pos: u64,
}

impl BinlogPos {
    /// Offset `pos` of binlog file `file` (`binlog.000012`).
    pub(super) fn new(file: &str, pos: u64) -> Self {
        BinlogPos {
            file: file_number(file),
            pos,
        }
    }
}

impl PartialOrd for BinlogPos {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some((self.file, self.pos).cmp(&(other.file, other.pos)))
    }
}

/// The source's side of the kit's position-watermark chunks: a chunk is read in a consistent
/// snapshot whose binlog position the server reports, on a connection of its own.
struct Chunks<'a> {
    source: &'a MysqlSource,
    conn: &'a mut Option<mysql_async::Conn>,
    /// What the stream has committed: a chunk read before it is read again later.
    done: &'a super::MysqlOffset,
}

impl ChunkSource for Chunks<'_> {
    type Key = String;
    type At = BinlogPos;
    type Table = Table;
    type Error = MysqlError;

    fn topic(table: &Table) -> std::sync::Arc<str> {
        table.topic.clone()
    }

    fn unreadable(table: &Table, p: &Progress) -> Option<String> {
        // The events' key is what matches a streamed change to a chunk's row, whatever the
        // chunks are read by.
        if table.shape.key.is_empty() {
            return Some(format!(
                "`{}` has no primary key to read it by in chunks",
                table.full_name()
            ));
        }
        match (chunk_key(table, p), &p.surrogate_key) {
            (None, Some(name)) => Some(format!(
                "the surrogate key `{name}` is not a captured column of `{}`",
                table.full_name()
            )),
            _ => None,
        }
    }

    async fn read(
        &mut self,
        table: &Table,
        p: &Progress,
        limit: usize,
    ) -> Result<Read<String, BinlogPos>, MysqlError> {
        let source = self.source;
        let conn = source.chunk_conn(&mut *self.conn).await?;
        let (file, pos) = super::locking::exact(conn).await?;
        let read = source.chunk_rows(conn, table, p, limit).await;
        let _ = conn.query_drop("COMMIT").await;
        // The stream had already streamed a transaction the chunk's snapshot does not see
        // (written to the binlog, not yet committed in the engine when the chunk was read).
        if BinlogPos::new(&file, pos) < BinlogPos::new(&self.done.file, self.done.pos) {
            tracing::debug!(%file, pos, "A chunk older than the stream; read again.");
            return Ok(Read::Later);
        }
        match read {
            Ok(Some((max_key, rows))) => Ok(Read::Rows {
                rows: source.chunk_events(table, rows, &file, pos),
                at: BinlogPos::new(&file, pos),
                max_key,
            }),
            Ok(None) => Ok(Read::Empty),
            // A condition the server refuses aborts the snapshot, not the stream.
            Err(MysqlError::Query { context, source })
                if matches!(source, mysql_async::Error::Server(_)) =>
            {
                Ok(Read::Refused(format!("{context}: {source}")))
            }
            Err(e) => Err(e),
        }
    }
}

/// The sequence number of a binlog file (`binlog.000012` → 12), by which files are ordered.
fn file_number(file: &str) -> u64 {
    file.rsplit('.')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The incremental snapshot's state in the stream: the tracker, the signal channels read
/// between binlog events, and a connection of its own for the chunks.
pub(super) struct Incremental {
    pub(super) tracker: Tracker,
    /// Whether a signal channel is on.
    enabled: bool,
    pub(super) channels: Channels,
    conn: Option<mysql_async::Conn>,
    /// A blocking snapshot asked for, run between transactions (after the signal's).
    pub(super) blocking: Option<sluice_kit::signal::BlockingRequest>,
}

impl Incremental {
    /// Forgets the chunk connection (it is opened again when next used).
    pub(super) fn drop_connection(&mut self) {
        self.conn = None;
    }

    /// The channels of `common`, resuming `resumed`.
    pub(super) async fn new(
        common: &sluice_kit::config::SourceCommon,
        resumed: Option<Progress>,
        ctx: &SourceContext,
    ) -> Result<Self, MysqlError> {
        let channels = Channels::open(common, ctx).await?;
        let table = common.signal_channel("source") && common.signal_data_collection.is_some();
        Ok(Incremental {
            tracker: Tracker::new(resumed, common.notifications()),
            enabled: table || !channels.is_empty(),
            channels,
            conn: None,
            blocking: None,
        })
    }

    /// Whether anything can need a look between binlog events.
    pub(super) fn active(&self) -> bool {
        self.enabled || self.tracker.ahead().is_some() || self.blocking.is_some()
    }
}

/// A key column's value written back into a query: a quoted string (the server converts it
/// to the column's type and compares in the column's collation), or a hex literal for a
/// binary column. The chunk connection runs with `NO_BACKSLASH_ESCAPES`.
fn literal(value: &str, binary: bool) -> String {
    if binary {
        format!("X'{value}'")
    } else {
        format!("'{}'", value.replace('\'', "''"))
    }
}

/// `(a, b)` of the key columns, or of their values as literals.
fn tuple(items: impl Iterator<Item = String>) -> String {
    format!("({})", items.collect::<Vec<_>>().join(", "))
}

/// The columns chunks of `table` are read by, as positions among its kept columns: the
/// primary key, or the signal's `surrogate-key` column (`None` when that is not captured).
fn chunk_key(table: &Table, p: &Progress) -> Option<Vec<usize>> {
    match &p.surrogate_key {
        None => Some(table.shape.key.clone()),
        Some(name) => table
            .shape
            .kept
            .iter()
            .position(|&i| table.columns[i].name.eq_ignore_ascii_case(name))
            .map(|j| vec![j]),
    }
}

impl MysqlSource {
    /// The columns at `key` (positions among the kept columns), quoted, and whether each is
    /// binary.
    fn key_columns(table: &Table, key: &[usize]) -> Vec<(String, bool)> {
        key.iter()
            .map(|&j| {
                let c = &table.columns[table.shape.kept[j]];
                (quote(&c.name), c.is_binary())
            })
            .collect()
    }

    /// The chunk query of `table` for progress `p` up to `max`.
    fn chunk_query(
        table: &Table,
        key: &[usize],
        p: &Progress,
        max: &[String],
        limit: usize,
    ) -> String {
        let keys = Self::key_columns(table, key);
        let names = || tuple(keys.iter().map(|(k, _)| k.clone()));
        let values = |key: &[String]| {
            tuple(
                keys.iter()
                    .zip(key)
                    .map(|((_, binary), v)| literal(v, *binary)),
            )
        };
        let list: Vec<String> = (table.shape.kept.iter())
            .map(|&i| table.columns[i].select_expr())
            .collect();
        let mut sql = format!(
            "SELECT {} FROM {}.{} WHERE {} <= {}",
            list.join(", "),
            quote(&table.db),
            quote(&table.name),
            names(),
            values(max)
        );
        if let Some(last) = &p.last_key {
            sql.push_str(&format!(" AND {} > {}", names(), values(last)));
        }
        if let Some(condition) = p.conditions.get(&table.full_name()) {
            sql.push_str(&format!(" AND ({condition})"));
        }
        sql.push_str(&format!(
            " ORDER BY {} LIMIT {limit}",
            names().trim_matches(['(', ')'])
        ));
        sql
    }

    /// The key of a row of a chunk or maximum key query (whose first columns are `columns`).
    fn row_key(row: &mysql_async::Row, columns: &[usize], binary: &[bool]) -> Vec<String> {
        columns
            .iter()
            .zip(binary)
            .map(|(&j, &b)| match row.as_ref(j) {
                Some(mysql_async::Value::Bytes(v)) if b => {
                    v.iter().map(|x| format!("{x:02X}")).collect()
                }
                Some(mysql_async::Value::Bytes(v)) => String::from_utf8_lossy(v).into_owned(),
                _ => String::new(),
            })
            .collect()
    }

    /// The chunk connection, opened on first use.
    async fn chunk_conn<'c>(
        &self,
        slot: &'c mut Option<mysql_async::Conn>,
    ) -> Result<&'c mut mysql_async::Conn, MysqlError> {
        if slot.is_none() {
            let mut conn = self.connect().await?;
            conn.query_drop("SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'NO_BACKSLASH_ESCAPES')")
                .await
                .map_err(|e| MysqlError::query("setting the chunk connection's sql_mode", e))?;
            *slot = Some(conn);
        }
        slot.as_mut()
            .ok_or_else(|| MysqlError::Setup("no chunk connection".into()))
    }

    /// Reads the next chunk of the snapshot `inc` runs, the stream having committed up to
    /// `done` (the kit's chunk step on [`Chunks`]).
    pub(super) async fn read_chunk(
        &self,
        inc: &mut Incremental,
        tables: &[&Table],
        done: &super::MysqlOffset,
    ) -> Result<Step<String, BinlogPos>, MysqlError> {
        let mut chunks = Chunks {
            source: self,
            conn: &mut inc.conn,
            done,
        };
        let find = |name: &str| tables.iter().copied().find(|t| t.full_name() == name);
        let limit = self.config.common.incremental_chunk_size;
        next_window(&mut chunks, &mut inc.tracker, find, limit).await
    }

    /// A chunk's rows as events read at `file`/`pos`.
    fn chunk_events(
        &self,
        table: &Table,
        rows: Vec<(Option<sluice_engine::Struct>, Vec<String>)>,
        file: &str,
        pos: u64,
    ) -> Vec<(Option<sluice_engine::ChangeEvent>, Vec<String>)> {
        let at = At {
            ts_ms: SourceTimestamps::now().millis(),
            snapshot: "incremental",
            server_id: 0,
            file: file.into(),
            pos,
            row: 0,
            gtid: None,
            query: None,
        };
        rows.into_iter()
            .map(|(after, key)| {
                let event = after.map(|after| {
                    let position = sluice_engine::Position::Offset(0);
                    self.event(table, Op::Read, None, Some(after), &at, position)
                });
                (event, key)
            })
            .collect()
    }

    /// The table's maximum key (`p`'s, or read now) and the chunk's rows (`None` when left out
    /// by the failure handling mode, still counted) with their keys; `None`: the table (with
    /// the signal's condition) is empty.
    #[allow(clippy::type_complexity)]
    async fn chunk_rows(
        &self,
        conn: &mut mysql_async::Conn,
        table: &Table,
        p: &Progress,
        limit: usize,
    ) -> Result<
        Option<(
            Vec<String>,
            Vec<(Option<sluice_engine::Struct>, Vec<String>)>,
        )>,
        MysqlError,
    > {
        let key = chunk_key(table, p).unwrap_or_default();
        let keys = Self::key_columns(table, &key);
        let binary: Vec<bool> = keys.iter().map(|(_, b)| *b).collect();
        let q = |e| MysqlError::query(format!("reading a chunk of `{}`", table.full_name()), e);
        let max = match &p.max_key {
            Some(max) => max.clone(),
            None => {
                let names: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
                let mut sql = format!(
                    "SELECT {} FROM {}.{}",
                    names.join(", "),
                    quote(&table.db),
                    quote(&table.name)
                );
                if let Some(condition) = p.conditions.get(&table.full_name()) {
                    sql.push_str(&format!(" WHERE ({condition})"));
                }
                let desc: Vec<String> = names.iter().map(|k| format!("{k} DESC")).collect();
                sql.push_str(&format!(" ORDER BY {} LIMIT 1", desc.join(", ")));
                let row: Option<mysql_async::Row> = conn.query_first(sql).await.map_err(q)?;
                let Some(row) = row else {
                    return Ok(None);
                };
                let all: Vec<usize> = (0..keys.len()).collect();
                Self::row_key(&row, &all, &binary)
            }
        };
        let sql = Self::chunk_query(table, &key, p, &max, limit);
        let result: Vec<mysql_async::Row> = conn.query(sql).await.map_err(q)?;
        let mut rows = Vec::with_capacity(result.len());
        for row in &result {
            let row_key = Self::row_key(row, &key, &binary);
            rows.push((self.text_row(table, row, None)?, row_key));
        }
        Ok(Some((max, rows)))
    }

    /// Carries out one signal, whichever channel brought it (the kit's tracker; a refusal is
    /// logged and notified). `true`: the chunk in its window is to be dropped (the progress
    /// changed, and reading goes on from what was delivered).
    pub(super) fn act_on(&self, signal: &Signal, tables: &[&Table], inc: &mut Incremental) -> bool {
        let signal_table = self.signal_table();
        let names: Vec<String> = tables
            .iter()
            .filter(|t| {
                Some((t.db.as_str(), t.name.as_str()))
                    != signal_table.as_ref().map(|(d, n)| (d.as_str(), n.as_str()))
            })
            .map(|t| t.full_name())
            .collect();
        inc.tracker
            .handle(signal, &names, "", ABILITIES, &mut inc.blocking)
    }

    /// The signals `received` of the `file`, `http` and `kafka` channels; `true`: drop the
    /// window.
    pub(super) fn channel_signals(
        &self,
        received: Vec<sluice_kit::signal::Received>,
        tables: &[&Table],
        inc: &mut Incremental,
    ) -> bool {
        let mut restart = false;
        for received in received {
            if let Some(signal) = received.signal() {
                restart |= self.act_on(&signal, tables, inc);
            }
            inc.channels.handled(&received);
        }
        restart
    }

    /// `signal.data.collection` as `(database, table)`, when the `source` channel reads it.
    pub(super) fn signal_table(&self) -> Option<(String, String)> {
        let common = &self.config.common;
        if !common.signal_channel("source") {
            return None;
        }
        common.signal_table("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binlog_positions_order_by_the_files_number() {
        let p = BinlogPos::new;
        assert!(p("binlog.000009", 500) < p("binlog.000010", 4));
        assert!(p("binlog.000010", 500) <= p("binlog.000010", 500));
        assert!(p("binlog.000010", 499) < p("binlog.000010", 500));
        assert!(p("binlog.000009", 9000) < p("binlog.000010", 4));
    }

    #[test]
    fn keys_are_written_back_as_literals() {
        assert_eq!(literal("it's", false), "'it''s'");
        assert_eq!(literal("00FF", true), "X'00FF'");
    }
}
