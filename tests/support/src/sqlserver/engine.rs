//! The emulated server's store: a SQLite database (WAL, one connection per client session, so
//! a transaction reads a snapshot and writers are serialised), tables named `"schema.table"`,
//! the catalog views the source reads (`INFORMATION_SCHEMA.*`, `sys.objects`, `sys.databases`,
//! `sys.partitions`),
//! and SQL Server's CDC: `sys.sp_cdc_enable_db`/`enable_table`/`disable_table`, change tables
//! `cdc.<capture_instance>_CT` filled by triggers, `cdc.change_tables`, `cdc.captured_columns`,
//! `cdc.lsn_time_mapping`. The capture job is played at commit: every change of a transaction
//! gets the transaction's commit LSN (`__$start_lsn`), each change its own `__$seqval` before it,
//! in commit order (SQLite has one writer at a time). Real SQL Server fills change tables
//! asynchronously, a few seconds after the commit; here they are filled at once.

use std::path::Path;
use std::time::Duration;

use rusqlite::functions::FunctionFlags;
use rusqlite::types::Value;
use rusqlite::Connection;

use super::tsql::{quote, statements, to_sqlite, tokenize, Names, Tok};
use super::types::SqlType;

/// One statement's outcome.
pub enum Output {
    Rows {
        columns: Vec<(String, SqlType)>,
        rows: Vec<Vec<Value>>,
    },
    Count(u64),
    Nothing,
}

/// A client session on the store.
pub struct Session {
    pub(super) conn: Connection,
    pub(super) in_tx: bool,
    pub(super) database: String,
}

/// A 10-byte LSN: `00000027:<n as 8 hex digits>:0001`.
pub fn lsn(n: i64) -> Vec<u8> {
    let mut b = vec![0, 0, 0, 0x27];
    b.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_be_bytes());
    b.extend_from_slice(&[0, 1]);
    b
}

