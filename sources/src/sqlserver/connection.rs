//! The TDS connection (tiberius) and the statements the source sends: Debezium's SQL Server
//! connector's own (`SqlServerConnection.java`, 3.x), with `#db` filled in.

use std::time::Duration;

use tiberius::{AuthMethod, Client, Config, EncryptionLevel, Row, ToSql};
use tokio::net::TcpStream;
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

use super::config::SqlServerConfig;
use super::error::SqlServerError;
use super::lsn::Lsn;

/// A connection to the server.
pub(crate) type Conn = Client<Compat<TcpStream>>;

/// `[name]`, a `]` inside doubled.
pub(crate) fn quote(name: &str) -> String {
    format!("[{}]", name.replace(']', "]]"))
}

/// Connects and logs in to the configured database, within `connect.timeout.ms`.
pub(crate) async fn connect(c: &SqlServerConfig) -> Result<Conn, SqlServerError> {
    let password = (c.connection.password()).map_err(SqlServerError::Setup)?;
    let mut config = Config::new();
    config.host(c.connection.host());
    config.port(c.port());
    config.database(&c.database);
    config.application_name("sluice");
    config.authentication(AuthMethod::sql_server(
        c.connection.login(),
        password.unwrap_or_default(),
    ));
    if c.encrypt {
        // Everything encrypted, or no connection (the driver's `encrypt=true`).
        config.encryption(EncryptionLevel::Required);
        if c.trust_server_certificate {
            config.trust_cert();
        }
        if let Some(path) = &c.server_certificate {
            config.trust_cert_ca(path.display());
        }
        if let Some(name) = &c.host_name_in_certificate {
            config.hostname_in_certificate(name);
        }
    } else {
        config.encryption(EncryptionLevel::NotSupported);
    }
    let address = format!("{}:{}", c.connection.host(), c.port());
    let timeout = Duration::from_millis(c.connect_timeout_ms.max(1));
    let connecting = async {
        let tcp = TcpStream::connect(&address).await.map_err(|e| {
            SqlServerError::query(
                format!("connecting to {address}"),
                tiberius::error::Error::from(e),
            )
        })?;
        let _ = tcp.set_nodelay(true);
        Client::connect(config, tcp.compat_write())
            .await
            .map_err(|e| {
                let reason = e.to_string();
                let tls = matches!(e, tiberius::error::Error::Tls(_))
                    || reason.to_ascii_lowercase().contains("tls");
                if tls && !c.encrypt {
                    return SqlServerError::Setup(format!("logging in to {address}: the server requires encryption ({reason}): set `database.encrypt: true`"));
                }
                if tls || reason.contains("certificate") {
                    return SqlServerError::Setup(format!("TLS to {address} failed: {reason} (with `database.encrypt: true` the server's certificate is checked against the system's roots: name its certificate or CA in `database.serverCertificate`, or set `database.trustServerCertificate: true`)"));
                }
                SqlServerError::query(
                    format!(
                        "logging in to {address} as `{}` (database `{}`)",
                        c.connection.login(),
                        c.database
                    ),
                    e,
                )
            })
    };
    match tokio::time::timeout(timeout, connecting).await {
        Ok(conn) => conn,
        Err(_) => Err(SqlServerError::Setup(format!(
            "connecting to {address}: no answer within `connect.timeout.ms` ({} ms)",
            c.connect_timeout_ms
        ))),
    }
}

/// The rows of `sql`'s first result.
pub(crate) async fn rows(
    conn: &mut Conn,
    what: &str,
    sql: &str,
    params: &[&dyn ToSql],
) -> Result<Vec<Row>, SqlServerError> {
    let stream = conn
        .query(sql, params)
        .await
        .map_err(|e| SqlServerError::query(what, e))?;
    stream
        .into_first_result()
        .await
        .map_err(|e| SqlServerError::query(what, e))
}

/// Runs a batch without results.
pub(crate) async fn run(conn: &mut Conn, what: &str, sql: &str) -> Result<(), SqlServerError> {
    let stream = conn
        .simple_query(sql)
        .await
        .map_err(|e| SqlServerError::query(what, e))?;
    stream
        .into_results()
        .await
        .map(|_| ())
        .map_err(|e| SqlServerError::query(what, e))
}

/// An LSN column of a row (`None`: NULL, whatever type the server gave the NULL).
pub(crate) fn lsn_at(row: &Row, i: usize) -> Result<Option<Lsn>, SqlServerError> {
    match row
        .get_column_data(i)
        .map_err(|e| SqlServerError::query("reading an LSN", e))?
    {
        tiberius::ColumnData::Binary(Some(b)) => Lsn::from_bytes(b).map(Some).ok_or_else(|| {
            SqlServerError::Setup(format!("an LSN of {} bytes (10 expected)", b.len()))
        }),
        tiberius::ColumnData::Binary(None) | tiberius::ColumnData::String(None) => Ok(None),
        other => Err(SqlServerError::Setup(format!(
            "an LSN column sent {other:?}"
        ))),
    }
}

