//! Debezium's records of captured tables: per-table schemas and events, the column properties
//! (mask, hash, truncate, key columns, source types), and schema change events.

pub(crate) mod schema_change;
pub(crate) mod table;
