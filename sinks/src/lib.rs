//! Sluice sinks. Each sink lives in its own folder with its `config.rs`; `kafka` is behind the
//! Cargo feature of its name (on by default).

pub mod file;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod null;
pub mod stdout;
mod writer;
