//! The options every database source shares (Debezium's common connector properties), read
//! once from the source's block beside the source's own keys and documented once here:
//!
//! - `topic.prefix` (required), `table.include.list` / `table.exclude.list` (anchored regexes on
//!   the source's table name: `schema.table` for PostgreSQL, the table for SQLite),
//!   `schema.include.list` / `schema.exclude.list`, `column.include.list` /
//!   `column.exclude.list` (on `schema.table.column`);
//! - `snapshot.mode` and its `configuration_based` flags, `snapshot.select.statement.overrides`,
//!   `snapshot.include.collection.list`;
//! - `tombstones.on.delete` (default true), `skipped.operations` (default `t`),
//!   `event.processing.failure.handling.mode` (default `fail`);
//! - the column properties (`column.mask.with.N.chars`, `column.mask.hash.*`,
//!   `column.truncate.to.N.chars`, `message.key.columns`, `column.propagate.source.type`,
//!   `datatype.propagate.source.type`);
//! - `heartbeat.interval.ms`, `heartbeat.action.query`, `topic.heartbeat.prefix`,
//!   `provide.transaction.metadata`, `include.schema.changes`;
//! - `signal.data.collection`, `signal.enabled.channels`, `signal.file`,
//!   `signal.poll.interval.ms`, `signal.kafka.*`, `signal.consumer.*`,
//!   `incremental.snapshot.chunk.size`, `notification.enabled.channels`,
//!   `notification.sink.topic.name`.
//!
//! A source reads its block with [`read`] and says in [`DatabaseSource::SUPPORTS`] which of
//! these it implements; a key of anything else is an error at that key, never ignored.
//!
//! Keys whose names carry a value: `column.mask.with.<N>.chars`,
//! `column.mask.hash.[v2.]<ALG>.with.salt.<salt>` and `column.truncate.to.<N>.chars` (value:
//! column selectors; as the `mask`, `hash` and `truncate` transforms do, on text columns other
//! than the key, a hash cut to the column's declared length, applied while rows are built; a
//! selector that selects no captured column is a warning at start),
//! `snapshot.select.statement.overrides.<table>` (a SELECT) and `signal.consumer.<property>`
//! (librdkafka consumer properties of the `kafka` signal channel). Debezium 1.x's names (`Also
//! read as` below) are read with a deprecation warning naming the current one.

pub mod columns;
mod connection;
mod legacy;
mod read;
mod support;

use serde::Deserialize;
use sluice_engine::config::{Properties, RegexList};
use sluice_engine::registry::Component;
use sluice_engine::FailureMode;

pub use connection::Connection;
pub use read::read;
pub use support::{Feature, Supports};

use crate::signal::KafkaSignalSettings;
use crate::snapshot::{ConfigurationBased, SnapshotMode, Snapshotter};
use columns::{ColumnRules, KeyColumns};
pub use legacy::LEGACY_NAMES;

/// The prefix of Debezium's per-table snapshot SELECT keys.
pub const OVERRIDE_PREFIX: &str = "snapshot.select.statement.overrides.";

