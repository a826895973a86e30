//! Per-table schemas and the building of Debezium events from column values.

use std::sync::Arc;

use sluice_engine::event::{EnvelopeSchema, SourceHead, SourceTimestamps};
use sluice_engine::{ChangeEvent, Op, Position, Record, Schema, SchemaType, Struct, Value};

use crate::postgres::config::PostgresConfig;
use crate::postgres::server::catalog::TableDef;
use sluice_kit::failure::{FailureHandling, KeyValue, Refusal, RowError};
use sluice_kit::mapping::ColumnMapper;

use crate::postgres::values::types::{
    default_value, fallback_value, parse_value, schema_of, Modes, PgKind, ReadPath,
};

/// Debezium's placeholder for unchanged TOASTed values.
pub(crate) const UNAVAILABLE: &str = "__debezium_unavailable_value";

/// One column's value as the server sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cell<'a> {
    /// SQL NULL (or not sent).
    Null,
    /// Text output of the value.
    Text(&'a str),
    /// An unchanged TOASTed value that was not sent.
    Unchanged,
}

#[derive(Debug)]
struct Column {
    name: String,
    kind: PgKind,
    schema: Arc<Schema>,
    /// Column mask / hash / truncate (value only): the value field's schema with its
    /// parameter, and the mapper when the values are mapped (character columns only).
    mapper: Option<(Option<ColumnMapper>, Arc<Schema>)>,
}

/// Whether `column.propagate.source.type` or `datatype.propagate.source.type` selects `c`.
fn propagates(
    config: &PostgresConfig,
    table: &str,
    c: &crate::postgres::server::catalog::ColumnDef,
) -> bool {
    config
        .common
        .column_propagate_source_type
        .matches(&format!("{table}.{}", c.name))
        || (!c.type_name.is_empty()
            && (config
                .common
                .datatype_propagate_source_type
                .matches(&c.type_name)
                || config
                    .common
                    .datatype_propagate_source_type
                    .matches(&c.type_name.to_ascii_uppercase())))
}

/// Debezium's source type parameters: type name (upper case), length, scale, column name.
fn source_type_parameters(
    schema: Arc<Schema>,
    c: &crate::postgres::server::catalog::ColumnDef,
) -> Arc<Schema> {
    let serial = c
        .default_expr
        .as_deref()
        .is_some_and(|d| d.starts_with("nextval("));
    let type_name = match (serial, c.type_oid) {
        (true, 21) => "SMALLSERIAL".to_owned(),
        (true, 23) => "SERIAL".to_owned(),
        (true, 20) => "BIGSERIAL".to_owned(),
        _ => c.type_name.to_ascii_uppercase(),
    };
    let (length, scale) = crate::postgres::records::schema_change::size(c.type_oid, c.typmod);
    let mut b = schema
        .to_builder()
        .parameter("__debezium.source.column.type", type_name)
        .parameter("__debezium.source.column.length", length.to_string());
    if let Some(scale) = scale {
        b = b.parameter("__debezium.source.column.scale", scale.to_string());
    }
    b.parameter("__debezium.source.column.name", c.name.clone())
        .build()
}

/// Whether a column is character data as JDBC sees it (Debezium masks only those).
fn is_character(c: &crate::postgres::server::catalog::ColumnDef) -> bool {
    matches!(c.type_oid, 18 | 19 | 25 | 1042 | 1043) || matches!(c.kind, PgKind::Enum(_))
}

/// How one table's events are built.
#[derive(Debug)]
pub(crate) struct TableSchema {
    /// Schema name.
    pub schema_name: String,
    /// Table name.
    pub table: String,
    /// Topic.
    pub topic: Arc<str>,
    columns: Vec<Column>,
    /// Positions (in table column order) of the value's fields.
    value_columns: Vec<usize>,
    /// Positions of the key's fields, in key order.
    key_columns: Vec<usize>,
    /// The envelope schemas.
    pub envelope: EnvelopeSchema,
    /// `pg_class.oid`.
    pub oid: u32,
    /// Primary key column names, in key order.
    pub primary_key: Vec<String>,
    /// The relation's column signature (name, type oid, modifier).
    pub signature: Vec<(String, u32, i32)>,
    /// The primary key column when the key is one integer column (the snapshot can read such a
    /// table in key ranges).
    pub int_key: Option<String>,
    modes: Modes,
    /// `event.processing.failure.handling.mode`, and where skipped changes are counted.
    failure: FailureHandling,
    /// `source` strings shared by all of this table's events.
    shared: [Arc<str>; 4],
}

