//! Kafka Connect schemas, shared between events through `Arc`.
//!
//! A [`Schema`] mirrors `org.apache.kafka.connect.data.Schema`: a type, optionality, an optional
//! semantic name (`io.debezium.time.MicroTimestamp`, `org.apache.kafka.connect.data.Decimal`, ...),
//! version, parameters, default value and, for structs, ordered fields. Schemas are immutable
//! once built and are shared by every event of a table; the JSON form used by the
//! JsonConverter is computed once per schema and cached (see [`Schema::json`]).

use std::sync::{Arc, OnceLock};

use super::value::Value;

/// Kafka Connect schema types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaType {
    /// 8-bit signed integer.
    Int8,
    /// 16-bit signed integer.
    Int16,
    /// 32-bit signed integer.
    Int32,
    /// 64-bit signed integer.
    Int64,
    /// IEEE 754 single precision.
    Float32,
    /// IEEE 754 double precision.
    Float64,
    /// Boolean.
    Boolean,
    /// UTF-8 string.
    String,
    /// Byte array.
    Bytes,
    /// Ordered list of values of one schema.
    Array,
    /// Map from key schema to value schema.
    Map,
    /// Ordered named fields.
    Struct,
}

impl SchemaType {
    /// The name Kafka Connect uses in JSON schemas (`int32`, `struct`, ...).
    pub fn connect_name(self) -> &'static str {
        match self {
            SchemaType::Int8 => "int8",
            SchemaType::Int16 => "int16",
            SchemaType::Int32 => "int32",
            SchemaType::Int64 => "int64",
            SchemaType::Float32 => "float",
            SchemaType::Float64 => "double",
            SchemaType::Boolean => "boolean",
            SchemaType::String => "string",
            SchemaType::Bytes => "bytes",
            SchemaType::Array => "array",
            SchemaType::Map => "map",
            SchemaType::Struct => "struct",
        }
    }
}

/// Semantic schema names used by Debezium and Kafka Connect.
pub mod names {
    /// Fixed-point decimal as unscaled two's-complement bytes; parameter `scale`.
    pub const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
    /// Days since the epoch (int32).
    pub const DATE: &str = "io.debezium.time.Date";
    /// Milliseconds past midnight (int32).
    pub const TIME: &str = "io.debezium.time.Time";
    /// Microseconds past midnight (int64).
    pub const MICRO_TIME: &str = "io.debezium.time.MicroTime";
    /// Nanoseconds past midnight (int64).
    pub const NANO_TIME: &str = "io.debezium.time.NanoTime";
    /// Milliseconds since the epoch, no time zone (int64).
    pub const TIMESTAMP: &str = "io.debezium.time.Timestamp";
    /// Microseconds since the epoch, no time zone (int64).
    pub const MICRO_TIMESTAMP: &str = "io.debezium.time.MicroTimestamp";
    /// Nanoseconds since the epoch, no time zone (int64).
    pub const NANO_TIMESTAMP: &str = "io.debezium.time.NanoTimestamp";
    /// ISO-8601 timestamp with offset (string).
    pub const ZONED_TIMESTAMP: &str = "io.debezium.time.ZonedTimestamp";
    /// ISO-8601 time with offset (string).
    pub const ZONED_TIME: &str = "io.debezium.time.ZonedTime";
    /// JSON document (string).
    pub const JSON: &str = "io.debezium.data.Json";
    /// Enumeration (string); parameter `allowed`.
    pub const ENUM: &str = "io.debezium.data.Enum";
    /// UUID (string).
    pub const UUID: &str = "io.debezium.data.Uuid";
    /// Transaction block of a data event.
    pub const TRANSACTION_BLOCK: &str = "event.block";
}

/// A named field of a struct schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Field name.
    pub name: Arc<str>,
    /// Field schema.
    pub schema: Arc<Schema>,
}

/// An immutable Kafka Connect schema.
#[derive(Debug, Default)]
pub struct Schema {
    kind: Option<SchemaType>,
    optional: bool,
    name: Option<Arc<str>>,
    version: Option<i32>,
    doc: Option<Arc<str>>,
    parameters: Option<Vec<(String, String)>>,
    default: Option<Value>,
    fields: Vec<Field>,
    items: Option<Arc<Schema>>,
    map_key: Option<Arc<Schema>>,
    json: OnceLock<Box<str>>,
    json_keys: OnceLock<Box<[Box<[u8]>]>>,
}

impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.optional == other.optional
            && self.name == other.name
            && self.version == other.version
            && self.doc == other.doc
            && self.parameters == other.parameters
            && self.default == other.default
            && self.fields == other.fields
            && self.items == other.items
            && self.map_key == other.map_key
    }
}

impl Schema {
    /// Starts a schema of the given type.
    pub fn builder(kind: SchemaType) -> SchemaBuilder {
        SchemaBuilder {
            schema: Schema {
                kind: Some(kind),
                ..Schema::default()
            },
        }
    }

    /// A plain struct builder.
    pub fn struct_builder() -> SchemaBuilder {
        Self::builder(SchemaType::Struct)
    }

    /// Shorthand for a primitive schema.
    pub fn primitive(kind: SchemaType, optional: bool) -> Arc<Schema> {
        let b = Self::builder(kind);
        if optional {
            b.optional().build()
        } else {
            b.build()
        }
    }

