//! The MySQL and MariaDB target. MySQL commits the open transaction at any DDL, so a batch's
//! tables are created or given their missing columns first, then its changes run in one
//! transaction. The session is strict (`STRICT_ALL_TABLES`: a value that does not fit its
//! column is an error, not a truncated or zero value) and in UTC; upserts are MariaDB's and
//! older MySQL's `ON DUPLICATE KEY UPDATE c=VALUES(c)`, MySQL 8.0.20's `AS new … c=new.c`.

use std::collections::HashMap;

use mysql_async::prelude::Queryable;
use sluice_engine::ComponentError;

use super::error::{ConnectError, JdbcSinkError};

use super::config::{Dialect, JdbcSinkConfig};
use super::sql::Sql;
use super::table::{column_key, evolve, parts, statement, Columns};
use super::tls::{Tls, TlsMode};
use super::Change;

/// The session every connection runs in.
const SESSION: &str = "SET NAMES utf8mb4, SESSION time_zone = '+00:00', SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'";

/// The connection and what it knows of the server and the tables.
#[derive(Default)]
pub(super) struct MySql {
    conn: Option<(mysql_async::Conn, Sql)>,
    /// Column types of the tables seen, by unquoted name.
    tables: HashMap<String, Columns>,
}

/// Why applying failed.
type Failure = super::table::Failure<mysql_async::Error>;

impl From<mysql_async::Error> for Failure {
    fn from(e: mysql_async::Error) -> Self {
        Failure::Db(e)
    }
}

impl MySql {
    /// Reaches the database, so that a wrong address or login stops the start, and keeps the
    /// connection.
    pub(super) async fn check(&mut self, config: &JdbcSinkConfig) -> Result<(), ConnectError> {
        self.conn = Some(connect(config).await?);
        Ok(())
    }

    /// Creates or alters the batch's tables, then applies `changes` in one transaction.
    pub(super) async fn apply(
        &mut self,
        name: &str,
        config: &JdbcSinkConfig,
        changes: &[Change],
    ) -> Result<(), ComponentError> {
        if self.conn.is_none() {
            let conn = connect(config)
                .await
                .map_err(|source| JdbcSinkError::Reconnect {
                    sink: name.to_owned(),
                    source,
                })?;
            self.conn = Some(conn);
        }
        let mut tables = std::mem::take(&mut self.tables);
        let Some((conn, sql)) = self.conn.as_mut() else {
            return Err(JdbcSinkError::no_connection(name).into());
        };
        let result = run(conn, sql, config, &mut tables, changes).await;
        match result {
            Ok(()) => {
                self.tables = tables;
                Ok(())
            }
            Err(e) => Err(self.classify(name, e)),
        }
    }

    /// A database error: retryable when the connection or the server's state is at fault
    /// (lost or timed-out connections, network errors, lock wait timeouts, deadlocks, a server
    /// shutting down or read-only during a failover, a statement to prepare again).
    fn classify(&mut self, name: &str, e: Failure) -> ComponentError {
        let (message, retryable, source): (String, bool, Option<super::error::Cause>) = match e {
            Failure::Plain(message) => (message, false, None),
            Failure::Db(mysql_async::Error::Server(s)) => (
                format!("{} (MySQL error {})", s.message, s.code),
                retryable(s.code),
                Some(Box::new(mysql_async::Error::Server(s))),
            ),
            Failure::Db(e @ mysql_async::Error::Url(_)) => {
                (e.to_string(), false, Some(Box::new(e)))
            }
            Failure::Db(e) => (e.to_string(), true, Some(Box::new(e))),
        };
        // The connection is not used again after any failure: a retry opens a fresh one.
        self.conn = None;
        JdbcSinkError::Write {
            sink: name.to_owned(),
            message,
            retryable,
            source,
        }
        .into()
    }
}

/// Whether a MySQL/MariaDB server error passes: too many connections (1040), shutdown (1053),
/// network errors (1158–1161), a commit that failed (1180), lock wait timeout (1205), deadlock
/// (1213), read-only (1290, 1836), a table changed under a prepared statement (1412, 1615),
/// interrupted (1317), a connection killed or timed out (1927, 4031).
fn retryable(code: u16) -> bool {
    matches!(
        code,
        1040 | 1053 | 1158
            ..=1161 | 1180 | 1205 | 1213 | 1290 | 1317 | 1412 | 1615 | 1836 | 1927 | 4031
    )
}

