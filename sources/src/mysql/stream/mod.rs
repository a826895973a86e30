//! The binlog stream: ROW events of the captured tables from the snapshot's (or the committed)
//! position on, as Debezium's MySQL connector emits them. Each row's events carry the position
//! after that row: inside a transaction, Debezium's offset of its first event with the events
//! handled since and the rows delivered of the next (`event`, `row`); a transaction's commit
//! (XID, or COMMIT for a non-transactional engine) carries the position after it. A restart
//! inside a transaction reads it again from its first event and skips exactly what was
//! delivered. `provide.transaction.metadata` adds BEGIN and END records and each event's
//! `transaction` block (the GTID, or `file=…,pos=…` of its first event, as Debezium's id).
//!
//! Between events (every 20 ms when a signal channel is on) the incremental snapshot reads its
//! chunks and sends them once the stream has passed their position (`incremental`).
//!
//! Not built yet (issue 17): GTID offsets, blocking snapshots, the `kafka` signal channel.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use mysql_async::binlog::events::{BinlogEventHeader, EventData, QueryEvent, RowsEventData};
use mysql_async::BinlogStreamRequest;
use sluice_engine::event::BatchCut;
use sluice_engine::{Batch, Position, SourceContext};
use sluice_kit::records::heartbeat::{due, Heartbeat};
use sluice_kit::records::transaction::TxSchemas;

use super::error::MysqlError;
use super::gtid::GtidPosition;
use super::incremental::{Incremental, Progress};
use super::schema::Schemas;
use super::snapshot::Table;
use super::table_map::Charsets;
use super::{At, MysqlOffset, MysqlSource, Offset};

mod decode;
mod out;
mod reconnect;
mod rows;
mod signals;
mod transaction;

pub(in crate::mysql) use out::Out;
pub(super) use rows::primary_key;
use rows::Mapped;
use transaction::Tx;

/// MariaDB's GTID event (type 162), which mysql_common does not decode.
const MARIADB_GTID_EVENT: u8 = 162;

/// `domain-server-sequence` of a MariaDB GTID event's body (sequence number u64, domain id
/// u32, little-endian) written by `server_id`.
fn mariadb_gtid(body: &[u8], server_id: u32) -> Option<String> {
    let sequence = u64::from_le_bytes(body.get(..8)?.try_into().ok()?);
    let domain = u32::from_le_bytes(body.get(8..12)?.try_into().ok()?);
    Some(format!("{domain}-{server_id}-{sequence}"))
}

/// The source of a MariaDB GTID (`domain-server`), which `gtid.source.*` match.
fn gtid_source(gtid: &str) -> &str {
    gtid.rsplit_once('-').map_or(gtid, |(source, _)| source)
}

/// The `source` block's facts of a binlog event at `start` of `file`: its own position (as
/// Debezium's `source.pos`), writer, time, transaction GTID and statement (`include.query`).
fn streamed(
    header: &BinlogEventHeader,
    file: &Arc<str>,
    start: u64,
    (gtid, query): (&Option<Arc<str>>, &Option<Arc<str>>),
) -> At {
    At {
        ts_ms: i64::from(header.timestamp()) * 1000,
        snapshot: "false",
        server_id: i64::from(header.server_id()),
        file: Arc::clone(file),
        pos: start,
        row: 0,
        gtid: gtid.clone(),
        query: query.clone(),
    }
}