/// The shared part of a database source's configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceCommon {
    /// Topics are `<topic.prefix>.<schema>.<table>`, the schema as the source names it (SQLite:
    /// `main`; MySQL: the database; SQL Server: `<database>.<schema>`); required.
    #[serde(rename = "topic.prefix", alias = "database.server.name")]
    pub topic_prefix: String,
    /// Tables to capture (none given: all).
    #[serde(rename = "table.include.list", alias = "table.whitelist", default)]
    pub table_include: RegexList,
    /// Tables not to capture.
    #[serde(rename = "table.exclude.list", alias = "table.blacklist", default)]
    pub table_exclude: RegexList,
    /// Schemas to capture (regexes on the schema name).
    #[serde(rename = "schema.include.list", alias = "schema.whitelist", default)]
    pub schema_include: RegexList,
    /// Schemas not to capture.
    #[serde(rename = "schema.exclude.list", alias = "schema.blacklist", default)]
    pub schema_exclude: RegexList,
    /// Columns to capture (regexes on the source's full column name: `schema.table.column`;
    /// MySQL `<database>.<table>.<column>`).
    #[serde(rename = "column.include.list", alias = "column.whitelist", default)]
    pub column_include: RegexList,
    /// Columns not to capture. PostgreSQL keeps a left-out key column in the key; the other
    /// sources refuse to leave out a primary key column.
    #[serde(rename = "column.exclude.list", alias = "column.blacklist", default)]
    pub column_exclude: RegexList,
    /// `snapshot.mode` (default `initial`).
    #[serde(rename = "snapshot.mode", default)]
    pub snapshot_mode: SnapshotMode,
    /// With `configuration_based`: read the tables' rows (at every start).
    #[serde(rename = "snapshot.mode.configuration.based.snapshot.data", default)]
    pub snapshot_data: bool,
    /// With `configuration_based`: capture the tables' schemas (into the schema history, for
    /// sources that keep one).
    #[serde(rename = "snapshot.mode.configuration.based.snapshot.schema", default)]
    pub snapshot_schema: bool,
    /// With `configuration_based`: stream after the snapshot (or from the stored position).
    #[serde(rename = "snapshot.mode.configuration.based.start.stream", default)]
    pub start_stream: bool,
    /// With `configuration_based`: capture the schemas again when the history is unusable.
    #[serde(
        rename = "snapshot.mode.configuration.based.snapshot.on.schema.error",
        default
    )]
    pub snapshot_on_schema_error: bool,
    /// With `configuration_based`: snapshot again when the stored position is lost, instead of
    /// stopping with an error.
    #[serde(
        rename = "snapshot.mode.configuration.based.snapshot.on.data.error",
        default
    )]
    pub snapshot_on_data_error: bool,
    /// Tables whose snapshot uses a custom SELECT, comma-separated, each SELECT given as
    /// `snapshot.select.statement.overrides.<table>: SELECT ...`. PostgreSQL and SQLite take
    /// its columns in table order (checked); MySQL takes them by name.
    #[serde(rename = "snapshot.select.statement.overrides", default)]
    pub snapshot_overrides_tables: Option<String>,
    /// The custom SELECT per table.
    #[serde(skip)]
    pub snapshot_overrides: std::collections::BTreeMap<String, String>,
    /// `snapshot.include.collection.list`: the captured tables whose rows the snapshot reads
    /// (regexes on the source's table name; none given: every captured table). The others
    /// are streamed only.
    #[serde(rename = "snapshot.include.collection.list", default)]
    pub snapshot_include: RegexList,
    /// A tombstone after each delete (default true).
    #[serde(rename = "tombstones.on.delete", default = "default_true")]
    pub tombstones_on_delete: bool,
    /// Operations not emitted: `c`, `u`, `d`, `t`, or `none` (default `t`).
    #[serde(rename = "skipped.operations", default = "default_skipped")]
    pub skipped_operations: String,
    /// A change whose value cannot be represented (default `fail`; `warn` logs its table,
    /// column and key and skips it; `skip` skips it).
    #[serde(rename = "event.processing.failure.handling.mode", default)]
    pub failure_mode: FailureMode,
    /// Where the changes skipped under `failure_mode` are counted (Debezium's
    /// `NumberOfErroneousEvents`): the running source's, set by [`Self::count_into`].
    #[serde(skip)]
    pub counters: std::sync::Arc<sluice_engine::component::SourceCounters>,
    /// Columns whose schemas carry their source type as parameters
    /// (`__debezium.source.column.type`, `.length`, `.scale`, `.name`).
    #[serde(rename = "column.propagate.source.type", default)]
    pub column_propagate_source_type: RegexList,
    /// Type names whose columns' schemas carry their source type.
    #[serde(rename = "datatype.propagate.source.type", default)]
    pub datatype_propagate_source_type: RegexList,
    /// Message keys from the listed columns instead of the primary key:
    /// `<table regex>:<c1>,<c2>;...`.
    #[serde(rename = "message.key.columns", default)]
    pub message_key_columns: Option<String>,
    /// Parsed `message.key.columns` (set by [`read`]).
    #[serde(skip)]
    pub key_columns: KeyColumns,
    /// The source these options belong to (set by [`read`] from its `KIND` and `SUPPORTS`).
    #[serde(skip)]
    pub owner: Owner,
    /// Column mask / hash / truncate rules (set by [`read`]).
    #[serde(skip)]
    pub column_rules: ColumnRules,
    /// Interval of heartbeat records on `<topic.heartbeat.prefix>.<topic.prefix>`, which also
    /// carry the current position (0: off, the default).
    #[serde(rename = "heartbeat.interval.ms", default)]
    pub heartbeat_interval_ms: u64,
    /// A statement run on the database before each heartbeat (for example an insert into a
    /// captured heartbeat table, so that a quiet database still moves the position forward).
    #[serde(rename = "heartbeat.action.query", default)]
    pub heartbeat_action_query: Option<String>,
    /// Prefix of the heartbeat topic (default `__debezium-heartbeat`).
    #[serde(
        rename = "topic.heartbeat.prefix",
        alias = "heartbeat.topics.prefix",
        default = "default_heartbeat_prefix"
    )]
    pub heartbeat_topic_prefix: String,
    /// BEGIN/END records on `<prefix>.transaction` and a `transaction` block in data events
    /// (default false).
    #[serde(rename = "provide.transaction.metadata", default)]
    pub provide_transaction_metadata: bool,
    /// Schema change events on the topic `<topic.prefix>` (Debezium's
    /// `SchemaChangeKey`/`SchemaChangeValue`, keyed by the database name, `tableChanges` in the
    /// relational format). Default `true` for `mysql`, `mariadb`, `sqlserver` and `db2`, as
    /// Debezium's; `false` for `postgres` (Debezium's PostgreSQL connector has none), where it
    /// gives a `CREATE` per table when a snapshot starts and an `ALTER` (`ddl` null) before the
    /// first row of a table whose columns changed.
    #[serde(rename = "include.schema.changes", default)]
    pub include_schema_changes: Option<bool>,
    /// The signaling table of the `source` channel, where incremental snapshots also write
    /// their watermarks (columns `id`, the primary key, `type`, `data`): `schema.table` or
    /// `db.schema.table` (PostgreSQL, which adds it to the publication), `<database>.<table>`
    /// (MySQL), `debezium_signal` or `main.debezium_signal` (SQLite, in capture mode),
    /// `[<database>.]<schema>.<table>` (SQL Server, one per database, comma-separated),
    /// `<schema>.<table>` (Db2).
    #[serde(rename = "signal.data.collection", default)]
    pub signal_data_collection: Option<String>,
    /// Signal channels, comma-separated: `source` (rows inserted into the signaling table, read
    /// in log order; the default), `file` (`signal.file`), `http` (the pipeline's admin
    /// endpoint, `sluice signal`), `kafka` (`signal.kafka.*`). The `file`, `http` and `kafka`
    /// signals are read between transactions.
    #[serde(rename = "signal.enabled.channels", default = "default_channels")]
    pub signal_enabled_channels: String,
    /// JSON-lines file of the `file` channel (`{"id": .., "type": .., "data": {..}}` per line),
    /// emptied once read (a line being written is kept).
    #[serde(rename = "signal.file", default)]
    pub signal_file: Option<std::path::PathBuf>,
    /// How often the `file` channel is read (default 1000 ms).
    #[serde(rename = "signal.poll.interval.ms", default = "default_signal_poll")]
    pub signal_poll_interval_ms: u64,
    /// The `kafka` channel's brokers (required with that channel). Records of its topic whose
    /// key is `topic.prefix` and whose value is the signal's JSON are signals; others are
    /// ignored.
    #[serde(rename = "signal.kafka.bootstrap.servers", default)]
    pub signal_kafka_servers: Option<String>,
    /// The `kafka` channel's topic (default `<topic.prefix>-signal`; created with one partition
    /// when missing).
    #[serde(rename = "signal.kafka.topic", default)]
    pub signal_kafka_topic: Option<String>,
    /// The `kafka` channel's consumer group (default `kafka-signal`): reading resumes from its
    /// committed offset (from the beginning without one), and each handled signal's offset is
    /// committed.
    #[serde(rename = "signal.kafka.groupId", default = "default_signal_group")]
    pub signal_kafka_group: String,
    /// Accepted for Debezium compatibility; the channel waits for records without polling.
    #[serde(rename = "signal.kafka.poll.timeout.ms", default)]
    pub signal_kafka_poll_timeout_ms: Option<u64>,
    /// `signal.consumer.*` properties of the `kafka` channel (set by [`read`]).
    #[serde(skip)]
    pub signal_consumer: Properties,
    /// Rows per incremental snapshot chunk at most (default 1024). PostgreSQL also cuts a
    /// chunk at a quarter of `max_queue_size_bytes` of row text, and the next chunks ask for as
    /// many rows as fitted, so wide rows make smaller chunks.
    #[serde(
        rename = "incremental.snapshot.chunk.size",
        default = "default_incremental_chunk"
    )]
    pub incremental_chunk_size: usize,
    /// `schema.history.internal.*`, for sources that keep a schema history (set by [`read`]).
    #[serde(skip)]
    pub history: crate::history::HistoryConfig,
    /// Where notifications go besides the log, which always has them: `sink` (Debezium's
    /// `io.debezium.connector.common.Notification` records, key `NotificationKey`, on
    /// `notification.sink.topic.name`), `log`.
    #[serde(rename = "notification.enabled.channels", default)]
    pub notification_enabled_channels: String,
    /// The topic of notification records; required with the `sink` channel.
    #[serde(rename = "notification.sink.topic.name", default)]
    pub notification_sink_topic: Option<String>,
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

