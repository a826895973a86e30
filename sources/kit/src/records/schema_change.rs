//! Schema change events (`include.schema.changes`): on the topic named after `topic.prefix`,
//! keyed by the database name, carrying the statement and the structure of each table it
//! changed, in the relational format every Debezium connector uses (`SchemaChangeKey` /
//! `SchemaChangeValue`, `tableChanges` of `io.debezium.connector.schema.*` structs). The
//! structures are the schema history's ([`crate::history::TableChange`]), so an event and the
//! history record of the same change say the same thing.

use std::sync::Arc;

use sluice_engine::{ChangeEvent, Position, Record, Schema, SchemaType, Struct, Value};

use crate::history::{ChangeKind, ColumnDef, TableChange, TableDef};

/// One schema change, as an event describes it.
#[derive(Debug, Clone, Copy)]
pub struct SchemaChange<'a> {
    /// The database the statement ran in (the event's key; empty for server-wide statements).
    pub database: &'a str,
    /// The schema, for databases that have them.
    pub schema: Option<&'a str>,
    /// The statement, when the source has one.
    pub ddl: Option<&'a str>,
    /// The tables it changed.
    pub changes: &'a [TableChange],
}

/// The schemas of a connector's schema change events, built once.
#[derive(Debug)]
pub struct SchemaChangeEvents {
    topic: Arc<str>,
    key: Arc<Schema>,
    value: Arc<Schema>,
    change: Arc<Schema>,
    table: Arc<Schema>,
    column: Arc<Schema>,
}

fn strings(optional: bool) -> Arc<Schema> {
    Schema::builder(SchemaType::Array)
        .optional_if(optional)
        .items(Schema::primitive(SchemaType::String, false))
        .build()
}

fn column_schema() -> Arc<Schema> {
    let s = |o| Schema::primitive(SchemaType::String, o);
    let i = |o| Schema::primitive(SchemaType::Int32, o);
    let b = || Schema::primitive(SchemaType::Boolean, true);
    Schema::struct_builder()
        .name("io.debezium.connector.schema.Column")
        .version(1)
        .field("name", s(false))
        .field("jdbcType", i(false))
        .field("nativeType", i(true))
        .field("typeName", s(false))
        .field("typeExpression", s(true))
        .field("charsetName", s(true))
        .field("length", i(true))
        .field("scale", i(true))
        .field("position", i(false))
        .field("optional", b())
        .field("autoIncremented", b())
        .field("generated", b())
        .field("comment", s(true))
        .field("defaultValueExpression", s(true))
        .field("enumValues", strings(true))
        .build()
}

fn text(s: &Option<String>) -> Value {
    s.as_deref().map_or(Value::Null, Value::from)
}

fn strct(schema: &Arc<Schema>, values: Vec<Value>) -> Value {
    Struct::from_values(schema.clone(), values).map_or(Value::Null, Value::Struct)
}

impl SchemaChangeEvents {
    /// Schemas for the topic `topic_prefix`, named after `connector` (`postgresql`, `mysql`),
    /// with that connector's `source` block schema.
    pub fn new(connector: &str, topic_prefix: &str, source: Arc<Schema>) -> Self {
        let s = |o| Schema::primitive(SchemaType::String, o);
        let column = column_schema();
        let table = Schema::struct_builder()
            .optional()
            .name("io.debezium.connector.schema.Table")
            .version(1)
            .field("defaultCharsetName", s(true))
            .field("primaryKeyColumnNames", strings(true))
            .field(
                "columns",
                Schema::builder(SchemaType::Array)
                    .items(column.clone())
                    .build(),
            )
            .field("comment", s(true))
            .build();
        let change = Schema::struct_builder()
            .name("io.debezium.connector.schema.Change")
            .version(1)
            .field("type", s(false))
            .field("id", s(false))
            .field("table", table.clone())
            .build();
        SchemaChangeEvents {
            topic: topic_prefix.into(),
            key: Schema::struct_builder()
                .name(format!("io.debezium.connector.{connector}.SchemaChangeKey"))
                .version(1)
                .field("databaseName", s(false))
                .build(),
            value: Schema::struct_builder()
                .name(format!(
                    "io.debezium.connector.{connector}.SchemaChangeValue"
                ))
                .version(1)
                .field("source", source)
                .field("ts_ms", Schema::primitive(SchemaType::Int64, false))
                .field("databaseName", s(true))
                .field("schemaName", s(true))
                .field("ddl", s(true))
                .field(
                    "tableChanges",
                    Schema::builder(SchemaType::Array)
                        .items(change.clone())
                        .build(),
                )
                .build(),
            change,
            table,
            column,
        }
    }

