//! How the snapshot's transaction gets a binlog position that matches what it reads
//! (`snapshot.locking.mode`, Debezium's MySQL connector's modes).
//!
//! MariaDB reports the binlog position a `START TRANSACTION WITH CONSISTENT SNAPSHOT` sees
//! (`binlog_snapshot_file`, `binlog_snapshot_position`), so the rows need no lock. The tables'
//! structure is another matter: `SHOW CREATE TABLE` and `information_schema` show the
//! current one, not the transaction's. Debezium's `minimal` holds `FLUSH TABLES WITH READ
//! LOCK` while it reads them; on MariaDB Sluice's `minimal` takes no lock and checks instead:
//! once the structure is read, the binlog from the snapshot's position to its current end must
//! hold no statement that changes a table, else the snapshot starts over. A server that does
//! not report the snapshot's position (MySQL) gets Debezium's `minimal`: the global read lock
//! while the position and the structure are read.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use serde::Deserialize;

use super::error::MysqlError;

/// `snapshot.locking.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockingMode {
    /// No lock on MariaDB (the structure is checked against the binlog); on a server that
    /// does not report the snapshot's position, the global read lock while the position and
    /// the structure are read (the default).
    #[default]
    Minimal,
    /// The global read lock for the whole snapshot: no writes meanwhile.
    Extended,
    /// No lock and no check: only safe when no table changes structure during the snapshot.
    None,
    /// Percona Server's `LOCK TABLES FOR BACKUP` (refused: not a MariaDB statement).
    MinimalPercona,
    /// Percona Server's, without table locks (refused).
    MinimalPerconaNoTableLocks,
    /// A locking provider of one's own (refused: Debezium's Java SPI).
    Custom,
}

impl LockingMode {
    /// The name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            LockingMode::Minimal => "minimal",
            LockingMode::Extended => "extended",
            LockingMode::None => "none",
            LockingMode::MinimalPercona => "minimal_percona",
            LockingMode::MinimalPerconaNoTableLocks => "minimal_percona_no_table_locks",
            LockingMode::Custom => "custom",
        }
    }

    /// `Err`: why the mode cannot be used, with the way out.
    pub fn check(self) -> Result<(), String> {
        match self {
            LockingMode::MinimalPercona | LockingMode::MinimalPerconaNoTableLocks => Err(format!(
                "`snapshot.locking.mode: {}` needs Percona Server's `LOCK TABLES FOR BACKUP`; use `minimal` (on MariaDB it takes no lock at all)",
                self.name()
            )),
            LockingMode::Custom => Err("`snapshot.locking.mode: custom` loads a Java locking provider, which Sluice has no counterpart for; use `minimal`, `extended` or `none`".into()),
            _ => Ok(()),
        }
    }
}

/// A started snapshot transaction.
#[derive(Debug)]
pub(super) struct Started {
    /// The binlog position its reads match.
    pub file: String,
    pub pos: u64,
    /// The global read lock is held (released by [`Started::structure_read`] or
    /// [`Started::rows_read`], as the mode says).
    locked: bool,
    /// The structure must be checked against the binlog once read.
    check: bool,
    mode: LockingMode,
}

/// Starts the snapshot's repeatable-read transaction as `mode` says; a lock waits at most
/// `lock_timeout_ms` (`snapshot.lock.timeout.ms`).
pub(super) async fn start(
    conn: &mut Conn,
    mode: LockingMode,
    lock_timeout_ms: u64,
) -> Result<Started, MysqlError> {
    let locked = mode == LockingMode::Extended
        || (mode == LockingMode::Minimal && !reports_snapshot_position(conn).await?);
    if locked {
        // Writes queue behind a waiting global read lock: it waits no longer than this.
        let seconds = lock_timeout_ms.div_ceil(1000).max(1);
        conn.query_drop(format!("SET SESSION lock_wait_timeout = {seconds}"))
            .await
            .map_err(|e| MysqlError::query("setting the lock wait timeout", e))?;
        conn.query_drop("FLUSH TABLES WITH READ LOCK")
            .await
            .map_err(|e| match &e {
                mysql_async::Error::Server(s) if s.code == 1227 || s.code == 1045 => MysqlError::Setup(format!(
                    "`FLUSH TABLES WITH READ LOCK` was refused ({}): grant the RELOAD privilege (`GRANT RELOAD ON *.* TO ...`), or set `snapshot.locking.mode: none` if no table changes structure during the snapshot",
                    s.message
                )),
                mysql_async::Error::Server(s) if s.code == 1205 => MysqlError::Setup(format!(
                    "`FLUSH TABLES WITH READ LOCK` waited longer than `snapshot.lock.timeout.ms` ({lock_timeout_ms} ms) behind running statements: start again when they are done, raise the timeout, or use `snapshot.locking.mode: minimal` (no lock on MariaDB)"
                )),
                _ => MysqlError::query("taking the global read lock (FLUSH TABLES WITH READ LOCK)", e),
            })?;
        tracing::info!(
            mode = mode.name(),
            "Global read lock taken for the snapshot."
        );
    }
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .await
        .map_err(|e| MysqlError::query("setting the isolation level", e))?;
    conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .await
        .map_err(|e| MysqlError::query("starting a consistent snapshot's transaction", e))?;
    let (file, pos) = match snapshot_position(conn).await? {
        Some(at) => at,
        // Under the lock nothing commits: the binlog's end is the transaction's position.
        None if locked => master_position(conn).await?,
        None => {
            tracing::warn!("The server does not report the snapshot's binlog position and `snapshot.locking.mode: none` takes no lock: changes committed while the snapshot starts may be missed or repeated.");
            master_position(conn).await?
        }
    };
    Ok(Started {
        file,
        pos,
        locked,
        check: mode == LockingMode::Minimal && !locked,
        mode,
    })
}

