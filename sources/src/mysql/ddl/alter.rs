//! `ALTER TABLE` operations applied to a table's structure: columns added (`FIRST`, `AFTER`),
//! dropped, modified, changed and renamed, defaults set and dropped, the primary key added
//! and dropped, the table renamed. Operations that change no column (indexes, `ALGORITHM`,
//! `LOCK`, `AUTO_INCREMENT=`) leave the structure as it is.

use sluice_kit::history::{ColumnDef, TableDef};
use sqlparser::ast::{
    AlterColumnOperation, AlterTableOperation, ColumnDef as SqlColumn, ColumnOption,
    ColumnOptionDef, DataType, Ident, MySQLColumnPosition, RenameTableNameKind, TableConstraint,
};

use super::mariadb::Guard;
use super::{column, split, Key, Unparsed};

/// Sets the primary key to `names` (its columns become NOT NULL, as MySQL makes them).
pub(super) fn set_primary_key(def: &mut TableDef, names: impl Iterator<Item = String>) {
    def.primary_key_column_names = names.map(|n| key_part(&n)).collect();
    for c in &mut def.columns {
        if def.primary_key_column_names.contains(&c.name) {
            column::make_required(c);
        }
    }
}

/// A unique key on `names` becomes the primary key of a table that has none, when all its
/// columns exist and are NOT NULL (Debezium's rule); returns whether it did.
pub(super) fn unique_becomes_key(def: &mut TableDef, names: &[String]) -> bool {
    if !def.primary_key_column_names.is_empty() {
        return false;
    }
    let names: Vec<String> = names.iter().map(|n| key_part(n)).collect();
    let eligible = names.iter().all(|n| {
        def.columns
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(n) && !c.optional)
    });
    if eligible {
        def.primary_key_column_names = names;
    }
    eligible
}

/// The column of a key part: `` `name`(10) `` (a prefix length) is `name`.
pub(super) fn key_part(part: &str) -> String {
    let name = match part.rfind('(') {
        Some(i)
            if part.ends_with(')')
                && part[i + 1..part.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_digit()) =>
        {
            &part[..i]
        }
        _ => part,
    };
    unquote(name.trim())
}

fn unquote(name: &str) -> String {
    name.trim_matches('`').to_owned()
}

fn index_of(def: &TableDef, name: &str) -> Result<usize, Unparsed> {
    def.columns
        .iter()
        .position(|c| c.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| Unparsed(format!("the column `{name}` is not in the table")))
}

/// Places `column` at `position` (`None`: at `at`, or last when `at` is `None`).
fn place(
    def: &mut TableDef,
    column: ColumnDef,
    position: Option<&MySQLColumnPosition>,
    at: Option<usize>,
) -> Result<(), Unparsed> {
    let index = match position {
        Some(MySQLColumnPosition::First) => 0,
        Some(MySQLColumnPosition::After(name)) => index_of(def, &name.value)? + 1,
        None => at.unwrap_or(def.columns.len()),
    };
    def.columns.insert(index.min(def.columns.len()), column);
    Ok(())
}

fn renumber(def: &mut TableDef) {
    for (i, c) in def.columns.iter_mut().enumerate() {
        c.position = i as i32 + 1;
    }
}

/// A column defined by a `MODIFY` / `CHANGE` clause.
fn redefined(
    def: &TableDef,
    name: &Ident,
    data_type: &DataType,
    options: &[ColumnOption],
) -> Result<ColumnDef, Unparsed> {
    let sql = SqlColumn {
        name: name.clone(),
        data_type: data_type.clone(),
        options: options
            .iter()
            .map(|o| ColumnOptionDef {
                name: None,
                option: o.clone(),
            })
            .collect(),
    };
    let mut c = column::describe(&sql, 0, def.default_charset_name.as_deref()).map_err(Unparsed)?;
    if def.primary_key_column_names.contains(&c.name) || column::is_primary(&sql) {
        column::make_required(&mut c);
    }
    Ok(c)
}

/// `ADD COLUMN`: a column the table already has is replaced in place (Debezium's table editor
/// does the same: a DDL seen twice, by the snapshot and the stream).
fn add_column(
    def: &mut TableDef,
    column_def: &sqlparser::ast::ColumnDef,
    position: Option<&sqlparser::ast::MySQLColumnPosition>,
) -> Result<(), Unparsed> {
    let mut c =
        column::describe(column_def, 0, def.default_charset_name.as_deref()).map_err(Unparsed)?;
    if column::is_primary(column_def) {
        column::make_required(&mut c);
        def.primary_key_column_names = vec![c.name.clone()];
    }
    let existing = index_of(def, &c.name).ok();
    if let Some(i) = existing {
        def.columns.remove(i);
    }
    place(def, c, position, existing)
}

/// A key column renamed from `old` to `new`.
fn rename_key(def: &mut TableDef, old: &str, new: &str) {
    for k in &mut def.primary_key_column_names {
        if *k == old {
            new.clone_into(k);
        }
    }
}