sluice_engine::source_block! {
    /// The PostgreSQL connector's `source` block.
    pub(crate) struct PgSourceBlock {
        sequence: String | null,
        ts_us: Int64 | null,
        ts_ns: Int64 | null,
        schema: String,
        table: String,
        tx_id as "txId": Int64 | null,
        lsn: Int64 | null,
        xmin: Int64 | null,
        origin: String | null,
        origin_lsn: Int64 | null,
    }
}

/// The PostgreSQL connector's `source` block schema.
pub(crate) fn source_schema() -> Arc<Schema> {
    PgSourceBlock::schema("io.debezium.connector.postgresql.Source")
}

/// What the `source` block of one event says.
#[derive(Debug, Clone)]
pub(crate) struct SourceInfo<'a> {
    /// `topic.prefix`.
    pub name: &'a Arc<str>,
    /// Database name.
    pub db: &'a Arc<str>,
    /// When the change happened in the database (µs since the epoch).
    pub ts_micros: i64,
    /// `snapshot` marker (`false` when streaming).
    pub snapshot: &'a Arc<str>,
    /// `sequence`: `[last commit LSN, this LSN]` as Debezium writes it.
    pub sequence: Option<Arc<str>>,
    /// Transaction id.
    pub tx_id: Option<i64>,
    /// LSN.
    pub lsn: Option<i64>,
}

/// A column's schema, default, column property mapper and source type parameters.
fn column(
    c: &crate::postgres::server::catalog::ColumnDef,
    config: &PostgresConfig,
    modes: Modes,
    full_table: &str,
) -> Column {
    let default = c
        .default_expr
        .as_deref()
        .and_then(|e| default_value(&c.kind, modes, e));
    // A key column keeps its optionality: `message.key.columns` may name nullable columns,
    // whose NULLs stay NULL in the key and in the row, as in Debezium.
    let optional = !c.not_null;
    let schema = schema_of(&c.kind, modes, optional, default);
    let length =
        (matches!(c.type_oid, 1042 | 1043) && c.typmod >= 4).then(|| (c.typmod - 4) as usize);
    // Values of character columns only, as Debezium; a mask or hash rule marks a column of
    // another type (`xml`, `json`, `uuid`: their named schema kept) all the same.
    let rule = (config.common.column_rules)
        .mapper(&format!("{full_table}.{}", c.name), length)
        .filter(|m| is_character(c) || m.marks_every_type());
    let mapper = rule.map(|m| {
        let (k, v) = m.parameter();
        let mapped = schema.to_builder().parameter(k, v).build();
        (Some(m).filter(|_| is_character(c)), mapped)
    });
    let schema = if mapper.is_none() && propagates(config, full_table, c) {
        source_type_parameters(schema, c)
    } else {
        schema
    };
    Column {
        name: c.name.clone(),
        kind: c.kind.clone(),
        schema,
        mapper,
    }
}

/// One warning for a column whose type Debezium does not carry as it is.
fn warn_unsupported(column: &str, kind: &PgKind) {
    match kind {
        PgKind::Unknown(name) => tracing::warn!(
            %column,
            r#type = %name,
            "Unsupported column type; its values are captured as strings."
        ),
        PgKind::Omitted(name) => tracing::warn!(
            %column,
            r#type = %name,
            "Column left out of the events, as Debezium leaves out this type."
        ),
        PgKind::Array(e) if matches!(**e, PgKind::Bit(_) | PgKind::VarBit(_)) => {
            tracing::warn!(
                %column,
                "Bit array: its values are emitted as null, as Debezium emits them."
            )
        }
        _ => {}
    }
}

