//! Debezium's column properties on the source: `column.mask.with.N.chars`,
//! `column.mask.hash.[v2.]<ALG>.with.salt.<salt>`, `column.truncate.to.N.chars` (dynamic keys
//! whose values are column selectors, anchored regexes on the source's full column names, such
//! as `schema.table.column`) and `message.key.columns` (`<table regex>:<c1>,<c2>;...`). A source
//! applies them while it builds rows, as Debezium does, with the schema parameters Debezium adds
//! (`masked`, `truncateLength`).

use sluice_engine::config::{split_list, AnchoredRegex};

use crate::mapping::{ColumnMapper, HashAlgorithm, HashVersion, Hasher};

/// The prefixes of the dynamic column keys.
pub const COLUMN_PREFIXES: [&str; 3] = [
    "column.mask.with.",
    "column.mask.hash.",
    "column.truncate.to.",
];

/// Checks one dynamic column key and its selectors.
pub fn check_column_property(key: &str, selectors: &str) -> Result<(), String> {
    ColumnRules::parse(&[(key.to_owned(), selectors.to_owned())]).map(|_| ())
}

/// Column mappers with the selectors they apply to, in the order given.
#[derive(Debug, Clone, Default)]
pub struct ColumnRules {
    rules: Vec<(Vec<AnchoredRegex>, ColumnMapper)>,
    /// The property each rule came from.
    keys: Vec<String>,
}

fn number(key: &str, text: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .map_err(|_| format!("`{key}`: `{text}` is not a whole number of characters (0 or more)"))
}

impl ColumnRules {
    /// Parses `(key, selectors)` pairs.
    pub fn parse(entries: &[(String, String)]) -> Result<Self, String> {
        let mut rules = Vec::new();
        let mut keys = Vec::new();
        for (key, value) in entries {
            let mapper = if let Some(rest) = key.strip_prefix("column.mask.with.") {
                let n = rest
                    .strip_suffix(".chars")
                    .ok_or_else(|| format!("`{key}`: expected `column.mask.with.<N>.chars`"))?;
                ColumnMapper::mask_chars(number(key, n)?)
            } else if let Some(rest) = key.strip_prefix("column.truncate.to.") {
                let n = rest
                    .strip_suffix(".chars")
                    .ok_or_else(|| format!("`{key}`: expected `column.truncate.to.<N>.chars`"))?;
                ColumnMapper::Truncate(number(key, n)?)
            } else if let Some(rest) = key.strip_prefix("column.mask.hash.") {
                let (version, rest) = match rest.strip_prefix("v2.") {
                    Some(r) => (HashVersion::V2, r),
                    None => (HashVersion::V1, rest.strip_prefix("v1.").unwrap_or(rest)),
                };
                let (algorithm, salt) = rest.split_once(".with.salt.").ok_or_else(|| {
                    format!(
                        "`{key}`: expected `column.mask.hash.[v2.]<ALGORITHM>.with.salt.<salt>`"
                    )
                })?;
                let algorithm =
                    HashAlgorithm::parse(algorithm).map_err(|e| format!("`{key}`: {e}"))?;
                ColumnMapper::Hash(Hasher::new(algorithm, version, salt), None)
            } else {
                continue;
            };
            let selectors = split_list(value)
                .iter()
                .map(|p| AnchoredRegex::new(p.trim()).map_err(|e| format!("`{key}`: {e}")))
                .collect::<Result<Vec<_>, _>>()?;
            rules.push((selectors, mapper));
            keys.push(key.clone());
        }
        Ok(ColumnRules { rules, keys })
    }

    /// The mapper of column `schema.table.column` (the first rule that selects it), with a hash
    /// cut to `length` when the column has one.
    pub fn mapper(&self, full_name: &str, length: Option<usize>) -> Option<ColumnMapper> {
        let (_, mapper) = self
            .rules
            .iter()
            .find(|(selectors, _)| selectors.iter().any(|r| r.is_match(full_name)))?;
        Some(match mapper {
            ColumnMapper::Hash(h, _) => ColumnMapper::Hash(h.clone(), length),
            other => other.clone(),
        })
    }

    /// Selectors (`property: pattern`) that select none of `columns` (`schema.table.column`).
    pub fn unused(&self, columns: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        for ((selectors, _), key) in self.rules.iter().zip(&self.keys) {
            for s in selectors {
                if !columns.iter().any(|c| s.is_match(c)) {
                    out.push(format!("{key}: {}", s.as_str()));
                }
            }
        }
        out
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// `message.key.columns`: key columns per table.
#[derive(Debug, Clone, Default)]
pub struct KeyColumns(Vec<(AnchoredRegex, Vec<String>)>);

impl KeyColumns {
    /// Parses `<table regex>:<c1>,<c2>;<table regex>:<c3>`.
    pub fn parse(text: &str) -> Result<Self, String> {
        crate::mapping::parse_key_columns(text)
            .map(KeyColumns)
            .map_err(|e| format!("`message.key.columns`: {e}"))
    }

    /// The key columns of `schema.table`, when configured.
    pub fn of(&self, full_table: &str) -> Option<&[String]> {
        self.0
            .iter()
            .find(|(r, _)| r.is_match(full_table))
            .map(|(_, c)| c.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debezium_keys_parse() -> Result<(), String> {
        let rules = ColumnRules::parse(&[
            ("column.mask.with.5.chars".into(), "public.gold.ssn".into()),
            (
                "column.mask.hash.v2.MD5.with.salt.pepper".into(),
                "public.gold.name, public.x.y".into(),
            ),
            (
                "column.truncate.to.4.chars".into(),
                "public\\.gold\\.notes".into(),
            ),
        ])?;
        assert_eq!(
            rules.mapper("public.gold.ssn", None),
            Some(ColumnMapper::mask_chars(5))
        );
        assert!(matches!(
            rules.mapper("public.x.y", Some(20)),
            Some(ColumnMapper::Hash(_, Some(20)))
        ));
        assert_eq!(
            rules.mapper("public.gold.notes", None),
            Some(ColumnMapper::Truncate(4))
        );
        assert_eq!(rules.mapper("public.gold.id", None), None);
        assert_eq!(
            rules.unused(&[
                "public.gold.ssn".into(),
                "public.gold.name".into(),
                "public.gold.notes".into()
            ]),
            vec!["column.mask.hash.v2.MD5.with.salt.pepper: public.x.y".to_owned()]
        );
        assert!(
            ColumnRules::parse(&[("column.mask.with.-1.chars".into(), "a.b.c".into())])
                .unwrap_err()
                .contains("whole number")
        );
        assert!(ColumnRules::parse(&[(
            "column.mask.hash.BLAKE.with.salt.x".into(),
            "a.b.c".into()
        )])
        .unwrap_err()
        .contains("unknown hash algorithm"));
        let keys = KeyColumns::parse("public.gold:n,id; public\\.other.*:a")?;
        assert_eq!(
            keys.of("public.gold"),
            Some(&["n".to_owned(), "id".to_owned()][..])
        );
        assert_eq!(keys.of("public.others"), Some(&["a".to_owned()][..]));
        assert_eq!(keys.of("public.nope"), None);
        Ok(())
    }
}