    fn column(&self, c: &ColumnDef) -> Value {
        let type_expression = c.type_expression.as_deref().unwrap_or(&c.type_name);
        strct(
            &self.column,
            vec![
                Value::from(c.name.as_str()),
                Value::Int32(c.jdbc_type),
                c.native_type.map_or(Value::Null, Value::Int32),
                Value::from(c.type_name.as_str()),
                Value::from(type_expression),
                text(&c.charset_name),
                c.length.map_or(Value::Null, Value::Int32),
                c.scale.map_or(Value::Null, Value::Int32),
                Value::Int32(c.position),
                Value::Boolean(c.optional),
                Value::Boolean(c.auto_incremented),
                Value::Boolean(c.generated),
                text(&c.comment),
                text(&c.default_value_expression),
                if c.enum_values.is_empty() {
                    Value::Null
                } else {
                    Value::Array(
                        c.enum_values
                            .iter()
                            .map(|v| Value::from(v.as_str()))
                            .collect(),
                    )
                },
            ],
        )
    }

    fn table(&self, t: &TableDef) -> Value {
        let names =
            |n: &[String]| Value::Array(n.iter().map(|k| Value::from(k.as_str())).collect());
        strct(
            &self.table,
            vec![
                text(&t.default_charset_name),
                names(&t.primary_key_column_names),
                Value::Array(t.columns.iter().map(|c| self.column(c)).collect()),
                text(&t.comment),
            ],
        )
    }

    /// The `tableChanges` item of one change.
    pub fn table_change(&self, change: &TableChange) -> Value {
        let kind = match change.kind {
            ChangeKind::Create => "CREATE",
            ChangeKind::Alter => "ALTER",
            ChangeKind::Drop => "DROP",
        };
        strct(
            &self.change,
            vec![
                Value::from(kind),
                Value::from(change.id.as_str()),
                change.table.as_ref().map_or(Value::Null, |t| self.table(t)),
            ],
        )
    }

    /// The event of `change`, with `source` saying where it was seen and `ts_ms` when.
    /// The event describing one table's structure `def` (`kind`: `CREATE` at a snapshot,
    /// `ALTER` when it changed), `ddl` null, as the change-table connectors (SQL Server, Db2)
    /// emit it: `(database, schema)` where the table is, `(id, def, kind)` what changed.
    pub fn table_event(
        &self,
        (database, schema): (&str, &str),
        (id, def, kind): (&str, &crate::history::TableDef, crate::history::ChangeKind),
        source: Struct,
        ts_ms: i64,
        position: Position,
    ) -> ChangeEvent {
        let change = crate::history::TableChange {
            kind,
            id: id.to_owned(),
            previous_id: None,
            table: Some(def.clone()),
            comment: Some(serde_json::Value::Null),
        };
        let event = SchemaChange {
            database,
            schema: Some(schema),
            ddl: None,
            changes: std::slice::from_ref(&change),
        };
        self.event(&event, source, ts_ms, position)
    }

