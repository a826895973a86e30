//! Applies one column mapper (mask, hash, truncate) to the selected string columns of `before`
//! and `after`, adding Debezium's schema parameter (`masked`, `truncateLength`). Events of
//! tables with no selected column pass through untouched.

use std::sync::Arc;

use sluice_engine::config::AnchoredRegex;
use sluice_engine::{ChangeEvent, ComponentError, Schema, SchemaType, Transform};
use sluice_kit::mapping::ColumnMapper;

use crate::envelope::{is_envelope, reschema, table_name, with_row, SchemaCache};

/// The length Debezium's `column.propagate.source.type` records, when present.
const LENGTH_PARAMETER: &str = "__debezium.source.column.length";

#[derive(Debug)]
struct Plan {
    /// `(field index in the row, mapper)`; empty: leave the table's events alone.
    columns: Vec<(usize, ColumnMapper)>,
    /// The value is a flat row (after `unwrap`), not an envelope.
    flat: bool,
    envelope: Arc<Schema>,
    row: Arc<Schema>,
}

/// A column mapper over selected columns.
#[derive(Debug)]
pub struct ColumnMap {
    selectors: Vec<AnchoredRegex>,
    mapper: ColumnMapper,
    plans: SchemaCache<Option<Plan>>,
}

impl ColumnMap {
    /// Maps columns selected by `selectors` (anchored regexes on `schema.table.column`).
    pub fn new(selectors: Vec<AnchoredRegex>, mapper: ColumnMapper) -> Self {
        ColumnMap {
            selectors,
            mapper,
            plans: SchemaCache::default(),
        }
    }

    fn plan(
        selectors: &[AnchoredRegex],
        mapper: &ColumnMapper,
        table: &str,
        schema: &Arc<Schema>,
    ) -> Option<Plan> {
        let flat = !is_envelope(schema);
        let row = if flat {
            (schema.kind() == SchemaType::Struct).then(|| schema.clone())?
        } else {
            schema.field("after")?.schema.clone()
        };
        let mut columns = Vec::new();
        let mut builder = row.to_builder().clear_fields();
        for (i, field) in row.fields().iter().enumerate() {
            let full = format!("{table}.{}", field.name);
            let selected = field.schema.kind() == SchemaType::String
                && selectors.iter().any(|r| r.is_match(&full));
            if !selected {
                builder = builder.field(field.name.clone(), field.schema.clone());
                continue;
            }
            let mapper = match mapper {
                ColumnMapper::Hash(h, None) => ColumnMapper::Hash(
                    h.clone(),
                    field
                        .schema
                        .parameter(LENGTH_PARAMETER)
                        .and_then(|l| l.parse::<usize>().ok())
                        .filter(|l| *l > 0),
                ),
                other => other.clone(),
            };
            let (k, v) = mapper.parameter();
            builder = builder.field(
                field.name.clone(),
                field.schema.to_builder().parameter(k, v).build(),
            );
            columns.push((i, mapper));
        }
        if columns.is_empty() {
            return Some(Plan {
                columns,
                flat,
                envelope: schema.clone(),
                row,
            });
        }
        let row = builder.build();
        if flat {
            return Some(Plan {
                columns,
                flat,
                envelope: row.clone(),
                row,
            });
        }
        Some(Plan {
            columns,
            flat,
            envelope: with_row(schema, &row).build(),
            row,
        })
    }

    /// Maps the event's columns; returns it unchanged when nothing is selected.
    pub fn map(&mut self, mut event: ChangeEvent) -> ChangeEvent {
        let Some(schema) = event.value.as_ref().map(|r| r.schema.clone()) else {
            return event;
        };
        let (selectors, mapper) = (&self.selectors, &self.mapper);
        let Some(plan) = self.plans.get_or_insert(&schema, || {
            let table = table_name(&event).unwrap_or_default();
            Self::plan(selectors, mapper, &table, &schema)
        }) else {
            return event;
        };
        if plan.columns.is_empty() {
            return event;
        }
        let Some(record) = event.value.as_mut() else {
            return event;
        };
        record.schema = plan.envelope.clone();
        if plan.flat {
            map_row(&mut record.value, plan);
            return event;
        }
        reschema(&mut record.value, &plan.envelope);
        if let Some(env) = record.value.as_struct_mut() {
            for side in ["before", "after"] {
                if let Some(row) = env.get_mut(side) {
                    map_row(row, plan);
                }
            }
        }
        event
    }
}

impl Transform for ColumnMap {
    fn apply(
        &mut self,
        event: ChangeEvent,
        out: &mut Vec<ChangeEvent>,
    ) -> Result<(), ComponentError> {
        out.push(self.map(event));
        Ok(())
    }
}

/// Maps one row (null rows stay null).
fn map_row(row: &mut sluice_engine::Value, plan: &Plan) {
    if row.is_null() {
        return;
    }
    reschema(row, &plan.row);
    if let Some(row) = row.as_struct_mut() {
        let values = row.values_mut();
        for (i, mapper) in &plan.columns {
            if let Some(mapped) = values.get(*i).and_then(|v| mapper.apply(v)) {
                values[*i] = mapped;
            }
        }
    }
}
