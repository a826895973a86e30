//! `mysql`: MySQL and MariaDB, as Debezium's MySQL connector captures them. This first step
//! reads one consistent snapshot of the captured tables (`snapshot.mode: initial_only`); the
//! binlog stream, schema history and the kit's signals follow (issue 17).
//!
//! The snapshot runs in one `START TRANSACTION WITH CONSISTENT SNAPSHOT`: MariaDB reports the
//! binlog position that transaction sees (`binlog_snapshot_file`, `binlog_snapshot_position`),
//! so no global read lock is taken (Debezium's `minimal` locking takes `FLUSH TABLES WITH READ
//! LOCK`). A server that does not report it (MySQL) is refused for now, with that reason.

mod columns;
mod config;
mod error;
mod snapshot;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sluice_engine::event::source_block_builder;
use sluice_engine::{BuildContext, ComponentError, Schema, SchemaType, Source, SourceContext};
use sluice_kit::position::Resume;

pub use config::MysqlConfig;
use error::MysqlError;

/// Where the binlog resumes (Debezium's MySQL offset fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MysqlOffset {
    /// The binlog file.
    pub file: String,
    /// The position in it.
    pub pos: u64,
    /// Rows of the event at `pos` already delivered.
    #[serde(default)]
    pub row: u32,
    /// Whether the snapshot was complete.
    pub snapshot_completed: bool,
}

/// A committed position: the offset and (later) an incremental snapshot's progress.
type Offset = Resume<MysqlOffset, serde_json::Value>;

/// The `mysql` source.
pub struct MysqlSource {
    config: MysqlConfig,
    source_schema: Arc<Schema>,
}

impl MysqlSource {
    /// A source for `config`.
    pub fn new(config: MysqlConfig, _ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        let string = |optional| Schema::primitive(SchemaType::String, optional);
        let int64 = |optional| Schema::primitive(SchemaType::Int64, optional);
        let source_schema = source_block_builder("io.debezium.connector.mysql.Source")
            .field("sequence", string(true))
            .field("ts_us", int64(true))
            .field("ts_ns", int64(true))
            .field("table", string(true))
            .field("server_id", int64(false))
            .field("gtid", string(true))
            .field("file", string(false))
            .field("pos", int64(false))
            .field("row", Schema::primitive(SchemaType::Int32, false))
            .field("thread", int64(true))
            .field("query", string(true))
            .build();
        Ok(MysqlSource {
            config,
            source_schema,
        })
    }

    /// A connection, with the session as the source reads it: UTC (TIMESTAMP values come as
    /// UTC text) and UTF-8.
    async fn connect(&self) -> Result<mysql_async::Conn, MysqlError> {
        let c = &self.config;
        let password = c.password().map_err(MysqlError::Setup)?;
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname(c.hostname.clone())
            .tcp_port(c.port)
            .user(Some(c.user.clone()))
            .pass(password)
            .prefer_socket(false)
            .init(vec!["SET time_zone = '+00:00'", "SET NAMES utf8mb4"]);
        let timeout = std::time::Duration::from_millis(c.connect_timeout_ms.max(1));
        let address = format!("{}:{}", c.hostname, c.port);
        match tokio::time::timeout(timeout, mysql_async::Conn::new(opts)).await {
            Ok(conn) => conn.map_err(|e| {
                MysqlError::query(format!("connecting to {address} as `{}`", c.user), e)
            }),
            Err(_) => Err(MysqlError::Query {
                context: format!("connecting to {address}"),
                source: mysql_async::Error::Other(
                    format!(
                        "no answer within `connect.timeout.ms` ({} ms)",
                        c.connect_timeout_ms
                    )
                    .into(),
                ),
            }),
        }
    }

    /// Checks that the server writes the binlog as a CDC reader needs it; `Err` says what to
    /// change.
    async fn check_server(&self, conn: &mut mysql_async::Conn) -> Result<(), MysqlError> {
        use mysql_async::prelude::Queryable;
        let (log_bin, format, image): (String, String, String) = conn
            .query_first("SELECT @@log_bin, @@binlog_format, @@binlog_row_image")
            .await
            .map_err(|e| MysqlError::query("reading the binlog settings", e))?
            .ok_or_else(|| {
                MysqlError::Setup("the server did not report its binlog settings".into())
            })?;
        if log_bin != "1" && !log_bin.eq_ignore_ascii_case("on") {
            return Err(MysqlError::Setup("the server's binlog is off (`log_bin`): start it with `--log-bin --binlog-format=ROW --binlog-row-image=FULL` and a `--server-id`".into()));
        }
        if !format.eq_ignore_ascii_case("row") {
            return Err(MysqlError::Setup(format!("`binlog_format` is {format}; change data capture needs ROW: `SET GLOBAL binlog_format = 'ROW'` (or `--binlog-format=ROW`)")));
        }
        if !image.eq_ignore_ascii_case("full") {
            return Err(MysqlError::Setup(format!("`binlog_row_image` is {image}; change data capture needs FULL: `SET GLOBAL binlog_row_image = 'FULL'` (or `--binlog-row-image=FULL`)")));
        }
        Ok(())
    }
}

#[async_trait]
impl Source for MysqlSource {
    async fn run(&mut self, ctx: &mut SourceContext) -> Result<(), ComponentError> {
        let span =
            tracing::info_span!("mysql", host = %self.config.hostname, port = self.config.port);
        let _guard = span.enter();
        let resume: Option<Offset> = ctx
            .resume_from()
            .map(|p| Offset::parse(p, "mysql"))
            .transpose()
            .map_err(ComponentError::fatal)?;
        let stored = sluice_kit::snapshot::Stored {
            offset: resume.is_some(),
            snapshot_completed: resume.as_ref().is_some_and(|r| r.at.snapshot_completed),
            position_available: true,
            history_available: true,
        };
        let plan = self
            .config
            .common
            .snapshotter("mysql", false)
            .and_then(|s| s.plan(stored, "the binlog was purged"))
            .map_err(ComponentError::fatal)?;
        if !plan.data {
            tracing::info!(
                mode = self.config.common.snapshot_mode.name(),
                "The snapshot is complete and snapshot.mode does not stream: nothing to do."
            );
            return Ok(());
        }
        let mut conn = self.connect().await?;
        self.check_server(&mut conn).await?;
        let rows = self.snapshot(&mut conn, ctx).await?;
        tracing::info!(rows, "Snapshot completed.");
        let _ = conn.disconnect().await;
        Ok(())
    }
}
