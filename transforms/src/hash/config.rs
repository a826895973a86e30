//! Configuration of the `hash` transform.

use serde::Deserialize;
use sluice_engine::config::RegexList;

/// `type: hash` (Debezium's `column.mask.hash.<algorithm>.with.salt.<salt>`): the selected
/// character columns become the hex digest of salt + value, cut to the column's length when the
/// schema carries it (`column.propagate.source.type`), the schema marked `masked=true`; NULL
/// stays NULL.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HashConfig {
    /// Column selectors: anchored regexes on `schema.table.column`.
    pub columns: RegexList,
    /// `MD5`, `SHA-1`, `SHA-256` (default), `SHA-384`, `SHA-512`.
    #[serde(default = "default_algorithm")]
    pub algorithm: String,
    /// Salt.
    #[serde(default)]
    pub salt: String,
    /// `v1` (Java serialization of the value, Debezium's default) or `v2` (UTF-8 bytes).
    #[serde(
        default = "default_version",
        rename = "hashing.strategy",
        alias = "version"
    )]
    pub version: String,
}

fn default_algorithm() -> String {
    "SHA-256".into()
}
fn default_version() -> String {
    "v1".into()
}

impl HashConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        sluice_kit::mapping::HashAlgorithm::parse(&self.algorithm)?;
        if !matches!(self.version.to_ascii_lowercase().as_str(), "v1" | "v2") {
            return Err(format!(
                "`hashing.strategy` is `{}`: use v1 or v2",
                self.version
            ));
        }
        if self.columns.is_empty() {
            return Err("`columns` selects nothing: list `schema.table.column` regexes".into());
        }
        Ok(())
    }
}

sluice_engine::impl_component!(
    HashConfig,
    Transform,
    "hash",
    check = Self::validate,
    build = |c, _ctx| super::build(c)?
);
