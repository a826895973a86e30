//! Sluice sinks. Each sink lives in its own folder with its `config.rs`.

pub mod file;
pub mod kafka;
pub mod null;
pub mod stdout;
mod writer;
