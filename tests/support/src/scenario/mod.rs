//! Scenarios written once and run against every source through a small [`Backend`] handle:
//! - [`boundary`]: every type at its limits reads the same in the snapshot, the stream and the
//!   database's own client;
//! - [`kill`]: kill -9 at random moments (initial, incremental and blocking snapshots, the
//!   stream) under a writer loses nothing;
//! - [`blocking`]: blocking snapshots signalled in the middle of a writer, the output equal to
//!   the table every time;
//! - [`generated`]: the same with values drawn across each type's whole range (MySQL's binlog
//!   decoder, PostgreSQL's pgoutput and COPY readers);
//! - [`memory`]: rows of megabytes through the snapshot and one transaction, in bounded memory;
//! - [`failure`]: a value the source cannot represent, under each failure handling mode.
//!
//! A backend is one database of one source: how to run SQL there, read it back with the
//! database's own client, name tables and columns, make a table captured, and write the
//! pipeline that reads it.

pub mod blocking;
pub mod boundary;
pub mod db2;
pub mod failure;
pub mod generated;
pub mod kill;
pub mod memory;
pub mod mysql;
pub mod postgres;
pub mod sqlite;
pub mod sqlserver;
pub mod text;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::pipeline::{Component, Pipeline, Scalar};

pub use boundary::Column;

/// What the scenarios need of one source and its database.
pub trait Backend: Sync {
    /// The source's name, in messages.
    fn name(&self) -> &str;
    /// Runs SQL statements separated by `;`, each its own transaction unless
    /// [`Self::transaction`] wrapped them.
    fn execute(&self, sql: &str);
    /// The database's own client's text of the rows `sql` selects (`None`: NULL).
    fn query(&self, sql: &str) -> Vec<Vec<Option<String>>>;
    /// Makes table `name` with `columns` (name and SQL type; the first is the primary key)
    /// and whatever its capture needs.
    fn create(&self, name: &str, columns: &[(String, String)]);
    /// Table `name` as SQL names it.
    fn table(&self, name: &str) -> String {
        name.to_owned()
    }
    /// Column `name` as SQL names it.
    fn column(&self, name: &str) -> String {
        name.to_owned()
    }
    /// The field events carry for column `name`.
    fn field(&self, name: &str) -> String {
        name.to_owned()
    }
    /// The data collection signals name table `name` by.
    fn collection(&self, name: &str) -> String;
    /// `statements` in one transaction.
    fn transaction(&self, statements: &[String]) -> String {
        format!("BEGIN; {}; COMMIT", statements.join("; "))
    }
    /// The SQL types of an integer column and of a short text column.
    fn types(&self) -> (&str, &str);
    /// The SQL type of a text column of megabytes.
    fn large_text_type(&self) -> &str;
    /// A value of a column type the source cannot represent ([`failure`]); `None`: the
    /// source has none the scenarios know.
    fn unrepresentable(&self) -> Option<failure::Unrepresentable> {
        None
    }
    /// SQL for a text of `n` times the character `c`.
    fn repeated(&self, n: usize, c: char) -> String {
        format!("repeat('{c}', {n})")
    }
    /// The source reading the captured tables: its `type`, connection and topics.
    fn source(&self) -> Component;
    /// A pipeline that snapshots the captured tables, then streams them, into
    /// `dir/out.jsonl` (schemas on), its source's `keys` set ([`pipeline_file`]).
    fn pipeline(&self, dir: &Path, keys: &[(&str, Scalar)]) -> PathBuf {
        pipeline_file(dir, self.source().set_all(keys))
    }

