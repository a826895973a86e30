//! Sluice transforms (Debezium SMTs). Each transform lives in its own folder with its `config.rs`.

pub mod column_map;
pub mod columns;
pub mod envelope;
pub mod filter;
pub mod hash;
pub mod key;
pub mod mask;
pub mod outbox;
pub mod reroute;
pub mod route;
pub mod skip;
pub mod truncate;
pub mod unwrap;

#[cfg(test)]
mod testing;

#[cfg(test)]
mod chain_tests;
#[cfg(test)]
mod integrity_tests;