fn position(offset: MysqlOffset) -> Position {
    Offset {
        at: offset,
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

/// Whether a statement is a `TRUNCATE [TABLE]`.
fn is_truncate(statement: &str) -> bool {
    statement
        .split_whitespace()
        .next()
        .is_some_and(|w| w.eq_ignore_ascii_case("truncate"))
}

/// What the stream keeps between events.
struct State<'a> {
    by_name: HashMap<(&'a str, &'a str), &'a Table>,
    schemas: Schemas,
    /// With `binlog_row_metadata=FULL`: the collations' character sets.
    charsets: Option<Charsets>,
    mapped: HashMap<u64, Mapped>,
    /// A connection for what the binlog does not say (a mapped table's primary key).
    lookup: Option<mysql_async::Conn>,
    file: String,
    /// `file` as the events' `source` block carries it.
    file_value: Arc<str>,
    gtid: Option<Arc<str>>,
    /// The statement whose rows follow (`include.query`).
    query: Option<Arc<str>>,
    /// The open transaction's GTID source is not captured (`gtid.source.*`): its row
    /// changes are left out.
    filtered: bool,
    seen_format: bool,
    /// Resuming from a GTID position: the first rotate event names the file, with this many
    /// checksum bytes after the name.
    first_rotate: Option<usize>,
    /// Where the last event of the binlog file ended: the next event's start. (A replica
    /// without MariaDB's GTID capability gets a BEGIN in place of each GTID event, ending where
    /// it ends but of another size: its own start is not a position of the file.)
    last_end: u64,
    /// The committed position when it is inside a transaction: skips once that one restarts.
    resume: Option<MysqlOffset>,
    out: Out,
    inc: Incremental,
    /// The signaling table, when the `source` channel reads it.
    signal_table: Option<(String, String)>,
    /// Captured tables the stream had not met when a snapshot signal came (created since the
    /// start, their TABLE_MAP not seen or forgotten at a rotation): described from the server
    /// then, so that the signal can select them.
    late: Vec<Table>,
    /// When the binlog connection was last opened again (reconnects in a row wait).
    reopened: Option<std::time::Instant>,
}

/// The captured tables as the stream knows them now: described by their latest TABLE_MAP where
/// one was seen since the last schema change, else as the source started.
fn captured<'t>(
    by_name: &HashMap<(&str, &str), &'t Table>,
    mapped: &'t HashMap<u64, Mapped>,
    late: &'t [Table],
) -> Vec<&'t Table> {
    let mut tables: Vec<&Table> = mapped
        .values()
        .filter_map(|m| match m {
            Mapped::Own(t) => Some(t.as_ref()),
            _ => None,
        })
        .collect();
    for t in by_name.values().copied().chain(late) {
        if !tables.iter().any(|m| m.db == t.db && m.name == t.name) {
            tables.push(t);
        }
    }
    tables
}