impl Started {
    /// The tables' structure is read: `minimal` releases its lock, or checks that no
    /// statement changed a table since the snapshot's position. `Ok(Some(statement))`: one
    /// did; the caller rolls back and starts over.
    pub(super) async fn structure_read(
        &mut self,
        conn: &mut Conn,
        captures: &(dyn Fn(&str, &str) -> bool + Sync),
    ) -> Result<Option<String>, MysqlError> {
        if self.locked && self.mode == LockingMode::Minimal {
            unlock(conn).await?;
            self.locked = false;
        }
        if !self.check {
            return Ok(None);
        }
        structure_changed_since(conn, (&self.file, self.pos), captures).await
    }

    /// The rows are read: `extended` releases its lock.
    pub(super) async fn rows_read(&mut self, conn: &mut Conn) -> Result<(), MysqlError> {
        if self.locked {
            unlock(conn).await?;
            self.locked = false;
        }
        Ok(())
    }
}

async fn unlock(conn: &mut Conn) -> Result<(), MysqlError> {
    // Releases the global read lock; the transaction goes on.
    conn.query_drop("UNLOCK TABLES")
        .await
        .map_err(|e| MysqlError::query("releasing the global read lock (UNLOCK TABLES)", e))?;
    tracing::info!("Global read lock released.");
    Ok(())
}

/// Starts a `START TRANSACTION WITH CONSISTENT SNAPSHOT` (repeatable read) without a lock:
/// the binlog position it sees, as MariaDB reports it (an incremental snapshot's chunk).
pub(super) async fn exact(conn: &mut Conn) -> Result<(String, u64), MysqlError> {
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .await
        .map_err(|e| MysqlError::query("setting the isolation level", e))?;
    conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .await
        .map_err(|e| MysqlError::query("starting a consistent snapshot's transaction", e))?;
    snapshot_position(conn).await?.ok_or_else(|| {
        MysqlError::Setup("the server does not report the binlog position of a consistent snapshot (`binlog_snapshot_file`, a MariaDB status), which incremental snapshots' chunks are read at: incremental snapshots need MariaDB".into())
    })
}

/// Whether the server reports a consistent snapshot's binlog position (MariaDB does).
async fn reports_snapshot_position(conn: &mut Conn) -> Result<bool, MysqlError> {
    let rows: Vec<(String, String)> = conn
        .query("SHOW STATUS LIKE 'binlog_snapshot_position'")
        .await
        .map_err(|e| MysqlError::query("reading the server's status", e))?;
    Ok(!rows.is_empty())
}

/// The binlog position the current consistent snapshot sees, as MariaDB reports it.
async fn snapshot_position(conn: &mut Conn) -> Result<Option<(String, u64)>, MysqlError> {
    let status: Vec<(String, String)> = conn
        .query("SHOW STATUS LIKE 'binlog_snapshot_%'")
        .await
        .map_err(|e| MysqlError::query("reading the snapshot's binlog position", e))?;
    let get = |k: &str| {
        status
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.clone())
    };
    Ok(
        match (
            get("binlog_snapshot_file"),
            get("binlog_snapshot_position").and_then(|p| p.parse::<u64>().ok()),
        ) {
            (Some(file), Some(pos)) if !file.is_empty() => Some((file, pos)),
            _ => None,
        },
    )
}

