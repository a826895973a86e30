//! Helpers shared by the transforms: reading a Debezium envelope, naming the table an event
//! belongs to, and caching per-schema plans so that unchanged events cost a pointer lookup.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_engine::{ChangeEvent, Schema, Struct, Value};

/// The most distinct schemas a cache keeps before it starts over.
const CACHE_LIMIT: usize = 4096;

/// Plans computed once per value schema (events of one table share one `Arc<Schema>`).
#[derive(Debug)]
pub struct SchemaCache<T> {
    plans: HashMap<usize, (Arc<Schema>, T)>,
}

impl<T> Default for SchemaCache<T> {
    fn default() -> Self {
        SchemaCache {
            plans: HashMap::new(),
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
        let (_, values) = std::mem::replace(s, Struct::new(schema.clone())).into_parts();
        if let Some(rebuilt) = Struct::from_values(schema.clone(), values) {
            *s = rebuilt;
        }
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
