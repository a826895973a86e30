//! `jdbc`: change events applied to tables of a PostgreSQL database, with the Debezium JDBC sink
//! connector's semantics (`insert.mode`, `primary.key.mode`, `delete.enabled`,
//! `truncate.enabled`, `schema.evolution`, `table.name.format`), on Debezium envelopes directly
//! (and on flat rows after `unwrap`). A batch is one transaction: it is acknowledged once
//! committed, so the source position never passes a row the target could lose; with
//! `insert.mode: upsert` a batch applied twice (a retry, a restart before the commit) leaves
//! the same rows. MySQL and MariaDB targets are not built yet.

mod config;
mod sql;
mod values;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use sluice_engine::{delivered, BuildContext, ChangeEvent, ComponentError, Delivery, Op};
use sluice_engine::{Schema, Sink, SinkBatch, Struct, Value};
use tokio_postgres::types::{ToSql, Type};

use crate::skipped::skip_or_fail;
pub use config::{Evolution, InsertMode, JdbcSinkConfig, KeyMode};

use sql::Column;

/// One column value of a row change.
struct Cell {
    name: String,
    schema: Arc<Schema>,
    text: Option<String>,
}

/// What an event does to its table.
enum Change {
    Write {
        table: String,
        keys: Vec<Cell>,
        values: Vec<Cell>,
    },
    Delete {
        table: String,
        keys: Vec<Cell>,
    },
    Truncate {
        table: String,
    },
}

/// The running sink.
pub struct JdbcSink {
    name: String,
    config: JdbcSinkConfig,
    client: Option<tokio_postgres::Client>,
    /// Column types of the tables seen, by unquoted name.
    tables: HashMap<String, HashMap<String, String>>,
}

impl JdbcSink {
    /// A sink for `config`: the database is reached once so that a wrong address or login
    /// stops the start with one line.
    pub fn open(config: &JdbcSinkConfig, ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        config.validate().map_err(ComponentError::fatal)?;
        let name = ctx.component.to_owned();
        let (check, sink) = (config.clone(), name.clone());
        crate::block_on_side_thread(async move {
            let client = connect(&check)
                .await
                .map_err(|e| ComponentError::fatal(format!("sink `{sink}`: {e}")))?;
            client
                .simple_query("SELECT 1")
                .await
                .map_err(|e| ComponentError::fatal(format!("sink `{sink}`: {e}")))?;
            Ok(())
        })?;
        Ok(JdbcSink {
            name,
            config: config.clone(),
            client: None,
            tables: HashMap::new(),
        })
    }

    /// An identifier as the target spells it (folded to lower case unless `quote.identifiers`).
    fn ident(&self, name: &str) -> String {
        match self.config.quote_identifiers {
            true => name.to_owned(),
            false => name.to_lowercase(),
        }
    }

