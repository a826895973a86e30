//! Sluice sources. Each source lives in its own folder with its `config.rs`.

pub mod datagen;
pub mod kafka_signal;
pub mod postgres;
pub mod sqlite;

/// Version reported in `source.version`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
