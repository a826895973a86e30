//! What a change needs of its table and the statement that applies it, the same for every
//! target: `schema.evolution` (create a missing table with the key columns first, add missing
//! columns as nullable; never change a type, a default or a key) and the statement per
//! `insert.mode`, bound from the change's cells.

use std::collections::HashMap;

use super::config::{Dialect, Evolution, InsertMode, JdbcSinkConfig};
use super::sql::{Column, Sql};
use super::{values, Cell, Change};

/// Why applying a batch failed: the database's error `E`, or what this sink found wrong.
pub(super) enum Failure<E> {
    Db(E),
    Plain(String),
}

impl<E> From<String> for Failure<E> {
    fn from(e: String) -> Self {
        Failure::Plain(e)
    }
}

/// A table's columns and their types, by name as [`column_key`] spells it.
pub(super) type Columns = HashMap<String, String>;

/// How a column's name is looked up: as it is on PostgreSQL, in lower case on MySQL (its
/// column names are not case-sensitive).
pub(super) fn column_key(dialect: Dialect, name: &str) -> String {
    match dialect {
        Dialect::Postgres => name.to_owned(),
        Dialect::MySql => name.to_lowercase(),
    }
}

/// The key cells and the other cells of a change.
pub(super) type Cells<'c> = (&'c [Cell], &'c [Cell]);

/// A statement and its parameters in order.
pub(super) type Bound<'c> = (String, Vec<&'c Option<String>>);

/// The table, the key cells and the other cells a change writes (`None`: a truncate).
pub(super) fn parts(change: &Change) -> (&str, Option<Cells<'_>>) {
    match change {
        Change::Write {
            table,
            keys,
            values,
        } => (table, Some((keys, values))),
        Change::Delete { table, keys } => (table, Some((keys, &[]))),
        Change::Truncate { table } => (table, None),
    }
}

/// The statement that makes `table` (whose columns are `known`, none when it does not exist)
/// fit `keys` and `values` per `schema.evolution`, with what to log; `None`: it fits.
pub(super) fn evolve(
    sql: &Sql,
    config: &JdbcSinkConfig,
    table: &str,
    known: &Columns,
    (keys, values): Cells<'_>,
) -> Result<Option<(String, &'static str)>, String> {
    let kind = |c: &Cell, key: bool| {
        values::column_type(&c.schema, sql.dialect, key)
            .map_err(|e| format!("column `{}`: {e}", c.name))
    };
    if known.is_empty() {
        if config.evolution == Evolution::None {
            return Err(format!(
                "table `{table}` does not exist: create it, or set `schema.evolution: basic`"
            ));
        }
        let kk: Vec<String> = keys
            .iter()
            .map(|c| kind(c, true))
            .collect::<Result<_, _>>()?;
        let vk: Vec<String> = (values.iter())
            .map(|c| kind(c, false))
            .collect::<Result<_, _>>()?;
        let k: Vec<Column<'_>> = (keys.iter().zip(&kk))
            .map(|(c, t)| Column {
                name: &c.name,
                kind: t,
                hex: false,
            })
            .collect();
        let v: Vec<(Column<'_>, bool)> = (values.iter().zip(&vk))
            .map(|(c, t)| {
                let column = Column {
                    name: &c.name,
                    kind: t,
                    hex: false,
                };
                (column, c.schema.is_optional())
            })
            .collect();
        let create = sql.create(&sql.table(table), &k, &v);
        return Ok(Some((
            create,
            "Created the table (schema.evolution: basic).",
        )));
    }
    let missing: Vec<&Cell> = (keys.iter().chain(values))
        .filter(|c| !known.contains_key(&column_key(sql.dialect, &c.name)))
        .collect();
    if missing.is_empty() {
        return Ok(None);
    }
    let names: Vec<&str> = missing.iter().map(|c| c.name.as_str()).collect();
    if config.evolution == Evolution::None {
        return Err(format!(
            "table `{table}` has no column {names:?}: add it, or set `schema.evolution: basic`"
        ));
    }
    if let Some(c) =
        (missing.iter()).find(|c| !c.schema.is_optional() && c.schema.default_value().is_none())
    {
        return Err(format!("cannot add column `{}` to table `{table}`: the field is not optional and has no default", c.name));
    }
    let kinds: Vec<String> = (missing.iter())
        .map(|c| kind(c, false))
        .collect::<Result<_, _>>()?;
    let add: Vec<Column<'_>> = (missing.iter().zip(&kinds))
        .map(|(c, t)| Column {
            name: &c.name,
            kind: t,
            hex: false,
        })
        .collect();
    let alter = sql.add_columns(&sql.table(table), &add);
    Ok(Some((alter, "Added columns (schema.evolution: basic).")))
}

/// The statement of `change` on its table (columns `columns`) and its parameters in order;
/// `None`: nothing to run (an `update` of a row with only key columns).
pub(super) fn statement<'c>(
    sql: &Sql,
    config: &JdbcSinkConfig,
    columns: &Columns,
    change: &'c Change,
) -> Result<Option<Bound<'c>>, String> {
    let (table, cells) = parts(change);
    let quoted = sql.table(table);
    let Some((keys, values)) = cells else {
        return Ok(Some((sql.truncate(&quoted), Vec::new())));
    };
    let (k, v) = (
        typed(sql, columns, table, keys)?,
        typed(sql, columns, table, values)?,
    );
    let texts = |cells: &'c [Cell]| cells.iter().map(|c| &c.text);
    Ok(Some(match change {
        Change::Delete { .. } => (sql.delete(&quoted, &k), texts(keys).collect()),
        _ => match config.insert_mode {
            InsertMode::Insert => (
                sql.insert(&quoted, &k, &v),
                texts(keys).chain(texts(values)).collect(),
            ),
            InsertMode::Upsert => (
                sql.upsert(&quoted, &k, &v),
                texts(keys).chain(texts(values)).collect(),
            ),
            InsertMode::Update if values.is_empty() => return Ok(None),
            InsertMode::Update => (
                sql.update(&quoted, &k, &v),
                texts(values).chain(texts(keys)).collect(),
            ),
        },
    }))
}

/// `cells` as columns of `table` with their types in `columns`.
fn typed<'a>(
    sql: &Sql,
    columns: &'a Columns,
    table: &str,
    cells: &'a [Cell],
) -> Result<Vec<Column<'a>>, String> {
    (cells.iter())
        .map(|c| {
            let kind = (columns.get(&column_key(sql.dialect, &c.name)))
                .ok_or_else(|| format!("table `{table}` has no column `{}`", c.name))?;
            Ok(Column {
                name: &c.name,
                kind,
                hex: values::is_hex(&c.schema, sql.dialect),
            })
        })
        .collect()
}
