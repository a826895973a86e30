//! The statements of the `jdbc` sink for PostgreSQL, as Debezium's JDBC sink writes them (its
//! PostgreSQL dialect): `INSERT`, `INSERT ... ON CONFLICT (<key>) DO UPDATE SET c=EXCLUDED.c`
//! (`DO NOTHING` without other columns), `UPDATE ... WHERE`, `DELETE ... WHERE`, `TRUNCATE`,
//! `CREATE TABLE` with the key columns first and the primary key, `ALTER TABLE ... ADD COLUMN`.
//! Every value is bound as text and cast to its column's type.

/// A column of a statement: its quoted name and its type in the table.
pub(super) struct Column<'a> {
    pub(super) name: &'a str,
    pub(super) kind: &'a str,
}

/// `"name"`, quotes doubled.
pub(super) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A table's quoted, possibly schema-qualified name.
pub(super) fn table(name: &str) -> String {
    name.split('.').map(quote).collect::<Vec<_>>().join(".")
}

fn placeholders(columns: &[Column<'_>], from: usize) -> Vec<String> {
    columns
        .iter()
        .enumerate()
        .map(|(i, c)| format!("${}::text::{}", from + i, c.kind))
        .collect()
}

fn names(columns: &[Column<'_>]) -> Vec<String> {
    columns.iter().map(|c| quote(c.name)).collect()
}

/// `INSERT INTO t (k.., v..) VALUES (...)` (parameters: keys, then values).
pub(super) fn insert(table: &str, keys: &[Column<'_>], values: &[Column<'_>]) -> String {
    let all: Vec<&Column<'_>> = keys.iter().chain(values).collect();
    let cols: Vec<String> = all.iter().map(|c| quote(c.name)).collect();
    let params: Vec<String> = all
        .iter()
        .enumerate()
        .map(|(i, c)| format!("${}::text::{}", i + 1, c.kind))
        .collect();
    format!(
        "INSERT INTO {table} ({}) VALUES ({})",
        cols.join(","),
        params.join(",")
    )
}

/// The insert with `ON CONFLICT (k) DO UPDATE SET v=EXCLUDED.v`.
pub(super) fn upsert(table: &str, keys: &[Column<'_>], values: &[Column<'_>]) -> String {
    let action = match values.is_empty() {
        true => "DO NOTHING".to_owned(),
        false => format!(
            "DO UPDATE SET {}",
            names(values)
                .iter()
                .map(|n| format!("{n}=EXCLUDED.{n}"))
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    format!(
        "{} ON CONFLICT ({}) {action}",
        insert(table, keys, values),
        names(keys).join(",")
    )
}

/// `UPDATE t SET v=.. WHERE k=..` (parameters: values, then keys).
pub(super) fn update(table: &str, keys: &[Column<'_>], values: &[Column<'_>]) -> String {
    let set: Vec<String> = names(values)
        .iter()
        .zip(placeholders(values, 1))
        .map(|(n, p)| format!("{n}={p}"))
        .collect();
    format!(
        "UPDATE {table} SET {} WHERE {}",
        set.join(", "),
        condition(keys, values.len() + 1)
    )
}

/// `DELETE FROM t WHERE k=..`.
pub(super) fn delete(table: &str, keys: &[Column<'_>]) -> String {
    format!("DELETE FROM {table} WHERE {}", condition(keys, 1))
}

fn condition(keys: &[Column<'_>], from: usize) -> String {
    names(keys)
        .iter()
        .zip(placeholders(keys, from))
        .map(|(n, p)| format!("{n}={p}"))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// `CREATE TABLE t (k type NOT NULL, .., v type NULL|NOT NULL, .., PRIMARY KEY(k..))`.
pub(super) fn create(table: &str, keys: &[Column<'_>], values: &[(Column<'_>, bool)]) -> String {
    let mut parts: Vec<String> = keys
        .iter()
        .map(|k| format!("{} {} NOT NULL", quote(k.name), k.kind))
        .collect();
    parts.extend(values.iter().map(|(c, optional)| {
        format!(
            "{} {} {}",
            quote(c.name),
            c.kind,
            if *optional { "NULL" } else { "NOT NULL" }
        )
    }));
    if !keys.is_empty() {
        parts.push(format!("PRIMARY KEY({})", names(keys).join(", ")));
    }
    format!("CREATE TABLE {table} ({})", parts.join(", "))
}

/// `ALTER TABLE t ADD COLUMN c type NULL, ADD COLUMN ...`.
pub(super) fn add_columns(table: &str, columns: &[Column<'_>]) -> String {
    let adds: Vec<String> = columns
        .iter()
        .map(|c| format!("ADD COLUMN {} {} NULL", quote(c.name), c.kind))
        .collect();
    format!("ALTER TABLE {table} {}", adds.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_debeziums_postgresql_dialect() {
        let k = [Column {
            name: "id",
            kind: "integer",
        }];
        let v = [
            Column {
                name: "name",
                kind: "text",
            },
            Column {
                name: "born",
                kind: "date",
            },
        ];
        let t = table("public.dbserver1_public_customers");
        assert_eq!(t, "\"public\".\"dbserver1_public_customers\"");
        assert_eq!(
            upsert("t", &k, &v),
            "INSERT INTO t (\"id\",\"name\",\"born\") VALUES ($1::text::integer,$2::text::text,$3::text::date) ON CONFLICT (\"id\") DO UPDATE SET \"name\"=EXCLUDED.\"name\",\"born\"=EXCLUDED.\"born\""
        );
        assert!(upsert("t", &k, &[]).ends_with("ON CONFLICT (\"id\") DO NOTHING"));
        assert_eq!(
            update("t", &k, &v),
            "UPDATE t SET \"name\"=$1::text::text, \"born\"=$2::text::date WHERE \"id\"=$3::text::integer"
        );
        assert_eq!(
            delete("t", &k),
            "DELETE FROM t WHERE \"id\"=$1::text::integer"
        );
        assert_eq!(
            create(
                "t",
                &k,
                &[(
                    Column {
                        name: "name",
                        kind: "text"
                    },
                    true
                )]
            ),
            "CREATE TABLE t (\"id\" integer NOT NULL, \"name\" text NULL, PRIMARY KEY(\"id\"))"
        );
        assert_eq!(quote("a\"b"), "\"a\"\"b\"");
    }
}
