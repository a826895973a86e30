//! The PostgreSQL target: a batch's changes in one transaction (tables created or given their
//! missing columns inside it), every value bound as text and cast to its column's type.

use std::collections::HashMap;

use sluice_engine::ComponentError;

use super::error::{ConnectError, JdbcSinkError};
use tokio_postgres::types::{ToSql, Type};

use sluice_engine::tls::{client_builder, Verify};

use super::config::JdbcSinkConfig;
use super::sql::Sql;
use super::table::{evolve, parts, statement, Columns};
use super::tls::{Tls, TlsMode};
use super::Change;

/// The connection and what it knows of the tables.
#[derive(Default)]
pub(super) struct Postgres {
    client: Option<tokio_postgres::Client>,
    /// Column types of the tables seen, by unquoted name.
    tables: HashMap<String, Columns>,
}

/// Why applying failed.
type Failure = super::table::Failure<tokio_postgres::Error>;

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Failure::Db(e)
    }
}

impl Postgres {
    /// Reaches the database (`SELECT 1`), so that a wrong address or login stops the start, and
    /// keeps the connection.
    pub(super) async fn check(&mut self, config: &JdbcSinkConfig) -> Result<(), ConnectError> {
        let client = connect(config).await?;
        client
            .simple_query("SELECT 1")
            .await
            .map_err(|e| ConnectError::Session {
                database: "PostgreSQL",
                at: at(config),
                source: Box::new(e),
            })?;
        self.client = Some(client);
        Ok(())
    }

    /// Applies `changes` in one transaction.
    pub(super) async fn apply(
        &mut self,
        name: &str,
        config: &JdbcSinkConfig,
        changes: &[Change],
    ) -> Result<(), ComponentError> {
        if self.client.as_ref().is_some_and(|c| c.is_closed()) {
            self.client = None;
        }
        if self.client.is_none() {
            let client = connect(config)
                .await
                .map_err(|source| JdbcSinkError::Reconnect {
                    sink: name.to_owned(),
                    source,
                })?;
            self.client = Some(client);
        }
        let mut tables = std::mem::take(&mut self.tables);
        let Some(client) = self.client.as_mut() else {
            return Err(JdbcSinkError::no_connection(name).into());
        };
        let result: Result<(), Failure> = async {
            let tx = client.transaction().await?;
            for change in changes {
                apply_one(&tx, config, &mut tables, change).await?;
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
            Err(e) => Err(self.classify(name, e)),
        }
    }

    /// A database error: retryable when the connection or the server's state is at fault.
    fn classify(&mut self, name: &str, e: Failure) -> ComponentError {
        let sink = name.to_owned();
        let error = match e {
            Failure::Plain(message) => JdbcSinkError::Write {
                sink,
                message,
                retryable: false,
                source: None,
            },
            Failure::Db(e) => {
                let class = e.code().map(|c| c.code()[..2].to_owned());
                let retryable = matches!(class.as_deref(), None | Some("08" | "40" | "53" | "57"));
                if retryable {
                    self.client = None;
                }
                JdbcSinkError::Write {
                    sink,
                    message: describe(&e),
                    retryable,
                    source: Some(Box::new(e)),
                }
            }
        };
        error.into()
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
    tables: &mut HashMap<String, Columns>,
    change: &Change,
) -> Result<(), Failure> {
    let sql = Sql::postgres();
    let (table, cells) = parts(change);
    if let Some(cells) = cells {
        if !tables.contains_key(table) {
            tables.insert(table.to_owned(), read_columns(tx, &sql, table).await?);
        }
        let known = tables.get(table).cloned().unwrap_or_default();
        if let Some((ddl, done)) = evolve(&sql, config, table, &known, cells)? {
            tx.batch_execute(&ddl).await?;
            tracing::info!(table, "{done}");
            tables.insert(table.to_owned(), read_columns(tx, &sql, table).await?);
        }
    }
    let columns = tables.get(table).cloned().unwrap_or_default();
    let Some((statement, params)) = statement(&sql, config, &columns, change)? else {
        return Ok(());
    };
    let types = vec![Type::TEXT; params.len()];
    let prepared = tx.prepare_typed(&statement, &types).await?;
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| *p as &(dyn ToSql + Sync)).collect();
    tx.execute(&prepared, &refs).await?;
    Ok(())
}

/// The columns of `table` and their types (`format_type`); none when it does not exist.
async fn read_columns(
    tx: &tokio_postgres::Transaction<'_>,
    sql: &Sql,
    table: &str,
) -> Result<Columns, Failure> {
    let rows = tx
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped",
            &[&sql.table(table)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
        .collect())
}

/// A connection to the target (its task on the current runtime).
/// `host:port/database` of the target, as errors name it.
fn at(config: &JdbcSinkConfig) -> String {
    match config.target() {
        Ok(t) => format!("{}:{}/{}", t.host, t.port, t.database),
        Err(_) => "the target".to_owned(),
    }
}

async fn connect(config: &JdbcSinkConfig) -> Result<tokio_postgres::Client, ConnectError> {
    let target = config.target().map_err(ConnectError::Target)?;
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
    let failed = |e: tokio_postgres::Error| match e.as_db_error() {
        Some(db) => ConnectError::Refused {
            database: "PostgreSQL",
            at: at.clone(),
            message: db.message().to_owned(),
            source: Box::new(e),
        },
        None => ConnectError::Unreachable {
            database: "PostgreSQL",
            at: at.clone(),
            detail: with_causes(&e),
            tls_key: "sslmode",
            source: Box::new(e),
        },
    };
    use tokio_postgres::config::SslMode;
    let client = match tls_config(&target.tls).map_err(ConnectError::Target)? {
        None => {
            pg.ssl_mode(SslMode::Disable);
            let (client, connection) = pg.connect(tokio_postgres::NoTls).await.map_err(failed)?;
            spawn_connection(connection);
            client
        }
        Some(tls) => {
            let prefer = target.tls.mode == TlsMode::Prefer;
            pg.ssl_mode(if prefer {
                SslMode::Prefer
            } else {
                SslMode::Require
            });
            let tls = tokio_postgres_rustls::MakeRustlsConnect::new(tls);
            let (client, connection) = pg.connect(tls).await.map_err(failed)?;
            spawn_connection(connection);
            client
        }
    };
    Ok(client)
}

/// An error's text followed by its causes' (a refused certificate is a cause).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}

/// Runs a connection's task on the current runtime.
fn spawn_connection<S, T>(connection: tokio_postgres::Connection<S, T>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "The jdbc sink's connection ended.");
        }
    });
}

/// The rustls configuration `sslmode` asks for (`None`: no TLS): `prefer` and `require`
/// encrypt without checking the server, `verify-ca` checks its chain against `sslrootcert`,
/// `verify-full` its name too (against the system's roots without `sslrootcert`).
fn tls_config(tls: &Tls) -> Result<Option<rustls::ClientConfig>, String> {
    let roots = match &tls.root_cert {
        Some(path) => Some(sluice_engine::tls::roots(path, "sslrootcert")?),
        None => None,
    };
    let verify = match tls.mode {
        TlsMode::Disable => return Ok(None),
        TlsMode::Prefer | TlsMode::Require => Verify::Nothing,
        TlsMode::VerifyCa => Verify::Chain,
        TlsMode::VerifyFull if roots.is_none() => {
            return crate::tls::client_config()
                .map(Some)
                .map_err(|e| e.to_string())
        }
        TlsMode::VerifyFull => Verify::Full,
    };
    Ok(Some(client_builder(verify, roots)?.with_no_client_auth()))
}
