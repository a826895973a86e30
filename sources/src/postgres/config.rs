//! Configuration of the `postgres` source: the Debezium PostgreSQL connector's property names
//! and defaults, so a Debezium configuration carries over unchanged.

use serde::Deserialize;
use sluice_engine::config::{ConfigError, Node, RegexList, Secret};

use crate::postgres::records::columns::{check_column_property, COLUMN_PREFIXES};
use sluice_kit::signal::kafka::SIGNAL_CONSUMER_PREFIX;

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
    /// `FOR TABLE` the included tables, kept in sync at start.
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
    /// Host (default `localhost`).
    #[serde(rename = "database.hostname", default)]
    pub hostname: Option<String>,
    /// Port (default 5432).
    #[serde(rename = "database.port", default)]
    pub port: Option<u16>,
    /// User (default `postgres`).
    #[serde(rename = "database.user", default)]
    pub user: Option<String>,
    /// Password (use `${VAR}` to take it from the environment).
    #[serde(rename = "database.password", default)]
    pub password: Option<Secret>,
    /// A file holding the password (first line).
    #[serde(rename = "database.password.file", default)]
    pub password_file: Option<std::path::PathBuf>,
    /// Database name.
    #[serde(rename = "database.dbname", default)]
    pub dbname: Option<String>,
    /// TLS mode (default `prefer`).
    #[serde(rename = "database.sslmode", default)]
    pub sslmode: Option<SslMode>,
    /// The CA certificate (PEM) for `verify-ca` and `verify-full`.
    #[serde(rename = "database.sslrootcert", default)]
    pub sslrootcert: Option<std::path::PathBuf>,
    /// The client certificate (PEM, chain) for certificate authentication.
    #[serde(rename = "database.sslcert", default)]
    pub sslcert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1, unencrypted).
    #[serde(rename = "database.sslkey", default)]
    pub sslkey: Option<std::path::PathBuf>,
    /// Topic prefix (logical server name); required.
    #[serde(rename = "topic.prefix")]
    pub topic_prefix: String,
    /// Only `pgoutput` is supported.
    #[serde(rename = "plugin.name", default = "default_plugin")]
    pub plugin_name: String,
    /// Replication slot (default `debezium`).
    #[serde(rename = "slot.name", default = "default_slot")]
    pub slot_name: String,
    /// Drop the slot when the pipeline stops (default false).
    #[serde(rename = "slot.drop.on.stop", default)]
    pub slot_drop_on_stop: bool,
    /// Publication (default `dbz_publication`).
    #[serde(rename = "publication.name", default = "default_publication")]
    pub publication_name: String,
    /// How the publication is created (default `all_tables`).
    #[serde(rename = "publication.autocreate.mode", default)]
    pub publication_autocreate: PublicationAutocreate,
    /// Schemas to capture (regexes on the schema name).
    #[serde(rename = "schema.include.list", default)]
    pub schema_include: RegexList,
    /// Schemas not to capture.
    #[serde(rename = "schema.exclude.list", default)]
    pub schema_exclude: RegexList,
    /// Tables to capture (regexes on `schema.table`).
    #[serde(rename = "table.include.list", default)]
    pub table_include: RegexList,
    /// Tables not to capture.
    #[serde(rename = "table.exclude.list", default)]
    pub table_exclude: RegexList,
    /// Columns to capture (regexes on `schema.table.column`).
    #[serde(rename = "column.include.list", default)]
    pub column_include: RegexList,
    /// Columns not to capture (key columns always stay in the key).
    #[serde(rename = "column.exclude.list", default)]
    pub column_exclude: RegexList,
    /// The options every database source shares (`snapshot.mode`, ...), read beside these.
    #[serde(skip)]
    pub common: sluice_kit::config::SourceCommon,
    /// Tables whose snapshot uses a custom SELECT, each given as
    /// `snapshot.select.statement.overrides.<schema>.<table>` (read by [`Self::with_overrides`]).
    #[serde(rename = "snapshot.select.statement.overrides", default)]
    pub snapshot_overrides_tables: Option<String>,
    /// The custom SELECT per `schema.table`.
    #[serde(skip)]
    pub snapshot_overrides: std::collections::BTreeMap<String, String>,
    /// Columns whose schemas carry their source type (`__debezium.source.column.type`, ...).
    #[serde(rename = "column.propagate.source.type", default)]
    pub column_propagate_source_type: RegexList,
    /// Type names whose columns' schemas carry their source type.
    #[serde(rename = "datatype.propagate.source.type", default)]
    pub datatype_propagate_source_type: RegexList,
    /// `message.key.columns`: `<table regex>:<c1>,<c2>;...`.
    #[serde(rename = "message.key.columns", default)]
    pub message_key_columns: Option<String>,
    /// Parsed `message.key.columns` (set by [`Self::with_columns`]).
    #[serde(skip)]
    pub key_columns: crate::postgres::records::columns::KeyColumns,
    /// Column mask / hash / truncate rules (set by [`Self::with_columns`]).
    #[serde(skip)]
    pub column_rules: crate::postgres::records::columns::ColumnRules,
    /// Accepted for Debezium compatibility; it has no effect: the snapshot streams each table
    /// with COPY instead of fetching in rounds.
    #[serde(rename = "snapshot.fetch.size", default = "default_fetch")]
    pub snapshot_fetch_size: usize,
    /// Connections reading the snapshot in parallel (default 1).
    #[serde(rename = "snapshot.max.threads", default = "default_threads")]
    pub snapshot_max_threads: usize,
    /// With more than one thread: tables with a single integer primary key and more rows than
    /// this are read in primary-key ranges of about this many rows (0: never split).
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
    /// A change whose value cannot be represented (default `fail`; `warn` logs its table,
    /// column and key and skips it; `skip` skips it).
    #[serde(rename = "event.processing.failure.handling.mode", default)]
    pub failure_mode: sluice_engine::FailureMode,
    /// `hstore` columns (default `json`).
    #[serde(rename = "hstore.handling.mode", default)]
    pub hstore_handling_mode: HstoreMode,
    /// Scale of `money` values (default 2).
    #[serde(rename = "money.fraction.digits", default = "default_money_digits")]
    pub money_fraction_digits: u32,
    /// BEGIN/END records on `<prefix>.transaction` and a `transaction` block in data events
    /// (default false).
    #[serde(rename = "provide.transaction.metadata", default)]
    pub provide_transaction_metadata: bool,
    /// The signaling table (`schema.table`, or `db.schema.table`) for the `source` channel and
    /// the incremental snapshot's watermarks.
    #[serde(rename = "signal.data.collection", default)]
    pub signal_data_collection: Option<String>,
    /// Signal channels, comma-separated: `source` (default), `file`.
    #[serde(rename = "signal.enabled.channels", default = "default_channels")]
    pub signal_enabled_channels: String,
    /// Where notifications go besides the log: `sink` (records on
    /// `notification.sink.topic.name`), `log`.
    #[serde(rename = "notification.enabled.channels", default)]
    pub notification_enabled_channels: String,
    /// The topic of notification records (the `sink` channel).
    #[serde(rename = "notification.sink.topic.name", default)]
    pub notification_sink_topic: Option<String>,
    /// JSON-lines file of the `file` channel.
    #[serde(rename = "signal.file", default)]
    pub signal_file: Option<std::path::PathBuf>,
    /// The `kafka` channel's brokers.
    #[serde(rename = "signal.kafka.bootstrap.servers", default)]
    pub signal_kafka_servers: Option<String>,
    /// The `kafka` channel's topic (default `<topic.prefix>-signal`).
    #[serde(rename = "signal.kafka.topic", default)]
    pub signal_kafka_topic: Option<String>,
    /// The `kafka` channel's consumer group (default `kafka-signal`).
    #[serde(rename = "signal.kafka.groupId", default = "default_signal_group")]
    pub signal_kafka_group: String,
    /// Accepted for Debezium compatibility; the channel waits for records without polling.
    #[serde(rename = "signal.kafka.poll.timeout.ms", default)]
    pub signal_kafka_poll_timeout_ms: Option<u64>,
    /// `signal.consumer.*` properties of the `kafka` channel (set by `with_signal_consumer`).
    #[serde(skip)]
    pub signal_consumer: sluice_engine::config::Properties,
    /// How often the `file` channel is read (default 1000 ms).
    #[serde(rename = "signal.poll.interval.ms", default = "default_signal_poll")]
    pub signal_poll_interval_ms: u64,
    /// Rows per incremental snapshot chunk (default 1024).
    #[serde(
        rename = "incremental.snapshot.chunk.size",
        default = "default_incremental_chunk"
    )]
    pub incremental_chunk_size: usize,
    /// `insert_insert` (default) or `insert_delete`.
    #[serde(rename = "incremental.snapshot.watermarking.strategy", default)]
    pub watermarking_strategy: WatermarkStrategy,
    /// Incremental snapshots without writes: no watermark rows; windows are bounded by WAL
    /// positions (default false).
    #[serde(rename = "read.only", default)]
    pub read_only: bool,
    /// Schema change events on the topic `<topic.prefix>` (default false: Debezium's PostgreSQL
    /// connector has none).
    #[serde(rename = "include.schema.changes", default)]
    pub include_schema_changes: bool,
    /// A tombstone after each delete (default true).
    #[serde(rename = "tombstones.on.delete", default = "default_true")]
    pub tombstones_on_delete: bool,
    /// Operations not emitted: `c`, `u`, `d`, `t`, or `none` (default `t`).
    #[serde(rename = "skipped.operations", default = "default_skipped")]
    pub skipped_operations: String,
    /// Interval of heartbeat records on `<topic.heartbeat.prefix>.<topic.prefix>`, which also
    /// carry the current position (0: off, the default).
    #[serde(rename = "heartbeat.interval.ms", default)]
    pub heartbeat_interval_ms: u64,
    /// A statement run on the database before each heartbeat (for example an insert into a
    /// captured heartbeat table, so that a quiet database still moves the slot forward).
    #[serde(rename = "heartbeat.action.query", default)]
    pub heartbeat_action_query: Option<String>,
    /// Prefix of the heartbeat topic (default `__debezium-heartbeat`).
    #[serde(
        rename = "topic.heartbeat.prefix",
        default = "default_heartbeat_prefix"
    )]
    pub heartbeat_topic_prefix: String,
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
fn default_channels() -> String {
    "source".into()
}
fn default_signal_group() -> String {
    "kafka-signal".to_owned()
}

