//! `jdbc`: change events applied to tables of a PostgreSQL, MySQL or MariaDB database, with the
//! Debezium JDBC sink connector's semantics (`insert.mode`, `primary.key.mode`,
//! `delete.enabled`, `truncate.enabled`, `schema.evolution`, `table.name.format`), on Debezium
//! envelopes directly (and on flat rows after `unwrap`). A batch is one transaction: it is
//! acknowledged once committed, so the source position never passes a row the target could
//! lose; with `insert.mode: upsert` a batch applied twice (a retry, a restart before the
//! commit) leaves the same rows. What differs by target is in `postgres.rs` and `mysql.rs`,
//! the statements in `sql.rs`, the values in `values.rs`.

mod config;
mod error;
mod mysql;
mod postgres;
mod sql;
mod table;
mod tls;
mod values;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use sluice_engine::{delivered, BuildContext, ChangeEvent, ComponentError, Delivery, Op};
use sluice_engine::{Schema, Sink, SinkBatch, Struct, Value};

use crate::skipped::skip_or_fail;
pub use config::{Dialect, Evolution, InsertMode, JdbcSinkConfig, KeyMode};
use error::{EventError, JdbcSinkError};

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

/// The database a sink writes to.
enum Backend {
    Postgres(postgres::Postgres),
    MySql(mysql::MySql),
}

/// The running sink.
pub struct JdbcSink {
    name: String,
    config: JdbcSinkConfig,
    dialect: Dialect,
    backend: Backend,
}

impl JdbcSink {
    /// A sink for `config` (the database is reached in [`Sink::health_check`]).
    pub fn open(config: &JdbcSinkConfig, ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        config.validate().map_err(JdbcSinkError::Config)?;
        let name = ctx.component.to_owned();
        let dialect = config.target().map_err(JdbcSinkError::Config)?.dialect;
        let backend = match dialect {
            Dialect::Postgres => Backend::Postgres(Default::default()),
            Dialect::MySql => Backend::MySql(Default::default()),
        };
        Ok(JdbcSink {
            name,
            config: config.clone(),
            dialect,
            backend,
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
    ) -> Result<Vec<Cell>, EventError> {
        let mut cells = Vec::new();
        for (field, value) in row.schema().fields().iter().zip(row.values()) {
            if only.is_some_and(|o| !o.iter().any(|f| f == field.name.as_ref()))
                || !self.config.keeps(topic, &field.name)
            {
                continue;
            }
            let text = values::text(&field.schema, value, self.dialect).map_err(|source| {
                EventError::Column {
                    column: field.name.to_string(),
                    source,
                }
            })?;
            cells.push(Cell {
                name: self.ident(&field.name),
                schema: field.schema.clone(),
                text,
            });
        }
        Ok(cells)
    }

    /// The key cells of an event (`primary.key.mode`).
    fn keys(&self, event: &ChangeEvent, row: Option<&Struct>) -> Result<Vec<Cell>, EventError> {
        let fields = self.config.key_fields();
        let only = (!fields.is_empty()).then_some(fields.as_slice());
        match self.config.key_mode {
            KeyMode::None => Ok(Vec::new()),
            KeyMode::RecordKey => match event.key.as_ref().map(|k| &k.value) {
                Some(Value::Struct(key)) => self.cells(&event.topic, key, only),
                _ => Err(EventError::NoStructKey),
            },
            KeyMode::RecordValue => match row {
                Some(row) => self.cells(&event.topic, row, only),
                None => Err(EventError::NoRowForKey),
            },
        }
    }

    /// What `event` does (`None`: nothing, as a delete with `delete.enabled: false`).
    fn change(&self, event: &ChangeEvent) -> Result<Option<Change>, EventError> {
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
            return Err(EventError::NotARow);
        };
        let row = match event.op() {
            None => envelope, // a flat row (after `unwrap`)
            Some(Op::Create | Op::Read | Op::Update) => match envelope.get("after") {
                Some(Value::Struct(after)) => after,
                _ => return Err(EventError::NoAfter),
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
    fn failed(
        &self,
        event: &ChangeEvent,
        reason: impl std::fmt::Display,
    ) -> Result<(), ComponentError> {
        let at = format!("topic `{}`", event.topic);
        skip_or_fail(self.config.failure_mode, &self.name, &at, reason)
    }

    /// Applies `changes` in one transaction.
    async fn apply(&mut self, changes: &[Change]) -> Result<(), ComponentError> {
        match &mut self.backend {
            Backend::Postgres(pg) => pg.apply(&self.name, &self.config, changes).await,
            Backend::MySql(my) => my.apply(&self.name, &self.config, changes).await,
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

#[async_trait]
impl Sink for JdbcSink {
    /// The database reached once (a wrong address or login stops the start with one line),
    /// the connection kept for the writes.
    async fn health_check(&mut self) -> Result<(), ComponentError> {
        let reached = match &mut self.backend {
            Backend::Postgres(db) => db.check(&self.config).await,
            Backend::MySql(db) => db.check(&self.config).await,
        };
        reached.map_err(|source| {
            ComponentError::from(JdbcSinkError::Start {
                sink: self.name.clone(),
                source,
            })
        })
    }

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
