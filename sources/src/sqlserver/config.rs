//! Configuration of the `sqlserver` source, with Debezium's SQL Server connector's property
//! names.

use serde::Deserialize;
use sluice_engine::config::Secret;
use sluice_kit::config::{DatabaseSource, Feature, SourceCommon, Supports};
use sluice_kit::values::{BinaryMode, DecimalMode, TimePrecisionMode};

/// `type: sqlserver`: the tables of one SQL Server database with CDC enabled, read in a
/// snapshot, then from their change tables (`cdc.<capture_instance>_CT`) in commit order.
/// Tables are `<schema>.<table>` (`table.include.list` matches that name).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlServerConfig {
    /// The server's host name or address.
    #[serde(rename = "database.hostname")]
    pub hostname: String,
    /// Its port (default 1433).
    #[serde(rename = "database.port", default = "default_port")]
    pub port: u16,
    /// The login Sluice connects with.
    #[serde(rename = "database.user")]
    pub user: String,
    /// Its password (kept secret).
    #[serde(rename = "database.password", default)]
    pub password: Option<Secret>,
    /// A file holding the password (first line).
    #[serde(rename = "database.password.file", default)]
    pub password_file: Option<std::path::PathBuf>,
    /// The database to capture (Debezium's `database.names`, one name; several databases
    /// per source are not built).
    #[serde(rename = "database.names", alias = "database.dbname")]
    pub database: String,
    /// `database.encrypt`: TLS to the server (the driver's `encrypt`; the TDS pre-login
    /// negotiates it and the whole session is encrypted). Default `false` here: mssql-jdbc's
    /// default is `true` with the server's certificate checked, so a Debezium configuration
    /// that connects with TLS says so, or sets `database.trustServerCertificate`.
    #[serde(rename = "database.encrypt", default)]
    pub encrypt: bool,
    /// `database.trustServerCertificate`: with `encrypt`, accept any certificate (the
    /// driver's `trustServerCertificate`; the connection is encrypted, the server unverified).
    #[serde(rename = "database.trustServerCertificate", default)]
    pub trust_server_certificate: bool,
    /// `database.serverCertificate`: with `encrypt`, the one certificate (PEM `.pem`/`.crt`
    /// or `.der`) the server's must be, or be signed by, instead of the system's roots.
    #[serde(rename = "database.serverCertificate", default)]
    pub server_certificate: Option<std::path::PathBuf>,
    /// `database.hostNameInCertificate`: the name the certificate must carry (default the
    /// host name).
    #[serde(rename = "database.hostNameInCertificate", default)]
    pub host_name_in_certificate: Option<String>,
    /// `snapshot.isolation.mode`: `repeatable_read` (Debezium's default), `snapshot` (what
    /// gives a snapshot consistent with the stream), `read_committed`, `read_uncommitted`,
    /// `exclusive`.
    #[serde(rename = "snapshot.isolation.mode", default)]
    pub isolation: IsolationMode,
    /// How long the snapshot's table locks may be waited for (milliseconds, default 10000).
    #[serde(rename = "snapshot.lock.timeout.ms", default = "default_lock_timeout")]
    pub lock_timeout_ms: u64,
    /// How long to wait between polls when the change tables had nothing new (milliseconds,
    /// default 500).
    #[serde(rename = "poll.interval.ms", default = "default_poll")]
    pub poll_interval_ms: u64,
    /// Transactions read per poll at most (default 500; 0: up to the newest).
    #[serde(
        rename = "max.iteration.transactions",
        default = "default_max_transactions"
    )]
    pub max_iteration_transactions: u32,
    /// Change rows read per table at a time (`streaming.fetch.size`, default 1024; 0: a poll's
    /// rows at once, Debezium's default, which holds them all in memory).
    #[serde(rename = "streaming.fetch.size", default = "default_fetch")]
    pub fetch_size: usize,
    /// `data.query.mode`: `direct` (Debezium's default since 3.4: the change tables queried
    /// directly) or `function` (`cdc.fn_cdc_get_all_changes_<instance>`).
    #[serde(rename = "data.query.mode", default)]
    pub query_mode: QueryMode,
    /// `decimal.handling.mode` (`precise`, `double`, `string`).
    #[serde(rename = "decimal.handling.mode", default)]
    pub decimal_mode: DecimalMode,
    /// `binary.handling.mode` (`bytes`, `base64`, `base64-url-safe`, `hex`).
    #[serde(rename = "binary.handling.mode", default)]
    pub binary_mode: BinaryMode,
    /// `time.precision.mode` (`adaptive`, the default, or `connect`).
    #[serde(rename = "time.precision.mode", default)]
    pub time_mode: TimePrecisionMode,
    /// How long connecting may take (milliseconds, default 30000).
    #[serde(rename = "connect.timeout.ms", default = "default_connect_timeout")]
    pub connect_timeout_ms: u64,
    /// The options every database source shares, read beside these.
    #[serde(skip)]
    pub common: SourceCommon,
}