    /// The table of an event per `table.name.format`.
    fn table_of(&self, event: &ChangeEvent) -> String {
        let source = |field: &str| {
            event
                .source_field(field)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let name = self
            .config
            .table_format
            .replace("${topic}", &event.topic.replace('.', "_"))
            .replace("${source.db}", &source("db"))
            .replace("${source.schema}", &source("schema"))
            .replace("${source.table}", &source("table"));
        self.ident(&name)
    }

    /// The cells of `row`'s fields, `only` of them when given, those the field lists keep.
    fn cells(
        &self,
        topic: &str,
        row: &Struct,
        only: Option<&[String]>,
    ) -> Result<Vec<Cell>, String> {
        let mut cells = Vec::new();
        for (field, value) in row.schema().fields().iter().zip(row.values()) {
            if only.is_some_and(|o| !o.iter().any(|f| f == field.name.as_ref()))
                || !self.config.keeps(topic, &field.name)
            {
                continue;
            }
            let text = values::text(&field.schema, value)
                .map_err(|e| format!("column `{}`: {e}", field.name))?;
            cells.push(Cell {
                name: self.ident(&field.name),
                schema: field.schema.clone(),
                text,
            });
        }
        Ok(cells)
    }

    /// The key cells of an event (`primary.key.mode`).
    fn keys(&self, event: &ChangeEvent, row: Option<&Struct>) -> Result<Vec<Cell>, String> {
        let fields = self.config.key_fields();
        let only = (!fields.is_empty()).then_some(fields.as_slice());
        match self.config.key_mode {
            KeyMode::None => Ok(Vec::new()),
            KeyMode::RecordKey => match event.key.as_ref().map(|k| &k.value) {
                Some(Value::Struct(key)) => self.cells(&event.topic, key, only),
                _ => Err("`primary.key.mode: record_key` needs a struct key; this event has none (a table without a primary key?)".into()),
            },
            KeyMode::RecordValue => match row {
                Some(row) => self.cells(&event.topic, row, only),
                None => Err("`primary.key.mode: record_value` has no row to take the key from".into()),
            },
        }
    }

    /// What `event` does (`None`: nothing, as a delete with `delete.enabled: false`).
    fn change(&self, event: &ChangeEvent) -> Result<Option<Change>, String> {
        let table = self.table_of(event);
        let Some(value) = &event.value else {
            return Ok(match self.config.delete_enabled {
                true => Some(Change::Delete {
                    table,
                    keys: self.keys(event, None)?,
                }),
                false => None,
            });
        };
        let Some(envelope) = value.value.as_struct() else {
            return Err("the value is not a row".into());
        };
        let row = match event.op() {
            None => envelope, // a flat row (after `unwrap`)
            Some(Op::Create | Op::Read | Op::Update) => match envelope.get("after") {
                Some(Value::Struct(after)) => after,
                _ => return Err("a change without its `after` row".into()),
            },
            Some(Op::Delete) => {
                return Ok(match self.config.delete_enabled {
                    true => Some(Change::Delete {
                        table,
                        keys: self.keys(event, None)?,
                    }),
                    false => None,
                })
            }
            Some(Op::Truncate) => {
                return Ok(self
                    .config
                    .truncate_enabled
                    .then_some(Change::Truncate { table }))
            }
            Some(Op::Message) => return Ok(None),
        };
        let keys = self.keys(event, Some(row))?;
        let mut values = self.cells(&event.topic, row, None)?;
        values.retain(|v| !keys.iter().any(|k| k.name == v.name));
        Ok(Some(Change::Write {
            table,
            keys,
            values,
        }))
    }

    /// An event that cannot be written, under the failure mode.
    fn failed(&self, event: &ChangeEvent, reason: &str) -> Result<(), ComponentError> {
        let at = format!("topic `{}`", event.topic);
        skip_or_fail(self.config.failure_mode, &self.name, &at, reason)
    }

    /// The connection, opened when there is none.
    async fn client(&mut self) -> Result<&mut tokio_postgres::Client, ComponentError> {
        if self
            .client
            .as_ref()
            .is_some_and(tokio_postgres::Client::is_closed)
        {
            self.client = None;
        }
        if self.client.is_none() {
            let client = connect(&self.config)
                .await
                .map_err(|e| ComponentError::retryable(format!("sink `{}`: {e}", self.name)))?;
            self.client = Some(client);
        }
        self.client
            .as_mut()
            .ok_or_else(|| ComponentError::retryable("no connection"))
    }

    /// Applies `changes` in one transaction.
    async fn apply(&mut self, changes: &[Change]) -> Result<(), ComponentError> {
        let name = self.name.clone();
        let config = self.config.clone();
        let mut tables = std::mem::take(&mut self.tables);
        let client = self.client().await?;
        let result: Result<(), Failure> = async {
            let tx = client.transaction().await?;
            for change in changes {
                apply_one(&tx, &config, &mut tables, change).await?;
            }
            tx.commit().await?;
            Ok(())
        }
        .await;
        match result {
            Ok(()) => {
                self.tables = tables;
                Ok(())
            }
            Err(e) => Err(self.classify(&name, e)),
        }
    }

    /// A database error: retryable when the connection or the server's state is at fault.
    fn classify(&mut self, name: &str, e: Failure) -> ComponentError {
        match e {
            Failure::Plain(message) => ComponentError::fatal(format!("sink `{name}`: {message}")),
            Failure::Db(e) => {
                let class = e.code().map(|c| c.code()[..2].to_owned());
                let line = format!("sink `{name}`: {}", describe(&e));
                match class.as_deref() {
                    None | Some("08" | "40" | "53" | "57") => {
                        self.client = None;
                        ComponentError::retryable(line)
                    }
                    _ => ComponentError::fatal(line),
                }
            }
        }
    }
}

/// `use.reduction.buffer`: only the last change of each (table, key) of a batch, in the order of
/// those last changes; changes without a key and truncates stay, and a truncate ends what the
/// changes before it can be reduced with.
fn reduce(changes: Vec<Change>) -> Vec<Change> {
    let identity = |c: &Change| -> Option<(String, Vec<Option<String>>)> {
        match c {
            Change::Write { table, keys, .. } | Change::Delete { table, keys }
                if !keys.is_empty() =>
            {
                Some((table.clone(), keys.iter().map(|k| k.text.clone()).collect()))
            }
            _ => None,
        }
    };
    let mut last: HashMap<(String, Vec<Option<String>>), usize> = HashMap::new();
    let mut barrier = 0;
    let ids: Vec<_> = changes.iter().map(identity).collect();
    let mut keep = vec![true; changes.len()];
    for (i, change) in changes.iter().enumerate() {
        if matches!(change, Change::Truncate { .. }) {
            barrier = i;
            last.clear();
            continue;
        }
        if let Some(id) = &ids[i] {
            if let Some(previous) = last.insert(id.clone(), i) {
                if previous >= barrier {
                    keep[previous] = false;
                }
            }
        }
    }
    changes
        .into_iter()
        .zip(keep)
        .filter_map(|(c, k)| k.then_some(c))
        .collect()
}

/// Why applying failed.
enum Failure {
    Db(tokio_postgres::Error),
    Plain(String),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Failure::Db(e)
    }
}

