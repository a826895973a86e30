//! Configuration of the `unwrap` transform.

use serde::Deserialize;

/// What happens to deletes and tombstones (`delete.tombstone.handling.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum DeleteMode {
    /// Deletes and tombstones are dropped.
    Drop,
    /// Deletes are dropped, tombstones kept (the default).
    #[default]
    Tombstone,
    /// Deletes become the `before` row with `__deleted: "true"`; tombstones are dropped.
    Rewrite,
    /// As `rewrite`, and tombstones are kept.
    RewriteWithTombstone,
    /// Deletes become tombstones (null value); the original tombstones are dropped.
    DeleteToTombstone,
}

/// Debezium 1.x/2.x `delete.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LegacyDeleteMode {
    /// Drop deletes.
    Drop,
    /// Rewrite deletes with `__deleted`.
    Rewrite,
    /// Keep deletes as records with a null value.
    None,
}

/// `type: unwrap` (Debezium's ExtractNewRecordState): the value becomes the `after` row, plus
/// requested envelope and source fields; non-envelope records pass unchanged.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnwrapConfig {
    /// What happens to deletes and tombstones (default `tombstone`).
    #[serde(rename = "delete.tombstone.handling.mode", default)]
    pub mode: Option<DeleteMode>,
    /// Legacy, honoured as Debezium 2.x did (Debezium 3.6 ignores it): `drop` (default),
    /// `rewrite`, `none`; not together with `delete.tombstone.handling.mode`.
    #[serde(rename = "delete.handling.mode", default)]
    pub legacy_mode: Option<LegacyDeleteMode>,
    /// Legacy, honoured as Debezium 2.x did: drop tombstones (default true); not together with
    /// `delete.tombstone.handling.mode`.
    #[serde(rename = "drop.tombstones", default)]
    pub drop_tombstones: Option<bool>,
    /// Fields added to the value: envelope fields (`op`, `ts_ms`) or source fields (`table`,
    /// `lsn`, `source.ts_ms`).
    #[serde(rename = "add.fields", default)]
    pub add_fields: FieldList,
    /// Prefix of added fields (default `__`).
    #[serde(rename = "add.fields.prefix", default = "default_prefix")]
    pub add_fields_prefix: String,
    /// Fields added as headers.
    #[serde(rename = "add.headers", default)]
    pub add_headers: FieldList,
    /// Prefix of added headers (default `__`).
    #[serde(rename = "add.headers.prefix", default = "default_prefix")]
    pub add_headers_prefix: String,
}

fn default_prefix() -> String {
    "__".into()
}

/// A comma-separated list (or a YAML list) of field names.
#[derive(Debug, Clone, Default)]
pub struct FieldList(pub Vec<String>);

impl<'de> Deserialize<'de> for FieldList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            One(String),
            Many(Vec<String>),
        }
        let items = match Form::deserialize(d)? {
            Form::One(s) => s.split(',').map(|f| f.trim().to_owned()).collect(),
            Form::Many(v) => v,
        };
        Ok(FieldList(
            items.into_iter().filter(|f| !f.is_empty()).collect(),
        ))
    }
}

impl UnwrapConfig {
    /// The effective mode: `delete.tombstone.handling.mode`, else the legacy pair.
    pub fn mode(&self) -> DeleteMode {
        if let Some(mode) = self.mode {
            return mode;
        }
        let keep_tombstones = self.drop_tombstones == Some(false);
        match (self.legacy_mode, keep_tombstones) {
            (None | Some(LegacyDeleteMode::Drop), false) => {
                if self.legacy_mode.is_none() && self.drop_tombstones.is_none() {
                    DeleteMode::Tombstone
                } else {
                    DeleteMode::Drop
                }
            }
            (None | Some(LegacyDeleteMode::Drop), true) => DeleteMode::Tombstone,
            (Some(LegacyDeleteMode::Rewrite), false) => DeleteMode::Rewrite,
            (Some(LegacyDeleteMode::Rewrite), true) => DeleteMode::RewriteWithTombstone,
            (Some(LegacyDeleteMode::None), _) => DeleteMode::DeleteToTombstone,
        }
    }

    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.mode.is_some() && (self.legacy_mode.is_some() || self.drop_tombstones.is_some()) {
            return Err("set `delete.tombstone.handling.mode`, or the older `delete.handling.mode` / `drop.tombstones`, not both".into());
        }
        Ok(())
    }
}

sluice_engine::impl_component!(
    UnwrapConfig,
    Transform,
    "unwrap",
    check = Self::validate,
    build = |c, _ctx| super::Unwrap::new(c.clone())
);
