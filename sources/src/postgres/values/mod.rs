//! PostgreSQL types mapped to Kafka Connect schemas and values as Debezium maps them (the
//! SQL-wide conversions are the kit's, `sluice_kit::values`).

pub(crate) mod extra_types;
pub(crate) mod temporal;
pub(crate) mod types;
