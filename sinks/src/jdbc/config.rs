//! Configuration of the `jdbc` sink, with the Debezium JDBC sink connector's property names.
//!
//! TLS to the target comes from `connection.url`'s parameters, as the JDBC drivers name them:
//! PostgreSQL's `sslmode` (`disable`, `prefer` (the default, as pgjdbc's), `require`,
//! `verify-ca`, `verify-full`), `sslrootcert` (the CA's PEM file; `verify-full` without it
//! checks against the system's roots) and `ssl=true` (`verify-full`); MySQL's and MariaDB's
//! `sslMode` (`DISABLED` (the default here), `PREFERRED`, `REQUIRED`/`trust`,
//! `VERIFY_CA`/`verify-ca`, `VERIFY_IDENTITY`/`verify-full`), `useSSL` and `serverSslCert` (the
//! CA's PEM file; a Java trust store is not read). `verify-ca` needs the CA's file. Any other
//! parameter is refused.

use serde::Deserialize;
use sluice_engine::config::Secret;
use sluice_engine::FailureMode;

/// `insert.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InsertMode {
    /// `INSERT`: a row that exists fails.
    #[default]
    Insert,
    /// `INSERT ... ON CONFLICT DO UPDATE` (`ON DUPLICATE KEY UPDATE`): replays are idempotent.
    Upsert,
    /// `UPDATE ... WHERE <key>`.
    Update,
}

/// `primary.key.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyMode {
    /// No key columns.
    #[default]
    None,
    /// The event key's fields (or `primary.key.fields` of them).
    RecordKey,
    /// The row's fields named by `primary.key.fields` (all of them when empty).
    RecordValue,
}

/// `schema.evolution`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Evolution {
    /// A missing table or column is an error.
    #[default]
    None,
    /// Missing tables are created, missing columns added (nullable); nothing else changes.
    Basic,
}

/// `type: jdbc`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JdbcSinkConfig {
    /// `jdbc:postgresql://host:port/database`, `jdbc:mysql://...` or `jdbc:mariadb://...` (user
    /// and password in their own keys), with the drivers' TLS parameters
    /// (`?sslmode=verify-full&sslrootcert=/ca.pem`, `?sslMode=VERIFY_IDENTITY&serverSslCert=...`);
    /// any other parameter is refused.
    #[serde(rename = "connection.url")]
    pub url: String,
    /// The login (required).
    #[serde(rename = "connection.username")]
    pub username: String,
    /// Its password (never logged).
    #[serde(rename = "connection.password", default)]
    pub password: Option<Secret>,
    /// `insert`, `upsert` (idempotent) or `update`; `upsert` and `update` need a
    /// `primary.key.mode`.
    #[serde(rename = "insert.mode", default)]
    pub insert_mode: InsertMode,
    /// Deletes and tombstones become `DELETE ... WHERE <key>` (needs `record_key`).
    #[serde(rename = "delete.enabled", default)]
    pub delete_enabled: bool,
    /// `op: t` empties the table: `TRUNCATE TABLE` (MySQL and MariaDB: `DELETE FROM`, as their
    /// `TRUNCATE` would commit the batch's transaction).
    #[serde(rename = "truncate.enabled", default)]
    pub truncate_enabled: bool,
    /// Where the key comes from: `record_key` (the event key's fields), `record_value` (the
    /// row's), `none`.
    #[serde(rename = "primary.key.mode", default)]
    pub key_mode: KeyMode,
    /// Comma-separated key columns, among the event key's fields (`record_key`) or the row's
    /// (`record_value`); default: all of them.
    #[serde(rename = "primary.key.fields", default)]
    pub key_fields: Option<String>,
    /// `basic`: create missing tables, add missing columns; `none`: the tables must exist.
    #[serde(rename = "schema.evolution", default)]
    pub evolution: Evolution,
    /// The table of an event: `${topic}` (dots become `_`), `${source.db}`, `${source.schema}`,
    /// `${source.table}` (default `${topic}`); a `schema.table` name qualifies it.
    #[serde(
        rename = "table.name.format",
        alias = "collection.name.format",
        default = "default_table"
    )]
    pub table_format: String,
    /// Quote identifiers as given (default false: names are folded to lower case).
    #[serde(rename = "quote.identifiers", default)]
    pub quote_identifiers: bool,
    /// Only these fields become columns: `field` or `topic:field`, comma-separated (exact names,
    /// as Debezium matches them); not with `field.exclude.list`.
    #[serde(rename = "field.include.list", default)]
    pub field_include: Option<String>,
    /// These fields do not become columns (same form; not with `field.include.list`).
    #[serde(rename = "field.exclude.list", default)]
    pub field_exclude: Option<String>,
    /// Within a batch, only the last change of each key is applied (default false).
    #[serde(rename = "use.reduction.buffer", default)]
    pub reduction_buffer: bool,
    /// An event whose value cannot be written (a type without a column type, a value out of
    /// range): `fail` (default), `warn`, `skip`.
    #[serde(rename = "event.processing.failure.handling.mode", default)]
    pub failure_mode: FailureMode,
}

fn default_table() -> String {
    "${topic}".to_owned()
}

/// The kind of database `connection.url` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    /// MySQL or MariaDB (`jdbc:mysql:` or `jdbc:mariadb:`: the server says which).
    MySql,
}

