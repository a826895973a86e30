//! Avro schemas derived from Kafka Connect schemas the way Confluent's `AvroData` (AvroConverter,
//! default settings) derives them, written as Avro's Java `Schema.toString()` writes them, so the
//! registered text is the same one Kafka Connect registers.
//!
//! - int8 / int16 are `int` with `connect.type`; Decimal is `bytes` with `scale`, `precision`
//!   (the `connect.decimal.precision` parameter, else 64) and `logicalType: decimal`;
//!   Connect's Date, Time and Timestamp get Avro's logical types.
//! - Named schemas carry `connect.doc`, `connect.version`, `connect.parameters`,
//!   `connect.default` and `connect.name`; structs become records named after the last part of
//!   the Connect name, its first parts the namespace.
//! - An optional schema is a union with null: `["null", T]` with default null, or `[T, "null"]`
//!   when it has a default.
//! - Maps with required string keys are Avro maps; other maps are arrays of `MapEntry` records.

use std::collections::HashSet;

use sluice_engine::codec::json::{write_string, write_value};
use sluice_engine::event::{Schema, SchemaType};

use crate::format::NameAdjustment;

const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
const CONNECT_DATE: &str = "org.apache.kafka.connect.data.Date";
const CONNECT_TIME: &str = "org.apache.kafka.connect.data.Time";
const CONNECT_TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
const DEFAULT_NAMESPACE: &str = "io.confluent.connect.avro";
const DEFAULT_NAME: &str = "ConnectDefault";
const PRECISION_PARAM: &str = "connect.decimal.precision";
const DEFAULT_PRECISION: i64 = 64;

/// The Avro schema text of a Connect schema, and the full name of its top record (for the
/// record name strategies).
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    /// The schema, as Java's `Schema.toString()`.
    pub json: String,
    /// `namespace.name` of the top-level record, when it is one.
    pub full_name: Option<String>,
}

/// Derives the Avro schema of `schema`.
pub fn derive(schema: &Schema, adjust: NameAdjustment) -> Derived {
    let mut w = Writer {
        out: String::with_capacity(1024),
        defined: HashSet::new(),
        space: None,
        adjust,
        unnamed: 0,
    };
    w.schema(schema);
    let full_name = (schema.kind() == SchemaType::Struct).then(|| {
        let (ns, name) = w.record_name(schema.name());
        match ns {
            Some(ns) => format!("{ns}.{name}"),
            None => name,
        }
    });
    Derived {
        json: w.out,
        full_name,
    }
}

struct Writer {
    out: String,
    defined: HashSet<String>,
    space: Option<String>,
    adjust: NameAdjustment,
    unnamed: usize,
}

impl Writer {
    fn raw(&mut self, s: &str) {
        self.out.push_str(s);
    }

    fn string(&mut self, s: &str) {
        self.out.push_str(&quoted(s));
    }

    /// A schema in a field, array or map: optional ones become unions with null.
    fn schema(&mut self, schema: &Schema) {
        if !schema.is_optional() {
            self.base(schema);
        } else if schema.default_value().is_some_and(|d| !d.is_null()) {
            self.raw("[");
            self.base(schema);
            self.raw(",\"null\"]");
        } else {
            self.raw("[\"null\",");
            self.base(schema);
            self.raw("]");
        }
    }

    /// The namespace and name of a record (adjusted).
    fn record_name(&self, connect_name: Option<&str>) -> (Option<String>, String) {
        match connect_name {
            None => (Some(DEFAULT_NAMESPACE.to_owned()), DEFAULT_NAME.to_owned()),
            Some(full) => match full.rfind('.') {
                Some(i) => (
                    Some(
                        full[..i]
                            .split('.')
                            .map(|p| adjust_name(p, self.adjust))
                            .collect::<Vec<_>>()
                            .join("."),
                    ),
                    adjust_name(&full[i + 1..], self.adjust),
                ),
                None => (None, adjust_name(full, self.adjust)),
            },
        }
    }