impl TableSchema {
    /// Builds the schemas of `def` (column filters and modes applied).
    pub(crate) fn new(def: &TableDef, config: &PostgresConfig, source: Arc<Schema>) -> Self {
        let modes = Modes::of(config);
        let full_table = format!("{}.{}", def.schema, def.name);
        let key_names: Vec<String> = match config.common.key_columns.of(&full_table) {
            Some(columns) => columns.to_vec(),
            None => def.primary_key.clone(),
        };
        let columns: Vec<Column> = def
            .columns
            .iter()
            .map(|c| column(c, config, modes, &full_table))
            .collect();
        for c in &columns {
            warn_unsupported(&format!("{}.{}.{}", def.schema, def.name, c.name), &c.kind);
        }
        let value_columns: Vec<usize> = (0..columns.len())
            .filter(|&i| !matches!(columns[i].kind, PgKind::Omitted(_)))
            .filter(|&i| config.captures_column(&def.schema, &def.name, &columns[i].name))
            .collect();
        let key_columns: Vec<usize> = key_names
            .iter()
            .filter_map(|k| columns.iter().position(|c| &c.name == k))
            .collect();
        let mut row = Schema::struct_builder();
        for &i in &value_columns {
            let schema = match &columns[i].mapper {
                Some((_, mapped)) => mapped.clone(),
                None => columns[i].schema.clone(),
            };
            row = row.field(columns[i].name.clone(), schema);
        }
        let key = (!key_columns.is_empty()).then(|| {
            let mut k = Schema::struct_builder();
            for &i in &key_columns {
                k = k.field(columns[i].name.clone(), columns[i].schema.clone());
            }
            k.build()
        });
        let int_key = match key_columns.as_slice() {
            [i] if matches!(columns[*i].kind, PgKind::Int2 | PgKind::Int4 | PgKind::Int8) => {
                Some(columns[*i].name.clone())
            }
            _ => None,
        };
        let prefix = format!("{}.{}.{}", config.common.topic_prefix, def.schema, def.name);
        TableSchema {
            int_key,
            oid: def.oid,
            primary_key: def.primary_key.clone(),
            signature: def
                .columns
                .iter()
                .map(|c| (c.name.clone(), c.type_oid, c.typmod))
                .collect(),
            schema_name: def.schema.clone(),
            table: def.name.clone(),
            topic: prefix.clone().into(),
            envelope: EnvelopeSchema::new(&prefix, key, row.build(), source),
            shared: [
                crate::VERSION.into(),
                "postgresql".into(),
                def.schema.as_str().into(),
                def.name.as_str().into(),
            ],
            columns,
            value_columns,
            key_columns,
            modes,
            failure: config.common.failure_handling(),
        }
    }

