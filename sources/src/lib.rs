//! Sluice sources. Each source lives in its own folder with its `config.rs`, behind a Cargo
//! feature of its name (all on by default but `db2`, which links unixODBC); the connector kit they share is
//! the `sluice-kit` crate (`sources/kit/`).

#[cfg(feature = "datagen")]
pub mod datagen;
#[cfg(feature = "db2")]
pub mod db2;
#[cfg(feature = "informix")]
pub mod informix;
#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(feature = "sqlserver")]
pub mod sqlserver;

#[cfg(test)]
mod positions;

/// Version reported in `source.version`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