    /// The event of a schema change.
    pub fn event(
        &self,
        change: &SchemaChange<'_>,
        source: Struct,
        ts_ms: i64,
        position: Position,
    ) -> ChangeEvent {
        let database: Arc<str> = change.database.into();
        let value = strct(
            &self.value,
            vec![
                Value::Struct(source),
                Value::Int64(ts_ms),
                Value::String(database.clone()),
                change.schema.map_or(Value::Null, Value::from),
                change.ddl.map_or(Value::Null, Value::from),
                Value::Array(
                    change
                        .changes
                        .iter()
                        .map(|c| self.table_change(c))
                        .collect(),
                ),
            ],
        );
        ChangeEvent {
            topic: self.topic.clone(),
            key: Some(Record {
                schema: self.key.clone(),
                value: strct(&self.key, vec![Value::String(database)]),
            }),
            value: Some(Record {
                schema: self.value.clone(),
                value,
            }),
            headers: Vec::new(),
            position,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(name: &str, position: i32) -> ColumnDef {
        ColumnDef {
            name: name.into(),
            jdbc_type: 4,
            native_type: None,
            type_name: "INT".into(),
            type_expression: None,
            charset_name: None,
            length: Some(11),
            scale: None,
            position,
            optional: false,
            auto_incremented: false,
            generated: false,
            comment: None,
            has_default_value: false,
            default_value_expression: None,
            enum_values: Vec::new(),
        }
    }

    #[test]
    fn an_event_carries_the_statement_and_each_tables_structure() {
        let source = Schema::struct_builder()
            .field("db", Schema::primitive(SchemaType::String, false))
            .build();
        let events = SchemaChangeEvents::new("mysql", "p", source.clone());
        let mut e = column("e", 2);
        e.enum_values = vec!["'a'".into()];
        let changes = [
            TableChange {
                kind: ChangeKind::Create,
                id: "\"d\".\"t\"".into(),
                previous_id: None,
                table: Some(TableDef {
                    default_charset_name: Some("latin1".into()),
                    primary_key_column_names: vec!["id".into()],
                    columns: vec![column("id", 1), e],
                    attributes: Vec::new(),
                    comment: None,
                }),
                comment: None,
            },
            TableChange {
                kind: ChangeKind::Drop,
                id: "\"d\".\"u\"".into(),
                previous_id: None,
                table: None,
                comment: None,
            },
        ];
        let change = SchemaChange {
            database: "d",
            schema: None,
            ddl: Some("CREATE TABLE t (id INT)"),
            changes: &changes,
        };
        let Some(src) = Struct::from_values(source, vec![Value::from("d")]) else {
            panic!("source struct");
        };
        let event = events.event(&change, src, 5, Position::Offset(1));
        assert_eq!(&*event.topic, "p");
        let Some(Record {
            value: Value::Struct(v),
            schema,
        }) = event.value
        else {
            panic!("a struct value");
        };
        assert_eq!(
            schema.name(),
            Some("io.debezium.connector.mysql.SchemaChangeValue")
        );
        let Some(Value::Array(items)) = v.get("tableChanges") else {
            panic!("tableChanges");
        };
        assert_eq!(items.len(), 2);
        let Value::Struct(drop) = &items[1] else {
            panic!("a change");
        };
        assert_eq!(drop.get("table"), Some(&Value::Null));
        let Value::Struct(create) = &items[0] else {
            panic!("a change");
        };
        let Some(Value::Struct(table)) = create.get("table") else {
            panic!("a table");
        };
        let Some(Value::Array(columns)) = table.get("columns") else {
            panic!("columns");
        };
        let (Value::Struct(id), Value::Struct(e)) = (&columns[0], &columns[1]) else {
            panic!("column structs");
        };
        assert_eq!(id.get("typeExpression"), Some(&Value::from("INT")));
        assert_eq!(id.get("enumValues"), Some(&Value::Null));
        assert_eq!(
            e.get("enumValues"),
            Some(&Value::Array(vec![Value::from("'a'")]))
        );
    }
}
