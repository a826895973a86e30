//! A YAML document as a tree of located nodes, and a serde `Deserializer` over it.
//!
//! Parsing first builds the [`Node`] tree with serde-saphyr (which also performs `${VAR}`
//! interpolation), keeping the line and column of every node. Typed configuration is then
//! deserialized from the tree by [`NodeDeserializer`], which attaches the location and the key path
//! of the innermost failing node to every error. Tagged components (`type: file`) are dispatched
//! by [`Node::tag`] without serde's buffering, so their errors stay located too.

use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// Line and column (1-based) of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Loc {
    /// Line, 1-based (0 when unknown).
    pub line: u64,
    /// Column, 1-based (0 when unknown).
    pub column: u64,
}

/// A located YAML node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Where the node starts.
    pub loc: Loc,
    /// What it holds.
    pub kind: NodeKind,
}

/// The content of a node.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// `~`, `null` or nothing.
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer too large for `i64`.
    UInt(u64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in document order.
    Map(Vec<(Node, Node)>),
}

impl NodeKind {
    fn describe(&self) -> &'static str {
        match self {
            NodeKind::Null => "null",
            NodeKind::Bool(_) => "a boolean",
            NodeKind::Int(_) | NodeKind::UInt(_) => "an integer",
            NodeKind::Float(_) => "a number",
            NodeKind::Str(_) => "a string",
            NodeKind::Seq(_) => "a list",
            NodeKind::Map(_) => "a mapping",
        }
    }
}

impl Node {
    /// The scalar as text (numbers and booleans in their usual spelling).
    pub fn as_text(&self) -> Option<String> {
        Some(match &self.kind {
            NodeKind::Str(s) => s.clone(),
            NodeKind::Int(i) => i.to_string(),
            NodeKind::UInt(u) => u.to_string(),
            NodeKind::Float(f) => f.to_string(),
            NodeKind::Bool(b) => b.to_string(),
            _ => return None,
        })
    }

    /// The entries of a mapping.
    pub fn entries(&self) -> Option<&[(Node, Node)]> {
        match &self.kind {
            NodeKind::Map(entries) => Some(entries),
            _ => None,
        }
    }

    /// A mapping's value by key.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entries()?
            .iter()
            .find(|(k, _)| matches!(&k.kind, NodeKind::Str(s) if s == key))
            .map(|(_, v)| v)
    }

    /// The string value of the `key` entry of a mapping (`type` for components), with errors
    /// for a non-mapping, a missing key or a non-string value.
    pub fn tag(&self, key: &str, what: &str) -> Result<(&str, &Node), ConfigError> {
        if self.entries().is_none() {
            return Err(ConfigError::at(
                self.loc,
                format!(
                    "expected {what} as a mapping with a `{key}`, found {}",
                    self.kind.describe()
                ),
            ));
        }
        let value = self.get(key).ok_or_else(|| {
            ConfigError::at(
                self.loc,
                format!("{what} has no `{key}`: add `{key}: <kind>`"),
            )
        })?;
        match &value.kind {
            NodeKind::Str(s) => Ok((s.as_str(), value)),
            // `type: null` is YAML's null; read it as the word (the `null` sink).
            NodeKind::Null => Ok(("null", value)),
            other => Err(ConfigError::at(
                value.loc,
                format!("`{key}` must be a string, found {}", other.describe()),
            )
            .with_path(key)),
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned: serde_saphyr::Spanned<NodeKind> =
            serde_saphyr::Spanned::deserialize(deserializer)?;
        Ok(Node {
            loc: Loc {
                line: spanned.referenced.line(),
                column: spanned.referenced.column(),
            },
            kind: spanned.value,
        })
    }
}

impl<'de> Deserialize<'de> for NodeKind {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KindVisitor)
    }
}

struct KindVisitor;