impl MysqlSource {
    /// Streams from `from` until the pipeline stops.
    pub(super) async fn stream(
        &self,
        tables: &[Table],
        schemas: Schemas,
        (from, progress, by_gtid): (MysqlOffset, Option<Progress>, bool),
        ctx: &mut SourceContext,
    ) -> Result<(), MysqlError> {
        let (mut stream, charsets, gtids, checksum) = self.open_binlog(&from, by_gtid).await?;
        let common = &self.config.common;
        let inc = Incremental::new(common, progress, ctx).await?;
        let done = MysqlOffset::at(&from.file, from.pos, true);
        let mut state = State {
            by_name: tables
                .iter()
                .map(|t| ((t.db.as_str(), t.name.as_str()), t))
                .collect(),
            schemas,
            charsets,
            mapped: HashMap::new(),
            lookup: None,
            file: from.file.clone(),
            file_value: from.file.as_str().into(),
            gtid: None,
            query: None,
            filtered: false,
            seen_format: false,
            first_rotate: by_gtid.then_some(checksum),
            last_end: from.pos,
            resume: (from.event > 0 || from.row > 0).then(|| from.clone()),
            out: Out {
                batch: Vec::new(),
                cut: BatchCut::for_limits(ctx.limits()),
                tx: None,
                sent: position(done.clone()),
                done,
                meta: common
                    .provide_transaction_metadata
                    .then(|| TxSchemas::new(&common.topic_prefix)),
                progress: inc.tracker.delivered_json().map(ToOwned::to_owned),
                window: None,
                gtids_text: gtids
                    .as_ref()
                    .filter(|g| !g.is_empty())
                    .map(ToString::to_string),
                gtids,
            },
            inc,
            signal_table: self.signal_table(),
            late: Vec::new(),
            reopened: None,
        };
        state.out.sent = state.out.done_position();
        let mut heartbeat = Heartbeat::new(common);
        let mut action: Option<mysql_async::Conn> = None;
        let mut signals = tokio::time::interval(std::time::Duration::from_millis(20));
        signals.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let next = tokio::select! {
                biased;
                _ = ctx.stopping() => return Ok(()),
                _ = signals.tick(), if state.inc.active() => {
                    self.incremental_step(&mut state, ctx).await?;
                    continue;
                }
                _ = due(heartbeat.as_ref().map(Heartbeat::deadline)), if heartbeat.is_some() => {
                    if let Some(beat) = heartbeat.as_mut() {
                        self.heartbeat(beat, &mut action, &state.out.sent, ctx).await;
                    }
                    continue;
                }
                next = stream.next() => next,
            };
            let event = match next {
                Some(Ok(event)) => event,
                Some(Err(e)) if !(self.config.keep_alive && reconnect::dropped(Some(&e))) => {
                    return Err(super::error::binlog(e, self.config.server_id))
                }
                None if !self.config.keep_alive => {
                    return Err(MysqlError::Query {
                        context: "reading the binlog".into(),
                        source: mysql_async::Error::Other(
                            "the server closed the binlog stream".into(),
                        ),
                    })
                }
                dropped => {
                    let cause = dropped.and_then(Result::err).map_or_else(
                        || "the server closed the binlog stream".to_owned(),
                        |e| e.to_string(),
                    );
                    stream = self.reopen(&mut state, &cause, ctx).await?;
                    continue;
                }
            };
            let batch_full = self.on_event(&mut state, &stream, &event, ctx).await?;
            // The event (a rows event of whole before and after images may be megabytes) is
            // let go before the batch waits for room in a full queue.
            drop(event);
            if batch_full {
                let at = (state.out.batch.last())
                    .map_or_else(|| state.out.sent.clone(), |e| e.position.clone());
                state.out.send(at, ctx).await;
            }
        }
    }

    /// The binlog stream from `from` (its GTID position when `by_gtid`) as replica
    /// `database.server.id`; the collations' character sets when the server writes the full
    /// row metadata; with `type: mariadb` the GTID position at `from`; the checksum's length.
    async fn open_binlog(
        &self,
        from: &MysqlOffset,
        by_gtid: bool,
    ) -> Result<
        (
            mysql_async::BinlogStream,
            Option<Charsets>,
            Option<GtidPosition>,
            usize,
        ),
        MysqlError,
    > {
        use mysql_async::prelude::Queryable;
        let mut conn = self.connect().await?;
        // With the full row metadata, each TABLE_MAP event says the schema its rows have.
        let charsets = self.full_metadata(&mut conn).await?;
        let checksum: Option<String> = conn
            .query_first("SELECT @@binlog_checksum")
            .await
            .map_err(|e| MysqlError::query("reading `binlog_checksum`", e))?;
        let checksum = if checksum.is_some_and(|c| !c.eq_ignore_ascii_case("none")) {
            4
        } else {
            0
        };
        let mut gtids = None;
        let mut request = BinlogStreamRequest::new(self.config.server_id);
        if self.flavour == super::Flavour::Mariadb {
            // A replica that says it reads MariaDB GTIDs gets each transaction's GTID event
            // (older replicas get a `BEGIN` in its place).
            conn.query_drop("SET @mariadb_slave_capability = 4")
                .await
                .map_err(|e| MysqlError::query("announcing the MariaDB GTID capability", e))?;
            gtids = Some(self.gtid_position(&mut conn, from).await?);
        }
        match (&gtids, by_gtid) {
            (Some(position), true) => {
                // The position was parsed, so it holds digits, `-` and `,` only.
                conn.query_drop(format!(
                    "SET @slave_connect_state = '{position}', @slave_gtid_strict_mode = 1"
                ))
                .await
                .map_err(|e| MysqlError::query("setting the GTID position to resume from", e))?;
            }
            _ => {
                request = request
                    .with_filename(from.file.as_bytes())
                    .with_pos(from.pos);
            }
        }
        let stream = conn.get_binlog_stream(request).await.map_err(|e| {
            MysqlError::query(
                format!(
                    "starting the binlog stream at {}:{} as server id {}",
                    from.file, from.pos, self.config.server_id
                ),
                e,
            )
        })?;
        tracing::info!(file = %from.file, pos = from.pos, event = from.event, row = from.row, gtids = ?gtids.as_ref().map(ToString::to_string), by_gtid, "Binlog stream started.");
        Ok((stream, charsets, gtids, checksum))
    }

    /// The GTID position at `from`: the committed one, else the server's for that binlog
    /// position (`BINLOG_GTID_POS`).
    async fn gtid_position(
        &self,
        conn: &mut mysql_async::Conn,
        from: &MysqlOffset,
    ) -> Result<GtidPosition, MysqlError> {
        use mysql_async::prelude::Queryable;
        if let Some(text) = &from.gtids {
            return GtidPosition::parse(text).map_err(MysqlError::Setup);
        }
        let text: Option<Option<String>> = conn
            .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (&from.file, from.pos))
            .await
            .map_err(|e| {
                MysqlError::query("reading the GTID position of the binlog position", e)
            })?;
        GtidPosition::parse(&text.flatten().unwrap_or_default()).map_err(MysqlError::Setup)
    }

    /// The statement of the ANNOTATE_ROWS event at the end of the last event (MariaDB's
    /// `SHOW BINLOG EVENTS` shows it), if that is one.
    async fn annotation(&self, state: &mut State<'_>) -> Result<Option<String>, MysqlError> {
        use mysql_async::prelude::Queryable;
        let conn = match &mut state.lookup {
            Some(conn) => conn,
            None => state.lookup.insert(self.connect().await?),
        };
        let file = state.file.replace('\\', "\\\\").replace('\'', "''");
        let at = state.last_end;
        let event: Option<mysql_async::Row> = conn
            .query_first(format!("SHOW BINLOG EVENTS IN '{file}' FROM {at} LIMIT 1"))
            .await
            .map_err(|e| MysqlError::query(format!("reading the statement at {file}:{at}"), e))?;
        let Some(event) = event else {
            return Ok(None);
        };
        let kind: Option<String> = event.get("Event_type");
        Ok(kind
            .filter(|k| k.eq_ignore_ascii_case("Annotate_rows"))
            .and_then(|_| event.get("Info")))
    }

    /// One binlog event.
    async fn on_event(
        &self,
        state: &mut State<'_>,
        stream: &mysql_async::BinlogStream,
        event: &mysql_async::binlog::events::Event,
        ctx: &mut SourceContext,
    ) -> Result<bool, MysqlError> {
        let header = event.header();
        let end = u64::from(header.log_pos());
        let start = end.saturating_sub(u64::from(header.event_size()));
        if let Some(tx) = &mut state.out.tx {
            tx.event += 1;
        }
        if header.event_type_raw() == MARIADB_GTID_EVENT {
            // A transaction (or DDL statement) begins: its GTID, for `source.gtid`.
            state.gtid = mariadb_gtid(event.data(), header.server_id()).map(Arc::from);
            state.filtered = state
                .gtid
                .as_deref()
                .is_some_and(|g| !self.config.captures_gtid_source(gtid_source(g)));
            state.begin(&header, start, true, self.flavour.name());
            state.last_end = end;
            return Ok(false);
        }
        let data = event.read_data().map_err(|e| {
            MysqlError::Value(format!(
                "a binlog event at {}:{start} cannot be decoded: {e}",
                state.file
            ))
        })?;
        let mut batch_full = false;
        let positioned = !matches!(
            data,
            Some(EventData::FormatDescriptionEvent(_) | EventData::RotateEvent(_))
        );
        match data {
            // The format description of the file (sent again, artificial, when a stream
            // starts inside it): no position of its own.
            Some(EventData::FormatDescriptionEvent(_)) => state.seen_format = true,
            Some(EventData::RotateEvent(r)) => {
                let name = match state.first_rotate.take() {
                    // Resuming from a GTID position: the server names the file it starts in.
                    Some(checksum) => {
                        let raw = r.name_raw();
                        let name = &raw[..raw.len().saturating_sub(checksum)];
                        Some(String::from_utf8_lossy(name).into_owned())
                    }
                    None => rotated_file(r.name_raw(), state.seen_format),
                };
                if let Some(file) = name {
                    state.file_value = file.as_str().into();
                    state.file = file;
                    state.last_end = r.position();
                }
                // Table ids start again after a server restart (a new binlog file).
                state.mapped.clear();
            }
            Some(EventData::QueryEvent(q)) => {
                self.on_query(state, &header, &q, (start, end), ctx).await?;
            }
            Some(EventData::XidEvent(_)) => {
                self.commit(state, &header, end, ctx).await?;
            }
            // MySQL's statement of the rows that follow (`binlog_rows_query_log_events`).
            Some(EventData::RowsQueryEvent(q)) if self.config.include_query => {
                state.annotate(q.query().into_owned());
            }
            // MariaDB sends the statement (ANNOTATE_ROWS, just before its table maps) only
            // to a replica that asks with a dump flag the binlog client cannot set, and leaves
            // a hole in the positions where it was: the statement is read at the hole.
            Some(EventData::TableMapEvent(_))
                if self.config.include_query
                    && self.flavour == super::Flavour::Mariadb
                    && start > state.last_end =>
            {
                if let Some(statement) = self.annotation(state).await? {
                    state.annotate(statement);
                }
            }
            Some(EventData::RowsEvent(rows)) => {
                let Some(tme) = stream.get_tme(rows.table_id()) else {
                    return Err(MysqlError::Value(format!(
                        "a rows event at {}:{start} names a table the binlog did not map",
                        state.file
                    )));
                };
                self.on_rows(state, &header, tme, &rows, start).await?;
                batch_full = state.out.cut.is_full(&state.out.batch);
            }
            _ => {}
        }
        if positioned && end > 0 {
            state.last_end = end;
        }
        // A full batch goes out once the caller has let the event go.
        Ok(batch_full)
    }

    /// A query event: a transaction's BEGIN or COMMIT, or a statement (a DDL changes the
    /// schema model and gives schema change events).
    async fn on_query(
        &self,
        state: &mut State<'_>,
        header: &BinlogEventHeader,
        q: &QueryEvent<'_>,
        (start, end): (u64, u64),
        ctx: &mut SourceContext,
    ) -> Result<(), MysqlError> {
        let query = q.query();
        let trimmed = query.trim();
        if trimmed.eq_ignore_ascii_case("BEGIN") {
            // The transaction's events follow (its GTID event, just before, began it already).
            let begun = state
                .out
                .tx
                .as_ref()
                .is_some_and(|tx| tx.by_gtid && tx.event == 1);
            if !begun {
                let start = state.last_end;
                state.begin(header, start, false, self.flavour.name());
            }
            return Ok(());
        }
        if trimmed.eq_ignore_ascii_case("COMMIT") {
            // A non-transactional engine's statement ends with COMMIT, not XID.
            self.commit(state, header, end, ctx).await?;
            return Ok(());
        }
        if is_truncate(trimmed) {
            // `skipped.operations` keeps `t` (checked at start): as Debezium's default, a
            // TRUNCATE gives no event.
            state.standalone_done();
            return Ok(());
        }
        let session = q.schema();
        let after = state.out.position(&MysqlOffset::at(&state.file, end, true));
        let source = streamed(header, &state.file_value, start, (&state.gtid, &None));
        // The session's database, or a captured database named in the text.
        let touches = state
            .by_name
            .values()
            .any(|t| t.db == session || query.contains(t.db.as_str()));
        if touches && state.charsets.is_some() {
            // Rows decode with their TABLE_MAP's schema: a table changed here gets a new
            // table id, and is described again.
            tracing::info!(
                database = %session,
                at = %format!("{}:{start}", state.file),
                "A schema change; the rows that follow are decoded with the schema their TABLE_MAP events give."
            );
            state.mapped.clear();
        } else if touches {
            return Err(MysqlError::Setup(format!("a schema change in `{session}` at {}:{start} (`{}`): without `binlog_row_metadata=FULL` on the server the mysql source stops rather than decode rows with a wrong schema; set `binlog_row_metadata=FULL` (rows then decode with their own schema), or take a new snapshot (remove the offsets) after the change", state.file, trimmed.chars().take(120).collect::<String>())));
        }
        let events = self
            .streamed_ddl(
                &mut state.schemas,
                &session,
                trimmed,
                (&source, end),
                &after,
            )
            .await?;
        if !events.is_empty() {
            // A DDL statement is its own transaction: committed at its end.
            for e in events {
                state.out.push(e);
            }
            self.commit(state, header, end, ctx).await?;
        } else {
            state.standalone_done();
        }
        Ok(())
    }

    /// A rows event: the change events of its rows, when its table is captured.
    async fn on_rows(
        &self,
        state: &mut State<'_>,
        header: &BinlogEventHeader,
        tme: &mysql_async::binlog::events::TableMapEvent<'_>,
        rows: &RowsEventData<'_>,
        start: u64,
    ) -> Result<(), MysqlError> {
        if state.filtered {
            self.config.common.counters.filtered(1);
            return Ok(());
        }
        if let Some(charsets) = &state.charsets {
            if let std::collections::hash_map::Entry::Vacant(e) =
                state.mapped.entry(rows.table_id())
            {
                e.insert(
                    self.mapped_table(tme, charsets, &mut state.lookup, &state.schemas.model)
                        .await?,
                );
            }
        }
        let table = match state.mapped.get(&rows.table_id()) {
            Some(Mapped::Own(t)) => t.as_ref(),
            Some(Mapped::Skip) => {
                // A table not captured (Debezium's filtered event).
                self.config.common.counters.filtered(1);
                return Ok(());
            }
            _ => {
                let (db, name) = (tme.database_name(), tme.table_name());
                let late = || state.late.iter().find(|t| t.db == db && t.name == name);
                let known = state.by_name.get(&(db.as_ref(), name.as_ref())).copied();
                let Some(table) = known.or_else(late) else {
                    return self.inconsistent(&db, &name, &state.file, start);
                };
                if usize::try_from(tme.columns_count()).ok() != Some(table.columns.len()) {
                    return Err(MysqlError::Setup(format!("`{}.{}` has {} columns in the binlog at {}:{start} but {} when the source started: its schema changed; with `binlog_row_metadata=FULL` on the server the rows of a changed table decode with their own schema, without it the mysql source stops", table.db, table.name, tme.columns_count(), state.file, table.columns.len())));
                }
                table
            }
        };
        let source = streamed(
            header,
            &state.file_value,
            start,
            (&state.gtid, &state.query),
        );
        let delivered = state.out.tx.as_ref().map_or(0, Tx::delivered_rows);
        let before = state.out.batch.len();
        self.row_changes(table, tme, rows, &source, &mut state.out, delivered)?;
        if state
            .signal_table
            .as_ref()
            .map(|(d, n)| (d.as_str(), n.as_str()))
            == Some((table.db.as_str(), table.name.as_str()))
        {
            // Inserts into the signaling table: signals, in binlog order.
            let signals: Vec<_> = state.out.batch[before..]
                .iter()
                .filter_map(sluice_kit::signal::from_insert)
                .collect();
            if signals.iter().any(|s| s.kind == "execute-snapshot") {
                self.meet_tables(state).await?;
            }
            let tables = captured(&state.by_name, &state.mapped, &state.late);
            for signal in &signals {
                if self.act_on(signal, &tables, &mut state.inc) {
                    state.out.window = None;
                }
            }
            state.out.progress = state.inc.tracker.delivered_json().map(ToOwned::to_owned);
        }
        Ok(())
    }

    /// A heartbeat tick: `heartbeat.action.query` runs (on a connection of its own), then a
    /// heartbeat record goes out at the position of the last batch sent, so a quiet stream
    /// still commits its progress.
    async fn heartbeat(
        &self,
        beat: &mut Heartbeat,
        action: &mut Option<mysql_async::Conn>,
        sent: &Position,
        ctx: &mut SourceContext,
    ) {
        let outcome = match beat.action_query() {
            Some(query) => Some(self.action_query(action, query).await),
            None => None,
        };
        let record = beat.record(outcome, sent.clone());
        let _ = ctx.emit(Batch::new(vec![record])).await;
    }

    /// Runs `heartbeat.action.query` on `action` (connected first when it is not); a failed
    /// connection is dropped, to connect again next time.
    async fn action_query(
        &self,
        action: &mut Option<mysql_async::Conn>,
        query: &str,
    ) -> Result<(), String> {
        use mysql_async::prelude::Queryable;
        let conn = match action {
            Some(conn) => conn,
            None => action.insert(
                self.connect()
                    .await
                    .map_err(|e| format!("cannot connect: {e}"))?,
            ),
        };
        let done = conn.query_drop(query).await.map_err(|e| e.to_string());
        if done.is_err() {
            *action = None;
        }
        done
    }

    /// A transaction committed (its last event `header` ends at `end`): its END record, then
    /// its events go out with the position after it. A blocking snapshot it asked for runs
    /// then; until it ends, positions stay before the transaction (a restart reads the signal
    /// again).
    async fn commit(
        &self,
        state: &mut State<'_>,
        header: &BinlogEventHeader,
        end: u64,
        ctx: &mut SourceContext,
    ) -> Result<(), MysqlError> {
        let before = match (&state.out.tx, &state.inc.blocking) {
            (Some(tx), Some(_)) => {
                Some(state.out.position(&MysqlOffset::at(&tx.file, tx.pos, true)))
            }
            _ => None,
        };
        state.out.gtid_done();
        state.out.done = MysqlOffset::at(&state.file, end, true);
        let done = state.out.done_position();
        let out = &mut state.out;
        let end_record = match (out.tx.take(), &out.meta) {
            (Some(tx), Some(meta)) if tx.counts.begun => {
                let ts_ms = i64::from(header.timestamp()) * 1000;
                Some(meta.end(&tx.id, ts_ms, tx.counts.total, &tx.counts.per_table))
            }
            _ => None,
        };
        if let Some(mut record) = end_record {
            record.position = before.clone().unwrap_or_else(|| done.clone());
            out.push(record);
        }
        match before {
            Some(before) => {
                out.send(before.clone(), ctx).await;
                self.run_blocking(state, before, ctx).await
            }
            None => {
                out.send(done, ctx).await;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests;