fn default_signal_poll() -> u64 {
    1000
}
fn default_incremental_chunk() -> usize {
    1024
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
fn default_true() -> bool {
    true
}
fn default_skipped() -> String {
    "t".to_owned()
}
fn default_heartbeat_prefix() -> String {
    "__debezium-heartbeat".to_owned()
}
fn default_status_ms() -> u64 {
    10_000
}

/// Which operations to drop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Inserts.
    pub create: bool,
    /// Updates.
    pub update: bool,
    /// Deletes.
    pub delete: bool,
    /// Truncates.
    pub truncate: bool,
}

/// The prefix of Debezium's per-table snapshot SELECT keys.
pub const OVERRIDE_PREFIX: &str = "snapshot.select.statement.overrides.";

impl PostgresConfig {
    /// Adds the per-table SELECTs (`snapshot.select.statement.overrides.<schema>.<table>: SELECT
    /// ...`), checking that they match the tables listed in `snapshot.select.statement.overrides`.
    pub fn with_overrides(mut self, statements: Vec<(String, String)>) -> Result<Self, String> {
        let listed: Vec<String> = self
            .snapshot_overrides_tables
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect();
        for (table, sql) in statements {
            if !listed.contains(&table) {
                return Err(format!(
                    "`{OVERRIDE_PREFIX}{table}` is set, but `{table}` is not listed in `snapshot.select.statement.overrides`"
                ));
            }
            self.snapshot_overrides.insert(table, sql);
        }
        if let Some(missing) = listed
            .iter()
            .find(|t| !self.snapshot_overrides.contains_key(*t))
        {
            return Err(format!(
                "`snapshot.select.statement.overrides` lists `{missing}` but `{OVERRIDE_PREFIX}{missing}` is not set"
            ));
        }
        Ok(self)
    }