impl Default for SourceCommon {
    /// The defaults serde applies, with an empty `topic.prefix` (a placeholder until [`read`]
    /// sets the real options).
    fn default() -> Self {
        SourceCommon {
            topic_prefix: String::new(),
            table_include: RegexList::default(),
            table_exclude: RegexList::default(),
            schema_include: RegexList::default(),
            schema_exclude: RegexList::default(),
            column_include: RegexList::default(),
            column_exclude: RegexList::default(),
            snapshot_mode: SnapshotMode::default(),
            snapshot_data: false,
            snapshot_schema: false,
            start_stream: false,
            snapshot_on_schema_error: false,
            snapshot_on_data_error: false,
            snapshot_overrides_tables: None,
            snapshot_overrides: Default::default(),
            snapshot_include: RegexList::default(),
            tombstones_on_delete: true,
            skipped_operations: default_skipped(),
            failure_mode: FailureMode::default(),
            counters: Default::default(),
            column_propagate_source_type: RegexList::default(),
            datatype_propagate_source_type: RegexList::default(),
            message_key_columns: None,
            key_columns: KeyColumns::default(),
            owner: Owner::default(),
            column_rules: ColumnRules::default(),
            heartbeat_interval_ms: 0,
            heartbeat_action_query: None,
            heartbeat_topic_prefix: default_heartbeat_prefix(),
            provide_transaction_metadata: false,
            include_schema_changes: None,
            signal_data_collection: None,
            signal_enabled_channels: default_channels(),
            signal_file: None,
            signal_poll_interval_ms: default_signal_poll(),
            signal_kafka_servers: None,
            signal_kafka_topic: None,
            signal_kafka_group: default_signal_group(),
            signal_kafka_poll_timeout_ms: None,
            signal_consumer: Properties::default(),
            incremental_chunk_size: default_incremental_chunk(),
            history: crate::history::HistoryConfig::default(),
            notification_enabled_channels: String::new(),
            notification_sink_topic: None,
        }
    }
}

