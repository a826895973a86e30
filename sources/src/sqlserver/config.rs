//! Configuration of the `sqlserver` source, with Debezium's SQL Server connector's property
//! names.

use serde::Deserialize;
use sluice_kit::config::{Connection, DatabaseSource, SourceCommon, Supports};
use sluice_kit::values::{BinaryMode, DecimalMode, TimePrecisionMode};

/// `type: sqlserver`: the tables of one SQL Server database with CDC enabled, read in a
/// snapshot, then from their change tables (`cdc.<capture_instance>_CT`) in commit order.
/// Tables are `<schema>.<table>` (`table.include.list` matches that name).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlServerConfig {
    /// The databases to capture (Debezium's `database.names`, separated by commas, each listed
    /// once; each database's own copy of the configuration holds its one name).
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
    /// `snapshot.isolation.mode` (default `repeatable_read`, Debezium's; `snapshot` is the one
    /// consistent with the stream).
    #[serde(rename = "snapshot.isolation.mode", default)]
    pub isolation: IsolationMode,
    /// How long the snapshot's table locks may be waited for (`SET LOCK_TIMEOUT`, in the modes
    /// that lock; milliseconds, default 10000).
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
    /// Change rows read per table at a time at most (default 1024; Debezium's `SELECT TOP n`,
    /// re-queried from the last row by (commit LSN, change LSN, operation)), fewer when rows
    /// are large: a table's piece asks for as many rows as its share of
    /// `max_queue_size_bytes` holds at the size of its last rows (one row before any was seen),
    /// so rows of megabytes come one at a time. 0: a poll's rows at once, in Debezium's direct
    /// order (with `__$command_id`), held in memory whatever their size (Debezium's default).
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
    /// `time.precision.mode`: `adaptive` (the default) or `connect`;
    /// `adaptive_time_microseconds` is refused (not one of the SQL Server connector's).
    #[serde(rename = "time.precision.mode", default)]
    pub time_mode: TimePrecisionMode,
    /// How long connecting may take (milliseconds, default 30000).
    #[serde(rename = "connect.timeout.ms", default = "default_connect_timeout")]
    pub connect_timeout_ms: u64,
    /// The options every database source shares, read beside these.
    #[serde(skip)]
    pub common: SourceCommon,
    /// The connection keys (`database.hostname`, `database.port`, `database.user`, the
    /// password), read beside these.
    #[serde(skip)]
    pub connection: Connection,
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
        self.common.selects(schema, table)
    }

    /// Whether `schema.table` of this database is the signaling table the `source` channel
    /// reads (`signal.data.collection`: `<database>.<schema>.<table>`, or several separated by
    /// commas, one per database, as Debezium takes them; without the database, the table of
    /// that name in each database read).
    pub fn is_signal_table(&self, schema: &str, table: &str) -> bool {
        let Some(named) = self.common.signal_data_collection.as_deref() else {
            return false;
        };
        let same = |a: &str, b: &str| a.trim().eq_ignore_ascii_case(b);
        self.common.signal_channel("source")
            && named
                .split(',')
                .any(|one| match one.split('.').collect::<Vec<_>>().as_slice() {
                    [db, s, t] => same(db, &self.database) && same(s, schema) && same(t, table),
                    [s, t] => same(s, schema) && same(t, table),
                    [t] => same("dbo", schema) && same(t, table),
                    _ => false,
                })
    }

    /// Whether this database has a signaling table for the `source` channel.
    pub fn has_signal_table(&self) -> bool {
        self.common.signal_channel("source")
            && (self.common.signal_data_collection.as_deref()).is_some_and(|named| {
                named.split(',').any(|one| {
                    let parts: Vec<&str> = one.split('.').collect();
                    parts.len() < 3 || parts[0].trim().eq_ignore_ascii_case(&self.database)
                })
            })
    }

    /// The databases of `database.names`, in the order listed.
    pub fn database_names(&self) -> Vec<String> {
        self.database
            .split(',')
            .map(|n| n.trim().to_owned())
            .collect()
    }
}

impl SqlServerConfig {
    /// The server's port (`database.port`, default 1433).
    pub fn port(&self) -> u16 {
        self.connection.port_or(1433)
    }
}