/// The server's message with its detail, or the error's text.
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{} ({detail})", db.message()),
            None => db.message().to_owned(),
        },
        None => e.to_string(),
    }
}

/// Runs one change, creating or altering its table first when needed.
async fn apply_one(
    tx: &tokio_postgres::Transaction<'_>,
    config: &JdbcSinkConfig,
    tables: &mut HashMap<String, HashMap<String, String>>,
    change: &Change,
) -> Result<(), Failure> {
    let (table, keys, values): (&str, &[Cell], &[Cell]) = match change {
        Change::Write {
            table,
            keys,
            values,
        } => (table, keys, values),
        Change::Delete { table, keys } => (table, keys, &[]),
        Change::Truncate { table } => {
            tx.batch_execute(&format!("TRUNCATE TABLE {}", sql::table(table)))
                .await?;
            return Ok(());
        }
    };
    let columns = ensure_table(tx, config, tables, table, keys, values).await?;
    let column = |c: &Cell| -> Result<String, Failure> {
        columns
            .get(&c.name)
            .cloned()
            .ok_or_else(|| Failure::Plain(format!("table `{table}` has no column `{}`", c.name)))
    };
    let kinds_k: Vec<String> = keys.iter().map(column).collect::<Result<_, _>>()?;
    let kinds_v: Vec<String> = values.iter().map(column).collect::<Result<_, _>>()?;
    let k: Vec<Column<'_>> = keys
        .iter()
        .zip(&kinds_k)
        .map(|(c, t)| Column {
            name: &c.name,
            kind: t,
        })
        .collect();
    let v: Vec<Column<'_>> = values
        .iter()
        .zip(&kinds_v)
        .map(|(c, t)| Column {
            name: &c.name,
            kind: t,
        })
        .collect();
    let quoted = sql::table(table);
    let (statement, params): (String, Vec<&Option<String>>) = match change {
        Change::Delete { .. } => (
            sql::delete(&quoted, &k),
            keys.iter().map(|c| &c.text).collect(),
        ),
        _ => match config.insert_mode {
            InsertMode::Insert => (
                sql::insert(&quoted, &k, &v),
                keys.iter().chain(values).map(|c| &c.text).collect(),
            ),
            InsertMode::Upsert => (
                sql::upsert(&quoted, &k, &v),
                keys.iter().chain(values).map(|c| &c.text).collect(),
            ),
            InsertMode::Update if values.is_empty() => return Ok(()),
            InsertMode::Update => (
                sql::update(&quoted, &k, &v),
                values.iter().chain(keys).map(|c| &c.text).collect(),
            ),
        },
    };
    let types = vec![Type::TEXT; params.len()];
    let prepared = tx.prepare_typed(&statement, &types).await?;
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| *p as &(dyn ToSql + Sync)).collect();
    tx.execute(&prepared, &refs).await?;
    Ok(())
}