    /// The schema's type.
    pub fn kind(&self) -> SchemaType {
        self.kind.unwrap_or(SchemaType::Struct)
    }
    /// Whether null is allowed.
    pub fn is_optional(&self) -> bool {
        self.optional
    }
    /// The semantic name, if any.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    /// The schema version, if any.
    pub fn version(&self) -> Option<i32> {
        self.version
    }
    /// Documentation string, if any.
    pub fn doc(&self) -> Option<&str> {
        self.doc.as_deref()
    }
    /// Parameters in insertion order (e.g. `scale` of a decimal), as Connect keeps them.
    pub fn parameters(&self) -> Option<&[(String, String)]> {
        self.parameters.as_deref()
    }
    /// One parameter by key.
    pub fn parameter(&self, key: &str) -> Option<&str> {
        self.parameters
            .as_ref()?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    /// The default value, if any.
    pub fn default_value(&self) -> Option<&Value> {
        self.default.as_ref()
    }
    /// Ordered fields of a struct schema (empty otherwise).
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }
    /// Position of a field by name.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| &*f.name == name)
    }
    /// A field by name.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| &*f.name == name)
    }
    /// Element schema of an array, value schema of a map.
    pub fn items(&self) -> Option<&Arc<Schema>> {
        self.items.as_ref()
    }
    /// Key schema of a map.
    pub fn map_key(&self) -> Option<&Arc<Schema>> {
        self.map_key.as_ref()
    }

    /// The JsonConverter form of this schema without the `field` member, computed once.
    pub fn json(&self) -> &str {
        self.json
            .get_or_init(|| crate::codec::json::schema_to_json(self, None).into_boxed_str())
    }

    /// Each field's JSON member prefix, escaped once: `"name":` for the first field and
    /// `,"name":` for the others (payload encoding writes these instead of escaping every name of
    /// every event).
    pub fn json_field_keys(&self) -> &[Box<[u8]>] {
        self.json_keys.get_or_init(|| {
            self.fields
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let mut key = Vec::with_capacity(f.name.len() + 4);
                    if i > 0 {
                        key.push(b',');
                    }
                    crate::codec::json::write_string(&f.name, &mut key);
                    key.push(b':');
                    key.into_boxed_slice()
                })
                .collect()
        })
    }

    /// A builder pre-filled with this schema's attributes, for derived schemas.
    pub fn to_builder(&self) -> SchemaBuilder {
        SchemaBuilder {
            schema: Schema {
                kind: self.kind,
                optional: self.optional,
                name: self.name.clone(),
                version: self.version,
                doc: self.doc.clone(),
                parameters: self.parameters.clone(),
                default: self.default.clone(),
                fields: self.fields.clone(),
                items: self.items.clone(),
                map_key: self.map_key.clone(),
                json: OnceLock::new(),
                json_keys: OnceLock::new(),
            },
        }
    }
}

/// Builds a [`Schema`].
#[derive(Debug)]
pub struct SchemaBuilder {
    schema: Schema,
}

impl SchemaBuilder {
    /// Allows null.
    pub fn optional(mut self) -> Self {
        self.schema.optional = true;
        self
    }
    /// Sets optionality.
    pub fn optional_if(mut self, optional: bool) -> Self {
        self.schema.optional = optional;
        self
    }
    /// Sets the semantic name.
    pub fn name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.schema.name = Some(name.into());
        self
    }
    /// Sets the version.
    pub fn version(mut self, version: i32) -> Self {
        self.schema.version = Some(version);
        self
    }
    /// Sets the doc string.
    pub fn doc(mut self, doc: impl Into<Arc<str>>) -> Self {
        self.schema.doc = Some(doc.into());
        self
    }
    /// Adds or replaces a parameter; parameters keep their insertion order.
    pub fn parameter(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let (key, value) = (key.into(), value.into());
        let params = self.schema.parameters.get_or_insert_with(Vec::new);
        match params.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => params.push((key, value)),
        }
        self
    }
    /// Sets the default value.
    pub fn default_value(mut self, value: Value) -> Self {
        self.schema.default = Some(value);
        self
    }
    /// Appends a field (struct schemas).
    pub fn field(mut self, name: impl Into<Arc<str>>, schema: Arc<Schema>) -> Self {
        self.schema.fields.push(Field {
            name: name.into(),
            schema,
        });
        self
    }
    /// Removes all fields (for derived schemas).
    pub fn clear_fields(mut self) -> Self {
        self.schema.fields.clear();
        self
    }
    /// Sets the element schema (arrays) or value schema (maps).
    pub fn items(mut self, schema: Arc<Schema>) -> Self {
        self.schema.items = Some(schema);
        self
    }
    /// Sets the key schema (maps).
    pub fn map_key(mut self, schema: Arc<Schema>) -> Self {
        self.schema.map_key = Some(schema);
        self
    }
    /// Finishes the schema.
    pub fn build(self) -> Arc<Schema> {
        Arc::new(self.schema)
    }
}

/// Builds a Connect decimal schema with the given scale and optional precision.
pub fn decimal_schema(scale: u32, precision: Option<u32>, optional: bool) -> Arc<Schema> {
    let mut b = Schema::builder(SchemaType::Bytes)
        .optional_if(optional)
        .name(names::DECIMAL)
        .version(1)
        .parameter("scale", scale.to_string());
    if let Some(p) = precision {
        b = b.parameter("connect.decimal.precision", p.to_string());
    }
    b.build()
}
