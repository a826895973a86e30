//! Configuration of the `db2` source, with Debezium's Db2 connector's property names.

use serde::Deserialize;
use sluice_kit::config::{Connection, DatabaseSource, SourceCommon, Supports};
use sluice_kit::values::{BinaryMode, DecimalMode, TimePrecisionMode};

/// `type: db2`: the tables of one Db2 database in capture mode (SQL Replication's ASN capture),
/// read in a snapshot, then from their change-data tables in commit order, through an ODBC
/// driver (IBM's Db2 CLI/ODBC driver, registered with unixODBC). Tables are
/// `<schema>.<table>` (`table.include.list` matches that name).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Db2Config {
    /// The database to capture (`source.db`, and the schema change events' `databaseName`).
    #[serde(rename = "database.dbname")]
    pub database: String,
    /// The ODBC driver's name in `odbcinst.ini` (default `IBM DB2 ODBC DRIVER`).
    #[serde(rename = "odbc.driver", default = "default_driver")]
    pub driver: String,
    /// A whole ODBC connection string instead of the one built from the `database.*` options
    /// (`${password}` in it is replaced by `database.password`).
    #[serde(rename = "odbc.connection.string", default)]
    pub connection_string: Option<String>,
    /// The schema of the ASN capture control tables (default `ASNCDC`).
    #[serde(rename = "cdc.control.schema", default = "default_asn")]
    pub control_schema: String,
    /// The schema of the change-data tables (default `ASNCDC`).
    #[serde(rename = "cdc.change.tables.schema", default = "default_asn")]
    pub change_tables_schema: String,
    /// `db2.platform`: `LUW` (Linux, Unix, Windows; the default) or `ZOS` (Db2 for z/OS: its
    /// catalog, `SYSIBM.SYSTABLES` and `SYSIBM.SYSCOLUMNS`, and Debezium's z/OS change query).
    #[serde(rename = "db2.platform", default)]
    pub platform: Platform,
    /// `snapshot.isolation.mode`: `repeatable_read` (the default, as Debezium's),
    /// `read_committed`, `read_uncommitted`, or `exclusive` (the tables locked in share mode
    /// for the whole snapshot: no writer changes them while it reads; a change committed just
    /// before, which the capture program has not read yet, still comes again in the stream).
    #[serde(rename = "snapshot.isolation.mode", default)]
    pub isolation: IsolationMode,
    /// How long to wait between polls when nothing was captured (milliseconds, default 1000).
    #[serde(rename = "poll.interval.ms", default = "default_poll")]
    pub poll_interval_ms: u64,
    /// Change rows read per table at a time at most (default 1024; `FETCH FIRST n ROWS ONLY`
    /// from the last row), fewer when rows are large: a table's piece asks for as many rows as
    /// its share of `max_queue_size_bytes` holds at the size of its last rows. 0: a poll's rows
    /// at once, held in memory whatever their size (Debezium's default).
    #[serde(rename = "streaming.fetch.size", default = "default_fetch")]
    pub fetch_size: usize,
    /// `streaming.query.timespan.seconds`: a poll reads at most this many seconds of
    /// transactions (by their log time, `IBMSNAP_UOW.IBMSNAP_LOGMARKER`) after the last one
    /// read, so that a large backlog is read in bounded queries; 0 (the default): no bound.
    #[serde(rename = "streaming.query.timespan.seconds", default)]
    pub timespan_seconds: u64,
    /// `decimal.handling.mode` (`precise`, `double`, `string`).
    #[serde(rename = "decimal.handling.mode", default)]
    pub decimal_mode: DecimalMode,
    /// `binary.handling.mode` (`bytes`, `base64`, `base64-url-safe`, `hex`).
    #[serde(rename = "binary.handling.mode", default)]
    pub binary_mode: BinaryMode,
    /// `time.precision.mode`: `adaptive` (the default) or `connect`;
    /// `adaptive_time_microseconds` is refused (not one of the Db2 connector's).
    #[serde(rename = "time.precision.mode", default)]
    pub time_mode: TimePrecisionMode,
    /// The options every database source shares, read beside these.
    #[serde(skip)]
    pub common: SourceCommon,
    /// The connection keys (`database.hostname`, `database.port`, `database.user`, the
    /// password), read beside these.
    #[serde(skip)]
    pub connection: Connection,
}