fn lsn_number(b: &[u8]) -> i64 {
    b.get(4..8).map_or(0, |x| {
        i64::from(u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
    })
}

const SETUP: &str = r#"
CREATE TABLE IF NOT EXISTS emu_state (next INTEGER NOT NULL, pending INTEGER NOT NULL, tx INTEGER NOT NULL);
INSERT INTO emu_state SELECT 100, 0, 0 WHERE NOT EXISTS (SELECT 1 FROM emu_state);
CREATE TABLE IF NOT EXISTS "sys.databases" (name nvarchar(128), database_id int, is_cdc_enabled bit);
CREATE TABLE IF NOT EXISTS "sys.objects" (object_id int PRIMARY KEY, schema_name nvarchar(128), name nvarchar(128), type nvarchar(2));
CREATE TABLE IF NOT EXISTS "sys.dm_server_services" (servicename nvarchar(256), status int);
CREATE TABLE IF NOT EXISTS "INFORMATION_SCHEMA.COLUMNS" (TABLE_CATALOG nvarchar(128), TABLE_SCHEMA nvarchar(128), TABLE_NAME nvarchar(128), COLUMN_NAME nvarchar(128), ORDINAL_POSITION int, COLUMN_DEFAULT nvarchar(4000), IS_NULLABLE varchar(3), DATA_TYPE nvarchar(128), CHARACTER_MAXIMUM_LENGTH int, NUMERIC_PRECISION tinyint, NUMERIC_SCALE int, DATETIME_PRECISION smallint);
CREATE TABLE IF NOT EXISTS "INFORMATION_SCHEMA.KEY_COLUMN_USAGE" (CONSTRAINT_NAME nvarchar(128), TABLE_SCHEMA nvarchar(128), TABLE_NAME nvarchar(128), COLUMN_NAME nvarchar(128), ORDINAL_POSITION int);
CREATE TABLE IF NOT EXISTS "INFORMATION_SCHEMA.TABLE_CONSTRAINTS" (CONSTRAINT_NAME nvarchar(128), TABLE_SCHEMA nvarchar(128), TABLE_NAME nvarchar(128), CONSTRAINT_TYPE varchar(11));
CREATE TABLE IF NOT EXISTS "INFORMATION_SCHEMA.TABLES" (TABLE_CATALOG nvarchar(128), TABLE_SCHEMA nvarchar(128), TABLE_NAME nvarchar(128), TABLE_TYPE varchar(10));
CREATE VIEW IF NOT EXISTS "sys.partitions" AS SELECT 0 AS partition_id, 0 AS object_id, 0 AS index_id, 0 AS partition_number, 0 AS hobt_id, 0 AS rows WHERE 0;
"#;

pub(super) const CDC_SETUP: &str = r#"
CREATE TABLE IF NOT EXISTS "cdc.change_tables" (object_id int, version int, source_object_id int, capture_instance nvarchar(128), start_lsn binary(10), end_lsn binary(10), supports_net_changes bit, has_drop_pending bit, role_name nvarchar(128), index_name nvarchar(128), filegroup_name nvarchar(128), create_date datetime, partition_switch bit);
CREATE TABLE IF NOT EXISTS "cdc.captured_columns" (object_id int, column_name nvarchar(128), column_id int, column_type nvarchar(128), column_ordinal int, is_computed bit);
CREATE TABLE IF NOT EXISTS "cdc.lsn_time_mapping" (start_lsn binary(10), tran_begin_time datetime, tran_end_time datetime, tran_id varbinary(10), tran_begin_lsn binary(10));
CREATE TABLE IF NOT EXISTS "sys.dm_cdc_log_scan_sessions" (session_id int, start_lsn nvarchar(23));
UPDATE "sys.databases" SET is_cdc_enabled = 1;
"#;

pub(super) fn sql_err(e: rusqlite::Error) -> String {
    e.to_string()
}

/// Creates the store at `path` for `database`, with SQL Server Agent running (`agent`).
pub fn create(path: &Path, database: &str) -> Result<(), String> {
    let conn = Connection::open(path).map_err(sql_err)?;
    conn.execute_batch("PRAGMA journal_mode = WAL;")
        .map_err(sql_err)?;
    conn.execute_batch(SETUP).map_err(sql_err)?;
    conn.execute(
        "INSERT INTO \"sys.databases\" VALUES (?1, 5, 0)",
        [database],
    )
    .map_err(sql_err)?;
    conn.execute(
        "INSERT INTO \"sys.dm_server_services\" VALUES ('SQL Server Agent (MSSQLSERVER)', 4)",
        [],
    )
    .map_err(sql_err)?;
    Ok(())
}

fn word(t: Option<&Tok>) -> String {
    match t {
        Some(Tok::Ident(w, false)) => w.to_ascii_uppercase(),
        _ => String::new(),
    }
}

impl Session {
    pub fn open(path: &Path, database: &str) -> Result<Session, String> {
        let conn = Connection::open(path).map_err(sql_err)?;
        conn.busy_timeout(Duration::from_secs(30))
            .map_err(sql_err)?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
            .map_err(sql_err)?;
        let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
        conn.create_scalar_function("emu_lsn", 1, flags, |ctx| Ok(lsn(ctx.get::<i64>(0)?)))
            .map_err(sql_err)?;
        conn.create_scalar_function("emu_increment_lsn", 1, flags, |ctx| {
            Ok(ctx
                .get::<Option<Vec<u8>>>(0)?
                .map(|b| lsn(lsn_number(&b) + 1)))
        })
        .map_err(sql_err)?;
        conn.create_scalar_function("emu_decrement_lsn", 1, flags, |ctx| {
            Ok(ctx
                .get::<Option<Vec<u8>>>(0)?
                .map(|b| lsn(lsn_number(&b) - 1)))
        })
        .map_err(sql_err)?;
        conn.create_scalar_function("emu_mask", -1, flags, |ctx| {
            let mut mask = vec![0u8; ctx.len().div_ceil(8).max(1)];
            for i in 0..ctx.len() {
                if ctx.get::<i64>(i)? != 0 {
                    // Column 1 is the lowest bit of the last byte.
                    let byte = mask.len() - 1 - i / 8;
                    mask[byte] |= 1 << (i % 8);
                }
            }
            Ok(mask)
        })
        .map_err(sql_err)?;
        Ok(Session {
            conn,
            in_tx: false,
            database: database.to_string(),
        })
    }

    fn schemas(&self) -> Vec<String> {
        let mut out = vec![
            "dbo".to_string(),
            "cdc".into(),
            "sys".into(),
            "INFORMATION_SCHEMA".into(),
        ];
        if let Ok(mut stmt) = self
            .conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        {
            if let Ok(rows) = stmt.query_map([], |r| r.get::<_, String>(0)) {
                for name in rows.flatten() {
                    if let Some((schema, _)) = name.split_once('.') {
                        if !out.iter().any(|s| s.eq_ignore_ascii_case(schema)) {
                            out.push(schema.to_string());
                        }
                    }
                }
            }
        }
        out
    }

    /// Runs a batch; the outputs of its statements in order, or the first error.
    pub fn run(&mut self, sql: &str, params: &[Value]) -> (Vec<Output>, Option<String>) {
        let mut outputs = Vec::new();
        let tokens = match tokenize(sql) {
            Ok(t) => t,
            Err(e) => return (outputs, Some(e)),
        };
        for statement in statements(tokens) {
            match self.statement(&statement, params) {
                Ok(o) => outputs.push(o),
                Err(e) => {
                    if !self.in_tx {
                        let _ = self.conn.execute_batch("ROLLBACK");
                    }
                    return (outputs, Some(e));
                }
            }
        }
        (outputs, None)
    }

    fn statement(&mut self, t: &[Tok], params: &[Value]) -> Result<Output, String> {
        let first = word(t.first());
        let second = word(t.get(1));
        match first.as_str() {
            "SET" | "USE" | "PRINT" => Ok(Output::Nothing),
            "BEGIN" if second.starts_with("TRAN") => {
                if !self.in_tx {
                    self.conn.execute_batch("BEGIN").map_err(sql_err)?;
                    self.in_tx = true;
                }
                Ok(Output::Nothing)
            }
            "COMMIT" => {
                if self.in_tx {
                    self.in_tx = false;
                    self.commit()?;
                }
                Ok(Output::Nothing)
            }
            "SAVE" => {
                let name = word(t.get(2));
                self.conn
                    .execute_batch(&format!("SAVEPOINT {}", quote(&name)))
                    .map_err(sql_err)?;
                Ok(Output::Nothing)
            }
            "ROLLBACK" => {
                let name = word(t.get(2));
                if !name.is_empty() {
                    self.conn
                        .execute_batch(&format!("ROLLBACK TO {}", quote(&name)))
                        .map_err(sql_err)?;
                } else if self.in_tx {
                    self.in_tx = false;
                    self.conn.execute_batch("ROLLBACK").map_err(sql_err)?;
                }
                Ok(Output::Nothing)
            }
            "EXEC" | "EXECUTE" => self.procedure(&t[1..]),
            "CREATE" | "ALTER" | "DROP" => self.ddl(t),
            "INSERT" | "UPDATE" | "DELETE" | "TRUNCATE" => self.write(t, params),
            "SELECT" | "WITH" => self.query(t, params),
            "" if matches!(t.first(), Some(Tok::Punct(p)) if p == "{") => {
                // `{call sys.sp_cdc_help_jobs}`: JDBC call escape.
                let inner: Vec<Tok> = t[2..t.len().saturating_sub(1)].to_vec();
                self.procedure(&inner)
            }
            other => Err(format!("statement {other} is not emulated")),
        }
    }

    fn translate(&self, t: &[Tok]) -> Result<String, String> {
        let schemas = self.schemas();
        to_sqlite(t, &Names { schemas: &schemas })
    }

    fn bind(stmt: &mut rusqlite::Statement, params: &[Value]) -> Result<(), String> {
        for i in 1..=stmt.parameter_count() {
            let value = params.get(i - 1).cloned().unwrap_or(Value::Null);
            stmt.raw_bind_parameter(i, value).map_err(sql_err)?;
        }
        Ok(())
    }

    fn query(&mut self, t: &[Tok], params: &[Value]) -> Result<Output, String> {
        let sql = self.translate(t)?;
        let mut stmt = self
            .conn
            .prepare(&sql)
            .map_err(|e| format!("{e} (in {sql})"))?;
        Self::bind(&mut stmt, params)?;
        let declared: Vec<(String, Option<SqlType>)> = stmt
            .columns()
            .map(|c| (c.name().to_string(), c.decl_type().and_then(SqlType::parse)))
            .collect();
        let n = declared.len();
        let mut rows = Vec::new();
        let mut result = stmt.raw_query();
        while let Some(row) = result.next().map_err(sql_err)? {
            let mut values = Vec::with_capacity(n);
            for i in 0..n {
                values.push(row.get::<_, Value>(i).map_err(sql_err)?);
            }
            rows.push(values);
        }
        let columns = declared
            .into_iter()
            .enumerate()
            .map(|(i, (name, ty))| {
                // `fn_cdc_map_lsn_to_time(…)` (a subquery here) is a datetime.
                let ty = ty.or_else(|| name.contains("tran_end_time").then_some(SqlType::DateTime));
                // An LSN expression (`fn_cdc_get_max_lsn()`, `MAX(start_lsn)`) is binary(10).
                let ty = ty.or_else(|| {
                    name.to_ascii_lowercase()
                        .contains("lsn")
                        .then_some(SqlType::VarBinary(Some(10)))
                });
                let ty = ty.unwrap_or_else(|| {
                    SqlType::of_value(
                        rows.iter()
                            .map(|r: &Vec<Value>| &r[i])
                            .find(|v| !matches!(v, Value::Null)),
                    )
                });
                // SQL Server leaves an expression's column unnamed.
                let name = if name.contains('(') || name.len() > 128 {
                    String::new()
                } else {
                    name
                };
                (name, ty)
            })
            .collect();
        Ok(Output::Rows { columns, rows })
    }

    fn write(&mut self, t: &[Tok], params: &[Value]) -> Result<Output, String> {
        let sql = if word(t.first()) == "TRUNCATE" {
            // TRUNCATE TABLE is not logged row by row: CDC refuses it on captured tables.
            let name = self.translate(&t[2..])?;
            if self.captured_instances(&name)?.is_empty() {
                format!("DELETE FROM {name}")
            } else {
                return Err("Cannot truncate table because it is published for replication or enabled for Change Data Capture.".into());
            }
        } else {
            self.translate(t)?
        };
        let auto = !self.in_tx;
        if auto {
            self.conn.execute_batch("BEGIN").map_err(sql_err)?;
        }
        let mut stmt = self
            .conn
            .prepare(&sql)
            .map_err(|e| format!("{e} (in {sql})"))?;
        Self::bind(&mut stmt, params)?;
        let n = stmt.raw_execute().map_err(|e| format!("{e} (in {sql})"))?;
        drop(stmt);
        if auto {
            self.commit()?;
        }
        Ok(Output::Count(n as u64))
    }

    /// The capture instances of a table given as SQLite text (`"dbo.t"`).
    fn captured_instances(&self, table: &str) -> Result<Vec<String>, String> {
        let name = table.trim().trim_matches('"').to_string();
        let exists: bool = self
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'cdc.change_tables'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(sql_err)?
            > 0;
        if !exists {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT capture_instance FROM \"cdc.change_tables\" ct JOIN \"sys.objects\" o \
                 ON o.object_id = ct.source_object_id WHERE o.schema_name || '.' || o.name = ?1",
            )
            .map_err(sql_err)?;
        let rows = stmt
            .query_map([name], |r| r.get::<_, String>(0))
            .map_err(sql_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(sql_err)?;
        Ok(rows)
    }

    /// Ends the write transaction: the capture job's part (commit LSN on this transaction's
    /// changes, a row in `cdc.lsn_time_mapping`), then COMMIT.
    fn commit(&mut self) -> Result<(), String> {
        let pending: i64 = self
            .conn
            .query_row("SELECT pending FROM emu_state", [], |r| r.get(0))
            .map_err(sql_err)?;
        if pending > 0 {
            self.conn
                .execute_batch("UPDATE emu_state SET next = next + 1, pending = 0, tx = tx + 1")
                .map_err(sql_err)?;
            let (next, tx): (i64, i64) = self
                .conn
                .query_row("SELECT next, tx FROM emu_state", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .map_err(sql_err)?;
            let commit = lsn(next);
            let instances: Vec<String> = {
                let mut stmt = self
                    .conn
                    .prepare("SELECT capture_instance FROM \"cdc.change_tables\"")
                    .map_err(sql_err)?;
                let rows = stmt
                    .query_map([], |r| r.get::<_, String>(0))
                    .map_err(sql_err)?;
                rows.collect::<Result<_, _>>().map_err(sql_err)?
            };
            for instance in instances {
                self.conn
                    .execute(
                        &format!(
                            "UPDATE {} SET \"__$start_lsn\" = ?1 WHERE \"__$start_lsn\" IS NULL",
                            quote(&format!("cdc.{instance}_CT"))
                        ),
                        [&commit],
                    )
                    .map_err(sql_err)?;
            }
            let mut tran_id = vec![0u8; 2];
            tran_id.extend_from_slice(&tx.to_be_bytes());
            self.conn
                .execute(
                    "INSERT INTO \"cdc.lsn_time_mapping\" VALUES (?1, strftime('%Y-%m-%d %H:%M:%f', 'now'), \
                     strftime('%Y-%m-%d %H:%M:%f', 'now'), ?2, ?1)",
                    rusqlite::params![commit, tran_id],
                )
                .map_err(sql_err)?;
        }
        self.conn.execute_batch("COMMIT").map_err(sql_err)
    }

    fn ddl(&mut self, t: &[Tok]) -> Result<Output, String> {
        let object = word(t.get(1));
        if object == "SCHEMA" {
            // Schemas exist as name prefixes; a marker table makes the name known.
            let name = match t.get(2) {
                Some(Tok::Ident(n, _)) => n.clone(),
                _ => return Err("CREATE SCHEMA without a name".into()),
            };
            self.conn
                .execute_batch(&format!(
                    "CREATE TABLE IF NOT EXISTS {} (x int)",
                    quote(&format!("{name}.emu_schema"))
                ))
                .map_err(sql_err)?;
            return Ok(Output::Nothing);
        }
        // SQL Server's type names as SQLite keeps them: exact numerics as text, `max` as -1,
        // no IDENTITY or index kinds.
        let mut rewritten = Vec::with_capacity(t.len());
        let mut i = 0;
        while i < t.len() {
            match &t[i] {
                Tok::Ident(w, false) if w.eq_ignore_ascii_case("IDENTITY") => {
                    i += 1;
                    if matches!(t.get(i), Some(Tok::Punct(p)) if p == "(") {
                        while i < t.len() && !matches!(&t[i], Tok::Punct(p) if p == ")") {
                            i += 1;
                        }
                        i += 1;
                    }
                    continue;
                }
                Tok::Ident(w, false)
                    if w.eq_ignore_ascii_case("CLUSTERED")
                        || w.eq_ignore_ascii_case("NONCLUSTERED") => {}
                Tok::Ident(w, false)
                    if ["decimal", "numeric", "money", "smallmoney"]
                        .iter()
                        .any(|x| w.eq_ignore_ascii_case(x)) =>
                {
                    rewritten.push(Tok::Raw(format!("{}_text", w.to_ascii_lowercase())))
                }
                Tok::Ident(w, false) if w.eq_ignore_ascii_case("MAX") => {
                    rewritten.push(Tok::Raw("-1".into()))
                }
                other => rewritten.push(other.clone()),
            }
            i += 1;
        }
        let sql = self.translate(&rewritten)?;
        let auto = !self.in_tx;
        if auto {
            self.conn.execute_batch("BEGIN").map_err(sql_err)?;
        }
        let result = self
            .conn
            .execute_batch(&sql)
            .map_err(|e| format!("{e} (in {sql})"));
        let result = result.and_then(|()| self.refresh_catalog());
        if auto {
            if result.is_ok() {
                self.conn.execute_batch("COMMIT").map_err(sql_err)?;
            } else {
                let _ = self.conn.execute_batch("ROLLBACK");
            }
        }
        result.map(|()| Output::Nothing)
    }

    /// Rebuilds the catalog tables from the user tables (`"schema.table"`).
    pub(super) fn refresh_catalog(&self) -> Result<(), String> {
        let tables: Vec<String> = {
            let mut stmt = self
                .conn
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%.%'")
                .map_err(sql_err)?;
            let rows = stmt
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(sql_err)?;
            rows.collect::<Result<_, _>>().map_err(sql_err)?
        };
        self.conn
            .execute_batch(
                "DELETE FROM \"INFORMATION_SCHEMA.COLUMNS\"; DELETE FROM \"INFORMATION_SCHEMA.KEY_COLUMN_USAGE\"; \
                 DELETE FROM \"INFORMATION_SCHEMA.TABLE_CONSTRAINTS\"; DELETE FROM \"INFORMATION_SCHEMA.TABLES\";",
            )
            .map_err(sql_err)?;
        let mut partitions = Vec::new();
        for table in tables {
            let Some((schema, name)) = table.split_once('.') else {
                continue;
            };
            if ["cdc", "sys", "information_schema"].contains(&schema.to_ascii_lowercase().as_str())
                || name == "emu_schema"
            {
                continue;
            }
            self.conn
                .execute(
                    "INSERT INTO \"sys.objects\" (object_id, schema_name, name, type) \
                     SELECT coalesce((SELECT max(object_id) FROM \"sys.objects\"), 1000) + 1, ?1, ?2, 'U' \
                     WHERE NOT EXISTS (SELECT 1 FROM \"sys.objects\" WHERE schema_name = ?1 AND name = ?2)",
                    [schema, name],
                )
                .map_err(sql_err)?;
            self.conn
                .execute(
                    "INSERT INTO \"INFORMATION_SCHEMA.TABLES\" VALUES (?1, ?2, ?3, 'BASE TABLE')",
                    [&self.database, schema, name],
                )
                .map_err(sql_err)?;
            let columns: Vec<(i64, String, String, bool, Option<String>, i64)> = {
                let mut stmt = self
                    .conn
                    .prepare(&format!("PRAGMA table_info({})", quote(&table)))
                    .map_err(sql_err)?;
                let rows = stmt
                    .query_map([], |r| {
                        Ok((
                            r.get(0)?,
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get(4)?,
                            r.get(5)?,
                        ))
                    })
                    .map_err(sql_err)?;
                rows.collect::<Result<_, _>>().map_err(sql_err)?
            };
            let mut keys: Vec<(i64, String)> = Vec::new();
            for (cid, column, declared, notnull, default, pk) in columns {
                let ty = SqlType::parse(&declared).ok_or_else(|| {
                    format!("type {declared} of {table}.{column} is not emulated")
                })?;
                let data_type = declared.to_ascii_lowercase().replace("_text", "");
                let data_type = data_type.split('(').next().unwrap_or("").trim().to_string();
                let (chars, precision, scale, dt) = catalog_numbers(&ty, &data_type);
                self.conn
                    .execute(
                        "INSERT INTO \"INFORMATION_SCHEMA.COLUMNS\" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                        rusqlite::params![
                            self.database, schema, name, column, cid + 1, default,
                            if notnull || pk > 0 { "NO" } else { "YES" }, data_type, chars, precision, scale, dt
                        ],
                    )
                    .map_err(sql_err)?;
                if pk > 0 {
                    keys.push((pk, column));
                }
            }
            partitions.push(partition(&table, schema, name, !keys.is_empty()));
            if !keys.is_empty() {
                keys.sort();
                let constraint = format!("PK_{name}");
                self.conn
                    .execute(
                        "INSERT INTO \"INFORMATION_SCHEMA.TABLE_CONSTRAINTS\" VALUES (?1, ?2, ?3, 'PRIMARY KEY')",
                        [&constraint, schema, name],
                    )
                    .map_err(sql_err)?;
                for (pos, column) in keys {
                    self.conn
                        .execute(
                            "INSERT INTO \"INFORMATION_SCHEMA.KEY_COLUMN_USAGE\" VALUES (?1, ?2, ?3, ?4, ?5)",
                            rusqlite::params![constraint, schema, name, column, pos],
                        )
                        .map_err(sql_err)?;
                }
            }
        }
        // `sys.partitions`: a view counting each table's rows when it is read.
        partitions.push(
            "SELECT 0 AS partition_id, 0 AS object_id, 0 AS index_id, 0 AS partition_number, \
             0 AS hobt_id, 0 AS rows WHERE 0"
                .into(),
        );
        self.conn
            .execute_batch(&format!(
                "DROP VIEW IF EXISTS \"sys.partitions\"; CREATE VIEW \"sys.partitions\" AS {}",
                partitions.join(" UNION ALL ")
            ))
            .map_err(sql_err)?;
        Ok(())
    }

    /// Runs a command directly (set-up and checks of tests): the rows as text.
    pub fn text_rows(&mut self, sql: &str) -> Result<Vec<Vec<String>>, String> {
        let (outputs, error) = self.run(sql, &[]);
        if let Some(e) = error {
            return Err(e);
        }
        let mut out = Vec::new();
        for o in outputs {
            if let Output::Rows { rows, .. } = o {
                for row in rows {
                    out.push(row.iter().map(value_text).collect());
                }
            }
        }
        Ok(out)
    }
}

/// The `sys.partitions` row of `table` (`"schema.name"`): the heap's (`index_id` 0) or, with a
/// primary key, the clustered index's (1), whose `rows` SQL Server keeps (here counted).
fn partition(table: &str, schema: &str, name: &str, clustered: bool) -> String {
    let literal = |s: &str| format!("'{}'", s.replace('\'', "''"));
    format!(
        "SELECT o.object_id * 100 + 1 AS partition_id, o.object_id, {} AS index_id, \
         1 AS partition_number, o.object_id * 100 + 1 AS hobt_id, \
         (SELECT count(*) FROM {}) AS rows \
         FROM \"sys.objects\" o WHERE o.schema_name = {} AND o.name = {}",
        i32::from(clustered),
        quote(table),
        literal(schema),
        literal(name)
    )
}

pub(super) fn value_text(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => r.to_string(),
        Value::Text(t) => t.clone(),
        Value::Blob(b) => format!(
            "0x{}",
            b.iter().map(|x| format!("{x:02X}")).collect::<String>()
        ),
    }
}

/// CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION.
fn catalog_numbers(
    ty: &SqlType,
    data_type: &str,
) -> (Option<i64>, Option<i64>, Option<i64>, Option<i64>) {
    match ty {
        SqlType::Int(1) => (None, Some(3), Some(0), None),
        SqlType::Int(2) => (None, Some(5), Some(0), None),
        SqlType::Int(4) => (None, Some(10), Some(0), None),
        SqlType::Int(_) => (None, Some(19), Some(0), None),
        SqlType::Bit => (None, None, None, None),
        SqlType::Float(4) => (None, Some(24), None, None),
        SqlType::Float(_) => (None, Some(53), None, None),
        SqlType::Decimal { precision, scale } => (
            None,
            Some(i64::from(*precision)),
            Some(i64::from(*scale)),
            None,
        ),
        SqlType::Money(8) => (None, Some(19), Some(4), None),
        SqlType::Money(_) => (None, Some(10), Some(4), None),
        SqlType::VarChar(n) | SqlType::VarBinary(n) => {
            (Some(n.map_or(-1, i64::from)), None, None, None)
        }
        SqlType::NVarChar(n) if data_type == "xml" => {
            (Some(n.map_or(-1, i64::from)), None, None, None)
        }
        SqlType::NVarChar(n) => (Some(n.map_or(-1, i64::from)), None, None, None),
        SqlType::Guid => (None, None, None, None),
        SqlType::Date => (None, None, None, Some(0)),
        SqlType::Time(s) | SqlType::DateTime2(s) | SqlType::DateTimeOffset(s) => {
            (None, None, None, Some(i64::from(*s)))
        }
        SqlType::DateTime => (None, None, None, Some(3)),
        SqlType::SmallDateTime => (None, None, None, Some(0)),
    }
}