/// `ALTER COLUMN ... SET DEFAULT` / `DROP DEFAULT`.
fn alter_column(c: &mut ColumnDef, op: &AlterColumnOperation) {
    match op {
        AlterColumnOperation::SetDefault { value } => {
            // `SET DEFAULT NULL` leaves the default as it was, as Debezium does.
            if let Some(text) = column::default_of(value, &c.type_name) {
                c.has_default_value = true;
                c.default_value_expression = Some(text);
            }
        }
        AlterColumnOperation::DropDefault => {
            c.has_default_value = false;
            c.default_value_expression = None;
        }
        _ => {}
    }
}

/// Whether MariaDB's `IF [NOT] EXISTS` (`guards`) leaves `op` out: a column added that the
/// table has, a column changed that it lacks, a primary key added to a table that has one.
fn skipped(def: &TableDef, op: &AlterTableOperation, guards: &[&Guard]) -> bool {
    let has = |name: &Ident| index_of(def, &name.value).is_ok();
    let guarded =
        |name: &Ident, want: fn(&Guard, &str) -> bool| guards.iter().any(|g| want(g, &name.value));
    let if_present =
        |g: &Guard, n: &str| matches!(g, Guard::IfPresent(c) if c.eq_ignore_ascii_case(n));
    match op {
        AlterTableOperation::AddColumn { column_def, .. } => {
            let absent = |g: &Guard, n: &str| matches!(g, Guard::AddIfAbsent(c) if c.eq_ignore_ascii_case(n));
            has(&column_def.name) && guarded(&column_def.name, absent)
        }
        AlterTableOperation::ModifyColumn { col_name: name, .. }
        | AlterTableOperation::ChangeColumn { old_name: name, .. }
        | AlterTableOperation::RenameColumn {
            old_column_name: name,
            ..
        }
        | AlterTableOperation::AlterColumn {
            column_name: name, ..
        } => !has(name) && guarded(name, if_present),
        AlterTableOperation::AddConstraint {
            constraint: TableConstraint::PrimaryKey(_),
            ..
        } => {
            !def.primary_key_column_names.is_empty()
                && guards.iter().any(|g| **g == Guard::KeyIfAbsent)
        }
        _ => false,
    }
}

/// Applies `operations` to `def`; returns the table's new name when one renames it.
pub(super) fn apply(
    def: &mut TableDef,
    operations: &[AlterTableOperation],
    session: &str,
    guards: &[&Guard],
) -> Result<Option<Key>, Unparsed> {
    let mut renamed = None;
    for op in operations {
        if skipped(def, op, guards) {
            continue;
        }
        match op {
            AlterTableOperation::AddColumn {
                column_def,
                column_position,
                ..
            } => add_column(def, column_def, column_position.as_ref())?,
            AlterTableOperation::DropColumn { column_names, .. } => {
                // A column the table does not have is nothing to drop (`IF EXISTS`, or a DDL
                // the snapshot's structure already shows).
                for name in column_names {
                    if let Ok(i) = index_of(def, &name.value) {
                        let removed = def.columns.remove(i);
                        def.primary_key_column_names.retain(|k| *k != removed.name);
                    }
                }
            }
            AlterTableOperation::ModifyColumn {
                col_name,
                data_type,
                options,
                column_position,
            } => {
                let i = index_of(def, &col_name.value)?;
                let mut c = redefined(def, col_name, data_type, options)?;
                c.name = def.columns[i].name.clone();
                def.columns.remove(i);
                place(def, c, column_position.as_ref(), Some(i))?;
            }
            AlterTableOperation::ChangeColumn {
                old_name,
                new_name,
                data_type,
                options,
                column_position,
            } => {
                let i = index_of(def, &old_name.value)?;
                let old = def.columns.remove(i).name;
                rename_key(def, &old, &new_name.value);
                let c = redefined(def, new_name, data_type, options)?;
                place(def, c, column_position.as_ref(), Some(i))?;
            }
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => {
                let i = index_of(def, &old_column_name.value)?;
                let old =
                    std::mem::replace(&mut def.columns[i].name, new_column_name.value.clone());
                rename_key(def, &old, &new_column_name.value);
            }
            AlterTableOperation::AlterColumn { column_name, op } => {
                let i = index_of(def, &column_name.value)?;
                alter_column(&mut def.columns[i], op);
            }
            AlterTableOperation::AddConstraint {
                constraint: TableConstraint::PrimaryKey(pk),
                ..
            } => set_primary_key(def, pk.columns.iter().map(|c| c.column.expr.to_string())),
            AlterTableOperation::AddConstraint {
                constraint: TableConstraint::Unique(u),
                ..
            } => {
                let names: Vec<String> = u
                    .columns
                    .iter()
                    .map(|c| c.column.expr.to_string())
                    .collect();
                unique_becomes_key(def, &names);
            }
            AlterTableOperation::DropPrimaryKey { .. } => def.primary_key_column_names.clear(),
            AlterTableOperation::RenameTable { table_name } => {
                let (RenameTableNameKind::To(name) | RenameTableNameKind::As(name)) = table_name;
                renamed = Some(split(name, session));
            }
            _ => {}
        }
    }
    renumber(def);
    Ok(renamed)
}
