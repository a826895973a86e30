//! Sluice sources. Each source lives in its own folder with its `config.rs`.

pub mod datagen;
