//! Debezium's schema history records, as `FileSchemaHistory` and `KafkaSchemaHistory` store
//! them (one JSON document per record): where in the log a schema change happened, its DDL,
//! and the structure of each table it changed (`tableChanges`, the relational format of
//! `JsonTableChangeSerializer`). The same records, read by either, rebuild the tables as they
//! were at a position.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// One schema history record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryRecord {
    /// The connector's partition (`{"server": <topic.prefix>}`).
    pub source: Json,
    /// The source's position at the change (its offset, as the offset store holds it).
    pub position: Json,
    /// When the record was made (milliseconds since the epoch).
    #[serde(default)]
    pub ts_ms: i64,
    /// The database the DDL ran in.
    #[serde(
        rename = "databaseName",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub database_name: Option<String>,
    /// The schema the DDL ran in (for sources with schemas).
    #[serde(
        rename = "schemaName",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub schema_name: Option<String>,
    /// The statement.
    #[serde(default)]
    pub ddl: String,
    /// The tables it changed, with their structure after it (empty: a statement that changes
    /// no table, such as `SET character_set_server=...`).
    #[serde(rename = "tableChanges", default)]
    pub table_changes: Vec<TableChange>,
}

/// What happened to one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ChangeKind {
    /// Created (or captured for the first time, in a snapshot).
    Create,
    /// Altered.
    Alter,
    /// Dropped.
    Drop,
}

/// One table's change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableChange {
    /// `CREATE`, `ALTER` or `DROP`.
    #[serde(rename = "type")]
    pub kind: ChangeKind,
    /// The table's id as Debezium writes it (`"inventory"."customers"`, quotes included).
    pub id: String,
    /// The id it had before a `RENAME TABLE`.
    #[serde(
        rename = "previousId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub previous_id: Option<String>,
    /// Its structure after the change (absent for drops).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<TableDef>,
    /// The change's `comment` as stored: absent (drops), `null`, or the table comment
    /// (Debezium writes `null` beside a table, nothing beside a drop).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub comment: Option<Json>,
}

/// A field that is present, even as `null`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Json>, D::Error> {
    Json::deserialize(d).map(Some)
}

/// A table's structure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableDef {
    /// The table's default character set.
    #[serde(default)]
    pub default_charset_name: Option<String>,
    /// Primary key columns, in key order.
    #[serde(default)]
    pub primary_key_column_names: Vec<String>,
    /// Columns, in table order.
    pub columns: Vec<ColumnDef>,
    /// Table attributes (`{"name":..,"value":..}`), kept as read.
    #[serde(default)]
    pub attributes: Vec<Json>,
    /// Table comment (with `include.schema.comments`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// A column's structure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ColumnDef {
    /// Name.
    pub name: String,
    /// `java.sql.Types` code.
    pub jdbc_type: i32,
    /// The database's own type code, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_type: Option<i32>,
    /// Type name (`INT`, `VARCHAR`).
    pub type_name: String,
    /// Type as written (`INT UNSIGNED`, `ENUM('a','b')`).
    #[serde(default)]
    pub type_expression: Option<String>,
    /// Character set.
    #[serde(default)]
    pub charset_name: Option<String>,
    /// Length or precision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<i32>,
    /// Scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<i32>,
    /// Position in the table, from 1.
    pub position: i32,
    /// Whether NULL is allowed.
    pub optional: bool,
    /// Auto-incremented.
    #[serde(default)]
    pub auto_incremented: bool,
    /// Generated.
    #[serde(default)]
    pub generated: bool,
    /// Column comment.
    #[serde(default)]
    pub comment: Option<String>,
    /// Whether the column has a default.
    #[serde(default)]
    pub has_default_value: bool,
    /// The default, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_value_expression: Option<String>,
    /// The values of an `ENUM` or `SET`.
    #[serde(default)]
    pub enum_values: Vec<String>,
}

/// The tables as a history rebuilt them, by id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tables(BTreeMap<String, TableDef>);

impl Tables {
    /// Applies one record's changes, in order.
    pub fn apply(&mut self, record: &HistoryRecord) {
        for change in &record.table_changes {
            match (change.kind, &change.table) {
                (ChangeKind::Drop, _) => {
                    self.0.remove(&change.id);
                }
                (_, Some(table)) => {
                    self.0.insert(change.id.clone(), table.clone());
                }
                (_, None) => {}
            }
        }
    }

    /// The structure of the table `id`.
    pub fn get(&self, id: &str) -> Option<&TableDef> {
        self.0.get(id)
    }

    /// The ids, in order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// How many tables.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `"db"."table"` (or `"db"."schema"."table"`) as Debezium writes a table id in history
/// records.
pub fn table_id(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(".")
}
