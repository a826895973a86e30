//! Typed column values, the payload half of a Kafka Connect record.

use std::sync::Arc;

use super::schema::Schema;

/// A value conforming to a [`Schema`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Null (only valid for optional schemas).
    Null,
    /// Boolean.
    Boolean(bool),
    /// int8.
    Int8(i8),
    /// int16.
    Int16(i16),
    /// int32 (also `io.debezium.time.Date`, `Time`).
    Int32(i32),
    /// int64 (also timestamps in micro/nanoseconds).
    Int64(i64),
    /// float.
    Float32(f32),
    /// double.
    Float64(f64),
    /// string (shared: constant strings such as a table name cost no copy per event).
    String(Arc<str>),
    /// bytes (also `Decimal`, as unscaled big-endian two's complement).
    Bytes(Vec<u8>),
    /// array.
    Array(Vec<Value>),
    /// map, in insertion order.
    Map(Vec<(Value, Value)>),
    /// struct.
    Struct(Struct),
}

impl Value {
    /// True for [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The struct, if this is a struct.
    pub fn as_struct(&self) -> Option<&Struct> {
        match self {
            Value::Struct(s) => Some(s),
            _ => None,
        }
    }

    /// Mutable struct access.
    pub fn as_struct_mut(&mut self) -> Option<&mut Struct> {
        match self {
            Value::Struct(s) => Some(s),
            _ => None,
        }
    }

    /// An approximation of the memory this value holds, used to bound queues in bytes: the
    /// value itself, its heap data, and an allocator overhead per heap allocation.
    pub fn estimated_size(&self) -> usize {
        std::mem::size_of::<Value>() + self.heap_size()
    }

    /// The heap part of [`Value::estimated_size`]. Scalars are counted inline, without a call
    /// per value: every event of every batch is measured.
    fn heap_size(&self) -> usize {
        const BASE: usize = std::mem::size_of::<Value>();
        const ALLOCATION: usize = 16;
        #[inline(always)]
        fn items(values: &[Value]) -> usize {
            values
                .iter()
                .map(|v| match v {
                    Value::String(s) => ALLOCATION + s.len(),
                    Value::Bytes(b) => ALLOCATION + b.capacity(),
                    Value::Array(_) | Value::Map(_) | Value::Struct(_) => v.heap_size(),
                    _ => 0,
                })
                .sum::<usize>()
                + values.len() * BASE
        }
        match self {
            Value::String(s) => ALLOCATION + s.len(),
            Value::Bytes(b) => ALLOCATION + b.capacity(),
            Value::Array(values) => ALLOCATION + items(values),
            Value::Map(entries) => {
                ALLOCATION
                    + entries
                        .iter()
                        .map(|(k, v)| k.estimated_size() + v.estimated_size())
                        .sum::<usize>()
            }
            // A shared struct's values are held once for all the events that share them.
            Value::Struct(s) if s.is_shared() => ALLOCATION,
            Value::Struct(s) => ALLOCATION + items(s.values()),
            _ => 0,
        }
    }

