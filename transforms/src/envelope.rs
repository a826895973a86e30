//! Helpers shared by the transforms: reading a Debezium envelope, naming the table an event
//! belongs to, and caching per-schema plans so that unchanged events cost a pointer lookup.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_engine::event::SchemaBuilder;
use sluice_engine::{ChangeEvent, Schema, Struct, Value};

/// The most distinct schemas a cache keeps before it starts over.
const CACHE_LIMIT: usize = 4096;

/// Hashes schema addresses (already unique) with one multiplication.
#[derive(Debug, Default, Clone, Copy)]
pub struct PtrHasher(u64);

impl std::hash::Hasher for PtrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type PtrMap<V> = HashMap<usize, V, std::hash::BuildHasherDefault<PtrHasher>>;

/// Plans computed once per value schema (events of one table share one `Arc<Schema>`).
#[derive(Debug)]
pub struct SchemaCache<T> {
    plans: PtrMap<(Arc<Schema>, T)>,
}

impl<T> Default for SchemaCache<T> {
    fn default() -> Self {
        SchemaCache {
            plans: PtrMap::default(),
        }
    }
}

impl<T> SchemaCache<T> {
    /// The plan for `schema`, computed by `make` the first time.
    pub fn get_or_insert(&mut self, schema: &Arc<Schema>, make: impl FnOnce() -> T) -> &T {
        let id = Arc::as_ptr(schema) as usize;
        if self.plans.len() >= CACHE_LIMIT && !self.plans.contains_key(&id) {
            self.plans.clear();
        }
        // The Arc kept beside the plan keeps the address from being reused.
        &self
            .plans
            .entry(id)
            .or_insert_with(|| (schema.clone(), make()))
            .1
    }
}

/// Whether a value schema is a Debezium change envelope.
pub fn is_envelope(schema: &Schema) -> bool {
    schema.name().is_some_and(|n| n.ends_with(".Envelope"))
        && schema.field("op").is_some()
        && schema.field("after").is_some()
}

/// A builder for envelope `schema` whose `before` and `after` have schema `row` instead.
pub fn with_row(schema: &Schema, row: &Arc<Schema>) -> SchemaBuilder {
    let mut b = schema.to_builder().clear_fields();
    for f in schema.fields() {
        let s = if matches!(&*f.name, "before" | "after") {
            row.clone()
        } else {
            f.schema.clone()
        };
        b = b.field(f.name.clone(), s);
    }
    b
}

/// The envelope struct of an event, if its value is one.
pub fn envelope(event: &ChangeEvent) -> Option<&Struct> {
    let record = event.value.as_ref()?;
    if !is_envelope(&record.schema) {
        return None;
    }
    record.value.as_struct()
}

/// `schema.table` of an event: from the `source` block (`schema` or, failing that, `db`, and
/// `table`), else the last two parts of the topic.
pub fn table_name(event: &ChangeEvent) -> Option<String> {
    let text = |f: &str| event.source_field(f).and_then(Value::as_str);
    if let Some(table) = text("table") {
        let schema = text("schema").or_else(|| text("db")).unwrap_or_default();
        return Some(format!("{schema}.{table}"));
    }
    let mut parts = event.topic.rsplit('.');
    let table = parts.next()?;
    let schema = parts.next()?;
    Some(format!("{schema}.{table}"))
}

/// A struct value under a new schema with the same fields (parameters or names changed).
pub fn reschema(value: &mut Value, schema: &Arc<Schema>) {
    if let Value::Struct(s) = value {
        s.set_schema(schema.clone());
    }
}

/// A Connect value as text (headers, predicates): strings as they are, numbers and booleans
/// in their usual form; `None` for null and for structured values.
pub fn value_text(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => return None,
        Value::Boolean(b) => b.to_string(),
        Value::Int8(v) => v.to_string(),
        Value::Int16(v) => v.to_string(),
        Value::Int32(v) => v.to_string(),
        Value::Int64(v) => v.to_string(),
        Value::Float32(v) => v.to_string(),
        Value::Float64(v) => v.to_string(),
        Value::String(s) => s.to_string(),
        _ => return None,
    })
}

/// Java's `Matcher.replaceAll` replacement syntax (`$1`, `${name}`, `\$`) in the `regex`
/// crate's syntax: `$1_x` means group 1 then `_x` in Java, but a group named `1_x` here.
pub fn java_replacement(replacement: &str, groups: usize) -> String {
    let chars: Vec<char> = replacement.chars().collect();
    let mut out = String::with_capacity(replacement.len() + 4);
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                if chars[i + 1] == '$' {
                    out.push_str("$$");
                } else {
                    out.push(chars[i + 1]);
                }
                i += 2;
            }
            '$' if i + 1 < chars.len() && chars[i + 1].is_ascii_digit() => {
                // The first digit always belongs to the reference; more digits only while the
                // number stays a valid group.
                let mut n = chars[i + 1].to_digit(10).unwrap_or(0) as usize;
                let mut j = i + 2;
                while j < chars.len() {
                    let Some(d) = chars[j].to_digit(10) else {
                        break;
                    };
                    let next = n * 10 + d as usize;
                    if next >= groups {
                        break;
                    }
                    n = next;
                    j += 1;
                }
                out.push_str(&format!("${{{n}}}"));
                i = j;
            }
            '$' if i + 1 < chars.len() && chars[i + 1] == '{' => {
                let end = chars[i..].iter().position(|c| *c == '}').map(|p| p + i);
                match end {
                    Some(end) => {
                        out.extend(&chars[i..=end]);
                        i = end + 1;
                    }
                    None => {
                        out.push_str("$$");
                        i += 1;
                    }
                }
            }
            '$' => {
                out.push_str("$$");
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::java_replacement;

    #[test]
    fn java_group_references_become_braced() {
        assert_eq!(java_replacement("$1_all", 2), "${1}_all");
        assert_eq!(java_replacement("all.$1s", 2), "all.${1}s");
        assert_eq!(java_replacement("$12", 13), "${12}");
        assert_eq!(java_replacement("$12", 3), "${1}2");
        assert_eq!(java_replacement("${name}-x", 2), "${name}-x");
        assert_eq!(java_replacement("cost \\$5", 1), "cost $$5");
    }
}
