//! `mysql`: MySQL and MariaDB, as Debezium's MySQL connector captures them: one consistent
//! snapshot of the captured tables, then the binlog stream (`stream`); DDL kept in a schema
//! model (`ddl`) that gives the schema change events and the schema history (`schema`);
//! incremental snapshots through the kit's signals and tracker (`incremental`); MariaDB GTID
//! offsets (`gtid`).
//!
//! The snapshot runs in one `START TRANSACTION WITH CONSISTENT SNAPSHOT`: MariaDB reports the
//! binlog position that transaction sees (`binlog_snapshot_file`, `binlog_snapshot_position`),
//! so no global read lock is taken; `snapshot.locking.mode` (`locking`) says how the tables'
//! structure is kept consistent with it, and locks as Debezium does on servers that do not
//! report it (MySQL).

mod blocking;
mod columns;
mod config;
mod ddl;
mod error;
mod gtid;
mod incremental;
mod lifecycle;
mod locking;
mod schema;
mod snapshot;
mod stream;
mod table_map;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sluice_engine::event::{SourceConstants, SourceTimestamps};
use sluice_engine::{
    BuildContext, ChangeEvent, ComponentError, Op, Position, Schema, Source, SourceContext, Struct,
    Value,
};
use sluice_kit::position::Resume;

pub use config::{MariadbConfig, MysqlConfig};

/// A MySQL identifier in backquotes (a backquote inside doubled).
pub(crate) fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// Which of Debezium's binlog connectors the source speaks as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavour {
    /// `type: mysql`, Debezium's MySQL connector.
    Mysql,
    /// `type: mariadb`, Debezium's MariaDB connector.
    Mariadb,
}

impl Flavour {
    /// `source.connector` and the schema names' part (`io.debezium.connector.<name>`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Flavour::Mysql => "mysql",
            Flavour::Mariadb => "mariadb",
        }
    }
}
use error::MysqlError;

/// Where the binlog resumes (Debezium's MySQL offset fields). Inside a transaction, `pos` is
/// the transaction's first event, `event` the events from it on already handled and `row` the
/// rows of the next event already delivered: a restart skips exactly those.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MysqlOffset {
    /// The binlog file.
    pub file: String,
    /// The position in it.
    pub pos: u64,
    /// Events from `pos` on already handled (Debezium's `event`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub event: u64,
    /// Rows of the next event already delivered.
    #[serde(default)]
    pub row: u32,
    /// The MariaDB GTID position of the transactions done (`type: mariadb`; Debezium's
    /// `gtids`): where a restart resumes when the binlog file is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtids: Option<String>,
    /// Whether the snapshot was complete.
    pub snapshot_completed: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl MysqlOffset {
    /// The position `pos` of `file`, between transactions.
    pub(crate) fn at(file: &str, pos: u64, snapshot_completed: bool) -> Self {
        MysqlOffset {
            file: file.to_owned(),
            pos,
            event: 0,
            row: 0,
            gtids: None,
            snapshot_completed,
        }
    }
}

/// A committed position: the offset and (later) an incremental snapshot's progress.
type Offset = Resume<MysqlOffset, serde_json::Value>;

/// A committed position as this source reads it, rendered back (`docs/positions.md`'s test).
#[cfg(test)]
pub(crate) fn reread(text: &str) -> Result<serde_json::Value, sluice_kit::position::PositionError> {
    sluice_kit::position::reread::<MysqlOffset, incremental::Progress>(text, "mysql")
}

/// The `mysql` source.
pub struct MysqlSource {
    config: MysqlConfig,
    flavour: Flavour,
    /// The pipeline's data directory (the schema history's file by default).
    data_dir: std::path::PathBuf,
    source_schema: Arc<Schema>,
    /// `skipped.operations`.
    skipped: sluice_kit::config::Skipped,
    /// `source.version`, `source.connector` and `source.name`, made once.
    constants: SourceConstants,
}

impl MysqlSource {
    /// A source for `config`.
    pub(crate) fn new(
        config: MysqlConfig,
        flavour: Flavour,
        ctx: &BuildContext<'_>,
    ) -> Result<Self, ComponentError> {
        if flavour == Flavour::Mysql
            && !(config.gtid_includes.is_empty() && config.gtid_excludes.is_empty())
        {
            return Err(ComponentError::fatal(
                "`gtid.source.includes`/`excludes` match MySQL GTIDs, which the mysql source does not read yet; with MariaDB use `type: mariadb`, which matches its `domain-server` GTID sources",
            ));
        }
        let source_schema =
            MysqlSourceBlock::schema(&format!("io.debezium.connector.{}.Source", flavour.name()));
        let skipped = config.common.skipped().map_err(ComponentError::fatal)?;
        let constants =
            SourceConstants::new(crate::VERSION, flavour.name(), &config.common.topic_prefix);
        Ok(MysqlSource {
            config,
            flavour,
            data_dir: ctx.data_dir.to_path_buf(),
            source_schema,
            skipped,
            constants,
        })
    }