    /// Adds the dynamic column keys (`column.mask.with.N.chars`, ...) and parses
    /// `message.key.columns`.
    pub fn with_columns(mut self, entries: &[(String, String)]) -> Result<Self, String> {
        self.column_rules = crate::postgres::records::columns::ColumnRules::parse(entries)?;
        if let Some(text) = &self.message_key_columns {
            self.key_columns = crate::postgres::records::columns::KeyColumns::parse(text)?;
        }
        Ok(self)
    }

    /// Adds the `signal.consumer.*` properties (names without the prefix).
    pub fn with_signal_consumer(mut self, properties: Vec<(String, String)>) -> Self {
        self.signal_consumer = properties.into_iter().collect();
        self
    }

    /// Where the `kafka` signal channel reads, when it is on.
    pub fn kafka_signals(&self) -> Option<sluice_kit::signal::kafka::KafkaSignalSettings> {
        if !self.signal_channels().iter().any(|c| c == "kafka") {
            return None;
        }
        Some(sluice_kit::signal::kafka::KafkaSignalSettings {
            bootstrap_servers: self.signal_kafka_servers.clone().unwrap_or_default(),
            topic: self
                .signal_kafka_topic
                .clone()
                .unwrap_or_else(|| format!("{}-signal", self.topic_prefix)),
            group_id: self.signal_kafka_group.clone(),
            key: self.topic_prefix.clone(),
            consumer: self.signal_consumer.clone(),
        })
    }