    /// Encodes a decimal's unscaled value as Connect does: minimal big-endian two's complement.
    pub fn decimal_bytes(unscaled: i128) -> Vec<u8> {
        let bytes = unscaled.to_be_bytes();
        let mut start = 0;
        while start < bytes.len() - 1 {
            let (b, next) = (bytes[start], bytes[start + 1]);
            let redundant = (b == 0x00 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0);
            if !redundant {
                break;
            }
            start += 1;
        }
        bytes[start..].to_vec()
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.into())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s.into())
    }
}
impl From<Arc<str>> for Value {
    fn from(s: Arc<str>) -> Self {
        Value::String(s)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int32(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int64(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Boolean(v)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// A struct value: one value per field of its schema, in schema order.
///
/// The values are either owned or shared: [`Struct::into_shared`] makes a struct that many
/// events can hold at the cost of one reference count each (a snapshot's `source` block, the
/// same for all its rows). A shared struct is copied on its first change.
#[derive(Debug, Clone)]
pub struct Struct {
    schema: Arc<Schema>,
    values: Values,
}

#[derive(Debug, Clone)]
enum Values {
    Owned(Vec<Value>),
    Shared(Arc<Shared>),
}

/// Shared values, and their payload JSON once a sink has written it: neither the values nor
/// the struct's schema can change while shared (changes make an owned copy), so it stays right.
#[derive(Debug)]
struct Shared {
    values: Box<[Value]>,
    json: std::sync::OnceLock<Box<[u8]>>,
}

impl PartialEq for Struct {
    fn eq(&self, other: &Self) -> bool {
        self.schema == other.schema && self.values() == other.values()
    }
}

impl Struct {
    /// A struct whose fields are all null (or their defaults when not optional).
    pub fn new(schema: Arc<Schema>) -> Self {
        let values = vec![Value::Null; schema.fields().len()];
        Struct {
            schema,
            values: Values::Owned(values),
        }
    }

    /// A struct from values in field order. Returns `None` when the count does not match.
    pub fn from_values(schema: Arc<Schema>, values: Vec<Value>) -> Option<Self> {
        (schema.fields().len() == values.len()).then_some(Struct {
            schema,
            values: Values::Owned(values),
        })
    }

    /// This struct with its values shared: clones cost a reference count, not a copy.
    pub fn into_shared(self) -> Self {
        let values = match self.values {
            Values::Owned(v) => Values::Shared(Arc::new(Shared {
                values: v.into_boxed_slice(),
                json: std::sync::OnceLock::new(),
            })),
            shared => shared,
        };
        Struct {
            schema: self.schema,
            values,
        }
    }

    /// Whether the values are shared (see [`Struct::into_shared`]).
    pub fn is_shared(&self) -> bool {
        matches!(self.values, Values::Shared(_))
    }

    /// The struct's schema.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// Values in field order.
    pub fn values(&self) -> &[Value] {
        match &self.values {
            Values::Owned(v) => v,
            Values::Shared(v) => &v.values,
        }
    }

    /// The payload JSON of a shared struct, computed by `encode` the first time it is asked
    /// for; `None` for an owned struct.
    pub fn shared_json(&self, encode: impl FnOnce() -> Vec<u8>) -> Option<&[u8]> {
        match &self.values {
            Values::Owned(_) => None,
            Values::Shared(v) => Some(v.json.get_or_init(|| encode().into_boxed_slice())),
        }
    }

    /// Mutable values in field order (the schema cannot change). A shared struct becomes an
    /// owned copy first.
    pub fn values_mut(&mut self) -> &mut [Value] {
        if let Values::Shared(v) = &self.values {
            self.values = Values::Owned(v.values.to_vec());
        }
        match &mut self.values {
            Values::Owned(v) => v,
            Values::Shared(_) => &mut [], // made owned just above
        }
    }

    /// Puts the values under another schema with as many fields (renamed, re-parameterized);
    /// returns false, changing nothing, when the field counts differ.
    pub fn set_schema(&mut self, schema: Arc<Schema>) -> bool {
        if schema.fields().len() != self.values().len() {
            return false;
        }
        // New field names: a shared struct's cached JSON would be wrong, so it becomes owned.
        self.values_mut();
        self.schema = schema;
        true
    }

    /// Takes the values out, leaving the schema.
    pub fn into_parts(self) -> (Arc<Schema>, Vec<Value>) {
        let values = match self.values {
            Values::Owned(v) => v,
            Values::Shared(v) => v.values.to_vec(),
        };
        (self.schema, values)
    }

    /// A field's value by name.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.schema
            .field_index(name)
            .and_then(|i| self.values().get(i))
    }

    /// A mutable field value by name.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Value> {
        let i = self.schema.field_index(name)?;
        self.values_mut().get_mut(i)
    }

    /// Sets a field by name; returns false when the schema has no such field.
    pub fn set(&mut self, name: &str, value: Value) -> bool {
        match self.schema.field_index(name) {
            Some(i) => {
                self.set_at(i, value);
                true
            }
            None => false,
        }
    }

    /// Sets a field by position.
    pub fn set_at(&mut self, index: usize, value: Value) {
        if let Some(slot) = self.values_mut().get_mut(index) {
            *slot = value;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_bytes_are_minimal_twos_complement() {
        assert_eq!(Value::decimal_bytes(0), vec![0x00]);
        assert_eq!(Value::decimal_bytes(-50), vec![0xce]);
        assert_eq!(Value::decimal_bytes(123456), vec![0x01, 0xe2, 0x40]);
        assert_eq!(Value::decimal_bytes(128), vec![0x00, 0x80]);
        assert_eq!(Value::decimal_bytes(-129), vec![0xff, 0x7f]);
        assert_eq!(Value::decimal_bytes(-128), vec![0x80]);
    }

    use crate::event::{Schema, SchemaType};

    /// A struct schema of primitive fields: (name, type, optional).
    fn struct_of(fields: &[(&str, SchemaType, bool)]) -> Arc<Schema> {
        fields
            .iter()
            .fold(Schema::struct_builder(), |b, &(name, kind, optional)| {
                b.field(name, Schema::primitive(kind, optional))
            })
            .build()
    }

    /// The measure as first written, one call per value: the oracle for the inlined one.
    fn size_by_recursion(v: &Value) -> usize {
        const BASE: usize = std::mem::size_of::<Value>();
        match v {
            Value::String(s) => BASE + 16 + s.len(),
            Value::Bytes(b) => BASE + 16 + b.capacity(),
            Value::Array(items) => BASE + 16 + items.iter().map(size_by_recursion).sum::<usize>(),
            Value::Map(entries) => {
                BASE + 16
                    + entries
                        .iter()
                        .map(|(k, v)| size_by_recursion(k) + size_by_recursion(v))
                        .sum::<usize>()
            }
            Value::Struct(s) if s.is_shared() => BASE + 16,
            Value::Struct(s) => BASE + 16 + s.values().iter().map(size_by_recursion).sum::<usize>(),
            _ => BASE,
        }
    }

    #[test]
    fn sizes_count_every_value() {
        let inner = struct_of(&[
            ("s", SchemaType::String, true),
            ("n", SchemaType::Int64, true),
        ]);
        let row = |s: &str| {
            Value::Struct(
                Struct::from_values(inner.clone(), vec![Value::from(s), Value::Int64(1)])
                    .unwrap_or_else(|| panic!("arity")),
            )
        };
        let values = [
            Value::Null,
            Value::from("hello"),
            Value::Bytes(vec![1, 2, 3]),
            Value::Array(vec![Value::Int32(1), Value::from("x"), row("nested")]),
            Value::Map(vec![(Value::from("k"), Value::Bytes(vec![0; 10]))]),
            row("a longer string value"),
            match row("shared") {
                Value::Struct(s) => Value::Struct(s.into_shared()),
                other => other,
            },
        ];
        for v in &values {
            assert_eq!(v.estimated_size(), size_by_recursion(v), "{v:?}");
        }
    }

    #[test]
    fn a_shared_struct_is_copied_on_change() {
        let schema = struct_of(&[
            ("a", SchemaType::Int32, false),
            ("b", SchemaType::String, true),
        ]);
        let owned = Struct::from_values(schema, vec![Value::Int32(1), Value::from("x")])
            .unwrap_or_else(|| panic!("arity"));
        let shared = owned.clone().into_shared();
        assert!(shared.is_shared() && !owned.is_shared());
        assert_eq!(shared, owned);
        let mut changed = shared.clone();
        assert!(changed.set("a", Value::Int32(2)));
        assert!(!changed.is_shared());
        assert_eq!(changed.get("a"), Some(&Value::Int32(2)));
        assert_eq!(shared.get("a"), Some(&Value::Int32(1)));
        assert_eq!(shared.clone().into_parts().1, owned.values().to_vec());
        assert!(Value::Struct(shared).estimated_size() < Value::Struct(owned).estimated_size());
    }
}
