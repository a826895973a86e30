//! An emulated Db2 for the `db2` source's tests: a fresh PostgreSQL database holding an
//! emulation of Db2's ASN capture (`asncdc.sql`: the control tables, the catalog views and
//! Debezium's management routines), reached through the PostgreSQL ODBC driver as Sluice
//! reaches Db2 through IBM's. No Db2 server can run on the project's machines.

use crate::pg::{drop_db, fresh_db, host, port, psql};

/// The emulation's SQL.
pub const ASNCDC_SQL: &str = include_str!("asncdc.sql");

/// The ODBC driver the tests use (Debian's `odbc-postgresql`).
pub const DRIVER: &str = "PostgreSQL Unicode";

/// A database with the ASN capture emulation, dropped at the end.
pub struct Db2 {
    pub database: String,
}

impl Db2 {
    /// A fresh emulated database named after the test, its capture program started
    /// (`VALUES ASNCDC.ASNCDCSERVICES('start','asncdc')`) when `started`.
    pub fn start(name: &str, started: bool) -> Db2 {
        let database = fresh_db(&format!("db2_{name}"));
        psql(&database, ASNCDC_SQL);
        let db = Db2 { database };
        if started {
            db.sql("SELECT asncdc.asncdcservices('start', 'asncdc')");
        }
        db
    }

    /// Runs `sql` (statements separated by `;`); what it printed.
    pub fn sql(&self, sql: &str) -> String {
        psql(&self.database, sql)
    }

    /// Puts `schema.table` in capture mode (`CALL ASNCDC.ADDTABLE`).
    pub fn add_table(&self, schema: &str, table: &str) {
        self.sql(&format!("CALL asncdc.addtable('{schema}', '{table}')"));
    }

    /// The ODBC connection string Sluice is given (`odbc.connection.string`): results read
    /// through a cursor in blocks of 100 rows (`UseDeclareFetch`), as IBM's CLI driver reads
    /// Db2's in query blocks.
    pub fn connection_string(&self) -> String {
        self.connection_string_fetching(100)
    }

    /// [`Self::connection_string`] with blocks of `rows` rows. PostgreSQL's driver counts a
    /// block in rows, IBM's CLI driver in bytes (a query block, LOBs apart): rows of megabytes
    /// are read with blocks of one row to stand for it.
    pub fn connection_string_fetching(&self, rows: usize) -> String {
        format!(
            "Driver={{{DRIVER}}};Server={};Port={};Database={};Uid=postgres;Pwd=${{password}};UseDeclareFetch=1;Fetch={rows};",
            host(),
            port(),
            self.database
        )
    }
}

impl Drop for Db2 {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            drop_db(&self.database);
        }
    }
}
