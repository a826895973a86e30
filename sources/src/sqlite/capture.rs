//! Capture mode, as the Db2 and SQL Server connectors know it: for each captured table, a change
//! table filled by triggers in the same transaction as the change, every change numbered by
//! one database-wide sequence (`_sluice_clock`). SQLite runs one write transaction at a time, so
//! the sequence follows commit order.
//!
//! - `_sluice_clock(id = 1, seq)`: the last sequence number handed out;
//! - `_sluice_capture(tbl, key_columns, columns)`: the captured tables, with the key and the
//!   columns (name and declared type, JSON) at the time capture was enabled;
//! - `_sluice_ct_<table>(seq, op, ts, "_b_<col>"..., "_a_<col>"...)`: one row per change (`ts`:
//!   when it was made, ms since the epoch), with the
//!   before and after images (`op`: `c`, `u`, `d`).

pub use rusqlite::Connection;
use rusqlite::{params, OptionalExtension};

/// Why a table cannot be put into or taken out of capture mode.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// A statement failed (`what`: what it was for).
    #[error("{what}: {source}")]
    Sqlite {
        what: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    /// A table of Sluice's own (`_sluice_...`) was named.
    #[error("`{0}` is one of Sluice's own tables")]
    OwnTable(String),
    /// No such table.
    #[error("no table `{0}` in this database")]
    NoTable(String),
    /// `--key` names a column the table does not have.
    #[error("`{table}` has no column `{column}` (given as its key)")]
    NoColumn { table: String, column: String },
    /// A table without a primary key and without `--key`.
    #[error("`{0}` has no primary key: give the columns that identify a row, e.g. `--key id`")]
    NoKey(String),
    /// `_sluice_capture`'s record of a table cannot be read or written.
    #[error("_sluice_capture of `{table}`: {source}")]
    Record {
        table: String,
        #[source]
        source: serde_json::Error,
    },
}

impl sluice_engine::Classify for CaptureError {
    fn class(&self) -> sluice_engine::ErrorClass {
        match self {
            // The database locked longer than the busy timeout: another try may get it.
            CaptureError::Sqlite {
                source: rusqlite::Error::SqliteFailure(e, _),
                ..
            } if matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
            {
                sluice_engine::ErrorClass::Retryable
            }
            _ => sluice_engine::ErrorClass::Fatal,
        }
    }
}

/// The error of a statement made for `what`.
fn sql(what: &'static str) -> impl FnOnce(rusqlite::Error) -> CaptureError {
    move |source| CaptureError::Sqlite { what, source }
}

/// The error of `table`'s record in `_sluice_capture`.
fn record(table: &str) -> impl FnOnce(serde_json::Error) -> CaptureError + '_ {
    move |source| CaptureError::Record {
        table: table.to_owned(),
        source,
    }
}

/// A column of a captured table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Column {
    /// The column's name.
    pub name: String,
    /// Its declared type (`INTEGER`, `TEXT`, `DECIMAL(10,2)`, ... or empty).
    pub decltype: String,
    /// Declared `NOT NULL`.
    pub not_null: bool,
}

/// A table in capture mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The table's name.
    pub table: String,
    /// The key columns, in key order.
    pub key: Vec<String>,
    /// The columns when capture was enabled.
    pub columns: Vec<Column>,
}

impl Captured {
    /// The change table's name.
    pub fn change_table(&self) -> String {
        change_table(&self.table)
    }
}

/// Milliseconds since the epoch, as an SQL expression every SQLite version knows
/// (`unixepoch` is 3.38+): the trigger's clock for `ts`, and the purge's.
pub const NOW_MS: &str = "cast((julianday('now') - 2440587.5) * 86400000 as integer)";

/// The last sequence number handed out (in the caller's transaction, if any).
pub fn clock(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("select seq from _sluice_clock where id = 1", [], |r| {
        r.get(0)
    })
}

/// The change table of `table`.
pub fn change_table(table: &str) -> String {
    format!("_sluice_ct_{table}")
}

/// `"name"` with quotes doubled.
pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Opens an existing database for `enable` / `disable`.
pub fn open(path: &std::path::Path) -> Result<Connection, CaptureError> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(sql("opening the database"))?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(sql("setting the busy timeout"))?;
    Ok(conn)
}