/// The batch: its tables made to fit (each DDL commits on its own), then its changes in one
/// transaction.
async fn run(
    conn: &mut mysql_async::Conn,
    sql: &Sql,
    config: &JdbcSinkConfig,
    tables: &mut HashMap<String, Columns>,
    changes: &[Change],
) -> Result<(), Failure> {
    for change in changes {
        let (table, Some(cells)) = parts(change) else {
            continue;
        };
        if !tables.contains_key(table) {
            tables.insert(table.to_owned(), read_columns(conn, table).await?);
        }
        let known = tables.get(table).cloned().unwrap_or_default();
        if let Some((ddl, done)) = evolve(sql, config, table, &known, cells)? {
            conn.query_drop(&ddl).await?;
            tracing::info!(table, "{done}");
            tables.insert(table.to_owned(), read_columns(conn, table).await?);
        }
    }
    let mut tx = conn
        .start_transaction(mysql_async::TxOpts::default())
        .await?;
    for change in changes {
        let (table, _) = parts(change);
        let columns = tables.get(table).cloned().unwrap_or_default();
        let Some((statement, params)) = statement(sql, config, &columns, change)? else {
            continue;
        };
        let values: Vec<mysql_async::Value> = (params.iter())
            .map(|p| match p {
                Some(text) => mysql_async::Value::Bytes(text.as_bytes().to_vec()),
                None => mysql_async::Value::NULL,
            })
            .collect();
        tx.exec_drop(statement, mysql_async::Params::Positional(values))
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The columns of `table` (`db.table` or a table of the connection's database) and their
/// types, by lower-case name; none when it does not exist.
async fn read_columns(conn: &mut mysql_async::Conn, table: &str) -> Result<Columns, Failure> {
    let (schema, name) = match table.split_once('.') {
        Some((s, t)) => (Some(s.to_owned()), t.to_owned()),
        None => (None, table.to_owned()),
    };
    let rows: Vec<(String, String)> = conn
        .exec(
            "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?",
            (schema, name),
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|(c, t)| (column_key(Dialect::MySql, &c), t))
        .collect())
}

/// A connection in the sink's session, and how statements are written for its server.
async fn connect(config: &JdbcSinkConfig) -> Result<(mysql_async::Conn, Sql), ConnectError> {
    let target = config.target().map_err(ConnectError::Target)?;
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(target.host.clone())
        .tcp_port(target.port)
        .user(Some(config.username.clone()))
        .pass(config.password.as_ref().map(|p| p.expose().to_owned()))
        .db_name(Some(target.database.clone()));
    let at = format!("{}:{}/{}", target.host, target.port, target.database);
    let failed = |e: mysql_async::Error| match e {
        mysql_async::Error::Server(s) => ConnectError::Refused {
            database: "MySQL",
            at: at.clone(),
            message: s.message.clone(),
            source: Box::new(mysql_async::Error::Server(s)),
        },
        e => ConnectError::Unreachable {
            database: "MySQL",
            at: at.clone(),
            detail: e.to_string(),
            tls_key: "sslMode",
            source: Box::new(e),
        },
    };
    let tls = ssl_opts(&target.tls);
    let mut conn = match mysql_async::Conn::new(opts.clone().ssl_opts(tls.clone())).await {
        // `PREFERRED`: a server without TLS is read in plain.
        Err(mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer))
            if target.tls.mode == TlsMode::Prefer =>
        {
            mysql_async::Conn::new(opts).await.map_err(failed)?
        }
        other => other.map_err(failed)?,
    };
    let setup = async {
        conn.query_drop(SESSION).await?;
        conn.query_first::<String, _>("SELECT VERSION()").await
    };
    let version = setup
        .await
        .map_err(|e| ConnectError::Session {
            database: "MySQL",
            at: at.clone(),
            source: Box::new(e),
        })?
        .unwrap_or_default();
    let sql = Sql {
        dialect: Dialect::MySql,
        row_alias: row_alias(&version),
    };
    Ok((conn, sql))
}

/// The TLS options `sslMode` asks for (`None`: none): `PREFERRED`, `REQUIRED`/`trust` encrypt
/// without checking the server; `VERIFY_CA`/`verify-ca` check its chain against
/// `serverSslCert`, not its name; `VERIFY_IDENTITY`/`verify-full` both (the built-in roots
/// without `serverSslCert`).
fn ssl_opts(tls: &Tls) -> Option<mysql_async::SslOpts> {
    if tls.mode == TlsMode::Disable {
        return None;
    }
    // mysql_async builds its TLS configuration with the process's default crypto provider,
    // which the build cannot pick by itself (ring and aws-lc-rs are both linked): ring, as
    // everywhere else in Sluice. Already installed: nothing to do.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let opts = mysql_async::SslOpts::default();
    let roots = tls.root_cert.iter().map(|p| p.clone().into()).collect();
    Some(match tls.mode {
        TlsMode::Disable | TlsMode::Prefer | TlsMode::Require => opts
            .with_danger_accept_invalid_certs(true)
            .with_danger_skip_domain_validation(true),
        TlsMode::VerifyCa => opts
            .with_root_certs(roots)
            .with_danger_skip_domain_validation(true),
        TlsMode::VerifyFull => opts.with_root_certs(roots),
    })
}

/// Whether the server (its `VERSION()`) names the inserted row with an alias in upserts:
/// MySQL from 8.0.20 (which deprecates `VALUES()` there); MariaDB never.
fn row_alias(version: &str) -> bool {
    if version.to_ascii_lowercase().contains("mariadb") {
        return false;
    }
    let numbers: Vec<u32> = (version.split(['.', '-']))
        .take(3)
        .map_while(|p| p.parse().ok())
        .collect();
    numbers.as_slice() >= [8, 0, 20].as_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_server_errors_are_retried() {
        assert!(retryable(1213) && retryable(4031) && retryable(1159));
        assert!(!retryable(1062) && !retryable(1146) && !retryable(1406));
    }

    #[test]
    fn upserts_name_the_row_from_mysql_8_0_20() {
        assert!(row_alias("8.0.20"));
        assert!(row_alias("8.4.3-commercial"));
        assert!(!row_alias("8.0.19-log"));
        assert!(!row_alias("5.7.44"));
        assert!(!row_alias("10.11.6-MariaDB-0+deb12u1-log"));
        assert!(!row_alias("11.4.2-MariaDB"));
    }
}
