//! The ODBC connection (odbc-api on unixODBC) and the statements the source sends: Debezium's
//! Db2 connector's own (`LuwPlatform.java`, `Db2Connection.java`, 3.x), written in the SQL that
//! Db2 and the emulation the tests run on (PostgreSQL) both accept; where Debezium's text is
//! Db2-only (`CONCAT` as an operator, `CURRENT TIMESTAMP` for a commit time) the portable
//! form is used and said so below. ODBC calls block: they run on a thread of the connection's
//! own ([`Conn`]).

use odbc_api::handles::DataType;
use odbc_api::parameter::VarBinaryBox;
use odbc_api::{ConnectionOptions, Cursor, IntoParameter, ResultSetMetadata};
use tokio::sync::{mpsc, oneshot};

use super::config::Db2Config;
use super::error::Db2Error;
use super::lsn::Lsn;

/// A result row: each column's bytes (text as the driver renders it, binary as stored), `None`
/// for NULL.
pub(crate) type Row = Vec<Option<Vec<u8>>>;

/// `"name"`, a `"` inside doubled.
pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'text'`, a `'` inside doubled.
pub(crate) fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The connection string: `odbc.connection.string` as given, or one for IBM's Db2 CLI/ODBC
/// driver from the `database.*` options; the isolation level as the CLI's `TxnIsolation`
/// keyword (ODBC's `SQL_TXN_*` values; drivers that do not know it ignore it).
fn connection_string(c: &Db2Config, password: &str, isolation: u32) -> String {
    let base = match &c.connection_string {
        Some(s) => s.replace("${password}", password),
        None => format!(
            "Driver={{{}}};Hostname={};Port={};Protocol=TCPIP;Database={};Uid={};Pwd={};",
            c.driver,
            c.connection.host(),
            c.port(),
            c.database,
            c.connection.login(),
            odbc_api::escape_attribute_value(password)
        ),
    };
    let sep = if base.ends_with(';') { "" } else { ";" };
    format!("{base}{sep}TxnIsolation={isolation};")
}

/// Rows of a query: more to come, or the last of them.
pub(crate) enum Chunk {
    More(Vec<Row>),
    Last(Vec<Row>),
}

/// The rows of a query as the ODBC thread sends them.
pub(crate) struct Chunks {
    rx: mpsc::Receiver<Result<Chunk, Db2Error>>,
    done: bool,
}

impl Chunks {
    /// The next rows; `None` after the last. The channel closing before the last rows (the
    /// ODBC thread gone) is an error, never the end of the rows.
    pub(crate) async fn next(&mut self) -> Result<Option<Vec<Row>>, Db2Error> {
        if self.done {
            return Ok(None);
        }
        let got = self.rx.recv().await;
        self.done = !matches!(got, Some(Ok(Chunk::More(_))));
        match got {
            Some(Ok(Chunk::More(rows) | Chunk::Last(rows))) => Ok(Some(rows)),
            Some(Err(e)) => Err(e),
            None => Err(gone()),
        }
    }
}

/// How many rows a chunk holds: it is sent once it has `rows` rows or `bytes` bytes (so a row
/// larger than `bytes` travels alone).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChunkSize {
    pub rows: usize,
    pub bytes: usize,
}

impl ChunkSize {
    /// The whole result in one chunk.
    const WHOLE: ChunkSize = ChunkSize {
        rows: usize::MAX,
        bytes: usize::MAX,
    };
}

/// A job for the ODBC thread.
enum Job {
    /// Rows of a query, sent in chunks of at most `chunk`.
    Rows {
        what: String,
        sql: String,
        params: Vec<Lsn>,
        chunk: ChunkSize,
        reply: mpsc::Sender<Result<Chunk, Db2Error>>,
    },
    /// A statement without results.
    Run {
        what: String,
        sql: String,
        reply: oneshot::Sender<Result<(), Db2Error>>,
    },
    /// The end of the current transaction.
    Commit {
        what: String,
        reply: oneshot::Sender<Result<(), Db2Error>>,
    },
}