/// Which operations to drop (`skipped.operations`).
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

impl Skipped {
    /// Whether events of `op` are dropped.
    pub fn skips(&self, op: sluice_engine::Op) -> bool {
        use sluice_engine::Op;
        match op {
            Op::Create => self.create,
            Op::Update => self.update,
            Op::Delete => self.delete,
            Op::Truncate => self.truncate,
            _ => false,
        }
    }
}

impl SourceCommon {
    /// Whether schema change events are on: `include.schema.changes`, else the connector's
    /// default (Debezium's MySQL connector: on; PostgreSQL has none, hence off).
    pub fn includes_schema_changes(&self, connector_default: bool) -> bool {
        self.include_schema_changes.unwrap_or(connector_default)
    }

    /// Heartbeat records, when `heartbeat.interval.ms` asks for them.
    pub fn heartbeats(&self) -> Option<crate::records::heartbeat::Heartbeats> {
        (self.heartbeat_interval_ms > 0).then(|| {
            crate::records::heartbeat::Heartbeats::new(
                &self.heartbeat_topic_prefix,
                &self.topic_prefix,
            )
        })
    }

    /// The heartbeat period (`heartbeat.interval.ms`; at least a millisecond).
    pub fn heartbeat_period(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.heartbeat_interval_ms.max(1))
    }

    /// How this source handles a change that cannot be represented (the mode and its
    /// counters), for the readers that keep their own copy.
    pub fn failure_handling(&self) -> crate::failure::FailureHandling {
        crate::failure::FailureHandling {
            mode: self.failure_mode,
            counters: self.counters.clone(),
        }
    }

    /// A change that cannot be represented:
    /// [`FailureHandling::refuse`](crate::failure::FailureHandling::refuse) under this
    /// source's mode.
    pub fn refuse(
        &self,
        refusal: crate::failure::Refusal<'_>,
        key: impl FnOnce() -> String,
    ) -> Result<(), crate::failure::Refused> {
        self.failure_handling().refuse(refusal, key)
    }

    /// Counts what the source skips into the running pipeline's counters (`ctx`'s); a source
    /// calls this before it hands its options to its readers.
    pub fn count_into(&mut self, ctx: &sluice_engine::SourceContext) {
        self.counters = ctx.source_counters();
    }

    /// The snapshotter these options describe, for the source they belong to; `Err` is the
    /// configuration error.
    pub fn snapshotter(&self) -> Result<Snapshotter, crate::snapshot::PlanError> {
        let flags = ConfigurationBased {
            snapshot_data: self.snapshot_data,
            snapshot_schema: self.snapshot_schema,
            start_stream: self.start_stream,
            on_schema_error: self.snapshot_on_schema_error,
            on_data_error: self.snapshot_on_data_error,
        };
        Snapshotter::new(
            self.snapshot_mode,
            flags,
            self.owner.kind,
            self.owner.keeps_history,
        )
    }

    /// What this start does, from `snapshot.mode` and what is `stored` (the snapshotter's
    /// [plan](Snapshotter::plan)); `Ok(None)`, logged, when there is nothing to do (a completed
    /// snapshot and a mode that does not stream). `lost_because` says why a stored position can
    /// no longer be read.
    pub fn plan(
        &self,
        stored: crate::snapshot::Stored,
        lost_because: &str,
    ) -> Result<Option<crate::snapshot::Plan>, crate::snapshot::PlanError> {
        let plan = self.snapshotter()?.plan(stored, lost_because)?;
        if !plan.data && !plan.stream {
            tracing::info!(
                mode = self.snapshot_mode.name(),
                "The initial snapshot is complete and snapshot.mode does not stream: nothing to do."
            );
            return Ok(None);
        }
        Ok(Some(plan))
    }

    /// Whether the table `schema.table` is captured (the schema lists on `schema`, the table
    /// lists on `schema.table`).
    pub fn selects(&self, schema: &str, table: &str) -> bool {
        self.selects_table(schema, &format!("{schema}.{table}"))
    }

    /// Whether the table named `full` (the source's table name, see the module) in `schema`
    /// is selected by the include and exclude lists.
    pub fn selects_table(&self, schema: &str, full: &str) -> bool {
        let schema_ok = (self.schema_include.is_empty() || self.schema_include.matches(schema))
            && !self.schema_exclude.matches(schema);
        let table_ok = (self.table_include.is_empty() || self.table_include.matches(full))
            && !self.table_exclude.matches(full);
        schema_ok && table_ok
    }

    /// Whether the snapshot reads the rows of the captured table named `full`
    /// (`snapshot.include.collection.list`).
    pub fn snapshots_table(&self, full: &str) -> bool {
        self.snapshot_include.is_empty() || self.snapshot_include.matches(full)
    }

    /// Whether the column named `full` (`schema.table.column`) is captured (key columns stay
    /// in the key regardless).
    pub fn selects_column(&self, full: &str) -> bool {
        (self.column_include.is_empty() || self.column_include.matches(full))
            && !self.column_exclude.matches(full)
    }

    /// The enabled signal channels.
    pub fn signal_channels(&self) -> Vec<String> {
        self.signal_enabled_channels
            .split(',')
            .map(|c| c.trim().to_ascii_lowercase())
            .filter(|c| !c.is_empty())
            .collect()
    }

    /// Whether the signal channel `name` is enabled.
    pub fn signal_channel(&self, name: &str) -> bool {
        self.signal_channels().iter().any(|c| c == name)
    }

    /// The signaling table as `(schema, table)`: a leading database name is dropped, a bare
    /// table name is in `default_schema`.
    pub fn signal_table(&self, default_schema: &str) -> Option<(String, String)> {
        let name = self.signal_data_collection.as_deref()?;
        let parts: Vec<&str> = name.split('.').collect();
        match parts.as_slice() {
            [.., schema, table] => Some(((*schema).to_owned(), (*table).to_owned())),
            [table] => Some((default_schema.to_owned(), (*table).to_owned())),
            [] => None,
        }
    }

    /// `Some(topic)` when the `sink` notification channel is on (`Some(None)`: no topic set).
    pub fn notification_sink(&self) -> Option<Option<&str>> {
        self.notification_enabled_channels
            .split(',')
            .any(|c| c.trim() == "sink")
            .then_some(self.notification_sink_topic.as_deref())
    }

    /// The builder of notification records, when the `sink` channel is on with a topic.
    pub fn notifications(&self) -> Option<crate::notification::Notifications> {
        self.notification_sink()
            .flatten()
            .map(|topic| crate::notification::Notifications::new(topic, &self.topic_prefix))
    }

    /// Where the `kafka` signal channel reads, when it is on.
    pub fn kafka_signals(&self) -> Option<KafkaSignalSettings> {
        if !self.signal_channel("kafka") {
            return None;
        }
        Some(KafkaSignalSettings {
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

    /// Checks what serde cannot, for the source named `source` implementing `supports`.
    pub fn validate(&self, source: &str, supports: &Supports) -> Result<(), String> {
        let channels = supports.signal_channels;
        if self.topic_prefix.trim().is_empty() {
            return Err("`topic.prefix` must not be empty".to_owned());
        }
        if self.incremental_chunk_size == 0 {
            return Err("`incremental.snapshot.chunk.size` must be at least 1".to_owned());
        }
        // The default (`source`) means nothing without a signaling table: a source that takes
        // no signals yet refuses only what is asked of it.
        let asked = !(channels.is_empty()
            && self.signal_channels() == ["source"]
            && self.signal_data_collection.is_none());
        for channel in self.signal_channels().into_iter().filter(|_| asked) {
            if !channels.contains(&channel.as_str()) {
                let available = match channels {
                    [] => "none yet".to_owned(),
                    some => some.join(", "),
                };
                return Err(format!(
                    "`signal.enabled.channels`: `{channel}` is not available for the {source} source: use {available}"
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
        if self.signal_channel("file") && self.signal_file.is_none() {
            return Err("the `file` signal channel needs `signal.file`".to_owned());
        }
        if self.signal_channel("kafka")
            && self
                .signal_kafka_servers
                .as_deref()
                .is_none_or(|s| s.trim().is_empty())
        {
            return Err(
                "the `kafka` signal channel needs `signal.kafka.bootstrap.servers`".to_owned(),
            );
        }
        self.skipped()?;
        self.snapshotter().map(|_| ()).map_err(|e| e.to_string())
    }
}

/// The source a [`SourceCommon`] belongs to, as its configuration type declares it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Owner {
    /// Its `type:` (`postgres`, `mysql`, ...).
    pub kind: &'static str,
    /// Whether it keeps a schema history (the `recovery` snapshot mode needs one).
    pub keeps_history: bool,
}

/// A database source's configuration: its own keys, read by serde, with the shared ones.
pub trait DatabaseSource: Component + for<'de> Deserialize<'de> {
    /// What it implements of the shared options.
    const SUPPORTS: Supports;
    /// Whether it reaches its server over the network with the connection keys
    /// ([`Connection`], read by the kit as a part of its block).
    const CONNECTS: bool = false;
    /// Puts the shared options into the configuration.
    fn set_common(&mut self, common: SourceCommon);
    /// Puts the connection keys into the configuration (sources that [connect](Self::CONNECTS)).
    fn set_connection(&mut self, _connection: Connection) {}
    /// Checks what serde cannot of the source's own keys (the shared ones are checked).
    fn check(&self) -> Result<(), String>;
}
