//! Sluice transforms (Debezium SMTs). Each transform lives in its own folder with its `config.rs`.

mod column_map;
pub mod envelope;
pub mod hash;
pub mod mask;
pub mod reroute;
pub mod route;
pub mod truncate;
pub mod unwrap;

#[cfg(test)]
mod testing;
