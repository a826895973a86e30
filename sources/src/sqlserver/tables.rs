//! The captured tables: their capture instances (`cdc.change_tables`), captured columns
//! (`cdc.captured_columns`) and structure, and the shape of their events (column lists,
//! mappers, key) from the kit.

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_engine::Schema;
use sluice_kit::change_tables::source::{CapturedTable, Column, TableParts};
use sluice_kit::shape::ColumnSpec;

use super::config::SqlServerConfig;
use super::connection::{lsn_at, rows, Conn, Statements};
use super::error::SqlServerError;
use super::lsn::Lsn;
use super::types::{Described, Kind, Modes};
use super::Table;

/// What the source reads the tables with.
pub(crate) struct Reading<'a> {
    pub config: &'a SqlServerConfig,
    pub modes: Modes,
    pub source_schema: &'a Arc<Schema>,
    pub q: &'a Statements,
}

/// A capture instance as `cdc.change_tables` lists it: where a table's changes are.
pub(crate) struct Instance {
    schema: String,
    table: String,
    pub name: String,
    object_id: i32,
    /// The capture instance's first LSN.
    pub start_lsn: Lsn,
    /// Where a newer capture instance of the table starts: this one's changes from there on
    /// are the newer one's to give.
    pub stop_lsn: Option<Lsn>,
}

/// The captured tables whose capture instances started at or before `upto` (`None`: all):
/// the newest instance of each, and with `all` the older ones too (with their stop LSN) (the newest, as Debezium reads while no schema change is pending).
pub(crate) async fn read(
    conn: &mut Conn,
    r: &Reading<'_>,
    upto: Option<Lsn>,
    all: bool,
) -> Result<Vec<Table>, SqlServerError> {
    let (config, q) = (r.config, r.q);
    let db = config.database.as_str();
    let what = "listing the change tables (cdc.change_tables)";
    let listed = match &upto {
        Some(lsn) => rows(conn, what, &q.change_tables(true), &[&&lsn.0[..], &db, &db]).await?,
        None => rows(conn, what, &q.change_tables(false), &[&db, &db]).await?,
    };
    let mut instances: BTreeMap<(String, String), Vec<Instance>> = BTreeMap::new();
    for row in &listed {
        let text = |i: usize| -> Result<String, SqlServerError> {
            row.try_get::<&str, _>(i)
                .map_err(|e| SqlServerError::query("reading cdc.change_tables", e))?
                .map(str::to_owned)
                .ok_or_else(|| {
                    SqlServerError::Setup("cdc.change_tables lists a table without a name".into())
                })
        };
        let (schema, table, name) = (text(0)?, text(1)?, text(2)?);
        if !config.selects(&schema, &table) && !config.is_signal_table(&schema, &table) {
            continue;
        }
        let object_id: i32 = row
            .try_get(3)
            .map_err(|e| SqlServerError::query("reading cdc.change_tables", e))?
            .unwrap_or_default();
        let Some(start_lsn) = lsn_at(row, 4)? else {
            continue;
        };
        let instance = Instance {
            schema: schema.clone(),
            table: table.clone(),
            name,
            object_id,
            start_lsn,
            stop_lsn: None,
        };
        instances.entry((schema, table)).or_default().push(instance);
    }
    // Two instances of one table (a schema change in progress): the stream reads the older
    // up to where the newer starts, then the newer (Debezium's stop LSN); a snapshot reads
    // the newer alone.
    let mut chosen = Vec::new();
    for mut of_table in instances.into_values() {
        of_table.sort_by_key(|i| i.start_lsn);
        let newest = of_table.pop();
        if let Some(newest) = newest {
            if all {
                for mut older in of_table {
                    older.stop_lsn = Some(newest.start_lsn);
                    chosen.push(older);
                }
            }
            chosen.push(newest);
        }
    }
    let captured = captured_columns(conn, q).await?;
    let mut out = Vec::new();
    for instance in chosen {
        let columns = captured
            .get(&instance.object_id)
            .cloned()
            .unwrap_or_default();
        out.push(build(conn, r, instance, &columns).await?);
    }
    Ok(out)
}

