//! Each transform changes only what it promises: on any rows (NULLs included), the fields it
//! does not target keep their values and schemas, a targeted field keeps its type and
//! optionality (gaining only its Debezium parameter), NULL stays NULL where the transform says
//! so, and the key, `source` and `op` pass through.

use proptest::prelude::*;
use sluice_engine::config::{AnchoredRegex, RegexList};
use sluice_engine::{ChangeEvent, Op, Schema, Transform, Value};

use crate::testing::*;

fn columns(p: &str) -> RegexList {
    RegexList(vec![AnchoredRegex::new(p).unwrap()])
}

/// A transform's name, the transform, and whether it maps one value to another as it promises.
type Case = (&'static str, Box<dyn Transform>, fn(&Value, &Value) -> bool);

/// The column transforms on `name`, each with what it does to one value.
fn column_transforms() -> Vec<Case> {
    let hash = |version: &str| {
        crate::hash::build(&crate::hash::HashConfig {
            columns: columns(r".*\.name"),
            algorithm: "SHA-256".into(),
            salt: "s".into(),
            version: version.into(),
        })
        .unwrap()
    };
    vec![
        (
            "mask",
            Box::new(crate::mask::build(&crate::mask::MaskConfig {
                columns: columns(r".*\.name"),
                chars: Some(3),
                replacement: None,
            })),
            // Debezium masks NULL too.
            |_, out| out == &Value::from("***"),
        ),
        (
            "truncate",
            Box::new(crate::truncate::build(&crate::truncate::TruncateConfig {
                columns: columns(r".*\.name"),
                length: 2,
            })),
            |v, out| match (v, out) {
                (Value::Null, Value::Null) => true,
                (Value::String(a), Value::String(b)) => {
                    b.chars().count() <= 2 && a.starts_with(&**b)
                }
                _ => false,
            },
        ),
        ("hash v1", Box::new(hash("v1")), hashed),
        ("hash v2", Box::new(hash("v2")), hashed),
    ]
}

fn hashed(v: &Value, out: &Value) -> bool {
    match (v, out) {
        (Value::Null, Value::Null) => true,
        (Value::String(_), Value::String(h)) => {
            h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())
        }
        _ => false,
    }
}

fn side<'a>(event: &'a ChangeEvent, side: &str) -> Option<&'a sluice_engine::Struct> {
    event
        .value
        .as_ref()?
        .value
        .as_struct()?
        .get(side)?
        .as_struct()
}

fn row_schema(event: &ChangeEvent) -> std::sync::Arc<Schema> {
    let value = event.value.as_ref().unwrap();
    value.schema.field("after").unwrap().schema.clone()
}

fn sample(op: u8, id: i32, name: Option<String>, ssn: Option<String>) -> ChangeEvent {
    let s = customers();
    let r = row(&s, id, name.as_deref(), ssn.as_deref(), "st");
    match op % 3 {
        0 => event(&s, Op::Create, None, Some(r)),
        1 => event(&s, Op::Update, Some(r.clone()), Some(r)),
        _ => event(&s, Op::Delete, Some(r), None),
    }
}

