//! The consistent snapshot: every captured table read in one transaction, at the binlog
//! position MariaDB reports for it. Rows are `op: r` events whose `source.snapshot` marks the
//! first and last rows (of all, and of each table) as Debezium does.

use sluice_kit::failure::{Refusal, RowError};
use sluice_kit::lifecycle::SnapshotRun;
use std::collections::BTreeMap;
use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use sluice_engine::event::{BatchCut, EnvelopeSchema, SourceTimestamps};
use sluice_engine::{Batch, ChangeEvent, Op, SourceContext, Struct};

use sluice_kit::shape::{ColumnSpec, Shape};
use sluice_kit::snapshot::Start;

use super::columns::{Column, Described, Modes};
use super::ddl::Model;
use super::error::MysqlError;
use super::locking;
use super::quote;
use super::schema::Schemas;
use super::{MysqlOffset, MysqlSource, Offset};
use sluice_kit::history::TableDef;

/// A captured table.
pub(super) struct Table {
    pub db: String,
    pub name: String,
    /// Every column, in the table's (and the binlog's) order.
    pub columns: Vec<Column>,
    /// What the events carry of them (`shape.kept` indexes `columns`).
    pub shape: Shape,
    pub topic: Arc<str>,
    pub envelope: EnvelopeSchema,
    /// `db` and `name` as the events' `source` block carries them.
    pub values: (Arc<str>, Arc<str>),
}

impl Table {
    /// `db.table`.
    pub(super) fn full_name(&self) -> String {
        format!("{}.{}", self.db, self.name)
    }
}

impl MysqlSource {
    pub(super) fn modes(&self) -> Modes {
        Modes {
            decimal: self.config.decimal_mode,
            time: self.config.time_mode,
            binary: self.config.binary_mode,
            bigint: self.config.bigint_mode,
        }
    }

    /// The captured tables, as the snapshot's transaction sees them.
    /// (`model`: the schema model, for the columns' defaults.)
    pub(super) async fn tables(
        &self,
        conn: &mut Conn,
        model: &Model,
    ) -> Result<Vec<Table>, MysqlError> {
        let names: Vec<(String, String)> = conn
            .query("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED') ORDER BY TABLE_SCHEMA, TABLE_NAME")
            .await
            .map_err(|e| MysqlError::query("listing the tables", e))?;
        let mut tables = Vec::new();
        for (db, name) in names.into_iter().filter(|(d, t)| self.config.selects(d, t)) {
            let modelled = model
                .known(&db, &name)
                .map(|(k, t)| (k.1.clone(), t.clone()));
            tables.push(self.table(conn, db, name, modelled.as_ref()).await?);
        }
        Ok(tables)
    }

    /// The captured table `db.name` as the server describes it now (`modelled`: the schema
    /// model's name and structure, for the topic, the key and the defaults).
    pub(super) async fn table(
        &self,
        conn: &mut Conn,
        db: String,
        name: String,
        modelled: Option<&(String, TableDef)>,
    ) -> Result<Table, MysqlError> {
        let structure = modelled.map(|(_, t)| t);
        let q = |e| MysqlError::query(format!("reading the columns of `{db}.{name}`"), e);
        type Row = (
            String,
            String,
            String,
            String,
            Option<u32>,
            Option<u32>,
            Option<u32>,
            Option<String>,
            Option<u64>,
        );
        let rows: Vec<Row> = conn
            .exec("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_SET_NAME, CHARACTER_MAXIMUM_LENGTH FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", (&db, &name))
            .await
            .map_err(q)?;
        // The key as Debezium's model has it (a UNIQUE NOT NULL key of a table without a
        // primary key counts), the same the stream uses; the PRIMARY constraint otherwise.
        let key_names = match structure {
            Some(t) => t.primary_key_column_names.clone(),
            None => super::stream::primary_key(conn, &db, &name).await?,
        };
        let described: Vec<Described> = rows
            .into_iter()
            .map(
                |(
                    col,
                    data_type,
                    column_type,
                    nullable,
                    precision,
                    scale,
                    fsp,
                    charset,
                    length,
                )| {
                    Described {
                        name: col,
                        data_type: data_type.to_ascii_lowercase(),
                        column_type: column_type.to_ascii_lowercase(),
                        nullable: nullable == "YES",
                        precision,
                        scale,
                        fsp,
                        charset: charset.map(|c| c.to_ascii_lowercase()),
                        length,
                    }
                },
            )
            .collect();
        let modelled = modelled.map(|(n, t)| (n.as_str(), t));
        self.table_of(db, name, described, &key_names, modelled)
    }

