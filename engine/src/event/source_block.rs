//! A connector's `source` block declared once, by name: [`source_block!`](crate::source_block)
//! makes its schema and a struct of its named fields from one list, so that the values of an
//! event's block cannot drift from the schema's order (a block filled by position did).

use super::Value;
use std::sync::{Arc, OnceLock};

/// The fields every Debezium `source` block starts with
/// ([`source_block_builder`](super::source_block_builder)'s).
#[derive(Debug, Clone)]
pub struct SourceHead {
    /// `version`: the connector's version.
    pub version: Value,
    /// `connector`: its name (`postgresql`, `mysql`, ...).
    pub connector: Value,
    /// `name`: `topic.prefix`.
    pub name: Value,
    /// `ts_ms`: when the change was made in the database (milliseconds since the epoch).
    pub ts_ms: i64,
    /// `snapshot`: `true`, `first`, ..., `last`, `incremental` or `false`.
    pub snapshot: Value,
    /// `db`: the database.
    pub db: Value,
}

/// The `source.snapshot` values Debezium writes (`SnapshotRecord`), most frequent first.
const SNAPSHOT_MARKERS: [&str; 7] = [
    "false",
    "true",
    "incremental",
    "first",
    "last",
    "first_in_data_collection",
    "last_in_data_collection",
];

/// A `source.snapshot` value: one of Debezium's markers shared (a reference count, no
/// allocation per event), any other text copied.
pub fn snapshot_marker(marker: &str) -> Value {
    static SHARED: OnceLock<[Arc<str>; SNAPSHOT_MARKERS.len()]> = OnceLock::new();
    let shared = SHARED.get_or_init(|| SNAPSHOT_MARKERS.map(Arc::from));
    match SNAPSHOT_MARKERS.iter().position(|m| *m == marker) {
        Some(i) => Value::String(Arc::clone(&shared[i])),
        None => Value::from(marker),
    }
}

/// What every `source` block of one source shares: its `version`, `connector` and `name`, made
/// once and shared by every event's block (a reference count each, no allocation per event).
#[derive(Debug, Clone)]
pub struct SourceConstants {
    version: Arc<str>,
    connector: Arc<str>,
    name: Arc<str>,
}

impl SourceConstants {
    /// The constants of a source of `connector` (`postgresql`, `mysql`, ...) at `version`,
    /// named `name` (its `topic.prefix`).
    pub fn new(version: &str, connector: &str, name: &str) -> SourceConstants {
        SourceConstants {
            version: version.into(),
            connector: connector.into(),
            name: name.into(),
        }
    }

    /// The head of a block of a change in `db`, made at `ts_ms`, in the snapshot phase
    /// `snapshot` ([`snapshot_marker`]).
    pub fn head(&self, db: Value, ts_ms: i64, snapshot: &str) -> SourceHead {
        SourceHead {
            version: Value::String(Arc::clone(&self.version)),
            connector: Value::String(Arc::clone(&self.connector)),
            name: Value::String(Arc::clone(&self.name)),
            ts_ms,
            snapshot: snapshot_marker(snapshot),
            db,
        }
    }
}

