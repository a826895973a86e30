//! A captured table of a change-table source: what every dialect knows of it (its columns and
//! their kinds, the shape and envelope of its events, its structure for the schema history),
//! and where its changes are read (`X`: SQL Server's capture instance, Db2's change-data table).

use std::sync::Arc;

use sluice_engine::event::EnvelopeSchema;
use sluice_engine::{Schema, Struct, Value};

use crate::config::SourceCommon;
use crate::failure::RowError;
use crate::history::{ColumnDef, TableDef};
use crate::shape::{ColumnSpec, Shape};

/// A captured table; `K` is the dialect's column kind, `X` where its changes are.
pub struct CapturedTable<K, X> {
    pub schema: String,
    pub name: String,
    /// Where its changes are read (the capture instance, the change-data table).
    pub change_table: X,
    /// The columns the snapshot and the change rows hold, in their order, with their kinds.
    pub columns: Vec<(String, K)>,
    /// What the events carry of them.
    pub shape: Shape,
    pub envelope: EnvelopeSchema,
    pub topic: Arc<str>,
    /// `source.schema` and `source.table`.
    pub values: (Value, Value),
    /// The table's id in schema change events and the history (`"db"."schema"."table"`).
    pub id: String,
    /// Its structure, as schema change events describe it.
    pub def: TableDef,
    /// Whether its changes are events (the configuration selects it).
    pub captured: bool,
    /// Whether it is the signaling table the `source` channel reads.
    pub signals: bool,
}

/// One column of a table as a dialect read it from its catalog.
pub struct Column<K> {
    pub kind: K,
    /// How the events carry it (name, schema, key position, text and length).
    pub spec: ColumnSpec,
    /// How the schema history and schema change events describe it.
    pub def: ColumnDef,
}

/// What a dialect read of a table, for [`CapturedTable::build`].
pub struct TableParts<'a, K, X> {
    pub schema: &'a str,
    pub name: &'a str,
    pub change_table: X,
    pub columns: Vec<Column<K>>,
    /// The database part of its topic (`<prefix>.<database>.<schema>.<table>`) and id, where
    /// the dialect names it (SQL Server does, Db2 does not).
    pub database: Option<&'a str>,
    pub captured: bool,
    pub signals: bool,
}

impl<K, X> CapturedTable<K, X> {
    /// The table of `parts`: its shape from the column options of `common`, its topic, its
    /// envelope with `source_schema`; `Err` says why its events cannot be made.
    pub fn build(
        parts: TableParts<'_, K, X>,
        common: &SourceCommon,
        source_schema: &Arc<Schema>,
    ) -> Result<Self, String> {
        let full = format!("{}.{}", parts.schema, parts.name);
        let mut keys: Vec<(usize, String)> = (parts.columns.iter())
            .filter_map(|c| Some((c.spec.primary_key?, c.spec.name.clone())))
            .collect();
        keys.sort();
        let mut columns = Vec::with_capacity(parts.columns.len());
        let mut specs = Vec::with_capacity(parts.columns.len());
        let mut defs = Vec::with_capacity(parts.columns.len());
        for c in parts.columns {
            columns.push((c.spec.name.clone(), c.kind));
            specs.push(c.spec);
            defs.push(c.def);
        }
        let shape = common.shape(&full, &specs)?;
        let topic = match parts.database {
            Some(db) => format!("{}.{db}.{full}", common.topic_prefix),
            None => format!("{}.{full}", common.topic_prefix),
        };
        let envelope = EnvelopeSchema::new(
            &topic,
            shape.key_schema.clone(),
            shape.row.clone(),
            source_schema.clone(),
        );
        let id = match parts.database {
            Some(db) => crate::history::table_id(&[db, parts.schema, parts.name]),
            None => crate::history::table_id(&[parts.schema, parts.name]),
        };
        Ok(CapturedTable {
            schema: parts.schema.to_owned(),
            name: parts.name.to_owned(),
            change_table: parts.change_table,
            columns,
            shape,
            envelope,
            topic: topic.into(),
            values: (Value::from(parts.schema), Value::from(parts.name)),
            id,
            def: TableDef {
                default_charset_name: None,
                primary_key_column_names: keys.into_iter().map(|(_, k)| k).collect(),
                columns: defs,
                attributes: Vec::new(),
                comment: None,
            },
            captured: parts.captured,
            signals: parts.signals,
        })
    }

    /// `schema.table`, as the configuration and signals name it.
    pub fn full_name(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    /// The row the events carry: `value(i, kind, schema)` gives the value of column `i` (an
    /// index into [`Self::columns`]) at its event schema, or why it cannot be represented.
    pub fn row(
        &self,
        mut value: impl FnMut(usize, &K, &Arc<Schema>) -> Result<Value, String>,
    ) -> Result<Struct, RowError> {
        let shape = &self.shape;
        let mut values = Vec::with_capacity(shape.kept.len());
        for (j, &i) in shape.kept.iter().enumerate() {
            let (name, kind) = &self.columns[i];
            let schema = &shape.row.fields()[j].schema;
            let v = value(i, kind, schema).map_err(|reason| RowError::Column {
                column: name.clone(),
                reason,
            })?;
            values.push(shape.map(j, v));
        }
        Struct::from_values(shape.row.clone(), values).ok_or(RowError::Shape)
    }
}
