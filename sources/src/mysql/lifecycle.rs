//! The MySQL and MariaDB source's steps as the kit's driver runs them
//! ([`sluice_kit::lifecycle::drive`]): reach the server, prepare (the committed position, the
//! schema history, whether the binlog still holds the position), then the snapshot or the
//! resume (with a schema snapshot when the plan asks), then the binlog stream.

use async_trait::async_trait;
use sluice_engine::SourceContext;
use sluice_kit::lifecycle::Prepared;
use sluice_kit::snapshot::{Plan, Start, Stored};

use super::error::MysqlError;
use super::snapshot::Table;
use super::{locking, schema, MysqlOffset, MysqlSource, Offset};

/// The server reached: a checked connection, and whether it compares table names regardless
/// of case (`lower_case_table_names`).
pub struct Reached {
    conn: mysql_async::Conn,
    case_insensitive: bool,
}

/// What the snapshot, the resume and the stream share.
pub struct Capture {
    /// The connection the snapshot or the resume reads with (closed once they are done; the
    /// stream opens its own).
    conn: Option<mysql_async::Conn>,
    schemas: schema::Schemas,
    /// The committed position, while it is resumed (a new snapshot drops it).
    resume: Option<Offset>,
    stored: Stored,
    /// The stored position is resumed by GTID (its binlog file was purged).
    by_gtid: bool,
}

/// Where the stream starts: the captured tables and the binlog position.
pub struct StreamFrom {
    tables: Vec<Table>,
    at: MysqlOffset,
}

/// The connection of `conn`, while it is open.
fn open(conn: &mut Option<mysql_async::Conn>) -> Result<&mut mysql_async::Conn, MysqlError> {
    conn.as_mut()
        .ok_or_else(|| MysqlError::Setup("the snapshot's connection was closed".into()))
}

impl Capture {
    /// Closes the connection the snapshot or the resume read with.
    async fn close(&mut self) {
        if let Some(conn) = self.conn.take() {
            let _ = conn.disconnect().await;
        }
    }
}

#[async_trait]
impl sluice_kit::lifecycle::DatabaseSource for MysqlSource {
    type Reached = Reached;
    type Prepared = Capture;
    type From = StreamFrom;
    type Error = MysqlError;

    fn connector(&self) -> &'static str {
        self.flavour.name()
    }

    fn common_mut(&mut self) -> &mut sluice_kit::config::SourceCommon {
        &mut self.config.common
    }

    async fn reach(&mut self, _ctx: &mut SourceContext) -> Result<Reached, MysqlError> {
        let mut conn = self.connect().await?;
        let case_insensitive = self.check_server(&mut conn).await?;
        Ok(Reached {
            conn,
            case_insensitive,
        })
    }

    async fn prepare(
        &mut self,
        reached: Reached,
        ctx: &mut SourceContext,
    ) -> Result<Prepared<Capture>, MysqlError> {
        let Reached {
            mut conn,
            case_insensitive,
        } = reached;
        let resume: Option<Offset> = (ctx.resume_from())
            .map(|p| Offset::parse(p, "mysql"))
            .transpose()?;
        let mut schemas = self.schemas().await?;
        schemas.model.set_case_insensitive(case_insensitive);
        let (lost, by_gtid) = self.resume_point(&mut conn, resume.as_ref()).await?;
        let stored = Stored {
            offset: resume.is_some(),
            snapshot_completed: resume.as_ref().is_some_and(|r| r.at.snapshot_completed),
            position_available: lost.is_none(),
            history_available: resume.is_none() || Self::has_history(&schemas)?,
        };
        let state = Capture {
            conn: Some(conn),
            schemas,
            resume,
            stored,
            by_gtid,
        };
        Ok(Prepared {
            state,
            stored,
            lost: lost.unwrap_or_default(),
        })
    }

    async fn snapshot(
        &mut self,
        state: &mut Capture,
        plan: &Plan,
        ctx: &mut SourceContext,
    ) -> Result<Option<StreamFrom>, MysqlError> {
        // A snapshot cut off earlier whose position the binlog still holds: a new snapshot
        // goes out at it and the stream resumes there (the kit's rule, `snapshot::Start`).
        let stored_at = state.resume.as_ref().map(|r| r.at.clone());
        let cut_off = match Start::cut_off(plan, state.stored, stored_at) {
            Some(at) => (self.resumable(open(&mut state.conn)?, &state.schemas, at)).await?,
            None => None,
        };
        // A new snapshot: the stored position is not resumed.
        state.resume = None;
        let conn = open(&mut state.conn)?;
        let snapshot = MysqlSource::snapshot(self, conn, &mut state.schemas, cut_off, ctx).await;
        let (rows, tables, start) = match snapshot {
            Err(MysqlError::Stopped) => return Ok(None),
            done => done?,
        };
        tracing::info!(rows, "Snapshot completed.");
        let from = match start {
            Start::Pin(at) => StreamFrom { tables, at },
            // The stream reads the binlog again from the cut-off snapshot's position, with the
            // tables' structure as the history had it there.
            Start::Resume(at) => {
                self.recover(&mut state.schemas, &at)?;
                let conn = open(&mut state.conn)?;
                let tables = self.tables(conn, &state.schemas.model).await?;
                StreamFrom { tables, at }
            }
        };
        state.close().await;
        Ok(Some(from))
    }

    async fn resume(
        &mut self,
        state: &mut Capture,
        plan: &Plan,
        ctx: &mut SourceContext,
    ) -> Result<Option<StreamFrom>, MysqlError> {
        let fresh = state.resume.is_none();
        let at = match &state.resume {
            Some(r) => r.at.clone(),
            None => {
                let (file, pos) = locking::master_position(open(&mut state.conn)?).await?;
                MysqlOffset::at(&file, pos, true)
            }
        };
        if plan.schema {
            // A schema snapshot (`no_data`, `recovery`): the tables' structure where the
            // stream starts, read from the server into the history; its events when nothing
            // was captured before.
            let position = Offset {
                at: at.clone(),
                incremental: None,
            }
            .position();
            let conn = open(&mut state.conn)?;
            let events = self
                .snapshot_schema(conn, &mut state.schemas, (&at.file, at.pos), &position)
                .await?;
            if fresh && !events.is_empty() {
                let batch = sluice_engine::Batch {
                    events,
                    position: Some(position),
                };
                if ctx.emit(batch).await.is_err() {
                    state.close().await;
                    return Ok(None);
                }
            }
        } else {
            self.recover(&mut state.schemas, &at)?;
        }
        let conn = open(&mut state.conn)?;
        let tables = self.tables(conn, &state.schemas.model).await?;
        state.close().await;
        Ok(Some(StreamFrom { tables, at }))
    }

    async fn stream(
        &mut self,
        state: Capture,
        StreamFrom { tables, at }: StreamFrom,
        ctx: &mut SourceContext,
    ) -> Result<(), MysqlError> {
        if ctx.is_stopping() {
            return Ok(());
        }
        let Capture {
            schemas,
            resume,
            by_gtid,
            ..
        } = state;
        // A running incremental snapshot goes on where the committed position left it.
        let progress =
            (resume.and_then(|r| r.incremental)).and_then(|p| serde_json::from_value(p).ok());
        match MysqlSource::stream(self, &tables, schemas, (at, progress, by_gtid), ctx).await {
            Err(MysqlError::Stopped) => Ok(()),
            done => done,
        }
    }
}
