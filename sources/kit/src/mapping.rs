//! Column value mappers with Debezium's semantics (`column.mask.with.N.chars`,
//! `column.mask.hash.<ALG>.with.salt.<salt>`, `column.truncate.to.N.chars`), shared by sources
//! that apply them while building rows and by the transforms that apply them to events.

use std::sync::Arc;

use sha2::Digest;

use sluice_engine::event::Value;

/// A digest algorithm, by its Java `MessageDigest` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashAlgorithm {
    /// `MD5`.
    Md5,
    /// `SHA-1`.
    Sha1,
    /// `SHA-256`.
    Sha256,
    /// `SHA-384`.
    Sha384,
    /// `SHA-512`.
    Sha512,
}

impl HashAlgorithm {
    /// Parses a Java algorithm name (`SHA-256`, `MD5`, ...; case-insensitive).
    pub fn parse(name: &str) -> Result<Self, String> {
        match name.to_ascii_uppercase().as_str() {
            "MD5" => Ok(Self::Md5),
            "SHA-1" | "SHA1" | "SHA" => Ok(Self::Sha1),
            "SHA-256" | "SHA256" => Ok(Self::Sha256),
            "SHA-384" | "SHA384" => Ok(Self::Sha384),
            "SHA-512" | "SHA512" => Ok(Self::Sha512),
            other => Err(format!(
                "unknown hash algorithm `{other}`: use MD5, SHA-1, SHA-256, SHA-384 or SHA-512"
            )),
        }
    }

    /// The digest of the concatenated parts, in a fixed buffer (64 bytes is SHA-512's size).
    fn digest(self, parts: &[&[u8]]) -> ([u8; 64], usize) {
        fn run<D: Digest>(parts: &[&[u8]]) -> ([u8; 64], usize) {
            let mut d = D::new();
            for p in parts {
                d.update(p);
            }
            let out = d.finalize();
            let mut buf = [0u8; 64];
            let n = out.len().min(64);
            buf[..n].copy_from_slice(&out[..n]);
            (buf, n)
        }
        match self {
            Self::Md5 => run::<md5::Md5>(parts),
            Self::Sha1 => run::<sha1::Sha1>(parts),
            Self::Sha256 => run::<sha2::Sha256>(parts),
            Self::Sha384 => run::<sha2::Sha384>(parts),
            Self::Sha512 => run::<sha2::Sha512>(parts),
        }
    }
}

/// How the value is turned into bytes before hashing (`column.mask.hash.hashing.strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HashVersion {
    /// Java serialization of the string (Debezium's default).
    #[default]
    V1,
    /// The string's UTF-8 bytes.
    V2,
}

/// Pseudonymizes strings as Debezium does: the hex digest of salt + value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hasher {
    algorithm: HashAlgorithm,
    version: HashVersion,
    salt: Vec<u8>,
}

impl Hasher {
    /// A hasher.
    pub fn new(algorithm: HashAlgorithm, version: HashVersion, salt: &str) -> Self {
        Hasher {
            algorithm,
            version,
            salt: salt.as_bytes().to_vec(),
        }
    }

    /// The lower-case hex digest.
    pub fn hash(&self, value: &str) -> String {
        self.hash_cut(value, usize::MAX).to_string()
    }