/// The current columns and primary key of `table` (`None`: no such table).
pub fn describe(
    conn: &Connection,
    table: &str,
) -> rusqlite::Result<Option<(Vec<Column>, Vec<String>)>> {
    let mut stmt =
        conn.prepare("select name, type, \"notnull\", pk from pragma_table_info(?1) order by cid")?;
    let rows = stmt.query_map([table], |r| {
        Ok((
            Column {
                name: r.get(0)?,
                decltype: r.get(1)?,
                not_null: r.get::<_, i64>(2)? != 0,
            },
            r.get::<_, i64>(3)?,
        ))
    })?;
    let mut columns = Vec::new();
    let mut pk: Vec<(i64, String)> = Vec::new();
    for row in rows {
        let (column, pk_index) = row?;
        if pk_index > 0 {
            pk.push((pk_index, column.name.clone()));
        }
        columns.push(column);
    }
    if columns.is_empty() {
        return Ok(None);
    }
    pk.sort();
    Ok(Some((columns, pk.into_iter().map(|(_, n)| n).collect())))
}

/// The tables in capture mode.
pub fn captured(conn: &Connection) -> Result<Vec<Captured>, CaptureError> {
    let exists: bool = conn
        .query_row(
            "select count(*) from sqlite_master where type = 'table' and name = '_sluice_capture'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .map_err(sql("looking for _sluice_capture"))?;
    if !exists {
        return Ok(Vec::new());
    }
    let mut stmt = conn
        .prepare("select tbl, key_columns, columns from _sluice_capture order by tbl")
        .map_err(sql("reading _sluice_capture"))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .map_err(sql("reading _sluice_capture"))?;
    let mut out = Vec::new();
    for row in rows {
        let (table, key, columns) = row.map_err(sql("reading _sluice_capture"))?;
        out.push(Captured {
            key: serde_json::from_str(&key).map_err(record(&table))?,
            columns: serde_json::from_str(&columns).map_err(record(&table))?,
            table,
        });
    }
    Ok(out)
}

/// What `enable` did for a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enabled {
    /// Capture was turned on.
    Now,
    /// It was on already, with the same columns.
    Already,
    /// It was on with other columns: the change table and triggers were made again.
    Recaptured,
}

