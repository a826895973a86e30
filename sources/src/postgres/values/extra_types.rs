//! Values of the PostgreSQL types whose Debezium form is not their text: bit strings
//! (`io.debezium.data.Bits`), points (`io.debezium.data.geometry.Point`) and `hstore` (a JSON
//! object string or a Connect map, in the order Debezium's `HashMap` gives its keys).

use sluice_engine::Value;

/// A bit string's text (`101`) → the bytes Debezium emits (`java.util.BitSet.toByteArray`):
/// little-endian, the last bit of the text is bit 0, no trailing zero bytes (all zeros give
/// none at all).
pub(crate) fn bits(text: &str) -> Option<Vec<u8>> {
    let b = text.as_bytes();
    let mut out = vec![0u8; b.len().div_ceil(8)];
    for (i, &c) in b.iter().rev().enumerate() {
        match c {
            b'1' => out[i / 8] |= 1 << (i % 8),
            b'0' => {}
            _ => return None,
        }
    }
    while out.last() == Some(&0) {
        out.pop();
    }
    Some(out)
}

/// A `point`'s text `(x,y)` → its coordinates.
pub(crate) fn point(text: &str) -> Option<(f64, f64)> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    let (x, y) = inner.split_once(',')?;
    Some((x.trim().parse().ok()?, y.trim().parse().ok()?))
}

/// An `hstore`'s text (`"a"=>"1", "b"=>NULL`) → its pairs in text order.
pub(crate) fn hstore(text: &str) -> Option<Vec<(String, Option<String>)>> {
    let mut chars = text.chars().peekable();
    let mut pairs = Vec::new();
    let skip_spaces = |c: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        while c.peek().is_some_and(|c| c.is_whitespace()) {
            c.next();
        }
    };
    fn item(c: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<Option<String>> {
        let mut out = String::new();
        if c.peek() == Some(&'"') {
            c.next();
            loop {
                match c.next()? {
                    '\\' => out.push(c.next()?),
                    '"' => return Some(Some(out)),
                    ch => out.push(ch),
                }
            }
        }
        while let Some(&ch) = c.peek() {
            if ch == ',' || ch == '=' || ch.is_whitespace() {
                break;
            }
            out.push(ch);
            c.next();
        }
        if out.is_empty() {
            return None;
        }
        Some((out != "NULL").then_some(out))
    }
    loop {
        skip_spaces(&mut chars);
        if chars.peek().is_none() {
            return Some(pairs);
        }
        let key = item(&mut chars)??;
        skip_spaces(&mut chars);
        if chars.next()? != '=' || chars.next()? != '>' {
            return None;
        }
        skip_spaces(&mut chars);
        let value = item(&mut chars)?;
        pairs.push((key, value));
        skip_spaces(&mut chars);
        match chars.next() {
            Some(',') => continue,
            None => return Some(pairs),
            Some(_) => return None,
        }
    }
}

/// Java's `String.hashCode` (over UTF-16 code units).
fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
}

/// Puts `pairs` (distinct keys, in insertion order) in the order a `java.util.HashMap` of
/// default capacity iterates them: by bucket of the final table, insertion order within a
/// bucket. Debezium reads an `hstore` into such a map, so its JSON and map forms list keys
/// in this order. (A bucket of more than 8 keys, which Java turns into a tree, is not
/// modelled: its keys keep insertion order.)
pub(crate) fn java_hash_map_order<V>(pairs: Vec<(String, V)>) -> Vec<(String, V)> {
    let mut capacity = 16usize;
    while pairs.len() > capacity / 4 * 3 {
        capacity *= 2;
    }
    let mut keyed: Vec<(usize, usize, (String, V))> = pairs
        .into_iter()
        .enumerate()
        .map(|(i, pair)| {
            let h = java_hash(&pair.0) as u32;
            let spread = (h ^ (h >> 16)) as usize;
            (spread & (capacity - 1), i, pair)
        })
        .collect();
    keyed.sort_by_key(|(bucket, i, _)| (*bucket, *i));
    keyed.into_iter().map(|(_, _, pair)| pair).collect()
}