    /// The lower-case hex digest cut to `max` characters, with one allocation.
    pub fn hash_cut(&self, value: &str, max: usize) -> Arc<str> {
        let (digest, n) = match self.version {
            // Modified UTF-8 equals UTF-8 without NUL and supplementary characters: hash the
            // serialization's parts without building it.
            HashVersion::V1
                if value.len() <= 0xffff && !value.bytes().any(|b| b == 0 || b >= 0xf0) =>
            {
                let len = (value.len() as u16).to_be_bytes();
                let header = [0xac, 0xed, 0x00, 0x05, 0x74, len[0], len[1]];
                self.algorithm
                    .digest(&[&self.salt, &header, value.as_bytes()])
            }
            HashVersion::V1 => self
                .algorithm
                .digest(&[&self.salt, &java_serialized_string(value)]),
            HashVersion::V2 => self.algorithm.digest(&[&self.salt, value.as_bytes()]),
        };
        let mut hex = [0u8; 128];
        for (i, b) in digest[..n].iter().enumerate() {
            hex[2 * i] = b"0123456789abcdef"[usize::from(b >> 4)];
            hex[2 * i + 1] = b"0123456789abcdef"[usize::from(b & 15)];
        }
        let len = (2 * n).min(max);
        Arc::from(std::str::from_utf8(&hex[..len]).unwrap_or_default())
    }
}

/// `ObjectOutputStream.writeObject(String)` output, stream header included: `TC_STRING` with a
/// 2-byte length (or `TC_LONGSTRING` with 8) and modified UTF-8.
pub fn java_serialized_string(s: &str) -> Vec<u8> {
    let mut utf = Vec::with_capacity(s.len() + 2);
    for c in s.chars() {
        let mut units = [0u16; 2];
        for &u in c.encode_utf16(&mut units).iter() {
            match u {
                0x0001..=0x007f => utf.push(u as u8),
                0x0000 | 0x0080..=0x07ff => {
                    utf.push(0xc0 | (u >> 6) as u8);
                    utf.push(0x80 | (u & 0x3f) as u8);
                }
                _ => {
                    utf.push(0xe0 | (u >> 12) as u8);
                    utf.push(0x80 | ((u >> 6) & 0x3f) as u8);
                    utf.push(0x80 | (u & 0x3f) as u8);
                }
            }
        }
    }
    let mut out = vec![0xac, 0xed, 0x00, 0x05];
    if utf.len() <= 0xffff {
        out.push(0x74);
        out.extend_from_slice(&(utf.len() as u16).to_be_bytes());
    } else {
        out.push(0x7c);
        out.extend_from_slice(&(utf.len() as u64).to_be_bytes());
    }
    out.extend_from_slice(&utf);
    out
}

/// `s` cut to at most `max` UTF-16 units (Java's `String.length()`), never inside a character;
/// `None` when it is not longer.
pub fn truncate(s: &str, max: usize) -> Option<&str> {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        units += c.len_utf16();
        if units > max {
            return Some(&s[..i]);
        }
    }
    None
}

/// Parses Debezium's `message.key.columns`: `<table regex>:<c1>,<c2>;<table regex>:<c3>`
/// (table regexes anchored, on `schema.table`).
pub fn parse_key_columns(
    text: &str,
) -> Result<Vec<(sluice_engine::config::AnchoredRegex, Vec<String>)>, String> {
    let mut out = Vec::new();
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (table, columns) = part.rsplit_once(':').ok_or_else(|| {
            format!("`{part}` should be `<schema.table regex>:<column>,<column>`")
        })?;
        let regex = sluice_engine::config::AnchoredRegex::new(table.trim())?;
        let columns: Vec<String> = columns
            .split(',')
            .map(|c| c.trim().to_owned())
            .filter(|c| !c.is_empty())
            .collect();
        if columns.is_empty() {
            return Err(format!("`{part}` names no column"));
        }
        out.push((regex, columns));
    }
    Ok(out)
}

/// One column's mapper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnMapper {
    /// Every value (null too) becomes this string.
    Mask(Arc<str>),
    /// Non-null values become their hash, cut to the column length when known.
    Hash(Hasher, Option<usize>),
    /// Longer values are cut to this many characters.
    Truncate(usize),
}

impl ColumnMapper {
    /// `column.mask.with.N.chars`.
    pub fn mask_chars(n: usize) -> Self {
        ColumnMapper::Mask("*".repeat(n).into())
    }

