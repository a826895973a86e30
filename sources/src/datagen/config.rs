//! Configuration of the `datagen` source.

use serde::Deserialize;

/// Percentages of inserts, updates and deletes.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpMix {
    /// Share of inserts.
    #[serde(default = "default_insert")]
    pub insert: u32,
    /// Share of updates.
    #[serde(default)]
    pub update: u32,
    /// Share of deletes.
    #[serde(default)]
    pub delete: u32,
}

fn default_insert() -> u32 {
    100
}

impl Default for OpMix {
    fn default() -> Self {
        OpMix {
            insert: 100,
            update: 0,
            delete: 0,
        }
    }
}

/// `type: datagen`: synthetic `customers`-shaped tables changing at a chosen rate and mix.
///
/// Positions are step counts, so a restarted pipeline regenerates exactly the events after the
/// committed position (the generator is deterministic for a given `seed`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatagenConfig {
    /// Topic prefix, as Debezium's `topic.prefix`: topics are `<topic.prefix>.<schema>.<table>`
    /// (default `datagen`).
    #[serde(rename = "topic.prefix", default = "default_prefix")]
    pub topic_prefix: String,
    /// Database name reported in `source.db` (default `datagen`).
    #[serde(rename = "database.dbname", default = "default_prefix")]
    pub database: String,
    /// Schema name of the tables (default `public`).
    #[serde(default = "default_schema")]
    pub schema: String,
    /// Table names (default `[customers]`).
    #[serde(default = "default_tables")]
    pub tables: Vec<String>,
    /// Changes per second, 0 for as fast as possible (default 0).
    #[serde(default)]
    pub rate: u64,
    /// Total changes to generate before the source ends; unset runs forever.
    #[serde(default, rename = "max.events")]
    pub max_events: Option<u64>,
    /// Share of inserts, updates and deletes.
    #[serde(default)]
    pub mix: OpMix,
    /// Random seed.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Extra characters in the `notes` column, to make records bigger (default 0).
    #[serde(default, rename = "payload.bytes")]
    pub payload_bytes: usize,
    /// Emit a tombstone after every delete, as Debezium's `tombstones.on.delete` (default true).
    #[serde(rename = "tombstones.on.delete", default = "default_true")]
    pub tombstones_on_delete: bool,
}

fn default_prefix() -> String {
    "datagen".to_owned()
}
fn default_schema() -> String {
    "public".to_owned()
}
fn default_tables() -> Vec<String> {
    vec!["customers".to_owned()]
}
fn default_seed() -> u64 {
    42
}
fn default_true() -> bool {
    true
}

impl DatagenConfig {
    /// Checks values serde cannot: at least one table and a non-zero mix.
    pub fn validate(&self) -> Result<(), String> {
        if self.tables.is_empty() {
            return Err("`tables` is empty: name at least one table".to_owned());
        }
        if self.mix.insert + self.mix.update + self.mix.delete == 0 {
            return Err("`mix` is all zero: give insert, update or delete a share".to_owned());
        }
        Ok(())
    }
}

sluice_engine::impl_component!(
    DatagenConfig,
    Source,
    "datagen",
    check = Self::validate,
    build = |c, ctx| super::DatagenSource::new(c.clone(), ctx)?
);