/// Where `connection.url` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub dialect: Dialect,
    pub tls: super::tls::Tls,
    pub host: String,
    pub port: u16,
    pub database: String,
}

impl JdbcSinkConfig {
    /// The server and database of `connection.url`.
    pub fn target(&self) -> Result<Target, String> {
        let form = "write it as jdbc:postgresql://host:5432/database, jdbc:mysql://host:3306/database or jdbc:mariadb://host:3306/database";
        let (dialect, rest, default_port) = [
            ("jdbc:postgresql://", Dialect::Postgres, 5432),
            ("jdbc:mysql://", Dialect::MySql, 3306),
            ("jdbc:mariadb://", Dialect::MySql, 3306),
        ]
        .into_iter()
        .find_map(|(prefix, d, port)| Some((d, self.url.strip_prefix(prefix)?, port)))
        .ok_or_else(|| format!("`connection.url` `{}`: {form}", self.url))?;
        // Driver parameters: the TLS ones are read, any other is refused.
        let (rest, params) = match rest.split_once('?') {
            Some((rest, params)) => (rest, Some(params)),
            None => (rest, None),
        };
        let tls = super::tls::parse(dialect, params)?;
        let (authority, database) = rest
            .split_once('/')
            .ok_or_else(|| format!("`connection.url` `{}` names no database: {form}", self.url))?;
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse()
                    .map_err(|_| format!("`connection.url`: `{p}` is not a port"))?,
            ),
            None => (authority, default_port),
        };
        if host.is_empty() || database.is_empty() {
            return Err(format!("`connection.url` `{}`: {form}", self.url));
        }
        Ok(Target {
            dialect,
            tls,
            host: host.to_owned(),
            port,
            database: database.to_owned(),
        })
    }

    /// The key columns named by `primary.key.fields`.
    pub fn key_fields(&self) -> Vec<String> {
        self.key_fields
            .iter()
            .flat_map(|f| f.split(','))
            .map(|f| f.trim().to_owned())
            .filter(|f| !f.is_empty())
            .collect()
    }

    /// Whether field `field` of an event of `topic` becomes a column.
    pub fn keeps(&self, topic: &str, field: &str) -> bool {
        let listed = |list: &Option<String>| {
            list.iter()
                .flat_map(|l| l.split(','))
                .map(str::trim)
                .any(|e| {
                    e == field
                        || e.split_once(':')
                            .is_some_and(|(t, f)| t == topic && f == field)
                })
        };
        match (&self.field_include, &self.field_exclude) {
            (_, Some(_)) => !listed(&self.field_exclude),
            (Some(_), None) => listed(&self.field_include),
            (None, None) => true,
        }
    }

    /// Checks what serde cannot (as Debezium's connector checks them).
    pub fn validate(&self) -> Result<(), String> {
        self.target()?;
        if self.field_include.is_some() && self.field_exclude.is_some() {
            return Err("set `field.include.list` or `field.exclude.list`, not both".into());
        }
        if self.insert_mode != InsertMode::Insert && self.key_mode == KeyMode::None {
            return Err("`insert.mode: upsert` and `update` need the key: set `primary.key.mode` (`record_key` or `record_value`)".into());
        }
        if self.delete_enabled && self.key_mode != KeyMode::RecordKey {
            return Err("`delete.enabled: true` needs `primary.key.mode: record_key`".into());
        }
        if !self.table_format.contains("${") && self.table_format.is_empty() {
            return Err("`table.name.format` is empty".into());
        }
        Ok(())
    }
}

sluice_engine::impl_component!(
    JdbcSinkConfig,
    Sink,
    "jdbc",
    check = Self::validate,
    build = |c, ctx| super::JdbcSink::open(c, ctx)?
);

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> JdbcSinkConfig {
        serde_json::from_value(
            serde_json::json!({"connection.url": url, "connection.username": "u"}),
        )
        .unwrap()
    }

    #[test]
    fn field_lists_take_names_or_topic_and_name() {
        let mut c = config("jdbc:postgresql://h/d");
        c.field_include = Some("id, t1:name".into());
        assert!(c.keeps("t1", "name") && c.keeps("t2", "id") && !c.keeps("t2", "name"));
        c.field_include = None;
        c.field_exclude = Some("secret".into());
        assert!(!c.keeps("t1", "secret") && c.keeps("t1", "name"));
    }

    #[test]
    fn urls_name_the_server_and_database() {
        let t = config("jdbc:postgresql://db.local:6543/shop")
            .target()
            .unwrap();
        assert!(config("jdbc:mysql://h/d?rewriteBatchedStatements=true")
            .target()
            .unwrap_err()
            .contains("`rewriteBatchedStatements` is not read"));
        assert_eq!(
            (t.host.as_str(), t.port, t.database.as_str()),
            ("db.local", 6543, "shop")
        );
        assert_eq!(config("jdbc:postgresql://h/d").target().unwrap().port, 5432);
        let m = config("jdbc:mariadb://m:3307/shop").target().unwrap();
        assert_eq!((m.dialect, m.port), (Dialect::MySql, 3307));
        assert_eq!(config("jdbc:mysql://h/d").target().unwrap().port, 3306);
        assert!(config("postgres://h/d").target().is_err());
    }
}
