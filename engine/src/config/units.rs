//! Human-friendly scalar types for configuration: durations, byte sizes, regexes.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A duration written `500ms`, `30s`, `5m`, `1h`, `1d`, or a bare integer of milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DurationSpec(pub Duration);

impl DurationSpec {
    /// Parses the textual form.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (digits, unit) = t.split_at(split);
        let n: u64 = digits.parse().map_err(|_| {
            format!("invalid duration `{text}`: expected a number and a unit such as 500ms, 30s, 5m, 1h")
        })?;
        let ms = match unit.trim() {
            "" | "ms" => Some(n),
            "s" => n.checked_mul(1_000),
            "m" | "min" => n.checked_mul(60_000),
            "h" => n.checked_mul(3_600_000),
            "d" => n.checked_mul(86_400_000),
            other => {
                return Err(format!(
                    "invalid duration `{text}`: unknown unit `{other}` (use ms, s, m, h or d)"
                ))
            }
        }
        .ok_or_else(|| format!("invalid duration `{text}`: too large"))?;
        Ok(DurationSpec(Duration::from_millis(ms)))
    }
}

impl fmt::Display for DurationSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0.as_millis())
    }
}

impl<'de> Deserialize<'de> for DurationSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DurationSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 500ms, 30s, 5m")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<DurationSpec, E> {
                Ok(DurationSpec(Duration::from_millis(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<DurationSpec, E> {
                u64::try_from(v)
                    .map(|v| DurationSpec(Duration::from_millis(v)))
                    .map_err(|_| E::custom(format!("invalid duration `{v}`: must not be negative")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DurationSpec, E> {
                DurationSpec::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A byte size written `64MiB`, `512KB`, `1G`, or a bare integer of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// Parses the textual form (`k`/`KB`/`KiB`... are powers of 1024 or 1000 as spelled).
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (digits, unit) = t.split_at(split);
        let n: u64 = digits.parse().map_err(|_| {
            format!(
                "invalid size `{text}`: expected a number and a unit such as 512KiB, 64MiB, 1GiB"
            )
        })?;
        let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kib" => 1 << 10,
            "kb" => 1_000,
            "m" | "mib" => 1 << 20,
            "mb" => 1_000_000,
            "g" | "gib" => 1 << 30,
            "gb" => 1_000_000_000,
            other => {
                return Err(format!(
                "invalid size `{text}`: unknown unit `{other}` (use B, KiB, MiB, GiB, KB, MB, GB)"
            ))
            }
        };
        n.checked_mul(factor)
            .map(ByteSize)
            .ok_or_else(|| format!("invalid size `{text}`: too large"))
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as 64MiB")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("invalid size `{v}`: must not be negative")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                ByteSize::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A regular expression, compiled while the configuration is read and anchored at both ends
/// (Debezium's include/exclude lists match whole names).
#[derive(Debug, Clone)]
pub struct AnchoredRegex {
    source: String,
    regex: regex::Regex,
}

impl AnchoredRegex {
    /// Compiles `pattern` anchored as `^(?:pattern)$`.
    pub fn new(pattern: &str) -> Result<Self, String> {
        regex::Regex::new(&format!("^(?:{pattern})$"))
            .map(|regex| AnchoredRegex {
                source: pattern.to_owned(),
                regex,
            })
            .map_err(|e| {
                let detail = e.to_string();
                let last = detail.lines().last().unwrap_or("invalid").trim();
                let last = last.strip_prefix("error: ").unwrap_or(last).to_owned();
                format!("invalid regex `{pattern}`: {last}")
            })
    }
    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }
    /// Whether the whole `text` matches.
    pub fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }
    /// The compiled regex (anchored).
    pub fn regex(&self) -> &regex::Regex {
        &self.regex
    }
}

impl<'de> Deserialize<'de> for AnchoredRegex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        AnchoredRegex::new(&s).map_err(de::Error::custom)
    }
}

/// A secret (a password): readable by the code that needs it, never printed by `Debug`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret(s)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Whether a client property holds a secret: its value is never printed.
pub fn is_secret_property(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password")
        || k.contains("secret")
        || k.contains("token")
        || k.starts_with("sasl.")
        || k.starts_with("ssl.key.")
        || k.contains("user.info")
        || k.contains("credentials")
}

/// Client properties passed through to a library (librdkafka's producer and consumer settings):
/// `Debug` prints the values of secret-bearing keys ([`is_secret_property`]) as `***`.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Properties(pub std::collections::BTreeMap<String, String>);

impl std::ops::Deref for Properties {
    type Target = std::collections::BTreeMap<String, String>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Properties {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl FromIterator<(String, String)> for Properties {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        Properties(iter.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a Properties {
    type Item = (&'a String, &'a String);
    type IntoIter = std::collections::btree_map::Iter<'a, String, String>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl fmt::Debug for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, v)| {
                let shown: &str = if is_secret_property(k) { "***" } else { v };
                (k, shown)
            }))
            .finish()
    }
}

/// A comma-separated list of anchored regexes (Debezium's include/exclude lists), also accepted
/// as a YAML list.
#[derive(Debug, Clone, Default)]
pub struct RegexList(pub Vec<AnchoredRegex>);

impl RegexList {
    /// Whether any pattern matches `text`.
    pub fn matches(&self, text: &str) -> bool {
        self.0.iter().any(|r| r.is_match(text))
    }
    /// True when the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'de> Deserialize<'de> for RegexList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            One(String),
            Many(Vec<String>),
        }
        let items = match Form::deserialize(d)? {
            Form::One(s) => split_list(&s),
            Form::Many(v) => v,
        };
        items
            .iter()
            .map(|p| AnchoredRegex::new(p.trim()).map_err(serde::de::Error::custom))
            .collect::<Result<_, _>>()
            .map(RegexList)
    }
}