    /// The boundary scenario's columns, each with its values.
    fn boundary_columns(&self) -> Vec<Column>;
    /// Columns of the boundary table's types with values drawn across each type's whole
    /// range ([`generated`]); none for a source whose decoders the scenario does not draw for.
    fn generated_columns(&self, _draw: &mut generated::Draw) -> Vec<Column> {
        Vec::new()
    }
    /// Whatever the boundary table's types need first (an enum type).
    fn prepare_boundary(&self) {}
    /// The client's expression for a boundary column (its bytes as hex, say).
    fn client_expr(&self, column: &Column) -> String {
        self.column(&column.name)
    }
    /// Whether the event's `value` (of field schema `schema`) is the client's text of it;
    /// `Err` says how it differs.
    fn check(
        &self,
        column: &Column,
        value: &Json,
        schema: &Json,
        client: &str,
    ) -> Result<(), String>;
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

/// The pipeline file the scenarios run (`dir/pipeline.yaml`): `source` into `dir/out.jsonl`
/// with schemas, offsets committed every 20 ms, batches of 256 events at most.
pub fn pipeline_file(dir: &Path, source: Component) -> PathBuf {
    Pipeline::new("scenario", dir.join("data"))
        .setting("restart", &[("max_retries", 0u32.into())])
        .setting("offsets", &[("flush_interval", "20ms".into())])
        .top("max_batch_size", 256u32)
        .source(source)
        .sink(crate::pipeline::file_sink(dir.join("out.jsonl"), true))
        .write(dir)
}

/// `CREATE TABLE table (columns…, PRIMARY KEY (first))`, each column named by `column`.
pub fn create_table_sql(
    table: &str,
    columns: &[(String, String)],
    column: impl Fn(&str) -> String,
) -> String {
    let defs: Vec<String> = columns
        .iter()
        .map(|(c, t)| format!("{} {t}", column(c)))
        .collect();
    let key = columns.first().map(|(c, _)| column(c)).unwrap_or_default();
    format!(
        "CREATE TABLE {table} ({}, PRIMARY KEY ({key}))",
        defs.join(", ")
    )
}

/// A client's tab-separated output as rows, `null` standing for NULL.
pub fn rows_of(text: &str, null: &str) -> Vec<Vec<Option<String>>> {
    text.lines()
        .map(|l| {
            l.split('\t')
                .map(|f| (f != null).then(|| f.to_owned()))
                .collect()
        })
        .collect()
}

/// The table `items` (`id`, `n`, `note`) as the database holds it.
pub fn items_state(backend: &dyn Backend) -> BTreeMap<i64, (i64, String)> {
    let (id, n, note) = (
        backend.column("id"),
        backend.column("n"),
        backend.column("note"),
    );
    backend
        .query(&format!(
            "SELECT {id}, {n}, {note} FROM {}",
            backend.table("items")
        ))
        .into_iter()
        .map(|r| {
            let field = |i: usize| r.get(i).cloned().flatten().unwrap_or_default();
            (
                field(0).parse().unwrap(),
                (field(1).parse().unwrap(), field(2)),
            )
        })
        .collect()
}

/// The table `items` as the output says: each key's last image (a delete or a tombstone
/// removes it).
pub fn items_replayed(backend: &dyn Backend, events: &[Json]) -> BTreeMap<i64, (i64, String)> {
    let (id, n, note) = (
        backend.field("id"),
        backend.field("n"),
        backend.field("note"),
    );
    let mut state = BTreeMap::new();
    for e in events {
        let topic = e["topic"].as_str().unwrap_or_default();
        if !topic.to_ascii_lowercase().ends_with(".items") {
            continue;
        }
        let value = &e["value"]["payload"];
        let Some(key) = e["key"]["payload"][&id].as_i64() else {
            continue;
        };
        match value["op"].as_str() {
            _ if value.is_null() => {
                state.remove(&key);
            }
            Some("r" | "c" | "u") => {
                let after = &value["after"];
                let row = (
                    after[&n].as_i64().unwrap_or_default(),
                    after[&note].as_str().unwrap_or_default().to_owned(),
                );
                state.insert(key, row);
            }
            Some("d") => {
                state.remove(&key);
            }
            _ => {}
        }
    }
    state
}

/// The writer's statements of step `i` on `items` seeded with `seeded` rows: an insert of a
/// new key, an update and a delete of seeded keys (every tenth step one transaction).
pub fn writer_step(backend: &dyn Backend, i: usize, seeded: usize) -> String {
    let (table, id, n, note) = (
        backend.table("items"),
        backend.column("id"),
        backend.column("n"),
        backend.column("note"),
    );
    let statements = vec![
        format!(
            "INSERT INTO {table} ({id}, {n}, {note}) VALUES ({}, {i}, 'w{i}')",
            seeded + i
        ),
        format!(
            "UPDATE {table} SET {n} = {n} + 1, {note} = 'u{i}' WHERE {id} = {}",
            1 + (i * 7) % seeded
        ),
        format!("DELETE FROM {table} WHERE {id} = {}", 2 + (i * 13) % seeded),
    ];
    if i.is_multiple_of(10) {
        backend.transaction(&statements)
    } else {
        statements.join("; ")
    }
}

/// Makes `items` with `rows` rows (ids 1 to `rows`), captured.
pub fn seed_items(backend: &dyn Backend, rows: usize) {
    let (int, text) = backend.types();
    let columns =
        [("id", int), ("n", int), ("note", text)].map(|(c, t)| (c.to_owned(), t.to_owned()));
    backend.create("items", &columns);
    let (table, id, n, note) = (
        backend.table("items"),
        backend.column("id"),
        backend.column("n"),
        backend.column("note"),
    );
    for chunk in (1..=rows).collect::<Vec<_>>().chunks(1000) {
        let values: Vec<String> = chunk
            .iter()
            .map(|i| format!("({i}, {i}, 's{i}')"))
            .collect();
        backend.execute(&format!(
            "INSERT INTO {table} ({id}, {n}, {note}) VALUES {}",
            values.join(", ")
        ));
    }
}

/// How many rounds a scenario makes: the environment variable `var` (the long mode outside
/// CI: `SLUICE_TEST_KILLS=50`, `SLUICE_TEST_BLOCKING_ROUNDS=20`), else `default`.
pub fn rounds(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}