    /// Names of the table's columns, in order.
    pub(crate) fn column_names(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|c| c.name.as_str())
    }

    /// Table positions of the key's columns, in key order.
    pub(crate) fn key_indexes(&self) -> &[usize] {
        &self.key_columns
    }

    /// Table position of a column.
    pub(crate) fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// Whether the table has a key.
    pub(crate) fn has_key(&self) -> bool {
        !self.key_columns.is_empty()
    }

    /// Column `index`'s value; the error is the reason only, the caller names the column (a
    /// small result on the path of every value).
    fn cell(&self, path: ReadPath, index: usize, cell: Cell<'_>) -> Result<Value, String> {
        let column = &self.columns[index];
        let schema = &column.schema;
        match cell {
            Cell::Text(t) => parse_value(&column.kind, self.modes, path, schema, t),
            // Debezium emits a column's default for NULL (snapshot and stream alike), and a
            // type's zero value for a NULL it must not emit (a key-only old row's columns).
            Cell::Null => Ok(match schema.default_value() {
                Some(default) => default.clone(),
                None if schema.is_optional() => Value::Null,
                None => fallback_value(schema),
            }),
            Cell::Unchanged => Ok(match schema.kind() {
                SchemaType::String => Value::from(UNAVAILABLE),
                SchemaType::Bytes => Value::Bytes(UNAVAILABLE.as_bytes().to_vec()),
                _ if schema.is_optional() => Value::Null,
                _ => fallback_value(schema),
            }),
        }
    }

    /// The row struct of a streamed change from cells in table column order.
    pub(crate) fn row(&self, cells: &[Cell<'_>]) -> Result<Struct, RowError> {
        self.row_at(ReadPath::Stream, cells)
    }

    fn row_at(&self, path: ReadPath, cells: &[Cell<'_>]) -> Result<Struct, RowError> {
        // Sized up front: collecting through `Result` would grow the vector step by step.
        let mut values = Vec::with_capacity(self.value_columns.len());
        for &i in &self.value_columns {
            let value = (self.cell(path, i, cells.get(i).copied().unwrap_or(Cell::Null)))
                .map_err(|reason| RowError::column(&self.columns[i].name, reason))?;
            values.push(match &self.columns[i].mapper {
                Some((Some(mapper), _)) => mapper.apply(&value).unwrap_or(value),
                _ => value,
            });
        }
        Struct::from_values(self.envelope.row.clone(), values).ok_or(RowError::Shape)
    }

    /// The key record of a streamed change from cells in table column order (`None` without a
    /// primary key).
    pub(crate) fn key(&self, cells: &[Cell<'_>]) -> Result<Option<Record>, RowError> {
        self.key_at(ReadPath::Stream, cells)
    }

    fn key_at(&self, path: ReadPath, cells: &[Cell<'_>]) -> Result<Option<Record>, RowError> {
        let Some(schema) = &self.envelope.key else {
            return Ok(None);
        };
        let mut values = Vec::with_capacity(self.key_columns.len());
        for &i in &self.key_columns {
            values.push(
                (self.cell(path, i, cells.get(i).copied().unwrap_or(Cell::Null)))
                    .map_err(|reason| RowError::column(&self.columns[i].name, reason))?,
            );
        }
        let value = Struct::from_values(schema.clone(), values).ok_or(RowError::Shape)?;
        Ok(Some(Record {
            schema: schema.clone(),
            value: Value::Struct(value),
        }))
    }

    /// What to do with a change or row whose values could not be read (`error` names the
    /// column and the value): `Ok` to go on without it (logged with its key under `warn`), or
    /// the error that stops the pipeline under `fail`.
    pub(crate) fn unreadable(
        &self,
        path: ReadPath,
        error: RowError,
        cells: &[Cell<'_>],
    ) -> Result<(), sluice_kit::failure::Refused> {
        // `{id: 2, name: "x"}`, as every source writes a key.
        let key = || {
            let fields = self.envelope.key.as_ref().map(|k| k.fields());
            sluice_kit::failure::key_text((self.key_columns.iter().enumerate()).map(|(j, &i)| {
                let cell = cells.get(i).copied().unwrap_or(Cell::Null);
                let value = self.cell(path, i, cell).ok().map(|value| match value {
                    Value::String(text) => KeyValue::Text(text.to_string()),
                    value => {
                        let mut out = Vec::new();
                        if let Some(field) = fields.and_then(|f| f.get(j)) {
                            sluice_engine::codec::json::write_value(
                                &field.schema,
                                &value,
                                &mut out,
                            );
                        }
                        KeyValue::Bare(String::from_utf8_lossy(&out).into_owned())
                    }
                });
                (self.columns[i].name.as_str(), value)
            }))
        };
        let table = format!("{}.{}", self.schema_name, self.table);
        self.failure.refuse(Refusal::of(&table, &error), key)
    }

    /// The `source` struct.
    pub(crate) fn source(&self, info: &SourceInfo<'_>) -> Struct {
        let ts = SourceTimestamps {
            nanos: info.ts_micros.saturating_mul(1000),
        };
        let [version, connector, schema, table] = &self.shared;
        PgSourceBlock {
            head: SourceHead {
                version: Value::String(version.clone()),
                connector: Value::String(connector.clone()),
                name: Value::String(info.name.clone()),
                ts_ms: ts.millis(),
                snapshot: Value::String(info.snapshot.clone()),
                db: Value::String(info.db.clone()),
            },
            sequence: info.sequence.clone().map_or(Value::Null, Value::String),
            ts_us: Value::Int64(ts.micros()),
            ts_ns: Value::Int64(ts.nanos),
            schema: Value::String(schema.clone()),
            table: Value::String(table.clone()),
            tx_id: info.tx_id.map_or(Value::Null, Value::Int64),
            lsn: info.lsn.map_or(Value::Null, Value::Int64),
            xmin: Value::Null,
            origin: Value::Null,
            origin_lsn: Value::Null,
        }
        .into_struct(&self.envelope.source)
    }

    /// A change event.
    pub(crate) fn event(
        &self,
        op: Op,
        key: Option<Record>,
        before: Option<Struct>,
        after: Option<Struct>,
        info: &SourceInfo<'_>,
        position: Position,
    ) -> ChangeEvent {
        self.event_with_source(op, key, before, after, self.source(info), position)
    }

    /// A snapshot row (`op: r`) from cells in table column order, with a `source` block built
    /// beforehand and shared by the snapshot's rows.
    pub(crate) fn read_event(
        &self,
        cells: &[Cell<'_>],
        source: &Struct,
        position: Position,
    ) -> Result<ChangeEvent, RowError> {
        let key = self.key_at(ReadPath::Snapshot, cells)?;
        let after = self.row_at(ReadPath::Snapshot, cells)?;
        Ok(self.event_with_source(Op::Read, key, None, Some(after), source.clone(), position))
    }

    /// A change event with a `source` block built beforehand (a snapshot's, shared by all its
    /// rows: see [`sluice_engine::Struct::into_shared`]).
    pub(crate) fn event_with_source(
        &self,
        op: Op,
        key: Option<Record>,
        before: Option<Struct>,
        after: Option<Struct>,
        source: Struct,
        position: Position,
    ) -> ChangeEvent {
        let value = self
            .envelope
            .value(op, before, after, source, None, SourceTimestamps::now());
        ChangeEvent {
            topic: self.topic.clone(),
            key,
            value: Some(value),
            headers: Vec::new(),
            position,
        }
    }
}