    /// The table `db.name` whose columns are `described` and whose primary key is
    /// `key_names`, as the column options shape it.
    /// `modelled`: the schema model's name of the table and its structure; the topic takes
    /// the model's name (on a `lower_case_table_names` server, the case of the statement that
    /// made the table, as Debezium's), `source.table` the server's.
    pub(super) fn table_of(
        &self,
        db: String,
        name: String,
        described: Vec<Described>,
        key_names: &[String],
        modelled: Option<(&str, &TableDef)>,
    ) -> Result<Table, MysqlError> {
        let structure = modelled.map(|(_, t)| t);
        let named = modelled.map_or(name.as_str(), |(n, _)| n);
        let mut columns = Vec::new();
        let mut specs = Vec::new();
        for mut d in described {
            // A TABLE_MAP without the spatial types says `geometry` of every spatial column:
            // the schema model knows which.
            let modelled = structure.and_then(|t| t.columns.iter().find(|c| c.name == d.name));
            if let Some(c) = modelled.filter(|_| d.data_type == "geometry") {
                let t = c.type_name.to_ascii_lowercase();
                if super::columns::SPATIAL.contains(&t.as_str()) {
                    d.data_type = t;
                }
            }
            // MariaDB's UUID, INET4 and INET6 are a BINARY(n) in the TABLE_MAP.
            if let Some(c) = modelled.filter(|_| d.data_type == "binary") {
                let t = c.type_name.to_ascii_lowercase();
                if super::columns::Special::of(&t).is_some() {
                    d.data_type.clone_from(&t);
                    d.column_type = t;
                }
            }
            let place = key_names.iter().position(|k| *k == d.name);
            let key = place.is_some();
            let full = format!("{db}.{name}.{}", d.name);
            let default = structure
                .and_then(|t| t.columns.iter().find(|c| c.name == d.name))
                .and_then(|c| c.default_value_expression.as_deref());
            let column = if key || self.config.common.selects_column(&full) {
                Column::new(&d, key, self.modes())
                    .map_err(|e| {
                        MysqlError::Setup(format!(
                            "table `{db}.{name}`: {e}; leave the table out with `table.exclude.list` (or the column with `column.exclude.list`)"
                        ))
                    })?
                    .with_default(default, self.modes())
            } else {
                Column::excluded(&d.name)
            };
            specs.push(ColumnSpec {
                name: column.name.clone(),
                schema: column.schema.clone(),
                primary_key: place,
                text: column.is_text(),
                length: d.length.and_then(|n| usize::try_from(n).ok()),
            });
            columns.push(column);
        }
        let shape = self
            .config
            .common
            .shape(&format!("{db}.{name}"), &specs)
            .map_err(MysqlError::Setup)?;
        let prefix = format!("{}.{db}.{named}", self.config.common.topic_prefix);
        let envelope = EnvelopeSchema::new(
            &prefix,
            shape.key_schema.clone(),
            shape.row.clone(),
            self.source_schema.clone(),
        );
        Ok(Table {
            values: (db.as_str().into(), name.as_str().into()),
            db,
            name,
            columns,
            shape,
            topic: prefix.into(),
            envelope,
        })
    }