/// An `hstore` as Debezium's `hstore.handling.mode: json` writes it: a compact JSON object
/// (Jackson's escaping).
pub(crate) fn hstore_json(pairs: &[(String, Option<String>)]) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_string(k, &mut out);
        out.push(':');
        match v {
            Some(v) => json_string(v, &mut out),
            None => out.push_str("null"),
        }
    }
    out.push('}');
    out
}

/// A JSON string as Jackson writes it by default: `"` and `\` escaped, control characters as
/// short escapes or `\u00XX`, everything else raw.
fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// An `hstore` as a Connect map (`hstore.handling.mode: map`).
pub(crate) fn hstore_map(pairs: Vec<(String, Option<String>)>) -> Value {
    Value::Map(
        pairs
            .into_iter()
            .map(|(k, v)| (Value::from(k), v.map_or(Value::Null, Value::from)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bits_are_little_endian_without_trailing_zero_bytes() {
        assert_eq!(bits("101"), Some(vec![0x05]));
        assert_eq!(bits("10101010101010101010"), Some(vec![0xaa, 0xaa, 0x0a]));
        assert_eq!(bits("000"), Some(vec![]));
        assert_eq!(bits(""), Some(vec![]));
        assert_eq!(bits("00000000000000000001"), Some(vec![0x01]));
        assert_eq!(bits("10000000"), Some(vec![0x80]));
        assert_eq!(bits("12"), None);
    }

    #[test]
    fn points_and_their_wkb() {
        assert_eq!(point("(1.5,-2.25)"), Some((1.5, -2.25)));
        assert_eq!(point("(1.5"), None);
    }

    #[test]
    fn hstore_text_parses_with_quotes_escapes_and_nulls() {
        let pairs = hstore(r#""a"=>"1", "b c"=>NULL, "d"=>"x\"y""#).unwrap();
        assert_eq!(
            pairs,
            vec![
                ("a".into(), Some("1".into())),
                ("b c".into(), None),
                ("d".into(), Some("x\"y".into())),
            ]
        );
        assert_eq!(hstore(""), Some(vec![]));
        assert_eq!(hstore(r#""a"=>"1" x"#), None);
        assert_eq!(hstore(r#""a"=>"#), None);
    }

    #[test]
    fn keys_come_in_java_hash_map_order() {
        // Debezium 3.6.3 wrote {"a":"1","d":"x\"y","b c":null} for PostgreSQL's text below;
        // in a map of 16 buckets, `d` and `b c` share bucket 4 and keep their order.
        let pairs = hstore(r#""a"=>"1", "d"=>"x\"y", "b c"=>NULL"#).unwrap();
        assert_eq!(
            hstore_json(&java_hash_map_order(pairs)),
            r#"{"a":"1","d":"x\"y","b c":null}"#
        );
        assert_eq!(java_hash("b c"), 95_269);
        assert_eq!(java_hash("😀"), 1_772_899);
    }

    proptest! {
        #[test]
        fn hstore_text_round_trips(pairs in proptest::collection::btree_map("[a-z \"\\\\=>,]{0,6}", proptest::option::of("[a-zA-Z0-9 \"\\\\=>,]{0,6}"), 0..6)) {
            let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
            let text: Vec<String> = pairs.iter().map(|(k, v)| format!("{}=>{}", quote(k), v.as_deref().map_or("NULL".to_owned(), quote))).collect();
            let parsed = hstore(&text.join(", ")).unwrap();
            let expected: Vec<(String, Option<String>)> = pairs.into_iter().collect();
            prop_assert_eq!(parsed, expected);
        }

        #[test]
        fn bits_round_trip(v in any::<u64>()) {
            let text = format!("{v:b}");
            let bytes = bits(&text).unwrap();
            let mut back = [0u8; 8];
            back[..bytes.len()].copy_from_slice(&bytes);
            prop_assert_eq!(u64::from_le_bytes(back), v);
        }
    }
}