/// Debezium's statements, for database `db`.
pub(crate) struct Statements {
    db: String,
}

impl Statements {
    pub(crate) fn new(db: &str) -> Self {
        Statements { db: quote(db) }
    }

    /// `GET_MAX_LSN`: the snapshot's position.
    pub(crate) fn max_lsn(&self) -> String {
        format!("SELECT {}.sys.fn_cdc_get_max_lsn()", self.db)
    }

    /// `GET_MAX_TRANSACTION_LSN` (`max.iteration.transactions: 0`).
    pub(crate) fn max_transaction_lsn(&self) -> String {
        format!(
            "SELECT MAX(start_lsn) FROM {}.cdc.lsn_time_mapping WHERE tran_id <> 0x00",
            self.db
        )
    }

    /// `GET_NTH_TRANSACTION_LSN_FROM_BEGINNING` (@P1: n).
    pub(crate) fn nth_transaction_lsn_from_beginning(&self) -> String {
        format!("SELECT MAX(start_lsn) FROM (SELECT TOP (@P1) start_lsn FROM {}.cdc.lsn_time_mapping WHERE tran_id <> 0x00 ORDER BY start_lsn) as next_lsns", self.db)
    }

    /// `GET_NTH_TRANSACTION_LSN_FROM_LAST` (@P1: n, @P2: the last commit LSN).
    pub(crate) fn nth_transaction_lsn_from_last(&self) -> String {
        format!("SELECT MAX(start_lsn) FROM (SELECT TOP (@P1 + 1) start_lsn FROM {}.cdc.lsn_time_mapping WHERE start_lsn >= @P2 AND tran_id <> 0x00 ORDER BY start_lsn) as next_lsns", self.db)
    }

    /// `INCREMENT_LSN` (@P1).
    pub(crate) fn increment_lsn(&self) -> String {
        format!("SELECT {}.sys.fn_cdc_increment_lsn(@P1)", self.db)
    }

    /// `GET_CHANGE_TABLES`, up to an LSN (`upto`: @P1 is it, @P2 and @P3 the database name)
    /// or all (@P1 and @P2 the database name).
    pub(crate) fn change_tables(&self, upto: bool) -> String {
        let (filter, a, b) = if upto {
            (" WHERE ct.start_lsn <= @P1", "@P2", "@P3")
        } else {
            ("", "@P1", "@P2")
        };
        format!(
            "WITH ordered_change_tables AS (SELECT ROW_NUMBER() OVER (PARTITION BY ct.source_object_id, ct.start_lsn ORDER BY ct.create_date DESC) AS ct_sequence, ct.* FROM {}.cdc.change_tables AS ct{filter}) SELECT OBJECT_SCHEMA_NAME(source_object_id, DB_ID({a})), OBJECT_NAME(source_object_id, DB_ID({b})), capture_instance, object_id, start_lsn FROM ordered_change_tables WHERE ct_sequence = 1",
            self.db
        )
    }

    /// The rows SQL Server counts in each table (@P1 and @P2 the database name): schema,
    /// table and the `rows` of its heap or clustered index over all partitions
    /// (`sys.partitions`, kept by the server as rows are written; approximate while
    /// transactions are open). Tables the login may not see are left out.
    pub(crate) fn row_estimates(&self) -> String {
        format!(
            "SELECT OBJECT_SCHEMA_NAME(p.object_id, DB_ID(@P1)), OBJECT_NAME(p.object_id, DB_ID(@P2)), SUM(p.rows) FROM {}.sys.partitions AS p WHERE p.index_id IN (0, 1) GROUP BY p.object_id",
            self.db
        )
    }

    /// `GET_CAPTURED_COLUMNS`.
    pub(crate) fn captured_columns(&self) -> String {
        format!(
            "SELECT object_id, column_name FROM {}.cdc.captured_columns ORDER BY object_id, column_id",
            self.db
        )
    }

    /// The columns of a table with their types and key place (@P1: schema, @P2: table).
    /// Debezium reads them through JDBC's `DatabaseMetaData`; TDS has no such call, so the
    /// source asks the standard catalog views.
    pub(crate) fn table_columns(&self) -> String {
        format!(
            "SELECT c.COLUMN_NAME, c.DATA_TYPE, c.CHARACTER_MAXIMUM_LENGTH, c.NUMERIC_PRECISION, c.NUMERIC_SCALE, c.DATETIME_PRECISION, c.IS_NULLABLE, \
             (SELECT k.ORDINAL_POSITION FROM {db}.INFORMATION_SCHEMA.KEY_COLUMN_USAGE k JOIN {db}.INFORMATION_SCHEMA.TABLE_CONSTRAINTS t ON t.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND t.TABLE_SCHEMA = k.TABLE_SCHEMA AND t.TABLE_NAME = k.TABLE_NAME \
              WHERE t.CONSTRAINT_TYPE = 'PRIMARY KEY' AND k.TABLE_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME AND k.COLUMN_NAME = c.COLUMN_NAME) \
             FROM {db}.INFORMATION_SCHEMA.COLUMNS c WHERE c.TABLE_SCHEMA = @P1 AND c.TABLE_NAME = @P2 ORDER BY c.ORDINAL_POSITION",
            db = self.db
        )
    }