impl DatabaseSource for SqlServerConfig {
    const SUPPORTS: Supports = sluice_kit::change_tables::source::SUPPORTS;
    const CONNECTS: bool = true;
    fn set_common(&mut self, common: SourceCommon) {
        self.common = common;
    }
    fn set_connection(&mut self, connection: Connection) {
        self.connection = connection;
    }
    fn check(&self) -> Result<(), String> {
        self.connection.require_host_and_user()?;
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
        let names = self.database_names();
        if names.iter().any(String::is_empty) {
            return Err(format!(
                "`database.names: {}`: a database name is empty; list the databases separated by commas",
                self.database
            ));
        }
        for (i, name) in names.iter().enumerate() {
            if names[..i].iter().any(|n| n.eq_ignore_ascii_case(name)) {
                return Err(format!(
                    "`database.names: {}`: the database `{name}` is listed twice",
                    self.database
                ));
            }
        }
        self.check_signal_tables(&names)
    }
}

impl SqlServerConfig {
    /// Each `signal.data.collection` entry names a table (`[<database>.]<schema>.<table>`)
    /// of a database read.
    fn check_signal_tables(&self, names: &[String]) -> Result<(), String> {
        let Some(named) = self.common.signal_data_collection.as_deref() else {
            return Ok(());
        };
        for one in named.split(',') {
            let parts: Vec<&str> = one.split('.').map(str::trim).collect();
            if parts.len() > 3 || parts.iter().any(|p| p.is_empty()) {
                return Err(format!(
                    "`signal.data.collection: {named}`: `{}` is not `<database>.<schema>.<table>`",
                    one.trim()
                ));
            }
            if parts.len() == 3 && !names.iter().any(|n| n.eq_ignore_ascii_case(parts[0])) {
                return Err(format!("`signal.data.collection: {named}`: the database `{}` is not one of `database.names` ({})", parts[0], names.join(", ")));
            }
        }
        Ok(())
    }
}

sluice_engine::impl_component!(
    SqlServerConfig,
    Source,
    "sqlserver",
    read = sluice_kit::config::read,
    build = |c, ctx| super::SqlServer::new(c.clone(), ctx)?
);

#[cfg(test)]
mod tests {
    use super::*;

    fn config(names: &str, signal: Option<&str>) -> SqlServerConfig {
        let mut c: SqlServerConfig = serde_json::from_value(serde_json::json!({
            "database.names": names,
        }))
        .unwrap();
        c.common.signal_data_collection = signal.map(str::to_owned);
        c.connection.hostname = Some("h".into());
        c.connection.user = Some("u".into());
        c
    }

    #[test]
    fn several_databases_are_listed_once_each() {
        assert_eq!(config(" a, B ", None).database_names(), ["a", "B"]);
        assert_eq!(config("a,B", None).check(), Ok(()));
        let twice = config("a, b, A", None).check().unwrap_err();
        assert!(
            twice.contains("the database `A` is listed twice"),
            "{twice}"
        );
        let empty = config("a,,b", None).check().unwrap_err();
        assert!(empty.contains("a database name is empty"), "{empty}");
    }

    #[test]
    fn the_signaling_table_is_the_named_databases() {
        let mut c = config("a,b", Some("b.dbo.sig, a.dbo.other"));
        c.database = "a".into();
        assert!(c.is_signal_table("dbo", "other") && !c.is_signal_table("dbo", "sig"));
        c.database = "B".into();
        assert!(c.is_signal_table("DBO", "SIG") && !c.is_signal_table("dbo", "other"));
        let c = config("a", Some("dbo.sig"));
        assert!(c.is_signal_table("dbo", "sig") && c.has_signal_table());
        let c = config("a,b", Some("b.dbo.sig"));
        assert!(
            !c.has_signal_table(),
            "database `a,b` is the whole list, not `b`"
        );
        let e = config("a,b", Some("c.dbo.sig")).check().unwrap_err();
        assert!(e.contains("the database `c` is not one of"), "{e}");
        let e = config("a", Some("x.a.dbo.sig")).check().unwrap_err();
        assert!(e.contains("is not `<database>.<schema>.<table>`"), "{e}");
    }
}