/// The connection: ODBC calls block, so the connection lives on a thread of its own, which
/// runs the jobs the source sends it in order; a query's rows come back in chunks through a
/// channel of one chunk, so a large result is read as fast as it is used, never held whole.
pub(crate) struct Conn {
    jobs: mpsc::UnboundedSender<Job>,
}

impl Conn {
    /// Connects at `isolation` (ODBC's `SQL_TXN_*`), autocommit off: the snapshot is one
    /// transaction, each poll another.
    pub(crate) async fn connect(c: &Db2Config, isolation: u32) -> Result<Conn, Db2Error> {
        let password = (c.connection.password())
            .map_err(Db2Error::Setup)?
            .unwrap_or_default();
        let target = match &c.connection_string {
            Some(_) => "the data source of `odbc.connection.string`".to_owned(),
            None => format!(
                "{}:{} (database `{}`, driver `{}`)",
                c.connection.host(),
                c.port(),
                c.database,
                c.driver
            ),
        };
        let string = connection_string(c, &password, isolation);
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
        let (ready, connected) = oneshot::channel::<Result<(), Db2Error>>();
        std::thread::Builder::new()
            .name("sluice-db2-odbc".into())
            .spawn(move || {
                let conn = match open(&string, &target) {
                    Ok(conn) => {
                        let _ = ready.send(Ok(()));
                        conn
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                while let Some(job) = queue.blocking_recv() {
                    work(&conn, job);
                }
                // The source is gone: what the open transaction read is let go.
                let _ = conn.rollback();
            })
            .map_err(|e| Db2Error::Setup(format!("cannot start the ODBC thread: {e}")))?;
        connected
            .await
            .map_err(|_| Db2Error::Setup("the ODBC thread ended while connecting".into()))??;
        Ok(Conn { jobs })
    }

    /// The rows of `sql` with the LSNs `params` bound in order.
    pub(crate) async fn rows(
        &self,
        what: &str,
        sql: &str,
        params: &[Lsn],
    ) -> Result<Vec<Row>, Db2Error> {
        let mut chunks = self.cursor(what, sql, params, ChunkSize::WHOLE)?;
        let mut out = Vec::new();
        while let Some(rows) = chunks.next().await? {
            out.extend(rows);
        }
        Ok(out)
    }

    /// The rows of `sql` in chunks of at most `chunk` (the query runs on as they are taken:
    /// the ODBC thread holds one chunk ahead).
    pub(crate) fn cursor(
        &self,
        what: &str,
        sql: &str,
        params: &[Lsn],
        chunk: ChunkSize,
    ) -> Result<Chunks, Db2Error> {
        let (reply, rx) = mpsc::channel(1);
        self.send(Job::Rows {
            what: what.to_owned(),
            sql: sql.to_owned(),
            params: params.to_vec(),
            chunk,
            reply,
        })?;
        Ok(Chunks { rx, done: false })
    }

    /// Runs a statement without results.
    pub(crate) async fn run(&self, what: &str, sql: &str) -> Result<(), Db2Error> {
        let (reply, done) = oneshot::channel();
        self.send(Job::Run {
            what: what.to_owned(),
            sql: sql.to_owned(),
            reply,
        })?;
        done.await.map_err(|_| gone())?
    }

    /// Ends the current transaction (it only read).
    pub(crate) async fn end(&self, what: &str) -> Result<(), Db2Error> {
        let (reply, done) = oneshot::channel();
        self.send(Job::Commit {
            what: what.to_owned(),
            reply,
        })?;
        done.await.map_err(|_| gone())?
    }

    fn send(&self, job: Job) -> Result<(), Db2Error> {
        self.jobs.send(job).map_err(|_| gone())
    }
}

fn gone() -> Db2Error {
    Db2Error::Setup("the ODBC thread ended".into())
}

/// Opens the connection (on the ODBC thread).
fn open(string: &str, target: &str) -> Result<odbc_api::Connection<'static>, Db2Error> {
    let env = odbc_api::environment().map_err(|e| Db2Error::query("starting ODBC", e))?;
    let options = ConnectionOptions {
        login_timeout_sec: Some(30),
        ..ConnectionOptions::default()
    };
    let string = super::driver::resolve(env, string);
    let conn = env
        .connect_with_connection_string(&string, options)
        .map_err(|e| Db2Error::query(format!("connecting to {target}"), e))?;
    conn.set_autocommit(false)
        .map_err(|e| Db2Error::query("turning autocommit off", e))?;
    Ok(conn)
}

/// Runs a job (on the ODBC thread).
fn work(conn: &odbc_api::Connection<'static>, job: Job) {
    match job {
        Job::Rows {
            what,
            sql,
            params,
            chunk,
            reply,
        } => {
            let mut rows = Vec::new();
            let mut bytes = 0;
            let done = each_row(conn, &what, &sql, &params, |row| {
                bytes += row_bytes(&row);
                rows.push(row);
                if rows.len() >= chunk.rows || bytes >= chunk.bytes {
                    bytes = 0;
                    // The source stopped taking rows: the query ends.
                    let more = Chunk::More(std::mem::take(&mut rows));
                    return Ok(reply.blocking_send(Ok(more)).is_ok());
                }
                Ok(true)
            });
            let last = done.map(|()| Chunk::Last(rows));
            let _ = reply.blocking_send(last);
        }
        Job::Run { what, sql, reply } => {
            let done = conn
                .execute(&sql, (), None)
                .map(|_| ())
                .map_err(|e| Db2Error::query(what, e));
            let _ = reply.send(done);
        }
        Job::Commit { what, reply } => {
            let _ = reply.send(conn.commit().map_err(|e| Db2Error::query(what, e)));
        }
    }
}

/// Calls `f` with each row of `sql` until it returns `false`.
fn each_row(
    conn: &odbc_api::Connection<'static>,
    what: &str,
    sql: &str,
    params: &[Lsn],
    mut f: impl FnMut(Row) -> Result<bool, Db2Error>,
) -> Result<(), Db2Error> {
    let bound: Vec<VarBinaryBox> = params
        .iter()
        .map(|l| l.0.to_vec().into_parameter())
        .collect();
    let found = if bound.is_empty() {
        conn.execute(sql, (), None)
    } else {
        conn.execute(sql, &bound[..], None)
    };
    let Some(mut cursor) = found.map_err(|e| Db2Error::query(what, e))? else {
        return Ok(());
    };
    let n = cursor
        .num_result_cols()
        .map_err(|e| Db2Error::query(what, e))?;
    let mut binary = Vec::new();
    for i in 1..=u16::try_from(n).unwrap_or(0) {
        let t = cursor
            .col_data_type(i)
            .map_err(|e| Db2Error::query(what, e))?;
        binary.push(matches!(
            t,
            DataType::Binary { .. } | DataType::Varbinary { .. } | DataType::LongVarbinary { .. }
        ));
    }
    let mut buf = Vec::new();
    while let Some(mut row) = cursor.next_row().map_err(|e| Db2Error::query(what, e))? {
        let mut cells = Vec::with_capacity(binary.len());
        for (i, &bin) in binary.iter().enumerate() {
            let col = u16::try_from(i + 1).unwrap_or(u16::MAX);
            let present = if bin {
                row.get_binary(col, &mut buf)
            } else {
                row.get_text(col, &mut buf)
            }
            .map_err(|e| Db2Error::query(what, e))?;
            cells.push(present.then(|| buf.clone()));
        }
        if !f(cells)? {
            break;
        }
    }
    Ok(())
}

/// The bytes a row's cells hold.
pub(crate) fn row_bytes(row: &Row) -> usize {
    row.iter().map(|c| c.as_ref().map_or(1, Vec::len)).sum()
}

/// The text of a cell.
pub(crate) fn text(row: &Row, i: usize) -> Option<String> {
    row.get(i)?
        .as_ref()
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// An LSN cell (`None`: NULL).
pub(crate) fn lsn_at(row: &Row, i: usize, what: &str) -> Result<Option<Lsn>, Db2Error> {
    match row.get(i).and_then(|c| c.as_deref()) {
        None => Ok(None),
        Some(b) => Lsn::from_bytes(b).map(Some).ok_or_else(|| {
            Db2Error::Setup(format!("{what}: an LSN of {} bytes (16 expected)", b.len()))
        }),
    }
}

/// Debezium's statements for the configured control and change-table schemas and platform
/// (`LuwPlatform`, `ZOsPlatform`). z/OS's `for read only with ur` suffixes are left out: they
/// only let those reads skip locks.
pub(crate) struct Statements {
    control: String,
    zos: bool,
}

impl Statements {
    pub(crate) fn new(c: &Db2Config) -> Self {
        Statements {
            control: c.control_schema.clone(),
            zos: c.platform == super::config::Platform::Zos,
        }
    }

    /// Whether the catalog is z/OS's (`SYSIBM.SYSCOLUMNS.COLTYPE` names the types).
    pub(crate) fn zos(&self) -> bool {
        self.zos
    }

    /// `getMaxLsn`: the highest synchpoint of the capture program (its global record) and of
    /// the registrations.
    pub(crate) fn max_lsn(&self) -> String {
        let c = &self.control;
        format!("SELECT max(t.SYNCHPOINT) FROM ( SELECT CD_NEW_SYNCHPOINT AS SYNCHPOINT FROM {c}.IBMSNAP_REGISTER UNION ALL SELECT SYNCHPOINT AS SYNCHPOINT FROM {c}.IBMSNAP_REGISTER) t")
    }

    /// `getListOfCdcEnabledTables`: source owner and table, CD owner and table, the
    /// registration's new and old synchpoints, the table's object id.
    pub(crate) fn change_tables(&self) -> String {
        let c = &self.control;
        if self.zos {
            return format!("select r.SOURCE_OWNER, r.SOURCE_TABLE, r.CD_OWNER, r.CD_TABLE, r.CD_NEW_SYNCHPOINT, r.CD_OLD_SYNCHPOINT, r.SYNCHPOINT, t.DBID, t.OBID , CAST((t.DBID * 65536 +  t.OBID )AS INTEGER ) from {c}.IBMSNAP_REGISTER r left JOIN SYSIBM.SYSTABLES t ON r.SOURCE_OWNER  = t.CREATOR AND r.SOURCE_TABLE = t.NAME  WHERE r.SOURCE_OWNER <> ''");
        }
        format!("select r.SOURCE_OWNER, r.SOURCE_TABLE, r.CD_OWNER, r.CD_TABLE, r.CD_NEW_SYNCHPOINT, r.CD_OLD_SYNCHPOINT, r.SYNCHPOINT, t.TBSPACEID, t.TABLEID , CAST((t.TBSPACEID * 65536 +  t.TABLEID )AS INTEGER ) from {c}.IBMSNAP_REGISTER r left JOIN SYSCAT.TABLES t ON r.SOURCE_OWNER  = t.TABSCHEMA AND r.SOURCE_TABLE = t.TABNAME  WHERE r.SOURCE_OWNER <> ''")
    }

    /// The rows the catalog's statistics count in each table of `schemas`: schema, table and
    /// `CARD` (`CARDF` on z/OS), which `RUNSTATS` sets and which is -1 until it has run.
    pub(crate) fn row_estimates(&self, schemas: &[&str]) -> String {
        let list: Vec<String> = schemas.iter().map(|s| literal(s)).collect();
        let list = list.join(", ");
        if self.zos {
            return format!("SELECT CREATOR, NAME, CARDF FROM SYSIBM.SYSTABLES WHERE TYPE = 'T' AND CREATOR IN ({list})");
        }
        format!("SELECT TABSCHEMA, TABNAME, CARD FROM SYSCAT.TABLES WHERE TYPE = 'T' AND TABSCHEMA IN ({list})")
    }

    /// A table's columns from the catalog: name, type, length, scale, nullability, key
    /// position, in column order (Debezium reads them through JDBC's `getColumns` and
    /// `GET_LIST_OF_KEY_COLUMNS`, which reads `SYSCAT.COLUMNS` too).
    pub(crate) fn table_columns(&self, schema: &str, table: &str) -> String {
        if self.zos {
            return format!(
                "SELECT NAME, COLTYPE, LENGTH, SCALE, NULLS, KEYSEQ FROM SYSIBM.SYSCOLUMNS WHERE TBCREATOR = {} AND TBNAME = {} ORDER BY COLNO",
                literal(schema),
                literal(table)
            );
        }
        format!(
            "SELECT COLNAME, TYPENAME, LENGTH, SCALE, NULLS, KEYSEQ FROM SYSCAT.COLUMNS WHERE TABSCHEMA = {} AND TABNAME = {} ORDER BY COLNO",
            literal(schema),
            literal(table)
        )
    }

    /// `getAllChangesForTable` from the last row read: the operation code (3 and 4 for an
    /// update's 'D' and 'I' rows, paired by `LEAD`/`LAG` inside the commit), the commit and
    /// intent LSNs, the transaction's log time (`IBMSNAP_UOW.IBMSNAP_LOGMARKER`, null once
    /// pruned), then the table's columns, in (commit, intent) order. Debezium's form reads a
    /// poll's whole range at once; here the window is computed over the commits from the
    /// piece's first one (so a pair split across pieces keeps its codes) and `FETCH FIRST`
    /// bounds the piece. Parameters: the piece's commit LSN, the poll's upper bound, the
    /// piece's commit LSN twice more and its last intent LSN.
    pub(crate) fn changes(&self, cd: &str, columns: &[String], fetch: Option<usize>) -> String {
        let cols: Vec<String> = columns
            .iter()
            .map(|c| format!("cdc.{}", quote(c)))
            .collect();
        let first = fetch
            .map(|n| format!(" FETCH FIRST {n} ROWS ONLY"))
            .unwrap_or_default();
        let control = &self.control;
        if self.zos {
            return self.zos_changes(cd, &cols, &first);
        }
        format!(
            "SELECT * FROM (SELECT CASE WHEN IBMSNAP_OPERATION = 'U' THEN 5 \
WHEN IBMSNAP_OPERATION = 'D' AND (LEAD(cdc.IBMSNAP_OPERATION,1,'X') OVER (PARTITION BY cdc.IBMSNAP_COMMITSEQ ORDER BY cdc.IBMSNAP_INTENTSEQ)) ='I' THEN 3 \
WHEN IBMSNAP_OPERATION = 'I' AND (LAG(cdc.IBMSNAP_OPERATION,1,'X') OVER (PARTITION BY cdc.IBMSNAP_COMMITSEQ ORDER BY cdc.IBMSNAP_INTENTSEQ)) ='D' THEN 4 \
WHEN IBMSNAP_OPERATION = 'D' THEN 1 WHEN IBMSNAP_OPERATION = 'I' THEN 2 END OPCODE, \
cdc.IBMSNAP_COMMITSEQ, cdc.IBMSNAP_INTENTSEQ, uow.IBMSNAP_LOGMARKER, {} \
FROM {cd} cdc LEFT JOIN {control}.IBMSNAP_UOW uow ON uow.IBMSNAP_COMMITSEQ = cdc.IBMSNAP_COMMITSEQ \
WHERE cdc.IBMSNAP_COMMITSEQ >= ? AND cdc.IBMSNAP_COMMITSEQ <= ?) ch \
WHERE ch.IBMSNAP_COMMITSEQ > ? OR (ch.IBMSNAP_COMMITSEQ = ? AND ch.IBMSNAP_INTENTSEQ > ?) \
ORDER BY ch.IBMSNAP_COMMITSEQ, ch.IBMSNAP_INTENTSEQ{first}",
            cols.join(", ")
        )
    }

    /// [`Self::changes`] as Debezium reads z/OS (`ZOsPlatform`): an update's rows paired by
    /// row numbers within the commit instead of `LEAD`/`LAG`; a single-row update ('U') is
    /// operation 5. Same parameters.
    fn zos_changes(&self, cd: &str, cols: &[String], first: &str) -> String {
        let control = &self.control;
        format!(
            "WITH tmp AS (SELECT cdc.IBMSNAP_OPERATION, cdc.IBMSNAP_COMMITSEQ, cdc.IBMSNAP_INTENTSEQ, \
ROW_NUMBER() OVER (PARTITION BY cdc.IBMSNAP_COMMITSEQ ORDER BY cdc.IBMSNAP_INTENTSEQ) rn FROM {cd} cdc \
WHERE cdc.IBMSNAP_COMMITSEQ >= ? AND cdc.IBMSNAP_COMMITSEQ <= ?), \
tmp2 AS (SELECT CASE WHEN cdc.IBMSNAP_OPERATION = 'U' THEN 5 \
WHEN cdc.IBMSNAP_OPERATION = 'D' AND cdc2.IBMSNAP_OPERATION ='I' THEN 3 \
WHEN cdc.IBMSNAP_OPERATION = 'I' AND cdc2.IBMSNAP_OPERATION ='D' THEN 4 \
WHEN cdc.IBMSNAP_OPERATION = 'D' THEN 1 WHEN cdc.IBMSNAP_OPERATION = 'I' THEN 2 END OPCODE, \
cdc.IBMSNAP_COMMITSEQ, cdc.IBMSNAP_INTENTSEQ FROM tmp cdc LEFT JOIN tmp cdc2 \
ON cdc.IBMSNAP_COMMITSEQ = cdc2.IBMSNAP_COMMITSEQ AND ((cdc.IBMSNAP_OPERATION = 'D' AND cdc.rn = cdc2.rn - 1) \
OR (cdc.IBMSNAP_OPERATION = 'I' AND cdc.rn = cdc2.rn + 1))) \
SELECT res.OPCODE, cdc.IBMSNAP_COMMITSEQ, cdc.IBMSNAP_INTENTSEQ, uow.IBMSNAP_LOGMARKER, {} \
FROM {cd} cdc INNER JOIN tmp2 res ON cdc.IBMSNAP_COMMITSEQ = res.IBMSNAP_COMMITSEQ AND cdc.IBMSNAP_INTENTSEQ = res.IBMSNAP_INTENTSEQ \
LEFT JOIN {control}.IBMSNAP_UOW uow ON uow.IBMSNAP_COMMITSEQ = cdc.IBMSNAP_COMMITSEQ \
WHERE cdc.IBMSNAP_COMMITSEQ > ? OR (cdc.IBMSNAP_COMMITSEQ = ? AND cdc.IBMSNAP_INTENTSEQ > ?) \
ORDER BY cdc.IBMSNAP_COMMITSEQ, cdc.IBMSNAP_INTENTSEQ{first}",
            cols.join(", ")
        )
    }
}

/// A z/OS catalog type (`SYSIBM.SYSCOLUMNS.COLTYPE`, eight characters) by the LUW name the
/// source maps: `TIMESTMP`, `VARG`, `VARBIN`, `LONGVAR`, `LONGVARG`, `CHAR`, and `FLOAT` of
/// length 4 (`REAL`) or 8 (`DOUBLE`).
pub(crate) fn zos_type(coltype: &str, length: i64) -> String {
    match coltype.trim_end() {
        "TIMESTMP" => "TIMESTAMP".into(),
        "VARG" => "VARGRAPHIC".into(),
        "VARBIN" => "VARBINARY".into(),
        "LONGVAR" => "LONG VARCHAR".into(),
        "LONGVARG" => "LONG VARGRAPHIC".into(),
        "CHAR" => "CHARACTER".into(),
        "FLOAT" if length == 4 => "REAL".into(),
        "FLOAT" => "DOUBLE".into(),
        other => other.to_owned(),
    }
}