    /// Reads the snapshot and sends its rows; returns how many, the tables, and where the
    /// stream goes on. `cut_off`: the stored position of a snapshot cut off earlier (still in
    /// the binlog), which the rows go out at and the stream resumes from
    /// ([`sluice_kit::snapshot::Start`]); without one the snapshot's own position is committed
    /// before its first row.
    pub(super) async fn snapshot(
        &self,
        conn: &mut Conn,
        schemas: &mut Schemas,
        cut_off: Option<MysqlOffset>,
        ctx: &mut SourceContext,
    ) -> Result<(u64, Vec<Table>, Start<MysqlOffset>), MysqlError> {
        let (mut started, tables, mut batch) = self.start_snapshot(conn, schemas).await?;
        let (file, pos) = (started.file.clone(), started.pos);
        tracing::info!(%file, pos, "Consistent snapshot started.");
        let under_way = |at: &MysqlOffset| {
            Offset {
                at: MysqlOffset {
                    snapshot_completed: false,
                    ..at.clone()
                },
                incremental: None,
            }
            .position()
        };
        let read_at = MysqlOffset::at(&file, pos, false);
        let start = Start::begin(ctx, cut_off, read_at, under_way)
            .await
            .map_err(|_| MysqlError::Stopped)?;
        let at = |completed| {
            Offset {
                at: MysqlOffset {
                    snapshot_completed: completed,
                    ..start.position().clone()
                },
                incremental: None,
            }
            .position()
        };
        // The schema events go out at the snapshot's start too: a position after a cut-off
        // snapshot's would be committed past the changes still to be read again.
        for e in &mut batch {
            e.position = at(false);
        }
        let included: Vec<&Table> = tables
            .iter()
            .filter(|t| self.config.common.snapshots_table(&t.full_name()))
            .collect();
        let announced = SnapshotRun::announce(ctx, estimates(conn, &included).await?);
        let no_conditions = BTreeMap::new();
        let (rows, mut events) = self
            .read_rows(
                conn,
                (&included, &no_conditions),
                (&file, pos),
                (at(false), batch),
                ctx,
            )
            .await?;
        started.rows_read(conn).await?;
        if rows == 0 {
            mark_last(&mut events);
        }
        let done = at(true);
        for e in &mut events {
            e.position = done.clone();
        }
        let _ = conn.query_drop("COMMIT").await;
        let _ = ctx
            .emit(Batch {
                events,
                position: Some(done),
            })
            .await;
        announced.completed(ctx);
        let start = start.map(|at| MysqlOffset {
            snapshot_completed: true,
            ..at
        });
        Ok((rows, tables, start))
    }
}

impl MysqlSource {
    /// Reads `tables` whole, each filtered by its `conditions` (a blocking snapshot's
    /// `additional-conditions`), in the snapshot transaction of `conn`, which sees binlog
    /// position `file`:`pos`. The rows follow `pending` and go out in batches at `position`;
    /// returns how many were read and the last batch, not sent yet.
    pub(super) async fn read_rows(
        &self,
        conn: &mut Conn,
        (tables, conditions): (&[&Table], &BTreeMap<String, String>),
        (file, pos): (&str, u64),
        (position, pending): (sluice_engine::Position, Vec<ChangeEvent>),
        ctx: &mut SourceContext,
    ) -> Result<(u64, Vec<ChangeEvent>), MysqlError> {
        let mut reader = Reader {
            source: self,
            started: SourceTimestamps::now(),
            file: file.into(),
            pos,
            position,
            batch: pending,
            cut: BatchCut::for_limits(ctx.limits()),
            rows: 0,
            conditions,
            stopped: false,
            shared: None,
        };
        let count = tables.len();
        for (i, table) in tables.iter().enumerate() {
            reader
                .read_table(conn, (i == 0, i + 1 == count), table, ctx)
                .await?;
            if reader.stopped {
                return Err(MysqlError::Stopped);
            }
        }
        Ok((reader.rows, reader.batch))
    }
}

/// `tables` (`db.table`) with the rows the server estimates each holds
/// (`information_schema.TABLES.TABLE_ROWS`: InnoDB's estimate from its statistics).
async fn estimates(
    conn: &mut Conn,
    tables: &[&Table],
) -> Result<Vec<(String, Option<u64>)>, MysqlError> {
    let known: Vec<(String, String, Option<u64>)> = conn
        .query("SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED')")
        .await
        .map_err(|e| MysqlError::query("reading the tables' estimated rows", e))?;
    let rows: std::collections::HashMap<(&str, &str), Option<u64>> = (known.iter())
        .map(|(db, name, rows)| ((db.as_str(), name.as_str()), *rows))
        .collect();
    Ok(tables
        .iter()
        .map(|t| {
            let estimate = rows
                .get(&(t.db.as_str(), t.name.as_str()))
                .copied()
                .flatten();
            (t.full_name(), estimate)
        })
        .collect())
}

/// How many times a snapshot starts over when a table changed structure while it was read.
const STRUCTURE_TRIES: usize = 5;

