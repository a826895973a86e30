//! Configuration structs read in parts: a component's own keys and the keys of a shared part
//! (the connector kit's common source options, say) in one YAML mapping, each part denying
//! keys that belong to neither. It is what `#[serde(flatten)]` would do, without losing
//! `deny_unknown_fields` and the located, did-you-mean errors.

use serde::de::{self, Deserialize, Visitor};

use super::node::{ConfigError, Node, NodeDeserializer};

/// The keys a struct reads (its serde field names, renames applied).
pub fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut fields));
    fields
}

/// Reads `node` as two structs that share its keys: `A` gets the keys `B` does not name and
/// `B` those `A` does not name; a key neither names is an error of `A`'s. `skip` as
/// [`NodeDeserializer::skipping`].
pub fn from_node_parts<'de, A, B>(node: &Node, skip: &[&str]) -> Result<(A, B), ConfigError>
where
    A: Deserialize<'de>,
    B: Deserialize<'de>,
{
    let all: Vec<&str> = fields_of::<A>()
        .iter()
        .chain(fields_of::<B>())
        .copied()
        .collect();
    let mut for_a: Vec<&str> = skip.to_vec();
    for_a.extend(fields_of::<B>());
    let a = A::deserialize(NodeDeserializer::skipping(node, &for_a))
        .map_err(|e| e.among_fields(&all))?;
    let mut for_b: Vec<&str> = skip.to_vec();
    for_b.extend(fields_of::<A>());
    let b = B::deserialize(NodeDeserializer::skipping(node, &for_b))
        .map_err(|e| e.among_fields(&all))?;
    Ok((a, b))
}

/// A deserializer that only records the fields a struct asks for.
struct FieldNames<'a>(&'a mut &'static [&'static str]);

#[derive(Debug)]
struct Recorded;

impl std::fmt::Display for Recorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field names recorded")
    }
}

impl std::error::Error for Recorded {}

impl de::Error for Recorded {
    fn custom<T: std::fmt::Display>(_msg: T) -> Self {
        Recorded
    }
}

impl<'de> de::Deserializer<'de> for FieldNames<'_> {
    type Error = Recorded;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Recorded> {
        Err(Recorded)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Recorded> {
        *self.0 = fields;
        Err(Recorded)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Own {
        #[serde(rename = "slot.name")]
        slot: String,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Common {
        #[serde(rename = "topic.prefix")]
        prefix: String,
        #[serde(rename = "tombstones.on.delete", default)]
        tombstones: bool,
    }

    fn parse(text: &str) -> Node {
        serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn two_parts_share_one_mapping() {
        assert_eq!(
            fields_of::<Common>(),
            ["topic.prefix", "tombstones.on.delete"]
        );
        let node = parse("type: x\nslot.name: s\ntopic.prefix: p\n");
        let parts: (Own, Common) =
            from_node_parts(&node, &["type"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parts.0.slot, "s");
        assert_eq!(parts.1.prefix, "p");
        let typo = parse("slot.name: s\ntopic.prefix: p\ntopic.prefx: q\n");
        let e = from_node_parts::<Own, Common>(&typo, &[]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("3:1: `topic.prefx`: unknown field"),
            "{e}"
        );
    }
}