/// `snapshot.isolation.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IsolationMode {
    /// SNAPSHOT isolation: the rows as of the snapshot's LSN, no locks (the database needs
    /// `ALLOW_SNAPSHOT_ISOLATION ON`).
    Snapshot,
    /// REPEATABLE READ, each table locked (`TABLOCKX`) while its structure is read (the
    /// default, as Debezium's).
    #[default]
    RepeatableRead,
    /// READ COMMITTED: no locks; a row changed during the snapshot may come twice.
    ReadCommitted,
    /// READ UNCOMMITTED: no locks; the snapshot may see uncommitted changes.
    ReadUncommitted,
    /// REPEATABLE READ, the tables locked (`TABLOCKX`) for the whole snapshot.
    Exclusive,
}

impl IsolationMode {
    /// The `SET TRANSACTION ISOLATION LEVEL` it reads at.
    pub(crate) fn level(self) -> &'static str {
        match self {
            IsolationMode::Snapshot => "SNAPSHOT",
            IsolationMode::RepeatableRead | IsolationMode::Exclusive => "REPEATABLE READ",
            IsolationMode::ReadCommitted => "READ COMMITTED",
            IsolationMode::ReadUncommitted => "READ UNCOMMITTED",
        }
    }

    /// Whether it locks the tables.
    pub(crate) fn locks(self) -> bool {
        matches!(
            self,
            IsolationMode::RepeatableRead | IsolationMode::Exclusive
        )
    }
}

/// `data.query.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueryMode {
    /// The change tables, joined with `cdc.lsn_time_mapping`.
    #[default]
    Direct,
    /// `cdc.fn_cdc_get_all_changes_<instance>(from, to, N'all update old')`.
    Function,
}

fn default_port() -> u16 {
    1433
}

fn default_lock_timeout() -> u64 {
    10_000
}

fn default_poll() -> u64 {
    500
}

fn default_max_transactions() -> u32 {
    500
}

fn default_fetch() -> usize {
    1024
}

fn default_connect_timeout() -> u64 {
    30_000
}

impl SqlServerConfig {
    /// Whether `schema.table` is captured.
    pub fn selects(&self, schema: &str, table: &str) -> bool {
        self.common
            .selects_table(schema, &format!("{schema}.{table}"))
    }

    /// Whether `schema.table` is the signaling table the `source` channel reads
    /// (`signal.data.collection`, `<database>.<schema>.<table>`).
    pub fn is_signal_table(&self, schema: &str, table: &str) -> bool {
        self.common.signal_channel("source")
            && self.common.signal_table("dbo").is_some_and(|(s, t)| {
                s.eq_ignore_ascii_case(schema) && t.eq_ignore_ascii_case(table)
            })
    }
}

impl DatabaseSource for SqlServerConfig {
    const SUPPORTS: Supports = Supports {
        features: &[
            Feature::FailureHandling,
            Feature::ColumnFilters,
            Feature::ColumnMasks,
            Feature::MessageKeyColumns,
            Feature::SkippedOperations,
            Feature::SnapshotCollections,
            Feature::Heartbeats,
            Feature::TransactionMetadata,
            Feature::SchemaChanges,
            Feature::Notifications,
            Feature::SchemaHistory,
        ],
        signal_channels: &["source", "file", "http", "kafka"],
    };
    fn set_common(&mut self, common: SourceCommon) {
        self.common = common;
    }
    fn check(&self) -> Result<(), String> {
        let tls_set = self.trust_server_certificate
            || self.server_certificate.is_some()
            || self.host_name_in_certificate.is_some();
        if tls_set && !self.encrypt {
            return Err("`database.trustServerCertificate`, `database.serverCertificate` and `database.hostNameInCertificate` apply to TLS: set `database.encrypt: true`".into());
        }
        if self.trust_server_certificate && self.server_certificate.is_some() {
            return Err("set `database.trustServerCertificate` (accept any certificate) or `database.serverCertificate` (accept this one), not both".into());
        }
        if let Some(path) = &self.server_certificate {
            let known = path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
                ["pem", "crt", "der"]
                    .iter()
                    .any(|k| e.eq_ignore_ascii_case(k))
            });
            if !known {
                return Err(format!("`database.serverCertificate` `{}`: name a certificate file ending in .pem, .crt or .der (a Java trust store is not read)", path.display()));
            }
        }
        if self.time_mode == TimePrecisionMode::AdaptiveTimeMicroseconds {
            return Err("`time.precision.mode: adaptive_time_microseconds` is not one of the SQL Server connector's; use `adaptive` (the default) or `connect`".into());
        }
        if self.poll_interval_ms == 0 {
            return Err("`poll.interval.ms` must be at least 1".into());
        }
        if self.password.is_some() && self.password_file.is_some() {
            return Err("give `database.password` or `database.password.file`, not both".into());
        }
        if self.database.contains(',') {
            return Err(format!(
                "`database.names: {}`: one database per source is built; make one pipeline per database",
                self.database
            ));
        }
        Ok(())
    }
}

sluice_engine::impl_component!(
    SqlServerConfig,
    Source,
    "sqlserver",
    read = sluice_kit::config::read,
    build = |c, ctx| super::SqlServerSource::new(c.clone(), ctx)?
);