impl MysqlSource {
    /// Starts the snapshot's transaction as `snapshot.locking.mode` says and reads the
    /// tables' structure in it (into the history); returns the transaction, the captured
    /// tables and the schema change events. A table that changed structure meanwhile
    /// (`minimal` on MariaDB checks the binlog) starts it over.
    async fn start_snapshot(
        &self,
        conn: &mut Conn,
        schemas: &mut Schemas,
    ) -> Result<(locking::Started, Vec<Table>, Vec<ChangeEvent>), MysqlError> {
        for attempt in 1..=STRUCTURE_TRIES {
            let mut started =
                locking::start(conn, self.config.locking_mode, self.config.lock_timeout_ms).await?;
            let position = Offset {
                at: MysqlOffset::at(&started.file, started.pos, false),
                incremental: None,
            }
            .position();
            schemas.clear_model();
            let events = self
                .snapshot_schema(conn, schemas, (&started.file, started.pos), &position)
                .await?;
            let tables = self.tables(conn, &schemas.model).await?;
            let captures = |db: &str, table: &str| self.config.selects(db, table);
            match started.structure_read(conn, &captures).await? {
                None => return Ok((started, tables, events)),
                Some(statement) => {
                    tracing::warn!(attempt, %statement, "A table changed structure while the snapshot read the tables' structure; the snapshot starts over.");
                    let _ = conn.query_drop("ROLLBACK").await;
                }
            }
        }
        Err(MysqlError::Setup(format!("tables kept changing structure while the snapshot read it ({STRUCTURE_TRIES} tries): start again when no DDL runs, or set `snapshot.locking.mode: extended` to hold the global read lock during the snapshot")))
    }
}

/// Marks the last of `events` `source.snapshot: last`, as Debezium marks a snapshot's last
/// record: without rows, its last schema change event.
fn mark_last(events: &mut [ChangeEvent]) {
    let source = events
        .last_mut()
        .and_then(|e| e.value.as_mut())
        .and_then(|r| r.value.as_struct_mut())
        .and_then(|v| v.get_mut("source"))
        .and_then(sluice_engine::Value::as_struct_mut);
    if let Some(source) = source {
        source.set("snapshot", sluice_engine::Value::from("last"));
    }
}

/// The snapshot's state while tables are read.
struct Reader<'a> {
    source: &'a MysqlSource,
    started: SourceTimestamps,
    file: Arc<str>,
    pos: u64,
    position: sluice_engine::Position,
    batch: Vec<ChangeEvent>,
    cut: BatchCut,
    rows: u64,
    /// Row filters by `db.table`.
    conditions: &'a BTreeMap<String, String>,
    /// The pipeline stopped: reading ends (releasing any lock with the connection).
    stopped: bool,
    /// The shared `source` block of the current table's rows (by its topic).
    shared: Option<(Arc<str>, Struct)>,
}

impl Reader<'_> {
    /// Reads one table; `place`: whether it is the first and the last table.
    async fn read_table(
        &mut self,
        conn: &mut Conn,
        place: (bool, bool),
        table: &Table,
        ctx: &mut SourceContext,
    ) -> Result<(), MysqlError> {
        let list: Vec<String> = (table.shape.kept.iter())
            .map(|&i| table.columns[i].select_expr())
            .collect();
        let full = table.full_name();
        let custom = (self.source.config.common.snapshot_overrides.get(&full))
            .map(|c| c.trim().trim_end_matches(';'));
        let condition = self.conditions.get(&full);
        let sql = match (custom, condition) {
            // `snapshot.select.statement.overrides.<db>.<table>`, run as it is (its ORDER BY
            // kept); the kept columns are taken from its result by name.
            (Some(custom), None) => custom.to_owned(),
            (Some(custom), Some(c)) => format!(
                "SELECT {} FROM ({custom}) AS sluice_override WHERE ({c})",
                list.join(", ")
            ),
            (None, c) => {
                let mut sql = format!(
                    "SELECT {} FROM {}.{}",
                    list.join(", "),
                    quote(&table.db),
                    quote(&table.name)
                );
                if let Some(c) = c {
                    sql.push_str(&format!(" WHERE ({c})"));
                }
                sql
            }
        };
        let q = |e| MysqlError::query(format!("reading `{}.{}`", table.db, table.name), e);
        let mut result = conn.query_iter(sql).await.map_err(q)?;
        let places = match (custom, condition) {
            (Some(_), None) => Some(override_places(table, result.columns().as_deref())?),
            _ => None,
        };
        // A row is held until the next one is read, so the table's last one can be marked.
        let mut held: Option<(Struct, bool)> = None;
        while let Some(row) = result.next().await.map_err(q)? {
            let after = self.source.text_row(table, &row, places.as_deref())?;
            // The row's bytes are let go before the event may wait for room in a full queue.
            drop(row);
            let Some(after) = after else {
                continue;
            };
            let first = held.is_none();
            if let Some((prev, prev_first)) = held.replace((after, first)) {
                let event = self.event(
                    table,
                    prev,
                    sluice_kit::snapshot::marker(place, prev_first, false),
                );
                self.push(event, ctx).await;
                if self.stopped {
                    return Ok(());
                }
            }
            self.rows += 1;
        }
        if let Some((prev, prev_first)) = held {
            let event = self.event(
                table,
                prev,
                sluice_kit::snapshot::marker(place, prev_first, true),
            );
            self.push(event, ctx).await;
        }
        Ok(())
    }

    async fn push(&mut self, event: ChangeEvent, ctx: &mut SourceContext) {
        let full = self.cut.add(&event);
        self.batch.push(event);
        if full {
            self.cut.taken();
            let events = std::mem::take(&mut self.batch);
            // A stopping pipeline drops the snapshot; the next start reads it again.
            let sent = ctx
                .emit(Batch {
                    events,
                    position: Some(self.position.clone()),
                })
                .await;
            self.stopped |= sent.is_err();
        }
    }

    fn event(&mut self, table: &Table, after: Struct, mark: &'static str) -> ChangeEvent {
        let at = super::At {
            // Debezium stamps snapshot rows with the snapshot's start, in whole seconds.
            ts_ms: self.started.millis() / 1000 * 1000,
            snapshot: mark,
            server_id: 0,
            file: self.file.clone(),
            pos: self.pos,
            row: 0,
            gtid: None,
            query: None,
        };
        // The rows between a table's first and last have one `source` block: made once,
        // shared (and encoded once).
        let source = match (mark, &self.shared) {
            ("true", Some((topic, source))) if Arc::ptr_eq(topic, &table.topic) => source.clone(),
            ("true", _) => {
                let source = (self.source)
                    .source(&table.db, Some(&table.name), &at)
                    .into_shared();
                self.shared = Some((Arc::clone(&table.topic), source.clone()));
                source
            }
            _ => self.source.source(&table.db, Some(&table.name), &at),
        };
        self.source.event_with(
            table,
            (Op::Read, None, Some(after)),
            source,
            self.position.clone(),
        )
    }
}