    fn base(&mut self, schema: &Schema) {
        let mut props: Vec<(&str, String)> = Vec::new();
        let name = schema.name();
        let (avro_type, opens) = match schema.kind() {
            SchemaType::Int8 | SchemaType::Int16 => {
                let t = if schema.kind() == SchemaType::Int8 {
                    "int8"
                } else {
                    "int16"
                };
                props.push(("connect.type", quoted(t)));
                ("int", false)
            }
            SchemaType::Int32 => ("int", false),
            SchemaType::Int64 => ("long", false),
            SchemaType::Float32 => ("float", false),
            SchemaType::Float64 => ("double", false),
            SchemaType::Boolean => ("boolean", false),
            SchemaType::String => ("string", false),
            SchemaType::Bytes => {
                if name.is_some_and(|n| n.eq_ignore_ascii_case(DECIMAL)) {
                    let (scale, precision) = decimal_params(schema);
                    props.push(("scale", scale.to_string()));
                    props.push(("precision", precision.to_string()));
                }
                ("bytes", false)
            }
            SchemaType::Array | SchemaType::Map | SchemaType::Struct => ("", true),
        };
        meta_props(schema, &mut props);
        if let Some(logical) = logical_type(schema) {
            props.push(("logicalType", quoted(logical)));
        }
        if !opens {
            if props.is_empty() {
                self.raw("\"");
                self.raw(avro_type);
                self.raw("\"");
            } else {
                self.raw("{\"type\":\"");
                self.raw(avro_type);
                self.raw("\"");
                self.props(&props);
                self.raw("}");
            }
            return;
        }
        match schema.kind() {
            SchemaType::Array => {
                self.raw("{\"type\":\"array\",\"items\":");
                if let Some(items) = schema.items() {
                    self.schema(items);
                } else {
                    self.raw("\"null\"");
                }
                self.props(&props);
                self.raw("}");
            }
            SchemaType::Map => {
                let string_keys = schema
                    .map_key()
                    .is_some_and(|k| k.kind() == SchemaType::String && !k.is_optional());
                if string_keys {
                    self.raw("{\"type\":\"map\",\"values\":");
                    if let Some(values) = schema.items() {
                        self.schema(values);
                    }
                    self.props(&props);
                    self.raw("}");
                } else {
                    self.raw("{\"type\":\"array\",\"items\":");
                    self.map_entry(schema);
                    self.props(&props);
                    self.raw("}");
                }
            }
            _ => self.record(schema, &props),
        }
    }

    /// Connect maps with other keys: an array of `{key, value}` records.
    fn map_entry(&mut self, schema: &Schema) {
        let full = format!("{DEFAULT_NAMESPACE}.MapEntry");
        if self.defined.contains(&full) {
            let reference = self.reference(Some(DEFAULT_NAMESPACE), "MapEntry");
            self.string(&reference);
            return;
        }
        self.defined.insert(full);
        self.raw("{\"type\":\"record\",\"name\":\"MapEntry\"");
        let saved = self.namespace_field(Some(DEFAULT_NAMESPACE));
        self.raw(",\"fields\":[{\"name\":\"key\",\"type\":");
        if let Some(k) = schema.map_key() {
            self.field_type_and_default(k);
        }
        self.raw("},{\"name\":\"value\",\"type\":");
        if let Some(v) = schema.items() {
            self.field_type_and_default(v);
        }
        self.raw("}]}");
        self.space = saved;
    }

    /// Writes `"namespace"` when it differs from the enclosing one, then makes it the enclosing
    /// one; returns the previous.
    fn namespace_field(&mut self, ns: Option<&str>) -> Option<String> {
        match (ns, self.space.as_deref()) {
            (Some(ns), current) if current != Some(ns) => {
                self.raw(",\"namespace\":");
                self.string(ns);
            }
            (None, Some(_)) => self.raw(",\"namespace\":\"\""),
            _ => {}
        }
        std::mem::replace(&mut self.space, ns.map(str::to_owned))
    }

    fn reference(&self, ns: Option<&str>, name: &str) -> String {
        match ns {
            Some(ns) if self.space.as_deref() != Some(ns) => format!("{ns}.{name}"),
            _ => name.to_owned(),
        }
    }

    fn record(&mut self, schema: &Schema, props: &[(&str, String)]) {
        let (ns, mut name) = self.record_name(schema.name());
        if schema.name().is_none() {
            self.unnamed += 1;
            if self.unnamed > 1 {
                name = format!("{DEFAULT_NAME}{}", self.unnamed - 1);
            }
        }
        let full = match &ns {
            Some(ns) => format!("{ns}.{name}"),
            None => name.clone(),
        };
        if self.defined.contains(&full) {
            let reference = self.reference(ns.as_deref(), &name);
            self.string(&reference);
            return;
        }
        self.defined.insert(full);
        self.raw("{\"type\":\"record\",\"name\":");
        self.string(&name);
        let saved = self.namespace_field(ns.as_deref());
        if let Some(doc) = schema.parameter("connect.record.doc") {
            self.raw(",\"doc\":");
            self.string(doc);
        }
        self.raw(",\"fields\":[");
        for (i, field) in schema.fields().iter().enumerate() {
            if i > 0 {
                self.raw(",");
            }
            self.raw("{\"name\":");
            self.string(&adjust_name(&field.name, self.adjust));
            self.raw(",\"type\":");
            self.field_type_and_default(&field.schema);
            self.raw("}");
        }
        self.raw("]");
        self.props(props);
        self.raw("}");
        self.space = saved;
    }