proptest! {
    #[test]
    fn column_transforms_change_only_their_column(
        op in 0u8..3,
        id in any::<i32>(),
        name in proptest::option::of(".{0,6}"),
        ssn in proptest::option::of(".{0,6}"),
    ) {
        for (what, mut t, maps) in column_transforms() {
            let input = sample(op, id, name.clone(), ssn.clone());
            let mut out = Vec::new();
            t.apply(input.clone(), &mut out).unwrap();
            prop_assert_eq!(out.len(), 1, "{}", what);
            let output = &out[0];
            prop_assert_eq!(&output.key, &input.key, "{}: key", what);
            prop_assert_eq!(output.op(), input.op(), "{}: op", what);
            let (a, b) = (input.value.as_ref().unwrap(), output.value.as_ref().unwrap());
            let (a, b) = (a.value.as_struct().unwrap(), b.value.as_struct().unwrap());
            prop_assert_eq!(a.get("source"), b.get("source"), "{}: source", what);
            let (schema_in, schema_out) = (row_schema(&input), row_schema(output));
            for field in schema_in.fields() {
                let mapped = schema_out.field(&field.name).unwrap();
                if &*field.name == "name" {
                    prop_assert_eq!(mapped.schema.kind(), field.schema.kind(), "{}", what);
                    prop_assert_eq!(mapped.schema.is_optional(), field.schema.is_optional(), "{}", what);
                    let added: Vec<_> = mapped.schema.parameters().unwrap_or_default().iter()
                        .filter(|p| !field.schema.parameters().unwrap_or_default().contains(p)).collect();
                    prop_assert_eq!(added.len(), 1, "{}: one parameter added", what);
                } else {
                    prop_assert_eq!(&mapped.schema, &field.schema, "{}: schema of {}", what, field.name);
                }
            }
            for s in ["before", "after"] {
                let (Some(x), Some(y)) = (side(&input, s), side(output, s)) else {
                    prop_assert_eq!(side(&input, s).is_none(), side(output, s).is_none(), "{}", what);
                    continue;
                };
                for field in schema_in.fields() {
                    let (v, w) = (x.get(&field.name).unwrap(), y.get(&field.name).unwrap());
                    if &*field.name == "name" {
                        prop_assert!(maps(v, w), "{}: {:?} became {:?}", what, v, w);
                    } else {
                        prop_assert_eq!(v, w, "{}: {} changed", what, field.name);
                    }
                }
            }
        }
    }

    /// `key` builds the key from nullable columns without changing them: a NULL stays NULL and
    /// the key field keeps the column's schema; the value passes through.
    #[test]
    fn key_columns_keep_nulls_and_leave_the_value(op in 0u8..3, id in any::<i32>(), name in proptest::option::of(".{0,6}")) {
        let mut k = crate::key::Key::new(&crate::key::KeyConfig { columns: "public.customers:name,id".into() }).unwrap();
        let input = sample(op, id, name.clone(), None);
        let mut out = Vec::new();
        k.apply(input.clone(), &mut out).unwrap();
        prop_assert_eq!(&out[0].value, &input.value);
        let key = out[0].key.as_ref().unwrap();
        let row = row_schema(&input);
        prop_assert_eq!(&key.schema.field("name").unwrap().schema, &row.field("name").unwrap().schema);
        let values = key.value.as_struct().unwrap().values().to_vec();
        prop_assert_eq!(values, vec![name.map_or(Value::Null, Value::from), Value::Int32(id)]);
    }

    /// `unwrap` flattens without changing a value: the flat row equals `after` (or `before` for
    /// a rewritten delete), field by field, schema by schema.
    #[test]
    fn unwrap_keeps_the_row(op in 0u8..3, id in any::<i32>(), name in proptest::option::of(".{0,6}"), ssn in proptest::option::of(".{0,6}")) {
        let mut u = crate::unwrap::Unwrap::new(crate::unwrap::UnwrapConfig {
            mode: Some(crate::unwrap::DeleteMode::Rewrite),
            legacy_mode: None,
            drop_tombstones: None,
            add_fields: crate::unwrap::FieldList(vec![]),
            add_fields_prefix: "__".into(),
            add_headers: crate::unwrap::FieldList(vec![]),
            add_headers_prefix: "__".into(),
        });
        let input = sample(op, id, name, ssn);
        let mut out = Vec::new();
        u.apply(input.clone(), &mut out).unwrap();
        let row = side(&input, "after").or_else(|| side(&input, "before")).unwrap();
        let flat = out[0].value.as_ref().unwrap();
        let flat_row = flat.value.as_struct().unwrap();
        for field in row_schema(&input).fields() {
            prop_assert_eq!(flat_row.get(&field.name), row.get(&field.name), "{}", field.name);
            prop_assert_eq!(&flat.schema.field(&field.name).unwrap().schema, &field.schema);
        }
        prop_assert_eq!(&out[0].key, &input.key);
    }
}