/// Where each kept column of `table` is in the result of its snapshot override (`columns`).
fn override_places(
    table: &Table,
    columns: Option<&[mysql_async::Column]>,
) -> Result<Vec<usize>, MysqlError> {
    let columns = columns.unwrap_or_default();
    (table.shape.kept.iter())
        .map(|&i| {
            let name = &table.columns[i].name;
            columns
                .iter()
                .position(|c| c.name_str().eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    MysqlError::Setup(format!(
                        "`snapshot.select.statement.overrides.{}` returns no column `{name}`: select every captured column (`SELECT * ...` will do)",
                        table.full_name()
                    ))
                })
        })
        .collect()
}

impl MysqlSource {
    /// A row read with the text protocol (its columns: the table's kept ones, in order, or at
    /// `places` in it) as the table's struct; `None`: a value its schema cannot hold, left out
    /// by `event.processing.failure.handling.mode`.
    pub(super) fn text_row(
        &self,
        table: &Table,
        row: &mysql_async::Row,
        places: Option<&[usize]>,
    ) -> Result<Option<Struct>, MysqlError> {
        let modes = self.modes();
        let text = |j: usize| match row.as_ref(places.map_or(j, |p| p[j])) {
            Some(mysql_async::Value::Bytes(b)) => Some(b.as_slice()),
            _ => None,
        };
        let shape = &table.shape;
        let values: Result<Vec<_>, RowError> = (shape.kept.iter().enumerate())
            .map(|(j, &i)| {
                let column = &table.columns[i];
                let value = (column.value(text(j), modes))
                    .map_err(|reason| RowError::column(&column.name, reason))?;
                Ok(shape.map(j, value))
            })
            .collect();
        let values = match values {
            Ok(values) => values,
            Err(e) => {
                // The result set holds the kept columns only.
                let at = |i| shape.kept.iter().position(|&k| k == i);
                let key = || {
                    (table.shape).key_text(|i| {
                        at(i)
                            .and_then(text)
                            .map(|b| String::from_utf8_lossy(b).into())
                    })
                };
                (self.config.common).refuse(Refusal::of(&table.full_name(), &e), key)?;
                return Ok(None);
            }
        };
        Struct::from_values(table.envelope.row.clone(), values)
            .map(Some)
            .ok_or_else(|| {
                MysqlError::Value(format!(
                    "`{}`: a row does not fit its schema",
                    table.full_name()
                ))
            })
    }
}
