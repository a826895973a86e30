//! The boundary-value agreement scenario, written once and run against every source through a
//! small [`Backend`] handle: a table with each column type at its limits is read once by the
//! snapshot and once by the stream (the same rows inserted after the snapshot, then an update
//! touching another column, then a delete). For every row and column:
//! - the snapshot's `after` equals the streamed `after`, the update's `before` and the
//!   delete's `before`, and the update's `after` but for the column it touched;
//! - the value is what the database's own client prints for it (the backend reads it back as
//!   that client's text).
//!
//! Every disagreement is collected (source, column, type, literal, what differs) and the
//! scenario fails listing them all, so one run names every wrong value.

use serde_json::Value as Json;

use super::{text, Backend};
use crate::pg;

/// One column of the boundary table: its SQL type and the values it takes, as SQL literals
/// (`NULL` among them where the type allows it).
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub sql_type: String,
    pub values: Vec<String>,
}

impl Column {
    pub fn new(name: &str, sql_type: &str, values: &[&str]) -> Column {
        Column {
            name: name.to_owned(),
            sql_type: sql_type.to_owned(),
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    /// A column of drawn values ([`super::generated`]).
    pub fn drawn(name: &str, sql_type: &str, values: Vec<String>) -> Column {
        Column {
            name: name.to_owned(),
            sql_type: sql_type.to_owned(),
            values,
        }
    }

    /// The literal of row `k` (0-based): the column's values in turn.
    fn literal(&self, k: usize) -> &str {
        &self.values[k % self.values.len()]
    }
}

/// The events of one row, by op.
#[derive(Default)]
struct RowEvents {
    read: Option<Json>,
    created: Option<Json>,
    updated: Option<(Json, Json)>,
    deleted: Option<Json>,
}

/// Runs the scenario against `backend`; panics listing every disagreement.
pub fn run(backend: &dyn Backend) {
    run_columns(backend, &backend.boundary_columns(), "boundary");
}

/// Runs the scenario on `columns` in a table named `table`; panics listing every disagreement.
pub fn run_columns(backend: &dyn Backend, columns: &[Column], table: &str) {
    let rows = columns.iter().map(|c| c.values.len()).max().unwrap_or(0);
    let rows_i = i64::try_from(rows).unwrap();
    let (int, _) = backend.types();
    backend.prepare_boundary();
    let mut defs = vec![
        ("id".to_owned(), int.to_owned()),
        ("touch".to_owned(), int.to_owned()),
    ];
    defs.extend(columns.iter().map(|c| (c.name.clone(), c.sql_type.clone())));
    backend.create(table, &defs);
    let (table, id, touch) = (
        backend.table(table),
        backend.column("id"),
        backend.column("touch"),
    );
    let names: Vec<String> = columns.iter().map(|c| backend.column(&c.name)).collect();
    let inserts = |first: i64| -> String {
        (0..rows)
            .map(|k| {
                let literals: Vec<&str> = columns.iter().map(|c| c.literal(k)).collect();
                format!(
                    "INSERT INTO {table} ({id}, {touch}, {}) VALUES ({}, 0, {})",
                    names.join(", "),
                    first + i64::try_from(k).unwrap(),
                    literals.join(", ")
                )
            })
            .collect::<Vec<_>>()
            .join(";\n")
    };
    backend.execute(&inserts(1));
    let exprs: Vec<String> = columns.iter().map(|c| backend.client_expr(c)).collect();
    let client = backend.query(&format!(
        "SELECT {} FROM {table} WHERE {id} BETWEEN 1 AND {rows_i} ORDER BY {id}",
        exprs.join(", ")
    ));
    let dir = tempfile::tempdir().unwrap();
    let path = backend.pipeline(dir.path(), &[]);
    let mut child = pg::start(&path, &[]);
    let count = |events: &[Json], op: &str| {
        events
            .iter()
            .filter(|e| e["value"]["payload"]["op"] == op)
            .count()
    };
    pg::wait_for(dir.path(), "the snapshot's rows", &mut child, |e| {
        count(e, "r") >= rows
    });
    backend.execute(&inserts(rows_i + 1));
    backend.execute(&format!(
        "UPDATE {table} SET {touch} = 1 WHERE {id} > {rows_i}"
    ));
    backend.execute(&format!("DELETE FROM {table} WHERE {id} > {rows_i}"));
    pg::wait_for(dir.path(), "the streamed deletes", &mut child, |e| {
        count(e, "d") >= rows
    });
    pg::stop(&child);
    pg::finish(child);
    let events = pg::lines(dir.path());
    let problems = compare(backend, columns, rows_i, &events, &client);
    assert!(
        problems.is_empty(),
        "{}: {} disagreement(s):\n{}",
        backend.name(),
        problems.len(),
        problems.join("\n")
    );
}

/// The events of each row id.
fn by_row(events: &[Json], id: &str) -> std::collections::BTreeMap<i64, RowEvents> {
    let mut rows: std::collections::BTreeMap<i64, RowEvents> = Default::default();
    for e in events {
        let payload = &e["value"]["payload"];
        let op = payload["op"].as_str().unwrap_or_default();
        let image = if op == "d" { "before" } else { "after" };
        let Some(id) = payload[image][id].as_i64() else {
            continue;
        };
        let row = rows.entry(id).or_default();
        match op {
            "r" => row.read = Some(e.clone()),
            "c" => row.created = Some(e.clone()),
            "u" => row.updated = Some((payload["before"].clone(), payload["after"].clone())),
            "d" => row.deleted = Some(payload["before"].clone()),
            _ => {}
        }
    }
    rows
}

/// Every disagreement between the snapshot, the stream and the client.
fn compare(
    backend: &dyn Backend,
    columns: &[Column],
    rows: i64,
    events: &[Json],
    client: &[Vec<Option<String>>],
) -> Vec<String> {
    let by_row = by_row(events, &backend.field("id"));
    let mut problems = Vec::new();
    let missing = RowEvents::default();
    for k in 1..=rows {
        let snapshot = by_row.get(&k).unwrap_or(&missing);
        let streamed = by_row.get(&(k + rows)).unwrap_or(&missing);
        let Some(read) = &snapshot.read else {
            problems.push(format!("row {k}: no snapshot event"));
            continue;
        };
        let (Some(created), Some((before, after)), Some(deleted)) =
            (&streamed.created, &streamed.updated, &streamed.deleted)
        else {
            problems.push(format!(
                "row {}: not created, updated and deleted in the stream",
                k + rows
            ));
            continue;
        };
        let fields = after_fields(read);
        let read = &read["value"]["payload"]["after"];
        let created = &created["value"]["payload"]["after"];
        for (i, column) in columns.iter().enumerate() {
            let literal = column.literal(usize::try_from(k - 1).unwrap());
            let what =
                |msg: String| format!("{} ({}) = {literal}: {msg}", column.name, column.sql_type);
            let field = backend.field(&column.name);
            let name = field.as_str();
            let schema = fields.get(name).cloned().unwrap_or(Json::Null);
            let ours = &read[name];
            for (image, other) in [
                ("the streamed after", &created[name]),
                ("the update's before", &before[name]),
                ("the update's after", &after[name]),
                ("the delete's before", &deleted[name]),
            ] {
                if !text::same(ours, other, &schema) {
                    problems.push(what(format!("snapshot {ours} but {image} {other}")));
                }
            }
            match (&client[usize::try_from(k - 1).unwrap()][i], ours.is_null()) {
                (None, true) => {}
                (None, false) => {
                    problems.push(what(format!("the client prints NULL, the snapshot {ours}")))
                }
                (Some(text), _) => {
                    if let Err(e) = backend.check(column, ours, &schema, text) {
                        problems.push(what(format!(
                            "the client prints {text:?}, the snapshot {ours}: {e}"
                        )));
                    }
                }
            }
        }
    }
    problems
}

/// The field schemas of an event's `after`, by name.
fn after_fields(event: &Json) -> std::collections::HashMap<String, Json> {
    event["value"]["schema"]["fields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["field"] == "after")
        .flat_map(|f| f["fields"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| Some((f["field"].as_str()?.to_owned(), f)))
        .collect()
}
