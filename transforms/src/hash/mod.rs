//! `hash`: pseudonymizes selected character columns (hex digest of salt + value), cut to the
//! column length when the schema records it (`column.propagate.source.type`).

mod config;

use sluice_engine::ComponentError;
use sluice_kit::mapping::{ColumnMapper, HashAlgorithm, HashVersion, Hasher};

pub use crate::column_map::ColumnMap;
pub use config::HashConfig;

/// A hasher for `config` (validated).
pub fn build(config: &HashConfig) -> Result<ColumnMap, ComponentError> {
    let algorithm = HashAlgorithm::parse(&config.algorithm).map_err(ComponentError::fatal)?;
    let version = if config.version.eq_ignore_ascii_case("v2") {
        HashVersion::V2
    } else {
        HashVersion::V1
    };
    let mapper = ColumnMapper::Hash(Hasher::new(algorithm, version, &config.salt), None);
    Ok(ColumnMap::new(config.columns.0.clone(), mapper))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use sluice_engine::config::{AnchoredRegex, RegexList};
    use sluice_engine::{ComponentError, Transform};
    use sluice_engine::{Op, Value};

    #[test]
    fn same_input_and_salt_give_debeziums_pseudonym() -> Result<(), ComponentError> {
        let s = customers();
        let mut h = build(&HashConfig {
            columns: RegexList(vec![AnchoredRegex::new(r".*\.ssn").unwrap()]),
            algorithm: "SHA-256".into(),
            salt: "CzQMA0cB5K".into(),
            version: "v1".into(),
        })?;
        let mut out = Vec::new();
        for _ in 0..2 {
            let e = event(
                &s,
                Op::Create,
                None,
                Some(row(&s, 1, None, Some("anne@example.com"), "x")),
            );
            h.apply(e, &mut out)?;
        }
        // Debezium 3.6.3's value for the same salt and input.
        let expected =
            Value::from("8764cc3b7c213d1ff98e382831a6b3b1bdf23d9b96712b4b6b165c245a96455b");
        assert_eq!(field(&out[0], "after", "ssn"), Some(&expected));
        assert_eq!(field(&out[1], "after", "ssn"), Some(&expected));
        assert_eq!(field(&out[0], "after", "name"), Some(&Value::Null));
        Ok(())
    }
}