    /// A field's type, then its `"default"`: the Connect default, or null when optional.
    fn field_type_and_default(&mut self, schema: &Schema) {
        self.schema(schema);
        match default_json(schema) {
            Some(d) => {
                self.raw(",\"default\":");
                self.raw(&d);
            }
            None if schema.is_optional() => self.raw(",\"default\":null"),
            None => {}
        }
    }

    fn props(&mut self, props: &[(&str, String)]) {
        for (k, v) in props {
            self.raw(",");
            self.string(k);
            self.raw(":");
            self.raw(v);
        }
    }
}

fn quoted(s: &str) -> String {
    let mut buf = Vec::with_capacity(s.len() + 2);
    write_string(s, &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The JSON of the schema's non-null default, if it has one.
fn default_json(schema: &Schema) -> Option<String> {
    let d = schema.default_value().filter(|d| !d.is_null())?;
    let mut buf = Vec::new();
    write_value(schema, d, &mut buf);
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// Scale and precision of a Decimal schema.
pub fn decimal_params(schema: &Schema) -> (i64, i64) {
    let scale = schema
        .parameter("scale")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let precision = schema
        .parameter(PRECISION_PARAM)
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_PRECISION);
    (scale, precision)
}

/// `connect.doc`, `connect.version`, `connect.parameters`, `connect.default`, `connect.name`.
fn meta_props(schema: &Schema, props: &mut Vec<(&'static str, String)>) {
    if let Some(doc) = schema.doc() {
        props.push(("connect.doc", quoted(doc)));
    }
    if let Some(v) = schema.version() {
        props.push(("connect.version", v.to_string()));
    }
    if let Some(params) = schema.parameters() {
        let mut obj = String::from("{");
        for (i, (k, v)) in params.iter().enumerate() {
            if i > 0 {
                obj.push(',');
            }
            obj.push_str(&quoted(k));
            obj.push(':');
            obj.push_str(&quoted(v));
        }
        obj.push('}');
        props.push(("connect.parameters", obj));
    }
    if let Some(d) = default_json(schema) {
        props.push(("connect.default", d));
    }
    if let Some(name) = schema.name() {
        props.push(("connect.name", quoted(name)));
    }
}

/// Avro's logical type for Connect's logical types.
fn logical_type(schema: &Schema) -> Option<&'static str> {
    let name = schema.name()?;
    if name.eq_ignore_ascii_case(DECIMAL) {
        let (scale, precision) = decimal_params(schema);
        (scale >= 0 && scale <= precision).then_some("decimal")
    } else if name.eq_ignore_ascii_case(CONNECT_TIME) {
        Some("time-millis")
    } else if name.eq_ignore_ascii_case(CONNECT_TIMESTAMP) {
        Some("timestamp-millis")
    } else if name.eq_ignore_ascii_case(CONNECT_DATE) {
        Some("date")
    } else {
        None
    }
}

/// A name Avro accepts (`[A-Za-z_][A-Za-z0-9_]*`), as Debezium's schema name adjuster makes it.
pub fn adjust_name(name: &str, mode: NameAdjustment) -> String {
    let valid =
        |i: usize, c: char| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit());
    if mode == NameAdjustment::None || name.chars().enumerate().all(|(i, c)| valid(i, c)) {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if valid(i, c) {
            out.push(c);
        } else if mode == NameAdjustment::AvroUnicode {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("_u{u:04x}"));
            }
        } else {
            out.push('_');
        }
    }
    if out.is_empty() {
        out.push('_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_names_are_adjusted_per_mode() {
        assert_eq!(adjust_name("my-table", NameAdjustment::Avro), "my_table");
        assert_eq!(adjust_name("1st", NameAdjustment::Avro), "_st");
        assert_eq!(
            adjust_name("my-table", NameAdjustment::AvroUnicode),
            "my_u002dtable"
        );
        assert_eq!(adjust_name("my-table", NameAdjustment::None), "my-table");
        assert_eq!(adjust_name("ok_name1", NameAdjustment::Avro), "ok_name1");
    }
}