    /// Checks what serde cannot; messages say how to fix.
    pub fn validate(&self) -> Result<(), String> {
        self.common.snapshotter("postgres", false)?;
        if self.plugin_name != "pgoutput" {
            return Err(format!(
                "`plugin.name` is `{}`: only `pgoutput` is supported",
                self.plugin_name
            ));
        }
        if self.topic_prefix.trim().is_empty() {
            return Err("`topic.prefix` must not be empty".to_owned());
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
        for channel in self.signal_channels() {
            if !matches!(channel.as_str(), "source" | "file" | "http" | "kafka") {
                return Err(format!(
                    "`signal.enabled.channels`: `{channel}` is not available here: use source, file, http, kafka"
                ));
            }
        }
        for channel in self.notification_enabled_channels.split(',').map(str::trim) {
            if !matches!(channel, "" | "sink" | "log") {
                return Err(format!(
                    "`notification.enabled.channels`: `{channel}` is not available here: use sink, log"
                ));
            }
        }
        if self.notification_sink().is_some_and(|t| t.is_none()) {
            return Err(
                "the `sink` notification channel needs `notification.sink.topic.name`".to_owned(),
            );
        }
        if self.signal_channels().iter().any(|c| c == "file") && self.signal_file.is_none() {
            return Err("the `file` signal channel needs `signal.file`".to_owned());
        }
        if self.signal_channels().iter().any(|c| c == "kafka")
            && self
                .signal_kafka_servers
                .as_deref()
                .is_none_or(|s| s.trim().is_empty())
        {
            return Err(
                "the `kafka` signal channel needs `signal.kafka.bootstrap.servers`".to_owned(),
            );
        }
        if self.incremental_chunk_size == 0 {
            return Err("`incremental.snapshot.chunk.size` must be at least 1".to_owned());
        }
        if self.snapshot_max_threads == 0 || self.snapshot_max_threads > 64 {
            return Err("`snapshot.max.threads` must be between 1 and 64".to_owned());
        }
        if self.snapshot_fetch_size == 0 {
            return Err("`snapshot.fetch.size` must be at least 1".to_owned());
        }
        self.skipped().map(|_| ())
    }

    /// `Some(topic)` when the `sink` notification channel is on (`Some(None)`: no topic set).
    pub fn notification_sink(&self) -> Option<Option<&str>> {
        self.notification_enabled_channels
            .split(',')
            .any(|c| c.trim() == "sink")
            .then_some(self.notification_sink_topic.as_deref())
    }

    /// The enabled signal channels.
    pub fn signal_channels(&self) -> Vec<String> {
        self.signal_enabled_channels
            .split(',')
            .map(|c| c.trim().to_ascii_lowercase())
            .filter(|c| !c.is_empty())
            .collect()
    }

    /// The signaling table as `(schema, table)` (a leading database name is dropped).
    pub fn signal_table(&self) -> Option<(String, String)> {
        let name = self.signal_data_collection.as_deref()?;
        let parts: Vec<&str> = name.split('.').collect();
        match parts.as_slice() {
            [.., schema, table] => Some(((*schema).to_owned(), (*table).to_owned())),
            [table] => Some(("public".to_owned(), (*table).to_owned())),
            [] => None,
        }
    }

    /// Parses `skipped.operations`.
    pub fn skipped(&self) -> Result<Skipped, String> {
        let mut s = Skipped::default();
        for op in self
            .skipped_operations
            .split(',')
            .map(str::trim)
            .filter(|o| !o.is_empty())
        {
            match op {
                "c" => s.create = true,
                "u" => s.update = true,
                "d" => s.delete = true,
                "t" => s.truncate = true,
                "none" => s = Skipped::default(),
                other => {
                    return Err(format!(
                        "`skipped.operations` has `{other}`: use c, u, d, t or none"
                    ))
                }
            }
        }
        Ok(s)
    }

    /// Whether the table `schema.table` is captured.
    pub fn captures_table(&self, schema: &str, table: &str) -> bool {
        let full = format!("{schema}.{table}");
        let schema_ok = (self.schema_include.is_empty() || self.schema_include.matches(schema))
            && !self.schema_exclude.matches(schema);
        let table_ok = (self.table_include.is_empty() || self.table_include.matches(&full))
            && !self.table_exclude.matches(&full);
        schema_ok && table_ok && !matches!(schema, "pg_catalog" | "information_schema")
    }

    /// Whether the column is captured (key columns are kept in the key regardless).
    pub fn captures_column(&self, schema: &str, table: &str, column: &str) -> bool {
        let full = format!("{schema}.{table}.{column}");
        (self.column_include.is_empty() || self.column_include.matches(&full))
            && !self.column_exclude.matches(&full)
    }
}

/// The keys of a `postgres` block whose names carry a value (`column.mask.with.8.chars`,
/// `signal.consumer.<property>`, `snapshot.select.statement.overrides.<table>`).
#[derive(Default)]
struct DynamicKeys {
    columns: Vec<(String, String)>,
    consumer: Vec<(String, String)>,
    statements: Vec<(String, String)>,
}

impl DynamicKeys {
    /// The keys [`DynamicKeys::read`] takes, for the serde pass to skip.
    fn prefixes() -> Vec<&'static str> {
        let mut keys = vec![OVERRIDE_PREFIX, SIGNAL_CONSUMER_PREFIX];
        keys.extend(COLUMN_PREFIXES);
        keys
    }

