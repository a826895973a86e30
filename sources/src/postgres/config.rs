//! Configuration of the `postgres` source: the Debezium PostgreSQL connector's property names
//! and defaults, so a Debezium configuration carries over unchanged.

use serde::Deserialize;
use sluice_engine::config::Secret;
use sluice_kit::config::{Connection, DatabaseSource, Feature, SourceCommon, Supports};

pub(super) use sluice_kit::values::{BinaryMode, DecimalMode, IntervalMode, TimePrecisionMode};

/// `hstore.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum HstoreMode {
    /// An `io.debezium.data.Json` string of the object (default).
    #[default]
    Json,
    /// A Connect map of strings to optional strings.
    Map,
}

/// `publication.autocreate.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum PublicationAutocreate {
    /// `FOR ALL TABLES` (default).
    #[default]
    AllTables,
    /// Never create; the publication must exist.
    Disabled,
    /// `FOR TABLE` the captured tables: a publication this pipeline created is kept to them at
    /// start; one that was there before only gains the missing ones.
    Filtered,
}

/// `database.sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it (default).
    #[default]
    Prefer,
    /// TLS without certificate checks.
    Require,
    /// TLS, certificate checked against the CA.
    VerifyCa,
    /// TLS, certificate and host name checked.
    VerifyFull,
}

/// How an incremental snapshot chunk's window is marked in the signaling table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum WatermarkStrategy {
    /// An open row, then a close row.
    #[default]
    InsertInsert,
    /// An open row, deleted to close the window (the table does not grow).
    InsertDelete,
}

/// `type: postgres`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// A `postgres://user:password@host:port/db?sslmode=...` URL; the fields below override it.
    /// Kept secret: it may hold the password.
    #[serde(rename = "database.url", default)]
    pub url: Option<Secret>,
    /// Database name; required unless `database.url` is given (a URL without one: `postgres`).
    #[serde(rename = "database.dbname", default)]
    pub dbname: Option<String>,
    /// TLS mode (default `prefer`). `prefer` applies to the SQL connection only: the
    /// replication connection stays unencrypted unless a client certificate
    /// (`database.sslcert`) is set; `require`, `verify-ca` and `verify-full` encrypt both
    /// (rustls).
    #[serde(rename = "database.sslmode", default)]
    pub sslmode: Option<SslMode>,
    /// The CA certificate (PEM) for `verify-ca` and `verify-full`.
    #[serde(rename = "database.sslrootcert", default)]
    pub sslrootcert: Option<std::path::PathBuf>,
    /// The client certificate (PEM, chain) for certificate authentication, with
    /// `database.sslkey`; with `prefer` it also makes the replication connection use TLS.
    #[serde(rename = "database.sslcert", default)]
    pub sslcert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1, unencrypted); set
    /// with `database.sslcert`.
    #[serde(rename = "database.sslkey", default)]
    pub sslkey: Option<std::path::PathBuf>,
    /// Only `pgoutput` is supported.
    #[serde(rename = "plugin.name", default = "default_plugin")]
    pub plugin_name: String,
    /// Replication slot (default `debezium`), created when missing (recorded in
    /// `<data_dir>/postgres-created.json`); an existing slot is used, never dropped.
    #[serde(rename = "slot.name", default = "default_slot")]
    pub slot_name: String,
    /// Drop the slot on a clean stop if this pipeline created it (default false); a slot that
    /// was there before is kept, with a warning.
    #[serde(rename = "slot.drop.on.stop", default)]
    pub slot_drop_on_stop: bool,
    /// Publication (default `dbz_publication`), created when missing (recorded in
    /// `<data_dir>/postgres-created.json`); an existing one is used, never dropped.
    #[serde(rename = "publication.name", default = "default_publication")]
    pub publication_name: String,
    /// How the publication is created (default `all_tables`).
    #[serde(rename = "publication.autocreate.mode", default)]
    pub publication_autocreate: PublicationAutocreate,
    /// The options every database source shares (`topic.prefix`, `snapshot.mode`, ...), read
    /// beside these.
    #[serde(skip)]
    pub common: SourceCommon,
    /// The connection keys (`database.hostname`, `database.port`, `database.user`, the
    /// password), read beside these.
    #[serde(skip)]
    pub connection: Connection,
    /// Accepted for Debezium compatibility; it has no effect: the snapshot streams each table
    /// with COPY instead of fetching in rounds.
    #[serde(rename = "snapshot.fetch.size", default = "default_fetch")]
    pub snapshot_fetch_size: usize,
    /// Connections reading the snapshot in parallel, each importing the same exported snapshot
    /// (default 1, at most 64); rows keep Debezium's `first` ... `last` markers.
    #[serde(rename = "snapshot.max.threads", default = "default_threads")]
    pub snapshot_max_threads: usize,
    /// With more than one thread: tables with a single integer primary key and more rows than
    /// this (the planner's estimate, else the key span) are read in primary-key ranges of about
    /// this many rows, so one large table is read in parallel too (0: never split).
    #[serde(rename = "snapshot.chunk.size", default = "default_chunk")]
    pub snapshot_chunk_size: u64,
    /// Temporal types (default `adaptive`).
    #[serde(rename = "time.precision.mode", default)]
    pub time_precision_mode: TimePrecisionMode,
    /// Decimal types (default `precise`).
    #[serde(rename = "decimal.handling.mode", default)]
    pub decimal_handling_mode: DecimalMode,
    /// Binary types (default `bytes`).
    #[serde(rename = "binary.handling.mode", default)]
    pub binary_handling_mode: BinaryMode,
    /// Intervals (default `numeric`).
    #[serde(rename = "interval.handling.mode", default)]
    pub interval_handling_mode: IntervalMode,
    /// `hstore` columns (default `json`); keys in the order Debezium's `HashMap` gives them.
    #[serde(rename = "hstore.handling.mode", default)]
    pub hstore_handling_mode: HstoreMode,
    /// Scale of `money` values (default 2).
    #[serde(rename = "money.fraction.digits", default = "default_money_digits")]
    pub money_fraction_digits: u32,
    /// How an incremental snapshot chunk's window is marked in the signaling table (default
    /// `insert_insert`).
    #[serde(rename = "incremental.snapshot.watermarking.strategy", default)]
    pub watermarking_strategy: WatermarkStrategy,
    /// Incremental snapshots without writes: no watermark rows; windows are bounded by WAL
    /// positions (default false).
    #[serde(rename = "read.only", default)]
    pub read_only: bool,
    /// How often the confirmed position is reported to the server (default 10s).
    #[serde(rename = "status.update.interval.ms", default = "default_status_ms")]
    pub status_update_interval_ms: u64,
}