/// Splits a Debezium list on commas that are not escaped or inside `{m,n}` quantifiers.
pub fn split_list(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    for c in s.chars() {
        match c {
            '{' => {
                depth += 1;
                cur.push(c);
            }
            '}' => {
                depth = depth.saturating_sub(1);
                cur.push(c);
            }
            ',' if depth == 0 => {
                if !cur.trim().is_empty() {
                    out.push(cur.trim().to_owned());
                }
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(
            DurationSpec::parse("500ms").map(|d| d.0),
            Ok(Duration::from_millis(500))
        );
        assert_eq!(
            DurationSpec::parse("30s").map(|d| d.0),
            Ok(Duration::from_secs(30))
        );
        assert_eq!(
            DurationSpec::parse("2m").map(|d| d.0),
            Ok(Duration::from_secs(120))
        );
        assert_eq!(
            DurationSpec::parse("250").map(|d| d.0),
            Ok(Duration::from_millis(250))
        );
        assert!(DurationSpec::parse("fast").is_err());
        assert!(DurationSpec::parse("5 parsecs").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(ByteSize::parse("64MiB").map(|s| s.0), Ok(64 << 20));
        assert_eq!(ByteSize::parse("1kb").map(|s| s.0), Ok(1000));
        assert_eq!(ByteSize::parse("4096").map(|s| s.0), Ok(4096));
        assert!(ByteSize::parse("lots").is_err());
        assert!(ByteSize::parse("3 parsecs").is_err());
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let s = Secret::from("hunter2".to_owned());
        assert_eq!(format!("{s:?}"), "Secret(***)");
        let p: Properties = [
            ("sasl.password", "hunter2"),
            ("ssl.key.password", "hunter3"),
            ("sasl.jaas.config", "hunter4"),
            ("basic.auth.user.info", "u:hunter5"),
            ("linger.ms", "5"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let shown = format!("{p:?}");
        assert!(!shown.contains("hunter"), "{shown}");
        assert!(shown.contains(r#""linger.ms": "5""#), "{shown}");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn regexes_are_anchored() {
        let r = AnchoredRegex::new("public\\.cust.*");
        assert!(r.as_ref().is_ok_and(|r| r.is_match("public.customers")));
        assert!(r.as_ref().is_ok_and(|r| !r.is_match("xpublic.customers")));
        assert!(AnchoredRegex::new("(unclosed").is_err());
    }
}
