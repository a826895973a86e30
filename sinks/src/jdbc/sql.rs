//! The statements of the `jdbc` sink, as Debezium's JDBC sink writes them (its PostgreSQL and
//! MySQL dialects): `INSERT`, upserts (`ON CONFLICT (<key>) DO UPDATE SET c=EXCLUDED.c`, `DO
//! NOTHING` without other columns; MySQL's `ON DUPLICATE KEY UPDATE c=VALUES(c)`, or with an
//! alias, `AS new … c=new.c`, from MySQL 8.0.20 on), `UPDATE ... WHERE`, `DELETE ... WHERE`,
//! `CREATE TABLE` with the key columns first and the primary key, `ALTER TABLE ... ADD COLUMN`.
//! Every value is bound as text: PostgreSQL casts it to its column's type, MySQL converts it
//! (bytes are bound as hexadecimal text through `UNHEX`).

use super::config::Dialect;

/// A column of a statement: its name, its type in the table, and whether its value is bytes
/// bound as hexadecimal text (MySQL: through `UNHEX`).
#[derive(Clone, Copy)]
pub(super) struct Column<'a> {
    pub(super) name: &'a str,
    pub(super) kind: &'a str,
    pub(super) hex: bool,
}

/// How statements are written for one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sql {
    pub(super) dialect: Dialect,
    /// MySQL from 8.0.20: upserts name the new row (`AS new`) instead of `VALUES()`.
    pub(super) row_alias: bool,
}

impl Sql {
    pub(super) fn postgres() -> Self {
        Sql {
            dialect: Dialect::Postgres,
            row_alias: false,
        }
    }

    /// `"name"` (PostgreSQL) or `` `name` `` (MySQL), quotes doubled.
    pub(super) fn quote(&self, name: &str) -> String {
        match self.dialect {
            Dialect::Postgres => format!("\"{}\"", name.replace('"', "\"\"")),
            Dialect::MySql => format!("`{}`", name.replace('`', "``")),
        }
    }