async fn captured_columns(
    conn: &mut Conn,
    q: &Statements,
) -> Result<BTreeMap<i32, Vec<String>>, SqlServerError> {
    let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for row in rows(
        conn,
        "reading cdc.captured_columns",
        &q.captured_columns(),
        &[],
    )
    .await?
    {
        let id: Option<i32> = row
            .try_get(0)
            .map_err(|e| SqlServerError::query("reading cdc.captured_columns", e))?;
        let name: Option<&str> = row
            .try_get(1)
            .map_err(|e| SqlServerError::query("reading cdc.captured_columns", e))?;
        if let (Some(id), Some(name)) = (id, name) {
            out.entry(id).or_default().push(name.to_owned());
        }
    }
    Ok(out)
}

async fn build(
    conn: &mut Conn,
    r: &Reading<'_>,
    instance: Instance,
    captured: &[String],
) -> Result<Table, SqlServerError> {
    let full = format!("{}.{}", instance.schema, instance.table);
    let described = rows(
        conn,
        &format!("reading the columns of {full}"),
        &r.q.table_columns(),
        &[&instance.schema.as_str(), &instance.table.as_str()],
    )
    .await?;
    let mut columns = Vec::new();
    for (position, row) in described.iter().enumerate() {
        let name: String = (row.try_get::<&str, _>(0))
            .map_err(|e| SqlServerError::query(format!("reading the columns of {full}"), e))?
            .unwrap_or_default()
            .to_owned();
        if !captured.iter().any(|c| c == &name) {
            continue;
        }
        columns.push(column(row, &full, name, position, r.modes)?);
    }
    if columns.is_empty() {
        return Err(SqlServerError::Setup(format!(
            "the capture instance `{}` of {full} has no column Sluice can read",
            instance.name
        )));
    }
    let (schema, table) = (instance.schema.clone(), instance.table.clone());
    let parts = TableParts {
        captured: r.config.selects(&schema, &table),
        signals: r.config.is_signal_table(&schema, &table),
        schema: &schema,
        name: &table,
        change_table: instance,
        columns,
        database: Some(&r.config.database),
    };
    CapturedTable::build(parts, &r.config.common, r.source_schema).map_err(SqlServerError::Setup)
}

/// A column as `INFORMATION_SCHEMA.COLUMNS` (the query's `row`) describes it.
fn column(
    row: &tiberius::Row,
    full: &str,
    name: String,
    position: usize,
    modes: Modes,
) -> Result<Column<Kind>, SqlServerError> {
    let get = |e| SqlServerError::query(format!("reading the columns of {full}"), e);
    let int = |i: usize| -> Result<Option<i64>, SqlServerError> {
        // The views type these columns int, tinyint or smallint.
        match row
            .get_column_data(i)
            .map_err(|e| SqlServerError::query("reading the catalog", e))?
        {
            tiberius::ColumnData::U8(v) => Ok(v.map(i64::from)),
            tiberius::ColumnData::I16(v) => Ok(v.map(i64::from)),
            tiberius::ColumnData::I32(v) => Ok(v.map(i64::from)),
            tiberius::ColumnData::I64(v) => Ok(*v),
            other => Err(SqlServerError::Setup(format!(
                "the catalog sent {other:?} for a number"
            ))),
        }
    };
    let d = Described {
        data_type: row
            .try_get::<&str, _>(1)
            .map_err(get)?
            .unwrap_or_default()
            .to_owned(),
        char_len: int(2)?,
        precision: int(3)?,
        scale: int(4)?,
        datetime_precision: int(5)?,
    };
    let nullable = row
        .try_get::<&str, _>(6)
        .map_err(get)?
        .is_some_and(|n| n.eq_ignore_ascii_case("YES"));
    let key = int(7)?.map(|k| usize::try_from(k).unwrap_or(0));
    let kind = Kind::of(&d).map_err(|e| {
        SqlServerError::Setup(format!(
            "column `{full}.{name}`: {e}; leave it out with `column.exclude.list`"
        ))
    })?;
    let optional = nullable && key.is_none();
    Ok(Column {
        spec: ColumnSpec {
            name: name.clone(),
            schema: kind.schema(modes, optional),
            primary_key: key,
            text: kind.is_text(),
            length: d.char_len.and_then(|l| usize::try_from(l).ok()),
        },
        def: super::types::column_def(&name, &d, position + 1, optional),
        kind,
    })
}