    /// A connection, with the session as the source reads it: UTC (TIMESTAMP values come as
    /// UTC text) and UTF-8.
    async fn connect(&self) -> Result<mysql_async::Conn, MysqlError> {
        let c = &self.config;
        let password = (c.connection.password()).map_err(MysqlError::Setup)?;
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname(c.connection.host())
            .tcp_port(c.port())
            .user(Some(c.connection.login()))
            .pass(password)
            .prefer_socket(false)
            .init(vec!["SET time_zone = '+00:00'", "SET NAMES utf8mb4"]);
        let tls = self.tls();
        let connected = self.connect_with(opts.clone().ssl_opts(tls.clone())).await;
        match connected {
            // `preferred`: a server without TLS is read in the clear.
            Err(MysqlError::Query {
                source:
                    mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer),
                ..
            }) if c.ssl_mode == config::SslMode::Preferred => {
                tracing::debug!("The server offers no TLS (`database.ssl.mode: preferred`): connecting without.");
                self.connect_with(opts).await
            }
            Err(MysqlError::Query {
                source:
                    mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer),
                ..
            }) => Err(MysqlError::Setup(format!(
                "the server at {}:{} offers no TLS, which `database.ssl.mode` requires: configure its certificates (`ssl_cert`, `ssl_key`), or set `database.ssl.mode: preferred`",
                c.connection.host(),
                c.port()
            ))),
            other => other,
        }
    }

    /// The TLS options `database.ssl.mode` asks for (`None`: no TLS).
    fn tls(&self) -> Option<mysql_async::SslOpts> {
        use config::SslMode;
        let c = &self.config;
        if c.ssl_mode != SslMode::Disabled {
            // mysql_async builds its TLS configuration with the process's default crypto
            // provider, which the build cannot pick by itself (ring and aws-lc-rs are both
            // linked): ring, as everywhere else in Sluice. Already installed: nothing to do.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let opts = mysql_async::SslOpts::default();
        match c.ssl_mode {
            SslMode::Disabled => None,
            SslMode::Preferred | SslMode::Required => Some(
                opts.with_danger_accept_invalid_certs(true)
                    .with_danger_skip_domain_validation(true),
            ),
            SslMode::VerifyCa | SslMode::VerifyIdentity => {
                let roots = c.ssl_truststore.iter().map(|p| p.clone().into()).collect();
                Some(
                    opts.with_root_certs(roots)
                        .with_danger_skip_domain_validation(c.ssl_mode == SslMode::VerifyCa),
                )
            }
        }
    }

    /// Connects with `opts`, within `connect.timeout.ms`.
    async fn connect_with(
        &self,
        opts: mysql_async::OptsBuilder,
    ) -> Result<mysql_async::Conn, MysqlError> {
        let c = &self.config;
        let timeout = std::time::Duration::from_millis(c.connect_timeout_ms.max(1));
        let address = format!("{}:{}", c.connection.host(), c.port());
        match tokio::time::timeout(timeout, mysql_async::Conn::new(opts)).await {
            Ok(conn) => conn.map_err(|e| {
                let user = c.connection.login();
                MysqlError::query(format!("connecting to {address} as `{user}`"), e)
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

    /// Checks that the server writes the binlog as a CDC reader needs it (`Err` says what to
    /// change); returns whether its table names match whatever their case
    /// (`lower_case_table_names` not 0).
    async fn check_server(&self, conn: &mut mysql_async::Conn) -> Result<bool, MysqlError> {
        use mysql_async::prelude::Queryable;
        let (log_bin, format, image, lower_case): (String, String, String, u8) = conn
            .query_first(
                "SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@lower_case_table_names",
            )
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
        Ok(lower_case != 0)
    }
}

impl MysqlSource {
    /// `at`, the position of a snapshot cut off earlier, when the binlog can be read again
    /// from there with the tables' structure as the history had it: the history is kept, and
    /// the server writes the full row metadata or no captured table changed structure since
    /// (without it the rows in between would not decode with the current tables). Otherwise `None`, said in a warning: the new snapshot streams from its
    /// own position, and a row the cut-off snapshot delivered and that was deleted meanwhile
    /// stays downstream.
    async fn resumable(
        &self,
        conn: &mut mysql_async::Conn,
        schemas: &schema::Schemas,
        at: MysqlOffset,
    ) -> Result<Option<MysqlOffset>, MysqlError> {
        let why = if !Self::has_history(schemas)? {
            Some("the schema history is missing".to_owned())
        } else if self.full_metadata(conn).await?.is_some() {
            // Each TABLE_MAP names its columns: rows of an older structure decode as they were.
            None
        } else {
            let captures = |db: &str, table: &str| self.config.selects(db, table);
            locking::structure_changed_since(conn, (&at.file, at.pos), &captures)
                .await?
                .map(|statement| format!("a captured table changed structure since: {statement}"))
        };
        match why {
            None => Ok(Some(at)),
            Some(why) => {
                tracing::warn!(file = %at.file, pos = at.pos, reason = %why, "A snapshot was cut off, but the binlog cannot be read again from its position: the new snapshot streams from its own, so rows the first one delivered and that were deleted meanwhile may stay downstream.");
                Ok(None)
            }
        }
    }

    /// Whether the committed position `resume` can be read again: `Some(why)` when its binlog
    /// file is gone; `true` when it resumes from its GTID position instead (`type: mariadb`,
    /// when the files left hold every transaction after it).
    async fn resume_point(
        &self,
        conn: &mut mysql_async::Conn,
        resume: Option<&Offset>,
    ) -> Result<(Option<String>, bool), MysqlError> {
        let lost = match resume {
            Some(r) => self.purged(conn, &r.at.file).await?,
            None => None,
        };
        let committed_gtids = resume
            .and_then(|r| r.at.gtids.as_deref())
            .and_then(|g| gtid::GtidPosition::parse(g).ok())
            .filter(|p| !p.is_empty());
        let by_gtid = match (&lost, self.flavour, &committed_gtids) {
            (Some(_), Flavour::Mariadb, Some(position)) => {
                self.gtids_available(conn, position).await?
            }
            _ => false,
        };
        if let (true, Some(lost)) = (by_gtid, &lost) {
            tracing::info!(reason = %lost, "Resuming from the committed GTID position.");
        }
        Ok((if by_gtid { None } else { lost }, by_gtid))
    }
}

#[async_trait]
impl Source for MysqlSource {
    async fn run(&mut self, ctx: &mut SourceContext) -> Result<(), ComponentError> {
        let span = tracing::info_span!("mysql", host = %self.config.connection.host(), port = self.config.port());
        let _guard = span.enter();
        sluice_kit::lifecycle::drive(self, ctx).await
    }
}

/// Bounds what the MySQL client library keeps between packets: mysql_async pools up to 128
/// packet buffers and keeps each up to 4 MiB (`MYSQL_ASYNC_BUFFER_SIZE_CAP`), memory the
/// queues' byte bounds do not count, which rows of megabytes fill (measured: 60 rows of 5 MB,
/// snapshot then one transaction, peak RSS 251 MiB with the library's default, 199 MiB with
/// 256 KiB). Sets 256 KiB unless the environment says otherwise. The library reads it once, so
/// the binary calls this first thing, before any thread starts.
pub fn bound_client_buffers() {
    const CAP: &str = "MYSQL_ASYNC_BUFFER_SIZE_CAP";
    if std::env::var_os(CAP).is_none() {
        std::env::set_var(CAP, "262144");
    }
}

/// What an event's `source` block says beyond the table.
#[derive(Debug, Clone)]
struct At {
    /// When the change was made (the snapshot's start for snapshot rows), milliseconds.
    pub ts_ms: i64,
    /// `source.snapshot`.
    pub snapshot: &'static str,
    /// The server that wrote the change (0 for snapshot rows, as Debezium).
    pub server_id: i64,
    pub file: Arc<str>,
    pub pos: u64,
    /// The row's index in its binlog event.
    pub row: i32,
    /// The transaction's MariaDB GTID (`type: mariadb` writes it to `source.gtid`; Debezium's
    /// MySQL connector reads no MariaDB GTID).
    pub gtid: Option<Arc<str>>,
    /// The statement that made the change (`include.query`).
    pub query: Option<Arc<str>>,
}

sluice_engine::source_block! {
    /// The MySQL connector's `source` block (the MariaDB connector's too).
    struct MysqlSourceBlock {
        sequence: String | null,
        ts_us: Int64 | null,
        ts_ns: Int64 | null,
        table: String | null,
        server_id: Int64,
        gtid: String | null,
        file: String,
        pos: Int64,
        row: Int32,
        thread: Int64 | null,
        query: String | null,
    }
}

impl MysqlSource {
    /// The `source` block of a change in `db` (and `table`) that `at` describes.
    fn source(&self, db: &str, table: Option<&str>, at: &At) -> Struct {
        self.source_of(Value::from(db), table.map_or(Value::Null, Value::from), at)
    }

    /// [`MysqlSource::source`] with the database and table as values (a table's own, which
    /// cost no copy per event).
    fn source_of(&self, db: Value, table: Value, at: &At) -> Struct {
        let made = SourceTimestamps {
            nanos: at.ts_ms.saturating_mul(1_000_000),
        };
        MysqlSourceBlock {
            head: self.constants.head(db, made.millis(), at.snapshot),
            sequence: Value::Null,
            ts_us: Value::Int64(made.micros()),
            ts_ns: Value::Int64(made.nanos),
            table,
            server_id: Value::Int64(at.server_id),
            gtid: match (&at.gtid, self.flavour) {
                (Some(gtid), Flavour::Mariadb) => Value::String(gtid.clone()),
                _ => Value::Null,
            },
            file: Value::String(Arc::clone(&at.file)),
            pos: Value::Int64(i64::try_from(at.pos).unwrap_or(i64::MAX)),
            row: Value::Int32(at.row),
            thread: Value::Null,
            query: at.query.clone().map_or(Value::Null, Value::String),
        }
        .into_struct(&self.source_schema)
    }

    /// The change event of `table`'s row: key, envelope, Debezium's MySQL `source` block.
    fn event(
        &self,
        table: &snapshot::Table,
        op: Op,
        before: Option<Struct>,
        after: Option<Struct>,
        at: &At,
        position: Position,
    ) -> ChangeEvent {
        let source = self.source_of(
            Value::String(Arc::clone(&table.values.0)),
            Value::String(Arc::clone(&table.values.1)),
            at,
        );
        self.event_with(table, (op, before, after), source, position)
    }

    /// [`MysqlSource::event`] with its `source` block made already (a snapshot's, shared by
    /// its rows).
    fn event_with(
        &self,
        table: &snapshot::Table,
        (op, before, after): (Op, Option<Struct>, Option<Struct>),
        source: Struct,
        position: Position,
    ) -> ChangeEvent {
        let ts = SourceTimestamps::now();
        let row = before.as_ref().or(after.as_ref());
        let key = table.shape.key_record(table.envelope.key.as_ref(), row);
        let value = table.envelope.value(op, before, after, source, None, ts);
        ChangeEvent {
            topic: Arc::clone(&table.topic),
            key,
            value: Some(value),
            headers: Vec::new(),
            position,
        }
    }
}

impl MysqlSource {
    /// Why the binlog `file` of a stored position cannot be read any more (`None`: it can): the
    /// server no longer lists it (`SHOW BINARY LOGS`, purged or reset).
    async fn purged(
        &self,
        conn: &mut mysql_async::Conn,
        file: &str,
    ) -> Result<Option<String>, MysqlError> {
        use mysql_async::prelude::Queryable;
        let rows: Vec<mysql_async::Row> = conn.query("SHOW BINARY LOGS").await.map_err(|e| {
            MysqlError::query(
                "listing the binlog files (SHOW BINARY LOGS; it needs REPLICATION CLIENT)",
                e,
            )
        })?;
        let files: Vec<String> = rows.iter().filter_map(|r| r.get::<String, _>(0)).collect();
        if files.iter().any(|f| f == file) {
            return Ok(None);
        }
        Ok(Some(format!(
            "the binlog file `{file}` of the committed position is no longer on the server (purged: the oldest is `{}`)",
            files.first().map_or("none", String::as_str)
        )))
    }

    /// Whether the binlog files on the server hold every transaction after `position`: it
    /// covers the GTID position the oldest file starts at.
    async fn gtids_available(
        &self,
        conn: &mut mysql_async::Conn,
        position: &gtid::GtidPosition,
    ) -> Result<bool, MysqlError> {
        use mysql_async::prelude::Queryable;
        let oldest: Option<mysql_async::Row> = conn
            .query_first("SHOW BINARY LOGS")
            .await
            .map_err(|e| MysqlError::query("listing the binlog files", e))?;
        let Some(oldest) = oldest.and_then(|r| r.get::<String, _>(0)) else {
            return Ok(false);
        };
        let start: Option<Option<String>> = conn
            .exec_first("SELECT BINLOG_GTID_POS(?, 4)", (&oldest,))
            .await
            .map_err(|e| MysqlError::query("reading the GTID position of the oldest binlog", e))?;
        Ok(start
            .flatten()
            .and_then(|t| gtid::GtidPosition::parse(&t).ok())
            .is_some_and(|start| position.covers(&start)))
    }
}
