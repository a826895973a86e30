//! A captured table as the SQLite source reads it: the columns it selects (after
//! `column.include.list` / `column.exclude.list`), their kinds and the column mappers of
//! `column.mask.with.N.chars`, `column.mask.hash.*` and `column.truncate.to.N.chars` (on text
//! columns, with the schema parameters Debezium adds), the key, and the event schemas.

use std::sync::Arc;

use sluice_engine::event::EnvelopeSchema;
use sluice_engine::{ComponentError, Schema, Value};
use sluice_kit::config::SourceCommon;
use sluice_kit::mapping::ColumnMapper;

use super::capture::Captured;
use super::types::{self, Kind};

/// One captured table, ready to turn rows into events.
pub(super) struct Table {
    pub(super) name: String,
    /// `source.table` of its events: the name, made once.
    pub(super) source_table: Value,
    pub(super) topic: Arc<str>,
    /// The columns read, in table order.
    pub(super) columns: Vec<(String, Kind)>,
    /// Each column's mapper, by the index in `columns`.
    pub(super) mappers: Vec<Option<ColumnMapper>>,
    /// The key columns (the primary key or capture's `--key`: incremental snapshots read in
    /// their order), by their index in `columns`.
    pub(super) key: Vec<usize>,
    /// The events' key columns: `message.key.columns` for the table, else `key`.
    pub(super) event_key: Vec<usize>,
    pub(super) envelope: EnvelopeSchema,
}

impl Table {
    /// The columns read, quoted and comma-separated (a SELECT list).
    pub(super) fn select_list(&self) -> String {
        self.columns
            .iter()
            .map(|(n, _)| super::quote(n))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Column `i`'s value as the event carries it (mapped when a column property says so).
    pub(super) fn mapped(&self, i: usize, value: Value) -> Value {
        match self.mappers.get(i).and_then(Option::as_ref) {
            Some(mapper) => mapper.apply(&value).unwrap_or(value),
            None => value,
        }
    }
}

/// The table `c` with these options. A key column the column lists leave out is refused: the
/// SQLite source keeps key columns in the value (Debezium keeps them in the key only).
pub(super) fn build(
    c: &Captured,
    common: &SourceCommon,
    source_schema: &Arc<Schema>,
) -> Result<Table, ComponentError> {
    let prefix = format!("{}.main.{}", common.topic_prefix, c.table);
    let mut row = Schema::struct_builder();
    let mut key_schema = Schema::struct_builder();
    let mut columns = Vec::new();
    let mut mappers = Vec::new();
    for col in &c.columns {
        let full = format!("main.{}.{}", c.table, col.name);
        let is_key = c.key.contains(&col.name);
        if !common.selects_column(&full) {
            if is_key {
                return Err(ComponentError::fatal(format!(
                    "`column.include.list` / `column.exclude.list` leave out `{full}`, a key column: the sqlite source cannot leave key columns out of the value yet; change the lists"
                )));
            }
            continue;
        }
        let kind = types::kind(&col.decltype);
        let mut schema = types::schema(&col.decltype, !col.not_null && !is_key);
        // A key column stays as it is (it is the key). Values of text columns only, as
        // Debezium; a mask or hash rule marks a column of another type all the same.
        let text = kind == Kind::String;
        let rule = (!is_key)
            .then(|| common.column_rules.mapper(&full, None))
            .flatten()
            .filter(|m| text || m.marks_every_type());
        if let Some(m) = &rule {
            let (name, value) = m.parameter();
            schema = schema.to_builder().parameter(name, value).build();
        }
        let mapper = rule.filter(|_| text);
        row = row.field(col.name.as_str(), schema);
        columns.push((col.name.clone(), kind));
        mappers.push(mapper);
    }
    let index = |k: &str, what: &str| {
        columns
            .iter()
            .position(|(name, _)| name == k)
            .ok_or_else(|| {
                ComponentError::fatal(format!(
                    "{what} `{k}` of `{}` is not a captured column",
                    c.table
                ))
            })
    };
    let key = c
        .key
        .iter()
        .map(|k| index(k, "key column"))
        .collect::<Result<Vec<_>, _>>()?;
    let event_key = match common.key_columns.of(&format!("main.{}", c.table)) {
        Some(names) => names
            .iter()
            .map(|k| index(k, "`message.key.columns` names column"))
            .collect::<Result<Vec<_>, _>>()?,
        None => key.clone(),
    };
    for &i in &event_key {
        let col = c.columns.iter().find(|col| col.name == columns[i].0);
        // A key column keeps its optionality: `message.key.columns` may name nullable ones.
        let optional = col.is_some_and(|col| !col.not_null && !c.key.contains(&col.name));
        let decl = col.map_or("", |col| col.decltype.as_str());
        key_schema = key_schema.field(columns[i].0.as_str(), types::schema(decl, optional));
    }
    let envelope = EnvelopeSchema::new(
        &prefix,
        Some(key_schema.build()),
        row.build(),
        source_schema.clone(),
    );
    Ok(Table {
        name: c.table.clone(),
        source_table: Value::from(c.table.as_str()),
        topic: prefix.into(),
        columns,
        mappers,
        key,
        event_key,
        envelope,
    })
}

/// Announces the snapshot's tables with their rows (counted in the snapshot's transaction:
/// SQLite keeps no estimate; a count that fails leaves that table without one).
pub(super) fn announce(
    tx: &rusqlite::Transaction<'_>,
    tables: &[&Table],
    plan: &sluice_engine::component::SnapshotPlan,
) {
    let counted = (tables.iter())
        .map(|t| {
            let sql = format!("SELECT count(*) FROM {}", super::capture::quote(&t.name));
            let rows = tx.query_row(&sql, [], |r| r.get::<_, i64>(0)).ok();
            (
                format!("main.{}", t.name),
                rows.and_then(|n| u64::try_from(n).ok()),
            )
        })
        .collect();
    *plan.lock().unwrap_or_else(|p| p.into_inner()) = Some(counted);
}