/// `db2.platform`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum Platform {
    /// Db2 for Linux, Unix and Windows.
    #[default]
    #[serde(rename = "LUW", alias = "luw")]
    Luw,
    /// Db2 for z/OS (`Z`, the name of Debezium's constant, is read as this too).
    #[serde(rename = "ZOS", alias = "zos", alias = "Z", alias = "z")]
    Zos,
}

/// `snapshot.isolation.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IsolationMode {
    /// Db2's RS (ODBC repeatable read): rows read stay locked until the snapshot ends.
    #[default]
    RepeatableRead,
    /// Db2's CS: no row stays locked; a row changed during the snapshot may come twice.
    ReadCommitted,
    /// Db2's UR: the snapshot may see uncommitted changes.
    ReadUncommitted,
    /// RR with the tables locked in share mode while the snapshot reads them.
    Exclusive,
}

impl IsolationMode {
    /// ODBC's `SQL_ATTR_TXN_ISOLATION` value for it.
    pub(crate) fn odbc(self) -> u32 {
        match self {
            IsolationMode::ReadUncommitted => 1,
            IsolationMode::ReadCommitted => 2,
            IsolationMode::RepeatableRead => 4,
            IsolationMode::Exclusive => 8,
        }
    }
}

fn default_driver() -> String {
    "IBM DB2 ODBC DRIVER".into()
}

fn default_asn() -> String {
    "ASNCDC".into()
}

fn default_poll() -> u64 {
    1000
}

fn default_fetch() -> usize {
    1024
}

impl Db2Config {
    /// Whether `schema.table` is captured.
    pub fn selects(&self, schema: &str, table: &str) -> bool {
        self.common.selects(schema, table)
    }

    /// Whether `schema.table` is the signaling table the `source` channel reads
    /// (`signal.data.collection`, `<schema>.<table>`).
    pub fn is_signal_table(&self, schema: &str, table: &str) -> bool {
        self.common.signal_channel("source")
            && (self.common.signal_table("")).is_some_and(|(s, t)| {
                s.eq_ignore_ascii_case(schema) && t.eq_ignore_ascii_case(table)
            })
    }
}

impl Db2Config {
    /// The server's port (`database.port`, default 50000).
    pub fn port(&self) -> u16 {
        self.connection.port_or(50000)
    }
}

impl DatabaseSource for Db2Config {
    const SUPPORTS: Supports = sluice_kit::change_tables::source::SUPPORTS;
    const CONNECTS: bool = true;
    fn set_common(&mut self, common: SourceCommon) {
        self.common = common;
    }
    fn set_connection(&mut self, connection: Connection) {
        self.connection = connection;
    }
    fn check(&self) -> Result<(), String> {
        let c = &self.connection;
        if self.connection_string.is_none() && (c.hostname.is_none() || c.user.is_none()) {
            return Err("give `database.hostname` and `database.user` (or a whole `odbc.connection.string`)".into());
        }
        if self.time_mode == TimePrecisionMode::AdaptiveTimeMicroseconds {
            return Err("`time.precision.mode: adaptive_time_microseconds` is not one of the Db2 connector's; use `adaptive` (the default) or `connect`".into());
        }
        if self.poll_interval_ms == 0 {
            return Err("`poll.interval.ms` must be at least 1".into());
        }
        for (key, name) in [
            ("cdc.control.schema", &self.control_schema),
            ("cdc.change.tables.schema", &self.change_tables_schema),
        ] {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!(
                    "`{key}: {name}` is not a schema name (letters, digits, `_`)"
                ));
            }
        }
        Ok(())
    }
}

sluice_engine::impl_component!(
    Db2Config,
    Source,
    "db2",
    read = sluice_kit::config::read,
    build = |c, ctx| super::Db2Source::new(c.clone(), ctx)?
);
