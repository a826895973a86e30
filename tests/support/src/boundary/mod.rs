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

pub mod mysql;
pub mod postgres;
pub mod sqlite;
pub mod text;

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

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

    /// The literal of row `k` (0-based): the column's values in turn.
    fn literal(&self, k: usize) -> &str {
        &self.values[k % self.values.len()]
    }
}

/// What the scenario needs of one source and its database.
pub trait Backend {
    /// The source's name, in messages.
    fn name(&self) -> &str;
    /// The columns under test, each with its values.
    fn columns(&self) -> Vec<Column>;
    /// Makes table `boundary` (`id` integer primary key, `touch` integer, then `columns`)
    /// and whatever its capture needs.
    fn create(&self, columns: &[Column]);
    /// Runs SQL statements separated by `;` (each its own transaction).
    fn execute(&self, sql: &str);
    /// A pipeline that snapshots `boundary`, then streams it, into `dir/out.jsonl` with
    /// schemas on.
    fn pipeline(&self, dir: &Path) -> PathBuf;
    /// The database's own client's text of `columns` for rows `ids` (`None`: NULL), in order.
    fn client_rows(
        &self,
        ids: std::ops::RangeInclusive<i64>,
        columns: &[Column],
    ) -> Vec<Vec<Option<String>>>;
    /// Whether the event's `value` (of field schema `schema`) is the client's text of it;
    /// `Err` says how it differs.
    fn check(
        &self,
        column: &Column,
        value: &Json,
        schema: &Json,
        client: &str,
    ) -> Result<(), String>;
    /// The INSERT of one row (`literals` in `columns`' order).
    fn insert(&self, id: i64, columns: &[Column], literals: &[&str]) -> String {
        let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
        format!(
            "INSERT INTO boundary (id, touch, {}) VALUES ({id}, 0, {})",
            names.join(", "),
            literals.join(", ")
        )
    }
}

/// Runs a database client with `input` on its standard input (statements too long for an
/// argument); its output.
pub fn piped(command: &mut std::process::Command, input: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the database client");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = format!("{input};\n");
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().expect("the database client");
    writer.join().unwrap();
    out
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
    let columns = backend.columns();
    let rows = columns.iter().map(|c| c.values.len()).max().unwrap_or(0);
    let rows_i = i64::try_from(rows).unwrap();
    backend.create(&columns);
    let inserts = |first: i64| -> String {
        (0..rows)
            .map(|k| {
                let literals: Vec<&str> = columns.iter().map(|c| c.literal(k)).collect();
                backend.insert(first + i64::try_from(k).unwrap(), &columns, &literals)
            })
            .collect::<Vec<_>>()
            .join(";\n")
    };
    backend.execute(&inserts(1));
    let client = backend.client_rows(1..=rows_i, &columns);
    let dir = tempfile::tempdir().unwrap();
    let path = backend.pipeline(dir.path());
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
        "UPDATE boundary SET touch = 1 WHERE id > {rows_i}"
    ));
    backend.execute(&format!("DELETE FROM boundary WHERE id > {rows_i}"));
    pg::wait_for(dir.path(), "the streamed deletes", &mut child, |e| {
        count(e, "d") >= rows
    });
    pg::stop(&child);
    pg::finish(child);
    let events = pg::lines(dir.path());
    let problems = compare(backend, &columns, rows_i, &events, &client);
    assert!(
        problems.is_empty(),
        "{}: {} disagreement(s):\n{}",
        backend.name(),
        problems.len(),
        problems.join("\n")
    );
}

/// The events of each row id.
fn by_row(events: &[Json]) -> std::collections::BTreeMap<i64, RowEvents> {
    let mut rows: std::collections::BTreeMap<i64, RowEvents> = Default::default();
    for e in events {
        let payload = &e["value"]["payload"];
        let op = payload["op"].as_str().unwrap_or_default();
        let image = if op == "d" { "before" } else { "after" };
        let Some(id) = payload[image]["id"].as_i64() else {
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
    let by_row = by_row(events);
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
            let name = column.name.as_str();
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
