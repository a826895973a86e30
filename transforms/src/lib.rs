//! Sluice transforms (Debezium SMTs). Each transform lives in its own folder with its `config.rs`.

pub mod route;