    /// A table's quoted, possibly schema- or database-qualified name.
    pub(super) fn table(&self, name: &str) -> String {
        (name.split('.'))
            .map(|p| self.quote(p))
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The parameter `n` (from 1) for `column`.
    fn placeholder(&self, n: usize, column: &Column<'_>) -> String {
        match self.dialect {
            Dialect::Postgres => format!("${n}::text::{}", column.kind),
            Dialect::MySql if column.hex => "UNHEX(?)".into(),
            Dialect::MySql => "?".into(),
        }
    }

    fn placeholders(&self, columns: &[Column<'_>], from: usize) -> Vec<String> {
        (columns.iter().enumerate())
            .map(|(i, c)| self.placeholder(from + i, c))
            .collect()
    }

    fn names(&self, columns: &[Column<'_>]) -> Vec<String> {
        columns.iter().map(|c| self.quote(c.name)).collect()
    }

    /// `INSERT INTO t (k.., v..) VALUES (...)` (parameters: keys, then values).
    pub(super) fn insert(&self, table: &str, keys: &[Column<'_>], values: &[Column<'_>]) -> String {
        let all: Vec<Column<'_>> = keys.iter().chain(values).copied().collect();
        format!(
            "INSERT INTO {table} ({}) VALUES ({})",
            self.names(&all).join(","),
            self.placeholders(&all, 1).join(",")
        )
    }

    /// The insert that updates the row its key finds instead.
    pub(super) fn upsert(&self, table: &str, keys: &[Column<'_>], values: &[Column<'_>]) -> String {
        let insert = self.insert(table, keys, values);
        let set = |f: &dyn Fn(&str) -> String| -> String {
            (self.names(values).iter())
                .map(|n| format!("{n}={}", f(n)))
                .collect::<Vec<_>>()
                .join(",")
        };
        match self.dialect {
            Dialect::Postgres => {
                let action = match values.is_empty() {
                    true => "DO NOTHING".to_owned(),
                    false => format!("DO UPDATE SET {}", set(&|n| format!("EXCLUDED.{n}"))),
                };
                let keys = self.names(keys).join(",");
                format!("{insert} ON CONFLICT ({keys}) {action}")
            }
            // Without other columns, the key set to itself: nothing changes, nothing fails.
            Dialect::MySql if values.is_empty() => {
                let k = self.names(keys);
                let same: Vec<String> = k.iter().map(|n| format!("{n}={n}")).collect();
                format!("{insert} ON DUPLICATE KEY UPDATE {}", same.join(","))
            }
            Dialect::MySql if self.row_alias => format!(
                "{insert} AS new ON DUPLICATE KEY UPDATE {}",
                set(&|n| format!("new.{n}"))
            ),
            Dialect::MySql => format!(
                "{insert} ON DUPLICATE KEY UPDATE {}",
                set(&|n| format!("VALUES({n})"))
            ),
        }
    }

    /// `UPDATE t SET v=.. WHERE k=..` (parameters: values, then keys).
    pub(super) fn update(&self, table: &str, keys: &[Column<'_>], values: &[Column<'_>]) -> String {
        let set: Vec<String> = (self.names(values).iter())
            .zip(self.placeholders(values, 1))
            .map(|(n, p)| format!("{n}={p}"))
            .collect();
        format!(
            "UPDATE {table} SET {} WHERE {}",
            set.join(", "),
            self.condition(keys, values.len() + 1)
        )
    }

    /// `DELETE FROM t WHERE k=..`.
    pub(super) fn delete(&self, table: &str, keys: &[Column<'_>]) -> String {
        format!("DELETE FROM {table} WHERE {}", self.condition(keys, 1))
    }

    /// Empties `table` inside the batch's transaction: `TRUNCATE TABLE` on PostgreSQL; on
    /// MySQL a `DELETE` (its `TRUNCATE` would commit the transaction so far).
    pub(super) fn truncate(&self, table: &str) -> String {
        match self.dialect {
            Dialect::Postgres => format!("TRUNCATE TABLE {table}"),
            Dialect::MySql => format!("DELETE FROM {table}"),
        }
    }

    fn condition(&self, keys: &[Column<'_>], from: usize) -> String {
        (self.names(keys).iter())
            .zip(self.placeholders(keys, from))
            .map(|(n, p)| format!("{n}={p}"))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// `CREATE TABLE t (k type NOT NULL, .., v type NULL|NOT NULL, .., PRIMARY KEY(k..))`.
    pub(super) fn create(
        &self,
        table: &str,
        keys: &[Column<'_>],
        values: &[(Column<'_>, bool)],
    ) -> String {
        let mut parts: Vec<String> = (keys.iter())
            .map(|k| format!("{} {} NOT NULL", self.quote(k.name), k.kind))
            .collect();
        parts.extend(values.iter().map(|(c, optional)| {
            let null = if *optional { "NULL" } else { "NOT NULL" };
            format!("{} {} {null}", self.quote(c.name), c.kind)
        }));
        if !keys.is_empty() {
            parts.push(format!("PRIMARY KEY({})", self.names(keys).join(", ")));
        }
        format!("CREATE TABLE {table} ({})", parts.join(", "))
    }

    /// `ALTER TABLE t ADD COLUMN c type NULL, ADD COLUMN ...`.
    pub(super) fn add_columns(&self, table: &str, columns: &[Column<'_>]) -> String {
        let adds: Vec<String> = (columns.iter())
            .map(|c| format!("ADD COLUMN {} {} NULL", self.quote(c.name), c.kind))
            .collect();
        format!("ALTER TABLE {table} {}", adds.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns() -> ([Column<'static>; 1], [Column<'static>; 2]) {
        let k = [Column {
            name: "id",
            kind: "integer",
            hex: false,
        }];
        let v = [
            Column {
                name: "name",
                kind: "text",
                hex: false,
            },
            Column {
                name: "born",
                kind: "date",
                hex: false,
            },
        ];
        (k, v)
    }

    #[test]
    fn statements_are_debeziums_postgresql_dialect() {
        let (k, v) = columns();
        let pg = Sql::postgres();
        let t = pg.table("public.dbserver1_public_customers");
        assert_eq!(t, "\"public\".\"dbserver1_public_customers\"");
        assert_eq!(
            pg.upsert("t", &k, &v),
            "INSERT INTO t (\"id\",\"name\",\"born\") VALUES ($1::text::integer,$2::text::text,$3::text::date) ON CONFLICT (\"id\") DO UPDATE SET \"name\"=EXCLUDED.\"name\",\"born\"=EXCLUDED.\"born\""
        );
        assert!(pg
            .upsert("t", &k, &[])
            .ends_with("ON CONFLICT (\"id\") DO NOTHING"));
        assert_eq!(
            pg.update("t", &k, &v),
            "UPDATE t SET \"name\"=$1::text::text, \"born\"=$2::text::date WHERE \"id\"=$3::text::integer"
        );
        assert_eq!(
            pg.delete("t", &k),
            "DELETE FROM t WHERE \"id\"=$1::text::integer"
        );
        let name = Column {
            name: "name",
            kind: "text",
            hex: false,
        };
        assert_eq!(
            pg.create("t", &k, &[(name, true)]),
            "CREATE TABLE t (\"id\" integer NOT NULL, \"name\" text NULL, PRIMARY KEY(\"id\"))"
        );
        assert_eq!(pg.quote("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn statements_are_debeziums_mysql_dialect() {
        let (k, v) = columns();
        let mut my = Sql {
            dialect: Dialect::MySql,
            row_alias: false,
        };
        assert_eq!(my.table("shop.t`x"), "`shop`.`t``x`");
        assert_eq!(
            my.upsert("t", &k, &v),
            "INSERT INTO t (`id`,`name`,`born`) VALUES (?,?,?) ON DUPLICATE KEY UPDATE `name`=VALUES(`name`),`born`=VALUES(`born`)"
        );
        assert!(my
            .upsert("t", &k, &[])
            .ends_with("ON DUPLICATE KEY UPDATE `id`=`id`"));
        my.row_alias = true;
        assert!(my.upsert("t", &k, &v).ends_with(
            "VALUES (?,?,?) AS new ON DUPLICATE KEY UPDATE `name`=new.`name`,`born`=new.`born`"
        ));
        let blob = [Column {
            name: "b",
            kind: "longblob",
            hex: true,
        }];
        assert_eq!(
            my.update("t", &k, &blob),
            "UPDATE t SET `b`=UNHEX(?) WHERE `id`=?"
        );
        assert_eq!(my.truncate("`t`"), "DELETE FROM `t`");
    }
}