/// Declares a connector's `source` block: a struct of its head ([`SourceHead`]) and its own
/// fields by name, its schema (`schema(record_name)`) and its value (`into_struct(&schema)`),
/// both from the one list. A field is `name: Type` (a [`SchemaType`](crate::SchemaType)
/// variant), `| null` when optional, `as "wireName"` when Debezium spells it otherwise.
///
/// ```
/// sluice_engine::source_block! {
///     /// A connector's `source` block.
///     pub struct ExampleSource {
///         ts_us: Int64 | null,
///         table: String,
///         tx_id as "txId": Int64 | null,
///     }
/// }
/// let schema = ExampleSource::schema("io.example.Source");
/// assert_eq!(schema.fields()[8].name.as_ref(), "txId");
/// ```
#[macro_export]
macro_rules! source_block {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $field:ident $(as $wire:literal)? : $kind:ident $(| $null:ident)? ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        $vis struct $name {
            /// The fields every connector's block starts with.
            $vis head: $crate::event::SourceHead,
            $( $(#[$fmeta])* $vis $field: $crate::Value, )*
        }

        impl $name {
            /// The block's schema, named `record` (version 1).
            $vis fn schema(record: &str) -> ::std::sync::Arc<$crate::Schema> {
                Self::schema_builder(record).build()
            }

            /// [`Self::schema`] not yet built: a connector whose block ends with a field only
            /// some of its flavours have adds it here, and its value by
            /// [`Self::into_struct_with`].
            #[allow(dead_code)]
            $vis fn schema_builder(record: &str) -> $crate::event::SchemaBuilder {
                $crate::event::source_block_builder(record)
                    $( .field(
                        $crate::source_block!(@wire $field $(, $wire)?),
                        $crate::Schema::primitive(
                            $crate::SchemaType::$kind,
                            $crate::source_block!(@optional $($null)?),
                        ),
                    ) )*
            }

            /// The block's values in the schema's order: moved into one vector, as a block
            /// filled by position was.
            fn into_values(self) -> Vec<$crate::Value> {
                let head = self.head;
                vec![
                    head.version,
                    head.connector,
                    head.name,
                    $crate::Value::Int64(head.ts_ms),
                    head.snapshot,
                    head.db,
                    $(self.$field),*
                ]
            }

            /// The block as a value of `schema` ([`Self::schema`]'s).
            $vis fn into_struct(
                self,
                schema: &::std::sync::Arc<$crate::Schema>,
            ) -> $crate::Struct {
                $crate::Struct::from_values(schema.clone(), self.into_values())
                    .unwrap_or_else(|| $crate::Struct::new(schema.clone()))
            }

            /// [`Self::into_struct`] for a schema [`Self::schema_builder`] extended: the
            /// `added` fields' values follow the declared ones, in the order they were added.
            #[allow(dead_code)]
            $vis fn into_struct_with(
                self,
                schema: &::std::sync::Arc<$crate::Schema>,
                added: impl IntoIterator<Item = $crate::Value>,
            ) -> $crate::Struct {
                let mut values = self.into_values();
                values.extend(added);
                $crate::Struct::from_values(schema.clone(), values)
                    .unwrap_or_else(|| $crate::Struct::new(schema.clone()))
            }
        }
    };
    (@wire $field:ident) => { stringify!($field) };
    (@wire $field:ident, $wire:literal) => { $wire };
    (@optional) => { false };
    (@optional $null:ident) => { true };
}

#[cfg(test)]
mod tests {
    use crate::event::{Struct, Value};
    use crate::SchemaType;

    crate::source_block! {
        /// A block for the test.
        struct TestSource {
            sequence: String | null,
            tx_id as "txId": Int64 | null,
            table: String,
        }
    }

    #[test]
    fn the_schema_and_the_values_follow_the_one_list() {
        let schema = TestSource::schema("io.test.Source");
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "version",
                "connector",
                "name",
                "ts_ms",
                "snapshot",
                "db",
                "sequence",
                "txId",
                "table"
            ]
        );
        assert!(schema.fields()[7].schema.is_optional());
        assert!(!schema.fields()[8].schema.is_optional());
        assert_eq!(schema.fields()[7].schema.kind(), SchemaType::Int64);
        let block: Struct = TestSource {
            head: super::SourceHead {
                version: Value::from("1"),
                connector: Value::from("test"),
                name: Value::from("p"),
                ts_ms: 5,
                snapshot: Value::from("false"),
                db: Value::from("d"),
            },
            sequence: Value::Null,
            tx_id: Value::Int64(7),
            table: Value::from("t"),
        }
        .into_struct(&schema);
        assert_eq!(block.get("txId"), Some(&Value::Int64(7)));
        assert_eq!(block.get("table"), Some(&Value::from("t")));
        assert_eq!(block.get("ts_ms"), Some(&Value::Int64(5)));
    }

    #[test]
    fn a_field_added_to_the_schema_takes_the_value_added() {
        let schema = TestSource::schema_builder("io.test.Source")
            .field("extra", crate::Schema::primitive(SchemaType::Int64, true))
            .build();
        let constants = super::SourceConstants::new("1", "test", "p");
        let block = TestSource {
            head: constants.head(Value::from("d"), 5, "false"),
            sequence: Value::Null,
            tx_id: Value::Int64(7),
            table: Value::from("t"),
        }
        .into_struct_with(&schema, [Value::Int64(9)]);
        assert_eq!(block.get("extra"), Some(&Value::Int64(9)));
        assert_eq!(block.get("table"), Some(&Value::from("t")));
    }

    #[test]
    fn a_head_shares_the_constants_and_the_markers() {
        let constants = super::SourceConstants::new("1.0", "test", "p");
        let (a, b) = (
            constants.head(Value::from("d"), 1, "true"),
            constants.head(Value::from("d"), 2, "true"),
        );
        let shared = |x: &Value, y: &Value| match (x, y) {
            (Value::String(x), Value::String(y)) => std::sync::Arc::ptr_eq(x, y),
            _ => false,
        };
        assert!(shared(&a.connector, &b.connector) && shared(&a.name, &b.name));
        assert!(shared(&a.snapshot, &b.snapshot));
        assert_eq!(a.snapshot, Value::from("true"));
        assert_eq!(super::snapshot_marker("last"), Value::from("last"));
        assert_eq!(super::snapshot_marker("other"), Value::from("other"));
    }
}
