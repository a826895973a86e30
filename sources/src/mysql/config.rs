//! Configuration of the `mysql` (and `mariadb`) source, with Debezium's MySQL connector's
//! property names.
//!
//! Of the shared options: tables are `<database>.<table>` and columns
//! `<database>.<table>.<column>` (a left-out column's type need not be mapped; a primary key
//! column cannot be left out); the column masks apply to text columns, a hash cut to the
//! column's length; `message.key.columns` is `<database>.<table>:<col>[,<col>];...` (default:
//! the primary key); `snapshot.select.statement.overrides.<database>.<table>` takes the
//! SELECT's columns by name; `skipped.operations` must keep `t` (a `TRUNCATE` gives no event:
//! truncate events are not built); `provide.transaction.metadata` names a transaction by its
//! MariaDB GTID (`type: mariadb`) or `file=...,pos=...` (`type: mysql`); heartbeats carry the
//! position of the last batch sent, and `heartbeat.action.query` runs on a connection of its
//! own; `include.schema.changes` is on by default; the schema history is by default
//! `<data_dir>/mysql-schema-history.jsonl`.

use serde::Deserialize;
use sluice_engine::config::RegexList;
use sluice_kit::config::{Connection, DatabaseSource, Feature, SourceCommon, Supports};
use sluice_kit::values::{BinaryMode, DecimalMode, TimePrecisionMode};

pub(super) use super::columns::BigintUnsignedMode;

/// `type: mysql`: a MySQL or MariaDB server's tables, read in one consistent snapshot, then
/// from the binlog. Tables are `<database>.<table>` (`table.include.list` matches that name).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MysqlConfig {
    /// The replica id Sluice reads the binlog as (unique among the server's replicas).
    #[serde(rename = "database.server.id")]
    pub server_id: u32,
    /// Databases to capture (regexes on the database name; none given: all). `mysql`,
    /// `information_schema`, `performance_schema` and `sys` are never captured.
    #[serde(rename = "database.include.list", default)]
    pub database_include: RegexList,
    /// Databases not to capture.
    #[serde(rename = "database.exclude.list", default)]
    pub database_exclude: RegexList,
    /// `decimal.handling.mode` (`precise`, `double`, `string`).
    #[serde(rename = "decimal.handling.mode", default)]
    pub decimal_mode: DecimalMode,
    /// `bigint.unsigned.handling.mode`: `long` (int64, the default; a value above 2^63-1 is an
    /// error under `event.processing.failure.handling.mode`, where Debezium wraps it to a
    /// negative number) or `precise` (`Decimal(20, 0)`).
    #[serde(rename = "bigint.unsigned.handling.mode", default)]
    pub bigint_mode: BigintUnsignedMode,
    /// `binary.handling.mode` (`bytes`, `base64`, `base64-url-safe`, `hex`).
    #[serde(rename = "binary.handling.mode", default)]
    pub binary_mode: BinaryMode,
    /// `time.precision.mode`: `adaptive_time_microseconds` (Debezium MySQL's default) or
    /// `connect` (a `TIME` beyond int32 milliseconds is then an error); `adaptive` is refused
    /// (not one of the MySQL connector's).
    #[serde(rename = "time.precision.mode", default = "default_time_mode")]
    pub time_mode: TimePrecisionMode,
    /// `snapshot.locking.mode` (`minimal`, the default, `extended`, `none`).
    #[serde(rename = "snapshot.locking.mode", default)]
    pub locking_mode: super::locking::LockingMode,
    /// How long the snapshot's global read lock may be waited for (`lock_wait_timeout`;
    /// milliseconds, default 10000, as Debezium's); a longer wait stops with one line naming
    /// the ways out.
    #[serde(rename = "snapshot.lock.timeout.ms", default = "default_lock_timeout")]
    pub lock_timeout_ms: u64,
    /// `database.ssl.mode`, for the binlog connection too: `disabled`, `preferred` (the
    /// default: TLS when the server offers it, the certificate not checked), `required` (TLS or
    /// fail, not checked), `verify_ca` (checked against `database.ssl.truststore`),
    /// `verify_identity` (and the host name).
    #[serde(rename = "database.ssl.mode", default)]
    pub ssl_mode: SslMode,
    /// The CA certificates (a PEM file) the server's certificate is checked against with
    /// `verify_ca` and `verify_identity` (Debezium's is a Java keystore:
    /// `keytool -exportcert -rfc` turns it into PEM); read with those two modes only. Client
    /// certificates (`database.ssl.keystore`) are not built.
    #[serde(rename = "database.ssl.truststore", default)]
    pub ssl_truststore: Option<std::path::PathBuf>,
    /// `inconsistent.schema.handling.mode`: what to do with the rows of a captured table the
    /// source knows no structure of (`fail`, the default, `warn`: logged and passed over,
    /// `skip`: passed over). Only a server that writes no column names
    /// (`binlog_row_metadata` not FULL) can give such rows.
    #[serde(rename = "inconsistent.schema.handling.mode", default)]
    pub inconsistent_schema: sluice_engine::FailureMode,
    /// `event.deserialization.failure.handling.mode` (`fail`, `warn`, `ignore`): deprecated in
    /// Debezium; when given it sets `event.processing.failure.handling.mode` (`ignore` as
    /// `skip`), with a warning saying so.
    #[serde(rename = "event.deserialization.failure.handling.mode", default)]
    pub deserialization_failure: Option<DeserializationFailure>,
    /// `include.query`: each streamed change's `source.query` is the statement that made it
    /// (`type: mariadb`: from MariaDB's ANNOTATE_ROWS events, on by default on the server
    /// as `binlog_annotate_row_events`; `type: mysql`: from MySQL's ROWS_QUERY events, which
    /// `binlog_rows_query_log_events=ON` writes).
    #[serde(rename = "include.query", default)]
    pub include_query: bool,
    /// `gtid.source.includes`: only the row changes of transactions whose GTID source
    /// matches (MariaDB: `domain-server` of the GTID, as Debezium's MariaDB connector);
    /// schema changes are applied whatever their source. `type: mariadb` only (`type: mysql`
    /// refuses it: MySQL GTIDs are not read yet); not together with `gtid.source.excludes`.
    #[serde(rename = "gtid.source.includes", default)]
    pub gtid_includes: RegexList,
    /// `gtid.source.excludes`: the row changes of transactions whose GTID source matches
    /// are left out (`type: mariadb` only).
    #[serde(rename = "gtid.source.excludes", default)]
    pub gtid_excludes: RegexList,
    /// How long connecting may take (milliseconds, default 30000).
    #[serde(rename = "connect.timeout.ms", default = "default_connect_timeout")]
    pub connect_timeout_ms: u64,
    /// Whether a dropped binlog connection is opened again by the source from the event it
    /// got to (Debezium's `connect.keep.alive`, default true); `false`: the pipeline restarts
    /// from its committed position.
    #[serde(rename = "connect.keep.alive", default = "default_true")]
    pub keep_alive: bool,
    /// How long the source keeps trying to open a dropped binlog connection again before it
    /// fails (milliseconds, default 60000; Debezium's `connect.keep.alive.interval.ms`, whose
    /// keep-alive thread reconnects without end; Sluice then hands the error to the
    /// pipeline's `restart` policy).
    #[serde(
        rename = "connect.keep.alive.interval.ms",
        default = "default_keep_alive_interval"
    )]
    pub keep_alive_interval_ms: u64,
    /// The options every database source shares, read beside these.
    #[serde(skip)]
    pub common: SourceCommon,
    /// The connection keys (`database.hostname`, `database.port`, `database.user`, the
    /// password), read beside these.
    #[serde(skip)]
    pub connection: Connection,
}

