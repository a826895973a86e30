//! The connector kit: Debezium's connector framework written once, for every database source.
//!
//! A database source is a protocol adapter on top of it: it reads its server's snapshot and log
//! and hands rows to the kit's pieces, which decide what Debezium would do with them.
//!
//! - [`change_tables`]: the polling core of the change-table sources (SQL Server, Db2): LSNs,
//!   offsets, the merge of a poll's change tables, restart skip rules, transaction metadata.
//! - [`config`]: the options every database source shares (and which of them a source
//!   implements), with the column properties (mask, hash, truncate, key columns).
//! - [`history`]: the schema history (file, Kafka topic or memory; Debezium's records) and
//!   its recovery at a restart position.
//! - [`incremental`]: an incremental snapshot's progress (tables left, last and maximum key,
//!   filters), as positions carry it.
//! - [`mapping`]: Debezium's column mapping (mask, hash, truncate, `message.key.columns`), used
//!   by sources and transforms alike.
//! - [`notification`]: Debezium's notification records.
//! - [`position`]: typed positions carrying an incremental snapshot's progress.
//! - [`records`]: the tombstone after a delete.
//! - [`shape`]: what a table's events carry under the column options (captured columns,
//!   mappers, event key).
//! - [`signal`]: the signal model and its channels (source table, file, Kafka, HTTP).
//! - [`snapshot`]: `snapshot.mode` and the snapshotter deciding each start.
//! - [`values`]: the value conversions all SQL databases share (temporal, decimal and binary
//!   modes).

pub mod change_tables;
pub mod config;
pub mod failure;
pub mod history;
pub mod incremental;
pub mod lifecycle;
pub mod mapping;
pub mod notification;
pub mod position;
pub mod records;
pub mod shape;
pub mod signal;
pub mod snapshot;
pub mod values;