impl<'de> Visitor<'de> for KindVisitor {
    type Value = NodeKind;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<NodeKind, E> {
        Ok(NodeKind::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<NodeKind, E> {
        Ok(NodeKind::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<NodeKind, E> {
        Ok(i64::try_from(v).map_or(NodeKind::UInt(v), NodeKind::Int))
    }
    fn visit_f64<E>(self, v: f64) -> Result<NodeKind, E> {
        Ok(NodeKind::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<NodeKind, E> {
        Ok(NodeKind::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<NodeKind, E> {
        Ok(NodeKind::Str(v))
    }
    fn visit_unit<E>(self) -> Result<NodeKind, E> {
        Ok(NodeKind::Null)
    }
    fn visit_none<E>(self) -> Result<NodeKind, E> {
        Ok(NodeKind::Null)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<NodeKind, D::Error> {
        NodeKind::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeKind, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(NodeKind::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeKind, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Node>()? {
            let value = map.next_value::<Node>()?;
            entries.push((key, value));
        }
        Ok(NodeKind::Map(entries))
    }
}

/// A configuration error at a place in the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Where, when known.
    pub loc: Option<Loc>,
    /// Key path from the root, outermost first (`sinks[1].path`).
    pub path: Vec<String>,
    /// What is wrong and what was expected.
    pub message: String,
}

impl ConfigError {
    /// An error at a location.
    pub fn at(loc: Loc, message: impl Into<String>) -> Self {
        ConfigError {
            loc: Some(loc),
            path: Vec::new(),
            message: message.into(),
        }
    }

    /// Prefixes a path segment (used while the error travels outwards).
    pub fn with_path(mut self, segment: impl Into<String>) -> Self {
        self.path.insert(0, segment.into());
        self
    }

    /// For an unknown-key error of one part of a block read in parts
    /// ([`from_node_parts`](super::from_node_parts)): the hint and the expected keys come from
    /// all the block's keys, `fields`, not the part's alone.
    pub fn among_fields(mut self, fields: &[&str]) -> Self {
        let Some(rest) = self.message.strip_prefix("unknown field `") else {
            return self;
        };
        let Some((field, _)) = rest.split_once('`') else {
            return self;
        };
        let field = field.to_owned();
        let expected = fields
            .iter()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(", ");
        self.message = match super::load::did_you_mean(&field, fields) {
            Some(best) => {
                format!(
                    "unknown field `{field}` (did you mean `{best}`?), expected one of {expected}"
                )
            }
            None => format!("unknown field `{field}`, expected one of {expected}"),
        };
        self
    }

    fn located(mut self, loc: Loc) -> Self {
        if self.loc.is_none() {
            self.loc = Some(loc);
        }
        self
    }

    /// The key path as `a.b[2].c`.
    pub fn path_string(&self) -> String {
        let mut out = String::new();
        for seg in &self.path {
            if seg.starts_with('[') || out.is_empty() {
                out.push_str(seg);
            } else {
                out.push('.');
                out.push_str(seg);
            }
        }
        out
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(loc) = self.loc {
            write!(f, "{}:{}: ", loc.line, loc.column)?;
        }
        if !self.path.is_empty() {
            write!(f, "`{}`: ", self.path_string())?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

impl de::Error for ConfigError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ConfigError {
            loc: None,
            path: Vec::new(),
            message: msg.to_string(),
        }
    }
}

/// Deserializes typed values from a [`Node`].
#[derive(Debug, Clone, Copy)]
pub struct NodeDeserializer<'a> {
    node: &'a Node,
    skip: &'a [&'a str],
}

impl<'a> NodeDeserializer<'a> {
    /// A deserializer over `node`.
    pub fn new(node: &'a Node) -> Self {
        NodeDeserializer { node, skip: &[] }
    }

    /// Ignores these keys of a mapping (keys handled by the caller, such as `type`); a key ending
    /// in `.` ignores every key with that prefix.
    pub fn skipping(node: &'a Node, skip: &'a [&'a str]) -> Self {
        NodeDeserializer { node, skip }
    }

    fn invalid(&self, expected: &str) -> ConfigError {
        let found = match &self.node.kind {
            NodeKind::Int(_) | NodeKind::UInt(_) | NodeKind::Float(_) | NodeKind::Bool(_) => {
                format!("`{}`", self.node.as_text().unwrap_or_default())
            }
            other => other.describe().to_owned(),
        };
        ConfigError::at(self.node.loc, format!("expected {expected}, found {found}"))
    }

    fn text(&self) -> Option<String> {
        self.node.as_text()
    }
}

/// Deserializes `T` from a node.
pub fn from_node<'de, T: Deserialize<'de>>(node: &Node) -> Result<T, ConfigError> {
    T::deserialize(NodeDeserializer::new(node))
}

macro_rules! lenient_number {
    ($method:ident, $visit:ident, $ty:ty, $what:expr) => {
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
            let parsed: Option<$ty> = match &self.node.kind {
                NodeKind::Int(i) => <$ty>::try_from(*i).ok(),
                NodeKind::UInt(u) => <$ty>::try_from(*u).ok(),
                NodeKind::Str(s) => s.trim().parse().ok(),
                _ => None,
            };
            match parsed {
                Some(v) => visitor
                    .$visit(v)
                    .map_err(|e: ConfigError| e.located(self.node.loc)),
                None => Err(self.invalid($what)),
            }
        }
    };
}

impl<'de> de::Deserializer<'de> for NodeDeserializer<'_> {
    type Error = ConfigError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        let loc = self.node.loc;
        let result = match &self.node.kind {
            NodeKind::Null => visitor.visit_unit(),
            NodeKind::Bool(b) => visitor.visit_bool(*b),
            NodeKind::Int(i) => visitor.visit_i64(*i),
            NodeKind::UInt(u) => visitor.visit_u64(*u),
            NodeKind::Float(f) => visitor.visit_f64(*f),
            NodeKind::Str(s) => visitor.visit_str(s),
            NodeKind::Seq(items) => visitor.visit_seq(NodeSeq {
                items: items.iter(),
                index: 0,
            }),
            NodeKind::Map(entries) => visitor.visit_map(NodeMap {
                entries: entries.iter(),
                skip: self.skip,
                value: None,
            }),
        };
        result.map_err(|e| e.located(loc))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        let parsed = match &self.node.kind {
            NodeKind::Bool(b) => Some(*b),
            NodeKind::Str(s) => match s.as_str() {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            },
            _ => None,
        };
        match parsed {
            Some(b) => visitor.visit_bool(b),
            None => Err(self.invalid("true or false")),
        }
    }

    lenient_number!(deserialize_i8, visit_i8, i8, "an integer from -128 to 127");
    lenient_number!(deserialize_i16, visit_i16, i16, "an integer (16 bits)");
    lenient_number!(deserialize_i32, visit_i32, i32, "an integer (32 bits)");
    lenient_number!(deserialize_i64, visit_i64, i64, "an integer");
    lenient_number!(deserialize_u8, visit_u8, u8, "an integer from 0 to 255");
    lenient_number!(
        deserialize_u16,
        visit_u16,
        u16,
        "a non-negative integer (16 bits)"
    );
    lenient_number!(
        deserialize_u32,
        visit_u32,
        u32,
        "a non-negative integer (32 bits)"
    );
    lenient_number!(deserialize_u64, visit_u64, u64, "a non-negative integer");

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        let parsed = match &self.node.kind {
            NodeKind::Float(f) => Some(*f),
            NodeKind::Int(i) => Some(*i as f64),
            NodeKind::UInt(u) => Some(*u as f64),
            NodeKind::Str(s) => s.trim().parse().ok(),
            _ => None,
        };
        match parsed {
            Some(f) => visitor.visit_f64(f),
            None => Err(self.invalid("a number")),
        }
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        match self.text() {
            Some(s) => visitor
                .visit_string(s)
                .map_err(|e: ConfigError| e.located(self.node.loc)),
            None => Err(self.invalid("a string")),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        match self.node.kind {
            NodeKind::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        match self.node.kind {
            NodeKind::Null => visitor.visit_unit(),
            _ => Err(self.invalid("null")),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ConfigError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ConfigError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        match &self.node.kind {
            NodeKind::Seq(_) => self.deserialize_any(visitor),
            _ => Err(self.invalid("a list")),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, ConfigError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, ConfigError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        match &self.node.kind {
            NodeKind::Map(_) => self.deserialize_any(visitor),
            _ => Err(self.invalid("a mapping")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ConfigError> {
        match &self.node.kind {
            NodeKind::Map(_) => self.deserialize_any(visitor),
            // An empty block (`null:` or nothing) is an empty mapping.
            NodeKind::Null => visitor
                .visit_map(NodeMap {
                    entries: [].iter(),
                    skip: &[],
                    value: None,
                })
                .map_err(|e| e.located(self.node.loc)),
            _ => Err(self.invalid("a mapping")),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ConfigError> {
        match self.text() {
            Some(s) if !matches!(self.node.kind, NodeKind::Map(_) | NodeKind::Seq(_)) => visitor
                .visit_enum(s.into_deserializer())
                .map_err(|e: ConfigError| e.located(self.node.loc)),
            _ => Err(self.invalid(&format!("one of {}", variants.join(", ")))),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ConfigError> {
        visitor.visit_unit()
    }
}

/// Puts a did-you-mean hint in front of serde's "unknown field `x`, expected one of ..." message.
fn hint_unknown_field(mut error: ConfigError) -> ConfigError {
    let Some(rest) = error.message.strip_prefix("unknown field `") else {
        return error;
    };
    let Some((field, expected)) = rest.split_once('`') else {
        return error;
    };
    let candidates: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    if let Some(best) = super::load::did_you_mean(field, &candidates) {
        error.message = format!("unknown field `{field}` (did you mean `{best}`?){expected}");
    }
    error
}

struct NodeSeq<'a> {
    items: std::slice::Iter<'a, Node>,
    index: usize,
}

impl<'de> SeqAccess<'de> for NodeSeq<'_> {
    type Error = ConfigError;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ConfigError> {
        let Some(item) = self.items.next() else {
            return Ok(None);
        };
        let index = self.index;
        self.index += 1;
        seed.deserialize(NodeDeserializer::new(item))
            .map(Some)
            .map_err(|e| e.located(item.loc).with_path(format!("[{index}]")))
    }
}

struct NodeMap<'a> {
    entries: std::slice::Iter<'a, (Node, Node)>,
    skip: &'a [&'a str],
    value: Option<(&'a Node, String)>,
}

impl<'de> MapAccess<'de> for NodeMap<'_> {
    type Error = ConfigError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ConfigError> {
        loop {
            let Some((key, value)) = self.entries.next() else {
                return Ok(None);
            };
            let name = key.as_text().unwrap_or_default();
            // An entry ending in `.` skips every key with that prefix (dynamic keys such as
            // Debezium's `snapshot.select.statement.overrides.<table>`).
            let skipped = self
                .skip
                .iter()
                .any(|k| *k == name || (k.ends_with('.') && name.starts_with(k)));
            if skipped {
                continue;
            }
            let result = seed.deserialize(NodeDeserializer::new(key)).map_err(|e| {
                hint_unknown_field(e)
                    .located(key.loc)
                    .with_path(name.clone())
            });
            self.value = Some((value, name));
            return result.map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, ConfigError> {
        match self.value.take() {
            Some((value, name)) => seed
                .deserialize(NodeDeserializer::new(value))
                .map_err(|e| e.located(value.loc).with_path(name)),
            None => Err(<ConfigError as de::Error>::custom(
                "value requested before key",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        size: u32,
        #[serde(default)]
        name: Option<String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        items: Vec<Inner>,
    }

    fn parse(text: &str) -> Node {
        serde_saphyr::from_str(text).unwrap_or(Node {
            loc: Loc::default(),
            kind: NodeKind::Null,
        })
    }

    #[test]
    fn unknown_key_is_located_with_its_path() {
        let node = parse("items:\n  - size: 1\n  - size: 2\n    nmae: x\n");
        let err = from_node::<Outer>(&node).err().map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(
            err.starts_with("4:5: `items[1].nmae`: unknown field `nmae`"),
            "{err}"
        );
    }

    #[test]
    fn wrong_type_is_located_at_the_value() {
        let node = parse("items:\n  - size: many\n");
        let err = from_node::<Outer>(&node).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "2:11: `items[0].size`: expected a non-negative integer (32 bits), found a string"
            )
        );
    }

    #[test]
    fn missing_field_points_at_the_mapping() {
        let node = parse("items:\n  - name: a\n");
        let err = from_node::<Outer>(&node).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("2:5: `items[0]`: missing field `size`")
        );
    }
}