/// Puts `table` into capture mode (idempotent). `key` replaces the primary key (required for a
/// table without one). Switches the database to WAL so that readers never block writers.
pub fn enable(
    conn: &mut Connection,
    table: &str,
    key: Option<&[String]>,
) -> Result<Enabled, CaptureError> {
    if table.starts_with("_sluice_") {
        return Err(CaptureError::OwnTable(table.to_owned()));
    }
    let (columns, key) = key_of(conn, table, key)?;
    conn.query_row("pragma journal_mode = wal", [], |_| Ok(()))
        .map_err(sql("switching to WAL"))?;
    let tx = conn.transaction().map_err(sql("beginning a transaction"))?;
    tx.execute_batch(
        "create table if not exists _sluice_clock (id integer primary key check (id = 1), seq integer not null);
         insert or ignore into _sluice_clock values (1, 0);
         create table if not exists _sluice_capture (tbl text primary key, key_columns text not null, columns text not null);",
    )
    .map_err(sql("creating Sluice's tables"))?;
    let key_json = serde_json::to_string(&key).map_err(record(table))?;
    let columns_json = serde_json::to_string(&columns).map_err(record(table))?;
    let existing: Option<(String, String)> = tx
        .query_row(
            "select key_columns, columns from _sluice_capture where tbl = ?1",
            [table],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(sql("reading _sluice_capture"))?;
    let ct = quote(&change_table(table));
    let mut ddl = String::new();
    let outcome = match existing {
        Some((k, c)) if k == key_json && c == columns_json => return Ok(Enabled::Already),
        Some((_, old)) => {
            // The change table keeps the changes not delivered yet: it gains the new columns
            // (older changes have no value for them), and the triggers are made again.
            drop_triggers(&tx, table).map_err(sql("dropping the triggers"))?;
            tx.execute("delete from _sluice_capture where tbl = ?1", [table])
                .map_err(sql("updating _sluice_capture"))?;
            let old: Vec<Column> = serde_json::from_str(&old).map_err(record(table))?;
            for c in columns
                .iter()
                .filter(|c| !old.iter().any(|o| o.name == c.name))
            {
                for side in ["_b_", "_a_"] {
                    ddl.push_str(&format!(
                        "alter table {ct} add column {};\n",
                        quote(&format!("{side}{}", c.name))
                    ));
                }
            }
            Enabled::Recaptured
        }
        None => {
            drop_capture_objects(&tx, table).map_err(sql("dropping old capture objects"))?;
            ddl.push_str(&format!(
                "create table {ct} (seq integer primary key, op text not null, ts integer not null"
            ));
            for c in &columns {
                ddl.push_str(&format!(
                    ", {}, {}",
                    quote(&format!("_b_{}", c.name)),
                    quote(&format!("_a_{}", c.name))
                ));
            }
            ddl.push_str(");\n");
            Enabled::Now
        }
    };
    ddl.push_str(&triggers(table, &ct, &columns));
    tx.execute_batch(&ddl)
        .map_err(sql("making the change table and triggers"))?;
    tx.execute(
        "insert into _sluice_capture (tbl, key_columns, columns) values (?1, ?2, ?3)",
        params![table, key_json, columns_json],
    )
    .map_err(sql("updating _sluice_capture"))?;
    tx.commit().map_err(sql("committing"))?;
    Ok(outcome)
}

/// The columns of `table` and the key its changes are identified by: `key` (checked), or its
/// primary key.
fn key_of(
    conn: &Connection,
    table: &str,
    key: Option<&[String]>,
) -> Result<(Vec<Column>, Vec<String>), CaptureError> {
    let (columns, pk) = describe(conn, table)
        .map_err(sql("describing the table"))?
        .ok_or_else(|| CaptureError::NoTable(table.to_owned()))?;
    let key: Vec<String> = match key {
        Some(k) => {
            for c in k {
                if !columns.iter().any(|col| &col.name == c) {
                    return Err(CaptureError::NoColumn {
                        table: table.to_owned(),
                        column: c.clone(),
                    });
                }
            }
            k.to_vec()
        }
        None if pk.is_empty() => return Err(CaptureError::NoKey(table.to_owned())),
        None => pk,
    };
    Ok((columns, key))
}

/// The three triggers that write `table`'s changes into its change table `ct` (quoted).
fn triggers(table: &str, ct: &str, columns: &[Column]) -> String {
    let mut ddl = String::new();
    let t = quote(table);
    let next = "update _sluice_clock set seq = seq + 1 where id = 1;";
    let seq = "(select seq from _sluice_clock where id = 1)";
    let now = NOW_MS;
    let list = |prefix: &str| {
        columns
            .iter()
            .map(|c| quote(&format!("{prefix}{}", c.name)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let values = |row: &str| {
        columns
            .iter()
            .map(|c| format!("{row}.{}", quote(&c.name)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    ddl.push_str(&format!(
        "create trigger {} after insert on {t} begin {next} insert into {ct} (seq, op, ts, {}) values ({seq}, 'c', {now}, {}); end;\n",
        quote(&format!("_sluice_ins_{table}")),
        list("_a_"),
        values("new")
    ));
    ddl.push_str(&format!(
        "create trigger {} after update on {t} begin {next} insert into {ct} (seq, op, ts, {}, {}) values ({seq}, 'u', {now}, {}, {}); end;\n",
        quote(&format!("_sluice_upd_{table}")),
        list("_b_"),
        list("_a_"),
        values("old"),
        values("new")
    ));
    ddl.push_str(&format!(
        "create trigger {} after delete on {t} begin {next} insert into {ct} (seq, op, ts, {}) values ({seq}, 'd', {now}, {}); end;\n",
        quote(&format!("_sluice_del_{table}")),
        list("_b_"),
        values("old")
    ));
    ddl
}

fn drop_triggers(conn: &Connection, table: &str) -> rusqlite::Result<()> {
    for kind in ["ins", "upd", "del"] {
        conn.execute_batch(&format!(
            "drop trigger if exists {};",
            quote(&format!("_sluice_{kind}_{table}"))
        ))?;
    }
    Ok(())
}

fn drop_capture_objects(conn: &Connection, table: &str) -> rusqlite::Result<()> {
    drop_triggers(conn, table)?;
    conn.execute_batch(&format!(
        "drop table if exists {};",
        quote(&change_table(table))
    ))?;
    let has_registry: i64 = conn.query_row(
        "select count(*) from sqlite_master where type = 'table' and name = '_sluice_capture'",
        [],
        |r| r.get(0),
    )?;
    if has_registry > 0 {
        conn.execute("delete from _sluice_capture where tbl = ?1", [table])?;
    }
    Ok(())
}

/// Takes `table` out of capture mode (its change table and triggers are dropped). `false`
/// when it was not captured.
pub fn disable(conn: &mut Connection, table: &str) -> Result<bool, CaptureError> {
    let was = captured(conn)?.iter().any(|c| c.table == table);
    let tx = conn.transaction().map_err(sql("beginning a transaction"))?;
    drop_capture_objects(&tx, table).map_err(sql("dropping the capture objects"))?;
    tx.commit().map_err(sql("committing"))?;
    Ok(was)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let conn = Connection::open_in_memory().unwrap_or_else(|e| panic!("{e}"));
        conn.execute_batch("create table t (id integer primary key, name text not null, price decimal(10,2)); create table nokey (a text, b int);")
            .unwrap_or_else(|e| panic!("{e}"));
        conn
    }

    fn changes(conn: &Connection) -> Vec<(i64, String, Option<String>, Option<String>)> {
        let mut stmt = conn
            .prepare("select seq, op, \"_b_name\", \"_a_name\" from _sluice_ct_t order by seq")
            .unwrap_or_else(|e| panic!("{e}"));
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap_or_else(|e| panic!("{e}"))
            .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
            .collect()
    }

    #[test]
    fn triggers_record_every_change_in_sequence_and_enable_is_idempotent() {
        let mut conn = db();
        assert_eq!(enable(&mut conn, "t", None).ok(), Some(Enabled::Now));
        assert_eq!(enable(&mut conn, "t", None).ok(), Some(Enabled::Already));
        conn.execute_batch("insert into t values (1, 'a', 1.5); update t set name = 'b' where id = 1; delete from t;")
            .unwrap_or_else(|e| panic!("{e}"));
        let c = changes(&conn);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0], (1, "c".into(), None, Some("a".into())));
        assert_eq!(c[1], (2, "u".into(), Some("a".into()), Some("b".into())));
        assert_eq!(c[2], (3, "d".into(), Some("b".into()), None));
        let tables = captured(&conn).unwrap_or_default();
        assert_eq!(tables.len(), 1);
        assert_eq!(tables[0].key, vec!["id".to_owned()]);
        assert_eq!(disable(&mut conn, "t").ok(), Some(true));
        assert_eq!(disable(&mut conn, "t").ok(), Some(false));
        conn.execute_batch("insert into t values (2, 'c', 2)")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(captured(&conn).unwrap_or_default().is_empty());
    }

    #[test]
    fn a_table_without_a_key_needs_one_and_a_changed_table_is_recaptured() {
        let mut conn = db();
        let e = enable(&mut conn, "nokey", None).map(|_| ()).unwrap_err();
        assert!(matches!(&e, CaptureError::NoKey(t) if t == "nokey"), "{e}");
        assert!(e.to_string().contains("--key"), "{e}");
        assert_eq!(
            enable(&mut conn, "nokey", Some(&["a".to_owned()])).ok(),
            Some(Enabled::Now)
        );
        let e = enable(&mut conn, "missing", None).map(|_| ()).unwrap_err();
        assert_eq!(e.to_string(), "no table `missing` in this database");
        let e = enable(&mut conn, "t", Some(&["nope".to_owned()]))
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e.to_string(), "`t` has no column `nope` (given as its key)");
        enable(&mut conn, "t", None).unwrap_or_else(|e| panic!("{e}"));
        conn.execute_batch("insert into t (id, name) values (100, 'before')")
            .unwrap_or_else(|e| panic!("{e}"));
        conn.execute_batch("alter table t add column extra text")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(enable(&mut conn, "t", None).ok(), Some(Enabled::Recaptured));
        conn.execute_batch("insert into t (id, name, extra) values (101, 'after', 'x')")
            .unwrap_or_else(|e| panic!("{e}"));
        // The change made before the column was added is still there, beside the new one.
        let rows: Vec<(String, Option<String>)> = conn
            .prepare("select \"_a_name\", \"_a_extra\" from _sluice_ct_t where op = 'c' and \"_a_id\" >= 100 order by seq")
            .and_then(|mut s| {
                s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            rows,
            vec![
                ("before".to_owned(), None),
                ("after".to_owned(), Some("x".to_owned()))
            ]
        );
    }
}