/// The column types of `table`, created or given the missing columns per `schema.evolution`.
async fn ensure_table(
    tx: &tokio_postgres::Transaction<'_>,
    config: &JdbcSinkConfig,
    tables: &mut HashMap<String, HashMap<String, String>>,
    table: &str,
    keys: &[Cell],
    values: &[Cell],
) -> Result<HashMap<String, String>, Failure> {
    if !tables.contains_key(table) {
        let columns = read_columns(tx, table).await?;
        if columns.is_empty() {
            if config.evolution == Evolution::None {
                return Err(Failure::Plain(format!(
                    "table `{table}` does not exist: create it, or set `schema.evolution: basic`"
                )));
            }
            let kinds = |cells: &[Cell]| -> Result<Vec<String>, Failure> {
                cells
                    .iter()
                    .map(|c| {
                        values::column_type(&c.schema)
                            .map_err(|e| Failure::Plain(format!("column `{}`: {e}", c.name)))
                    })
                    .collect()
            };
            let (kk, vk) = (kinds(keys)?, kinds(values)?);
            let k: Vec<Column<'_>> = keys
                .iter()
                .zip(&kk)
                .map(|(c, t)| Column {
                    name: &c.name,
                    kind: t,
                })
                .collect();
            let v: Vec<(Column<'_>, bool)> = values
                .iter()
                .zip(&vk)
                .map(|(c, t)| {
                    (
                        Column {
                            name: &c.name,
                            kind: t,
                        },
                        c.schema.is_optional(),
                    )
                })
                .collect();
            tx.batch_execute(&sql::create(&sql::table(table), &k, &v))
                .await?;
            tracing::info!(table, "Created the table (schema.evolution: basic).");
        }
        tables.insert(table.to_owned(), read_columns(tx, table).await?);
    }
    let known = tables.get(table).cloned().unwrap_or_default();
    let missing: Vec<&Cell> = keys
        .iter()
        .chain(values)
        .filter(|c| !known.contains_key(&c.name))
        .collect();
    if missing.is_empty() {
        return Ok(known);
    }
    let names: Vec<&str> = missing.iter().map(|c| c.name.as_str()).collect();
    if config.evolution == Evolution::None {
        return Err(Failure::Plain(format!(
            "table `{table}` has no column {names:?}: add it, or set `schema.evolution: basic`"
        )));
    }
    if let Some(c) = missing
        .iter()
        .find(|c| !c.schema.is_optional() && c.schema.default_value().is_none())
    {
        return Err(Failure::Plain(format!("cannot add column `{}` to table `{table}`: the field is not optional and has no default", c.name)));
    }
    let kinds: Vec<String> = missing
        .iter()
        .map(|c| {
            values::column_type(&c.schema)
                .map_err(|e| Failure::Plain(format!("column `{}`: {e}", c.name)))
        })
        .collect::<Result<_, _>>()?;
    let add: Vec<Column<'_>> = missing
        .iter()
        .zip(&kinds)
        .map(|(c, t)| Column {
            name: &c.name,
            kind: t,
        })
        .collect();
    tx.batch_execute(&sql::add_columns(&sql::table(table), &add))
        .await?;
    tracing::info!(table, columns = ?names, "Added columns (schema.evolution: basic).");
    let columns = read_columns(tx, table).await?;
    tables.insert(table.to_owned(), columns.clone());
    Ok(columns)
}

/// The columns of `table` and their types (`format_type`); none when it does not exist.
async fn read_columns(
    tx: &tokio_postgres::Transaction<'_>,
    table: &str,
) -> Result<HashMap<String, String>, Failure> {
    let rows = tx
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped",
            &[&sql::table(table)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
        .collect())
}

/// A connection to the target (its task on the current runtime).
async fn connect(config: &JdbcSinkConfig) -> Result<tokio_postgres::Client, String> {
    let target = config.target()?;
    let mut pg = tokio_postgres::Config::new();
    pg.host(&target.host)
        .port(target.port)
        .dbname(&target.database)
        .user(&config.username)
        .application_name("sluice")
        .connect_timeout(std::time::Duration::from_secs(30));
    if let Some(p) = &config.password {
        pg.password(p.expose());
    }
    let at = format!("{}:{}/{}", target.host, target.port, target.database);
    let (client, connection) = pg.connect(tokio_postgres::NoTls).await.map_err(|e| match e.as_db_error() {
        Some(db) => format!("PostgreSQL at {at} refused the connection: {} (check `connection.username`, `connection.password` and the database)", db.message()),
        None => format!("cannot reach PostgreSQL at {at} ({e}): check `connection.url`"),
    })?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "The jdbc sink's connection ended.");
        }
    });
    Ok(client)
}