fn default_plugin() -> String {
    "pgoutput".to_owned()
}
fn default_slot() -> String {
    "debezium".to_owned()
}
fn default_publication() -> String {
    "dbz_publication".to_owned()
}
fn default_fetch() -> usize {
    10_240
}
fn default_threads() -> usize {
    1
}
fn default_chunk() -> u64 {
    100_000
}
fn default_money_digits() -> u32 {
    2
}
fn default_status_ms() -> u64 {
    10_000
}

impl PostgresConfig {
    /// Checks what serde cannot; messages say how to fix.
    fn validate(&self) -> Result<(), String> {
        if self.plugin_name != "pgoutput" {
            return Err(format!(
                "`plugin.name` is `{}`: only `pgoutput` is supported",
                self.plugin_name
            ));
        }
        if !self
            .slot_name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(format!(
                "`slot.name` `{}` may only contain lower-case letters, digits and underscores",
                self.slot_name
            ));
        }
        if self.sslcert.is_some() != self.sslkey.is_some() {
            return Err(
                "set both `database.sslcert` and `database.sslkey` (a client certificate needs its key)"
                    .to_owned(),
            );
        }
        if self.sslmode == Some(SslMode::Disable) && self.sslcert.is_some() {
            return Err(
                "`database.sslcert` needs TLS: set `database.sslmode` to require (or prefer, verify-ca, verify-full)"
                    .to_owned(),
            );
        }
        if self.url.is_none() && self.dbname.is_none() {
            return Err("set `database.dbname` (or `database.url`)".to_owned());
        }
        if self.snapshot_max_threads == 0 || self.snapshot_max_threads > 64 {
            return Err("`snapshot.max.threads` must be between 1 and 64".to_owned());
        }
        if self.snapshot_fetch_size == 0 {
            return Err("`snapshot.fetch.size` must be at least 1".to_owned());
        }
        Ok(())
    }

    /// The signaling table as `(schema, table)` (a leading database name is dropped).
    pub fn signal_table(&self) -> Option<(String, String)> {
        self.common.signal_table("public")
    }

    /// Whether the table `schema.table` is captured (never the system catalogs).
    pub fn captures_table(&self, schema: &str, table: &str) -> bool {
        !matches!(schema, "pg_catalog" | "information_schema") && self.common.selects(schema, table)
    }

    /// Whether the column is captured (key columns are kept in the key regardless).
    pub fn captures_column(&self, schema: &str, table: &str, column: &str) -> bool {
        self.common
            .selects_column(&format!("{schema}.{table}.{column}"))
    }
}

impl DatabaseSource for PostgresConfig {
    const SUPPORTS: Supports = Supports {
        features: &[
            Feature::SchemaFilters,
            Feature::ColumnFilters,
            Feature::ColumnMasks,
            Feature::MessageKeyColumns,
            Feature::SourceTypes,
            Feature::SnapshotOverrides,
            Feature::SnapshotCollections,
            Feature::SkippedOperations,
            Feature::FailureHandling,
            Feature::Heartbeats,
            Feature::TransactionMetadata,
            Feature::SchemaChanges,
            Feature::Notifications,
        ],
        signal_channels: &["source", "file", "http", "kafka"],
    };
    const CONNECTS: bool = true;
    fn set_common(&mut self, common: SourceCommon) {
        self.common = common;
    }
    fn set_connection(&mut self, connection: Connection) {
        self.connection = connection;
    }
    fn check(&self) -> Result<(), String> {
        self.validate()
    }
}

sluice_engine::impl_component!(
    PostgresConfig,
    Source,
    "postgres",
    read = sluice_kit::config::read,
    build = |c, ctx| crate::postgres::PostgresSource::new(c.clone(), ctx)?
);

#[cfg(test)]
mod tests {
    use sluice_engine::config::split_list;

    #[test]
    fn lists_split_on_commas_outside_quantifiers() {
        assert_eq!(
            split_list("public.a, public.b{1,3} ,x"),
            vec!["public.a", "public.b{1,3}", "x"]
        );
    }
}