/// `event.deserialization.failure.handling.mode`, Debezium's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeserializationFailure {
    /// Stop.
    Fail,
    /// Log and pass over.
    Warn,
    /// Pass over.
    Ignore,
}

/// `database.ssl.mode`, Debezium's MySQL connector's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SslMode {
    /// No TLS.
    Disabled,
    /// TLS when the server offers it, without checking its certificate (the default).
    #[default]
    Preferred,
    /// TLS, without checking the server's certificate.
    Required,
    /// TLS, the certificate checked against the CA (`database.ssl.truststore`).
    VerifyCa,
    /// TLS, the certificate and the host name checked.
    VerifyIdentity,
}

fn default_time_mode() -> TimePrecisionMode {
    TimePrecisionMode::AdaptiveTimeMicroseconds
}

fn default_lock_timeout() -> u64 {
    10_000
}

fn default_connect_timeout() -> u64 {
    30_000
}

fn default_keep_alive_interval() -> u64 {
    60_000
}

fn default_true() -> bool {
    true
}

/// Databases never captured.
const SYSTEM_DATABASES: [&str; 4] = ["mysql", "information_schema", "performance_schema", "sys"];

impl MysqlConfig {
    /// Whether the row changes of a transaction whose GTID source (`domain-server`) is
    /// `source` are captured (`gtid.source.includes` / `excludes`).
    pub(super) fn captures_gtid_source(&self, source: &str) -> bool {
        match (self.gtid_includes.is_empty(), self.gtid_excludes.is_empty()) {
            (false, _) => self.gtid_includes.matches(source),
            (true, false) => !self.gtid_excludes.matches(source),
            (true, true) => true,
        }
    }

    /// Whether database `db` is captured (`database.include.list` / `exclude`; never the
    /// system databases).
    pub fn selects_database(&self, db: &str) -> bool {
        !SYSTEM_DATABASES.contains(&db)
            && (self.database_include.is_empty() || self.database_include.matches(db))
            && !self.database_exclude.matches(db)
    }