/// The binlog's end (`SHOW MASTER STATUS`).
pub(super) async fn master_position(conn: &mut Conn) -> Result<(String, u64), MysqlError> {
    let row: Option<mysql_async::Row> =
        conn.query_first("SHOW MASTER STATUS").await.map_err(|e| {
            MysqlError::query(
                "reading the binlog position (SHOW MASTER STATUS; it needs REPLICATION CLIENT)",
                e,
            )
        })?;
    let row = row.ok_or_else(|| {
        MysqlError::Setup("`SHOW MASTER STATUS` returned nothing: the binlog is off".into())
    })?;
    match (
        row.get::<Option<String>, _>(0),
        row.get::<Option<u64>, _>(1),
    ) {
        (Some(Some(file)), Some(Some(pos))) => Ok((file, pos)),
        _ => Err(MysqlError::Setup(
            "`SHOW MASTER STATUS` did not give a file and position".into(),
        )),
    }
}

/// The first statement written to the binlog from `file`:`pos` to its end that changes the
/// structure of a table the snapshot may read, if any (`captures(db, table)`: whether a table is
/// captured; another table's `CREATE`/`ALTER`/`DROP TABLE` is no reason to start over).
pub(super) async fn structure_changed_since(
    conn: &mut Conn,
    (file, pos): (&str, u64),
    captures: &(dyn Fn(&str, &str) -> bool + Sync),
) -> Result<Option<String>, MysqlError> {
    let (end_file, end_pos) = master_position(conn).await?;
    if end_file == file && end_pos <= pos {
        return Ok(None);
    }
    let files: Vec<mysql_async::Row> = conn
        .query("SHOW BINARY LOGS")
        .await
        .map_err(|e| MysqlError::query("listing the binlog files", e))?;
    let files: Vec<String> = files.iter().filter_map(|r| r.get(0)).collect();
    let Some(from) = files.iter().position(|f| f == file) else {
        // Purged meanwhile: what happened since cannot be told, so the snapshot starts over.
        return Ok(Some(format!("(the binlog file `{file}` is gone)")));
    };
    for name in &files[from..] {
        let mut start = if name == file { pos } else { 4 };
        let last = *name == end_file;
        // Page by page, up to the end read above (the server's own file names, such as
        // `binlog.000012`, quoted as a literal).
        let literal = name.replace('\\', "\\\\").replace('\'', "''");
        loop {
            if last && start >= end_pos {
                return Ok(None);
            }
            let page: Vec<mysql_async::Row> = conn
                .query(format!("SHOW BINLOG EVENTS IN '{literal}' FROM {start} LIMIT {PAGE}"))
                .await
                .map_err(|e| MysqlError::query(format!("reading the binlog `{name}` since the snapshot started (SHOW BINLOG EVENTS)"), e))?;
            let listed = page.iter().filter_map(|r| {
                let kind: Option<Option<String>> = r.get(2);
                let info: Option<Option<String>> = r.get(5);
                kind.flatten().zip(info.flatten())
            });
            if let Some(statement) = first_structure_change(listed, captures) {
                return Ok(Some(statement));
            }
            let next = page
                .last()
                .and_then(|r| r.get::<Option<u64>, _>(4))
                .flatten();
            match next {
                Some(next) if page.len() == PAGE && next > start => start = next,
                _ => break,
            }
        }
        if last {
            break;
        }
    }
    Ok(None)
}

/// Binlog events read at a time by the structure check.
const PAGE: usize = 1000;

/// The first `Query` event of `events` (`SHOW BINLOG EVENTS`' `Event_type` and `Info`) whose
/// statement changes a table's structure.
fn first_structure_change(
    events: impl Iterator<Item = (String, String)>,
    captures: &(dyn Fn(&str, &str) -> bool + Sync),
) -> Option<String> {
    events
        // `Query`, or `Query_compressed` (`log_bin_compress`).
        .filter(|(kind, _)| kind.starts_with("Query"))
        .map(|(_, info)| info)
        .find(|info| {
            let statement = without_use(info);
            super::schema::changes_structure(statement)
                && concerns(
                    session_of(info).as_deref().unwrap_or(""),
                    statement,
                    captures,
                )
        })
}

/// Whether a statement that changes a table's structure may change a captured one: unless it
/// is a `CREATE`, `ALTER` or `DROP` of one table, named, not captured, and renames nothing.
fn concerns(
    session: &str,
    statement: &str,
    captures: &(dyn Fn(&str, &str) -> bool + Sync),
) -> bool {
    let upper = statement.to_ascii_uppercase();
    let mut words = upper.split_whitespace();
    let one_table = matches!(words.next(), Some("CREATE" | "ALTER" | "DROP"))
        && upper.contains(" TABLE ")
        && !upper.contains("RENAME")
        && !(upper.starts_with("DROP") && upper.contains(','));
    if !one_table {
        return true;
    }
    match super::ddl::target_of(statement, session) {
        Some((db, table)) => captures(&db, &table),
        None => true,
    }
}