    fn read(node: &Node) -> Result<Self, ConfigError> {
        let mut keys = DynamicKeys::default();
        for (key, value) in node.entries().unwrap_or_default() {
            let name = key.as_text().unwrap_or_default();
            let text = |expected: &str| {
                value
                    .as_text()
                    .ok_or_else(|| ConfigError::at(value.loc, expected).with_path(name.clone()))
            };
            if COLUMN_PREFIXES.iter().any(|p| name.starts_with(p)) {
                let selectors = text(
                    "expected column selectors (regexes on schema.table.column, comma-separated)",
                )?;
                check_column_property(&name, &selectors)
                    .map_err(|m| ConfigError::at(key.loc, m).with_path(name.clone()))?;
                keys.columns.push((name.clone(), selectors));
            } else if let Some(property) = name.strip_prefix(SIGNAL_CONSUMER_PREFIX) {
                let value = text("expected a consumer property value")?;
                keys.consumer.push((property.to_owned(), value));
            } else if let Some(table) = name.strip_prefix(OVERRIDE_PREFIX) {
                let sql = text("expected a SELECT statement")?;
                keys.statements.push((table.to_owned(), sql));
            }
        }
        Ok(keys)
    }
}

impl sluice_engine::registry::Component for PostgresConfig {
    type Built = Box<dyn sluice_engine::Source>;
    const KIND: &'static str = "postgres";
    fn from_node(node: &Node, skip: &[&str]) -> Result<Self, ConfigError> {
        let mut keys: Vec<&str> = skip.to_vec();
        keys.extend(DynamicKeys::prefixes());
        let config: PostgresConfig = sluice_engine::registry::read_parts(
            node,
            &keys,
            |c: &mut PostgresConfig, common: sluice_kit::config::SourceCommon| c.common = common,
            sluice_engine::registry::unchecked,
        )?;
        let dynamic = DynamicKeys::read(node)?;
        let config = config
            .with_signal_consumer(dynamic.consumer)
            .with_overrides(dynamic.statements)
            .and_then(|c| c.with_columns(&dynamic.columns))
            .map_err(|m| ConfigError::at(node.loc, m))?;
        config
            .validate()
            .map_err(|m| ConfigError::at(node.loc, m))?;
        Ok(config)
    }
    fn build(
        &self,
        ctx: &sluice_engine::BuildContext<'_>,
    ) -> Result<Self::Built, sluice_engine::ComponentError> {
        Ok(Box::new(crate::postgres::PostgresSource::new(
            self.clone(),
            ctx,
        )?))
    }
}

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