    /// Whether `db.table` is captured.
    pub fn selects(&self, db: &str, table: &str) -> bool {
        self.selects_database(db) && self.common.selects(db, table)
    }

    /// Whether the schema history (and the snapshot's schema events) describe `db.table`:
    /// every table of every database but the system ones, unless
    /// `schema.history.internal.store.only.captured.tables.ddl` (or `...databases.ddl`) narrow
    /// it, as in Debezium.
    pub fn describes(&self, db: &str, table: &str) -> bool {
        let history = &self.common.history;
        if history.only_captured_tables {
            self.selects(db, table)
        } else if history.only_captured_databases {
            self.selects_database(db)
        } else {
            !SYSTEM_DATABASES.contains(&db)
        }
    }
}

impl MysqlConfig {
    /// The server's port (`database.port`, default 3306).
    pub fn port(&self) -> u16 {
        self.connection.port_or(3306)
    }
}

impl DatabaseSource for MysqlConfig {
    const SUPPORTS: Supports = Supports {
        features: &[
            Feature::FailureHandling,
            Feature::ColumnFilters,
            Feature::ColumnMasks,
            Feature::MessageKeyColumns,
            Feature::SkippedOperations,
            Feature::Heartbeats,
            Feature::TransactionMetadata,
            Feature::SchemaChanges,
            Feature::SchemaHistory,
            Feature::Notifications,
            Feature::SnapshotOverrides,
            Feature::SnapshotCollections,
        ],
        signal_channels: &["source", "file", "http", "kafka"],
    };
    const CONNECTS: bool = true;
    fn set_connection(&mut self, connection: Connection) {
        self.connection = connection;
    }
    fn set_common(&mut self, mut common: SourceCommon) {
        if let Some(mode) = self.deserialization_failure {
            tracing::warn!("`event.deserialization.failure.handling.mode` is deprecated (as in Debezium); it sets `event.processing.failure.handling.mode`, which to use instead.");
            common.failure_mode = match mode {
                DeserializationFailure::Fail => sluice_engine::FailureMode::Fail,
                DeserializationFailure::Warn => sluice_engine::FailureMode::Warn,
                DeserializationFailure::Ignore => sluice_engine::FailureMode::Skip,
            };
        }
        self.common = common;
    }
    fn check(&self) -> Result<(), String> {
        self.connection.require_host_and_user()?;
        if self.time_mode == TimePrecisionMode::Adaptive {
            return Err("`time.precision.mode: adaptive` is not one of the MySQL connector's; use `adaptive_time_microseconds` (the default) or `connect`".into());
        }
        self.locking_mode.check()?;
        if !self.gtid_includes.is_empty() && !self.gtid_excludes.is_empty() {
            return Err(
                "`gtid.source.includes` and `gtid.source.excludes` are both set; keep one".into(),
            );
        }
        if !self.common.skipped()?.truncate {
            return Err("`skipped.operations` without `t`: the mysql source does not emit truncate events yet; keep `t` in the list (Debezium's default)".into());
        }
        if self.ssl_truststore.is_some()
            && !matches!(self.ssl_mode, SslMode::VerifyCa | SslMode::VerifyIdentity)
        {
            return Err(format!(
                "`database.ssl.truststore` is only read with `database.ssl.mode: verify_ca` or `verify_identity` (it is `{}`)",
                match self.ssl_mode {
                    SslMode::Disabled => "disabled",
                    SslMode::Preferred => "preferred",
                    _ => "required",
                }
            ));
        }
        Ok(())
    }
}

sluice_engine::impl_component!(
    MysqlConfig,
    Source,
    "mysql",
    read = sluice_kit::config::read,
    build = |c, ctx| super::MysqlSource::new(c.clone(), super::Flavour::Mysql, ctx)?
);

/// `type: mariadb`: the same source as `type: mysql`, speaking as Debezium's MariaDB connector
/// (`source.connector: mariadb`, `io.debezium.connector.mariadb.*` schema names, and each
/// transaction's MariaDB GTID `domain-server-sequence` in `source.gtid`).
#[derive(Debug, Clone, Deserialize)]
#[serde(transparent)]
pub struct MariadbConfig(pub MysqlConfig);

impl DatabaseSource for MariadbConfig {
    const SUPPORTS: Supports = MysqlConfig::SUPPORTS;
    const CONNECTS: bool = true;
    fn set_common(&mut self, common: SourceCommon) {
        self.0.set_common(common);
    }
    fn set_connection(&mut self, connection: Connection) {
        self.0.set_connection(connection);
    }
    fn check(&self) -> Result<(), String> {
        self.0.check()
    }
}

sluice_engine::impl_component!(
    MariadbConfig,
    Source,
    "mariadb",
    read = sluice_kit::config::read,
    build = |c, ctx| super::MysqlSource::new(c.0.clone(), super::Flavour::Mariadb, ctx)?
);