    /// The changes of one capture instance between two LSNs after a position (Debezium's
    /// `getChangesForTable`): @P1..@P7 are from LSN, seqval, operation, from LSN, seqval, from
    /// LSN, to LSN; in the function mode @P1, @P2 (from, to) come first and the rest follow.
    /// `top`: at most that many rows (`streaming.fetch.size`). One conjunct is added to
    /// Debezium's text, `__$start_lsn >= <from>`, which the three alternatives imply: it lets
    /// the change table's index (clustered on the LSNs) seek to the piece's start.
    pub(crate) fn changes(
        &self,
        mode: super::config::QueryMode,
        instance: &str,
        columns: &[String],
        top: Option<usize>,
        skip_ops: &[i32],
    ) -> String {
        let select = top.map_or("SELECT".to_owned(), |n| format!("SELECT TOP {n}"));
        // Read in pieces, the order must be the pieces' key (commit LSN, change LSN,
        // operation): `__$command_id` (Debezium's direct order) would let a piece's start
        // skip or repeat rows whose command and change orders differ.
        let command = if top.is_some() {
            ""
        } else {
            "cdc_data.[__$command_id] ASC, "
        };
        let skipped = if skip_ops.is_empty() {
            String::new()
        } else {
            let column = match mode {
                super::config::QueryMode::Direct => "[cdc_data].[__$operation]",
                super::config::QueryMode::Function => "[__$operation]",
            };
            format!(
                " AND {column} NOT IN ({})",
                skip_ops
                    .iter()
                    .map(i32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        let cols = columns
            .iter()
            .map(|c| quote(c))
            .collect::<Vec<_>>()
            .join(", ");
        match mode {
            super::config::QueryMode::Direct => format!(
                "{select} cdc_data.[__$start_lsn], cdc_data.[__$seqval], cdc_data.[__$operation], cdc_data.[__$update_mask], {cols}, TODATETIMEOFFSET(ltm.tran_begin_time, DATEPART(TZOFFSET, SYSDATETIMEOFFSET())) \
                 FROM {db}.cdc.{table} AS cdc_data LEFT JOIN {db}.cdc.lsn_time_mapping ltm ON ltm.start_lsn = cdc_data.[__$start_lsn] \
                  WHERE [cdc_data].[__$start_lsn] >= @P6 AND (([cdc_data].[__$start_lsn] = @P1 AND [cdc_data].[__$seqval] = @P2 AND [cdc_data].[__$operation] > @P3) OR ([cdc_data].[__$start_lsn] = @P4 AND [cdc_data].[__$seqval] > @P5) OR ([cdc_data].[__$start_lsn] > @P6)) AND [cdc_data].[__$start_lsn] <= @P7{skipped} \
                 ORDER BY cdc_data.[__$start_lsn] ASC, {command}cdc_data.[__$seqval] ASC, cdc_data.[__$operation] ASC",
                db = self.db,
                table = quote(&format!("{instance}_CT")),
            ),
            super::config::QueryMode::Function => format!(
                "{select} [__$start_lsn], [__$seqval], [__$operation], [__$update_mask], {cols}, TODATETIMEOFFSET({db}.sys.fn_cdc_map_lsn_to_time([__$start_lsn]), DATEPART(TZOFFSET, SYSDATETIMEOFFSET())) \
                 FROM {db}.cdc.{function}(@P1, @P2, N'all update old') \
                  WHERE [__$start_lsn] >= @P8 AND (([__$start_lsn] = @P3 AND [__$seqval] = @P4 AND [__$operation] > @P5) OR ([__$start_lsn] = @P6 AND [__$seqval] > @P7) OR ([__$start_lsn] > @P8)) AND [__$start_lsn] <= @P9{skipped} \
                 ORDER BY [__$start_lsn] ASC, [__$seqval] ASC, [__$operation] ASC",
                db = self.db,
                function = quote(&format!("fn_cdc_get_all_changes_{instance}")),
            ),
        }
    }

    /// `GET_MIN_LSN_FROM_ALL_CHANGE_TABLES`: the oldest LSN the change tables still hold.
    pub(crate) fn min_lsn_of_change_tables(&self) -> String {
        format!("select min(start_lsn) from {}.cdc.change_tables", self.db)
    }

    /// `sqlserver.agent.status.query`'s default: 1 when SQL Server Agent runs.
    pub(crate) fn agent_status(&self) -> String {
        format!(
            "SELECT CASE WHEN dss.[status]=4 THEN 1 ELSE 0 END AS isRunning FROM {}.sys.dm_server_services dss WHERE dss.[servicename] LIKE N'SQL Server Agent (%';",
            self.db
        )
    }

    /// `CHECK_CDC_ACCESS`: the capture instances the login may read.
    pub(crate) fn help_change_data_capture(&self) -> String {
        format!("EXEC {}.sys.sp_cdc_help_change_data_capture", self.db)
    }
}