#[async_trait]
impl Sink for JdbcSink {
    async fn write(&mut self, batch: &SinkBatch<'_>) -> Result<Delivery, ComponentError> {
        use tracing::Instrument;
        let span = tracing::debug_span!("jdbc", sink = %self.name, events = batch.len());
        async {
            let mut changes = Vec::with_capacity(batch.len());
            for event in batch.iter() {
                match self.change(event) {
                    Ok(Some(c)) => changes.push(c),
                    Ok(None) => {}
                    Err(reason) => self.failed(event, &reason)?,
                }
            }
            if self.config.reduction_buffer {
                changes = reduce(changes);
            }
            if !changes.is_empty() {
                self.apply(&changes).await?;
            }
            Ok(delivered())
        }
        .instrument(span)
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::SchemaType;

    fn cell(v: &str) -> Cell {
        Cell {
            name: "id".into(),
            schema: Schema::primitive(SchemaType::Int32, false),
            text: Some(v.into()),
        }
    }

    fn write(key: &str, value: &str) -> Change {
        Change::Write {
            table: "t".into(),
            keys: vec![cell(key)],
            values: vec![Cell {
                name: "v".into(),
                ..cell(value)
            }],
        }
    }

    fn describe(changes: &[Change]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                Change::Write { keys, values, .. } => format!(
                    "w{}={}",
                    keys[0].text.as_deref().unwrap_or(""),
                    values[0].text.as_deref().unwrap_or("")
                ),
                Change::Delete { keys, .. } => {
                    format!("d{}", keys[0].text.as_deref().unwrap_or(""))
                }
                Change::Truncate { .. } => "t".into(),
            })
            .collect()
    }

    #[test]
    fn the_reduction_buffer_keeps_each_keys_last_change_and_respects_truncates() {
        let changes = vec![
            write("1", "a"),
            write("2", "b"),
            write("1", "c"),
            Change::Delete {
                table: "t".into(),
                keys: vec![cell("2")],
            },
            Change::Truncate { table: "t".into() },
            write("1", "d"),
            write("1", "e"),
        ];
        assert_eq!(describe(&reduce(changes)), ["w1=c", "d2", "t", "w1=e"]);
    }
}