/// The database a `Query` event's `use `db`;` names.
fn session_of(info: &str) -> Option<String> {
    let trimmed = info.trim_start();
    if trimmed.len() <= 4 || !trimmed[..4].eq_ignore_ascii_case("use ") {
        return None;
    }
    let statement = without_use(info);
    let prefix = &trimmed[4..trimmed.len() - statement.len()];
    let name = prefix.trim().trim_end_matches(';').trim();
    let name = name.strip_prefix('`')?.strip_suffix('`')?;
    Some(name.replace("``", "`"))
}

/// A `Query` event's text without the `use `db`; ` MariaDB puts before it.
fn without_use(info: &str) -> &str {
    let trimmed = info.trim_start();
    if trimmed.len() > 4 && trimmed[..4].eq_ignore_ascii_case("use ") {
        // The database name is quoted with backquotes (doubled inside).
        let rest = &trimmed[4..];
        let mut in_quote = false;
        for (i, c) in rest.char_indices() {
            match c {
                '`' => in_quote = !in_quote,
                ';' if !in_quote => return rest[i + 1..].trim_start(),
                _ => {}
            }
        }
    }
    trimmed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, i)| ((*k).to_owned(), (*i).to_owned()))
            .collect()
    }

    #[test]
    fn a_statement_that_changes_a_table_is_found_among_the_binlog_events() {
        let quiet = events(&[
            ("Gtid", "BEGIN GTID 0-1-5"),
            ("Query", "BEGIN"),
            ("Table_map", "table_id: 33 (db.items)"),
            ("Write_rows_v1", "table_id: 33 flags: STMT_END_F"),
            ("Xid", "COMMIT /* xid=77 */"),
            ("Query", "use `db`; TRUNCATE TABLE items"),
            ("Query", "GRANT SELECT ON *.* TO 'u'@'%'"),
        ]);
        let all = |_: &str, _: &str| true;
        assert_eq!(first_structure_change(quiet.into_iter(), &all), None);
        let altered = events(&[
            ("Query", "BEGIN"),
            ("Query", "use `we;ird`; ALTER TABLE items ADD COLUMN c INT"),
            ("Query", "use `db`; DROP TABLE t"),
        ]);
        let compressed = events(&[("Query_compressed", "use `db`; DROP TABLE t")]);
        assert!(first_structure_change(compressed.into_iter(), &all).is_some());
        assert_eq!(
            first_structure_change(altered.clone().into_iter(), &all).as_deref(),
            Some("use `we;ird`; ALTER TABLE items ADD COLUMN c INT")
        );
        let bare = events(&[("Query", "CREATE TABLE db.t (id INT)")]);
        assert!(first_structure_change(bare.clone().into_iter(), &all).is_some());
        // Other databases' tables are no reason to start over; renames and lists may be.
        let only_db = |d: &str, _: &str| d == "db";
        assert_eq!(
            first_structure_change(altered.into_iter(), &only_db).as_deref(),
            Some("use `db`; DROP TABLE t")
        );
        let elsewhere = events(&[
            ("Query", "use `other`; CREATE TABLE t (id INT)"),
            ("Query", "use `db`; ALTER TABLE other.t ADD COLUMN c INT"),
            ("Query", "use `other`; DROP TABLE IF EXISTS `t`"),
        ]);
        assert_eq!(
            first_structure_change(elsewhere.into_iter(), &only_db),
            None
        );
        let renamed = events(&[("Query", "use `other`; ALTER TABLE t RENAME TO db.t")]);
        assert!(first_structure_change(renamed.into_iter(), &only_db).is_some());
        let listed = events(&[("Query", "use `other`; DROP TABLE t, db.u")]);
        assert!(first_structure_change(listed.into_iter(), &only_db).is_some());
        assert!(first_structure_change(bare.into_iter(), &only_db).is_some());
        assert_eq!(
            session_of("use `we;ird`; ALTER TABLE t").as_deref(),
            Some("we;ird")
        );
        assert_eq!(session_of("ALTER TABLE t"), None);
    }

    #[test]
    fn the_use_prefix_is_taken_off() {
        assert_eq!(without_use("use `a`; ALTER TABLE t"), "ALTER TABLE t");
        assert_eq!(without_use("USE `a``;b`;DROP TABLE t"), "DROP TABLE t");
        assert_eq!(without_use("ALTER TABLE t"), "ALTER TABLE t");
        assert_eq!(without_use("user_table"), "user_table");
    }

    #[test]
    fn percona_and_custom_modes_are_refused_with_the_way_out() {
        assert!(LockingMode::Minimal.check().is_ok());
        assert!(LockingMode::Extended.check().is_ok());
        assert!(LockingMode::None.check().is_ok());
        let e = LockingMode::MinimalPercona.check().unwrap_err();
        assert!(e.contains("use `minimal`"), "{e}");
        assert!(LockingMode::Custom.check().is_err());
    }
}