    /// The mapped value, or `None` when the value stays as it is.
    pub fn apply(&self, value: &Value) -> Option<Value> {
        match (self, value) {
            (ColumnMapper::Mask(m), _) => Some(Value::String(m.clone())),
            (ColumnMapper::Hash(h, max), Value::String(s)) => {
                Some(Value::String(h.hash_cut(s, max.unwrap_or(usize::MAX))))
            }
            (ColumnMapper::Truncate(n), Value::String(s)) => truncate(s, *n).map(Value::from),
            _ => None,
        }
    }

    /// Whether Debezium marks a column of any type this mapper's rule names (`masked`), while
    /// it maps the values of character columns only: a masked or hashed `xml`, `json` or
    /// `uuid` column keeps its values and its named schema, with `masked: "true"` added.
    pub fn marks_every_type(&self) -> bool {
        matches!(self, ColumnMapper::Mask(_) | ColumnMapper::Hash(..))
    }

    /// The schema parameter Debezium adds to a mapped column.
    pub fn parameter(&self) -> (&'static str, String) {
        match self {
            ColumnMapper::Mask(_) | ColumnMapper::Hash(..) => ("masked", "true".into()),
            ColumnMapper::Truncate(n) => ("truncateLength", n.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hashes_equal_debeziums() {
        // Values from Debezium 3.6.3 output (tests/fixtures/debezium/columns_*).
        let v1 = Hasher::new(HashAlgorithm::Sha256, HashVersion::V1, "CzQMA0cB5K");
        assert_eq!(
            v1.hash("anne@example.com"),
            "8764cc3b7c213d1ff98e382831a6b3b1bdf23d9b96712b4b6b165c245a96455b"
        );
        assert_eq!(
            v1.hash("zoë@example.com"),
            "f575ba8ee465f762c1728a44b911d171d161e04b3b787348adb6cd5f67c2fdbb"
        );
        let v2 = ColumnMapper::Hash(
            Hasher::new(HashAlgorithm::Md5, HashVersion::V2, "pepper"),
            Some(20),
        );
        assert_eq!(
            v2.apply(&Value::from("Anne")),
            Some(Value::from("e18b9fcef0a5d7dbf7d3"))
        );
        assert_eq!(v2.apply(&Value::Null), None);
    }

    #[test]
    fn modified_utf8_encodes_nul_and_supplementary_characters() {
        let s = java_serialized_string("\0😀");
        assert_eq!(
            &s[4..],
            &[0x74, 0, 8, 0xc0, 0x80, 0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80]
        );
    }

    #[test]
    fn truncation_counts_java_characters() {
        assert_eq!(truncate("ünïcødé", 4), Some("ünïc"));
        assert_eq!(truncate("abc", 3), None);
        assert_eq!(truncate("a😀b", 2), Some("a"));
    }

    proptest! {
        #[test]
        fn masking_depends_on_nothing_but_the_mask(a in ".*", b in ".*", n in 0usize..40) {
            let m = ColumnMapper::mask_chars(n);
            prop_assert_eq!(m.apply(&Value::from(a.as_str())), m.apply(&Value::from(b.as_str())));
            prop_assert_eq!(m.apply(&Value::Null), Some(Value::from("*".repeat(n).as_str())));
        }

        #[test]
        fn truncation_is_idempotent_and_never_lengthens(s in ".*", n in 0usize..20) {
            let once = truncate(&s, n).unwrap_or(&s);
            prop_assert!(once.len() <= s.len());
            prop_assert!(once.encode_utf16().count() <= n || once == s);
            prop_assert_eq!(truncate(once, n), None);
        }

        #[test]
        fn the_same_input_and_salt_give_the_same_pseudonym(s in ".*", salt in "[a-z]{0,8}") {
            let h = Hasher::new(HashAlgorithm::Sha512, HashVersion::V1, &salt);
            prop_assert_eq!(h.hash(&s), h.hash(&s));
            prop_assert_eq!(h.hash(&s).len(), 128);
        }
    }
}
