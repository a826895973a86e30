//! The captured tables: their registrations (`ASNCDC.IBMSNAP_REGISTER`: the change-data table
//! and the synchpoints), their columns (`SYSCAT.COLUMNS`), and the shape of their events
//! (column lists, mappers, key) from the kit.

use std::sync::Arc;

use sluice_engine::Schema;
use sluice_kit::change_tables::source::{CapturedTable, Column, TableParts};
use sluice_kit::shape::ColumnSpec;

use super::config::Db2Config;
use super::connection::{quote, text, Conn, Statements};
use super::error::Db2Error;
use super::types::{Described, Kind, Modes};
use super::Table;

/// What the source reads the tables with.
pub(crate) struct Reading<'a> {
    pub config: &'a Db2Config,
    pub modes: Modes,
    pub source_schema: &'a Arc<Schema>,
    pub q: &'a Statements,
}

/// The captured tables that the configuration selects. Their changes are read from the poll's
/// lower bound whatever the registration's synchpoints say: the capture program moves
/// `CD_NEW_SYNCHPOINT` as it goes, and a change-data table holds no row from before its
/// registration (Debezium's LUW reading does not bound by them either).
pub(crate) async fn read(conn: &Conn, r: &Reading<'_>) -> Result<Vec<Table>, Db2Error> {
    let q = r.q;
    let what = format!(
        "listing the captured tables ({}.IBMSNAP_REGISTER)",
        r.config.control_schema
    );
    let listed = conn.rows(&what, &q.change_tables(), &[]).await?;
    // ((schema, table), "CD_OWNER"."CD_TABLE")
    let mut found: Vec<((String, String), String)> = Vec::new();
    for row in &listed {
        let (Some(schema), Some(table)) = (text(row, 0), text(row, 1)) else {
            continue;
        };
        let (schema, table) = (schema.trim_end().to_owned(), table.trim_end().to_owned());
        if !r.config.selects(&schema, &table) && !r.config.is_signal_table(&schema, &table) {
            continue;
        }
        let (Some(owner), Some(cd)) = (text(row, 2), text(row, 3)) else {
            return Err(Db2Error::Setup(format!(
                "the registration of {schema}.{table} names no change-data table"
            )));
        };
        let cd = format!("{}.{}", quote(owner.trim_end()), quote(cd.trim_end()));
        found.push(((schema, table), cd));
    }
    found.sort();
    let mut out = Vec::new();
    for ((schema, table), registration) in found {
        out.push(build(conn, r, q, (&schema, &table), registration).await?);
    }
    Ok(out)
}

async fn build(
    conn: &Conn,
    r: &Reading<'_>,
    q: &Statements,
    (schema, table): (&str, &str),
    cd: String,
) -> Result<Table, Db2Error> {
    let full = format!("{schema}.{table}");
    let catalog = if q.zos() {
        "SYSIBM.SYSCOLUMNS"
    } else {
        "SYSCAT.COLUMNS"
    };
    let what = format!("reading the columns of {full} ({catalog})");
    let described = conn
        .rows(&what, &q.table_columns(schema, table), &[])
        .await?;
    let mut columns = Vec::new();
    for (position, row) in described.iter().enumerate() {
        let name = text(row, 0).unwrap_or_default();
        let int = |i: usize| text(row, i).and_then(|t| t.trim().parse::<i64>().ok());
        let declared = text(row, 1).unwrap_or_default().trim_end().to_owned();
        let length = int(2).unwrap_or(0);
        let d = Described {
            type_name: match q.zos() {
                true => super::connection::zos_type(&declared, length),
                false => declared,
            },
            length,
            scale: int(3).unwrap_or(0),
        };
        let nullable = text(row, 4).is_some_and(|n| n.trim() == "Y");
        let key = int(5)
            .filter(|k| *k > 0)
            .and_then(|k| usize::try_from(k).ok());
        let kind = Kind::of(&d).map_err(|e| {
            Db2Error::Setup(format!(
                "column `{full}.{name}`: {e}; leave it out with `column.exclude.list`"
            ))
        })?;
        let optional = nullable && key.is_none();
        columns.push(Column {
            spec: ColumnSpec {
                name: name.clone(),
                schema: kind.schema(r.modes, optional),
                primary_key: key,
                text: kind.is_text(),
                length: usize::try_from(d.length).ok().filter(|l| *l > 0),
            },
            def: super::types::column_def(&name, &d, position + 1, optional),
            kind,
        });
    }
    if columns.is_empty() {
        return Err(Db2Error::Setup(format!(
            "{full}: {catalog} lists no column (is the table there?)"
        )));
    }
    let parts = TableParts {
        captured: r.config.selects(schema, table),
        signals: r.config.is_signal_table(schema, table),
        schema,
        name: table,
        change_table: cd,
        columns,
        database: None,
    };
    CapturedTable::build(parts, &r.config.common, r.source_schema).map_err(Db2Error::Setup)
}
