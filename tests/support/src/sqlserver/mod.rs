//! An emulated SQL Server for the `sqlserver` source's tests: no SQL Server can run on these
//! machines (no package, no container images). A small TDS 7.4 server (`tds`) answers the
//! statements the source sends and the T-SQL the tests send, from a SQLite store (`engine`)
//! that plays SQL Server's CDC (`cdc`): change tables filled at commit with commit LSNs, change
//! sequence values and operations 1–4, as the capture job fills them. `tests/sqlserver/`
//! checks the emulator with FreeTDS's `tsql`, a client independent of Sluice's.
//!
//! [`SqlServer::start_tls`] serves TLS as SQL Server does when it forces encryption: the
//! pre-login answers `ENCRYPT_REQ`, the TLS handshake travels inside pre-login packets, then
//! the whole session is TLS (`tls`).
//!
//! What it does not emulate: the log reader's delay (changes appear at commit), isolation
//! levels other than a snapshot per transaction, locks (`TABLOCKX` is accepted and ignored),
//! login-only encryption, TDS 8.0's strict mode, and every statement not listed in
//! `engine`/`cdc`.

mod cdc;
mod engine;
mod tds;
mod tls;
mod tsql;
mod types;

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;

pub use engine::{lsn, Output, Session};

/// The login the emulator accepts.
pub const USER: &str = "sa";
pub const PASSWORD: &str = "Sluice-Test-1";

/// One database of a running emulated server (a server may hold several:
/// [`SqlServer::start_many`]).
pub struct SqlServer {
    pub port: u16,
    pub database: String,
    path: PathBuf,
    _dir: Arc<tempfile::TempDir>,
}

/// The databases of a server: their names and stores.
type Stores = Arc<Vec<(String, PathBuf)>>;

impl SqlServer {
    /// Starts a server on a free port with an empty database `database` (CDC not enabled).
    pub fn start(database: &str) -> SqlServer {
        Self::start_with(&[database], None).remove(0)
    }

    /// A server on a free port with the empty databases `databases` (each its own store and
    /// LSNs, as SQL Server's databases each have their log); one handle per database.
    pub fn start_many(databases: &[&str]) -> Vec<SqlServer> {
        Self::start_with(databases, None)
    }

    /// [`SqlServer::start`] forcing TLS, with a self-signed certificate for `localhost` and
    /// `127.0.0.1`, whose PEM file is returned.
    pub fn start_tls(database: &str) -> (SqlServer, PathBuf) {
        let (config, pem) = tls::self_signed();
        let server = Self::start_with(&[database], Some(config)).remove(0);
        let path = server._dir.path().join("server.crt");
        std::fs::write(&path, pem).unwrap();
        (server, path)
    }

    fn start_with(databases: &[&str], tls: Option<Arc<rustls::ServerConfig>>) -> Vec<SqlServer> {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let stores: Stores = Arc::new(
            (databases.iter().enumerate())
                .map(|(i, db)| {
                    let path = dir.path().join(format!("store{i}.db"));
                    engine::create(&path, db).unwrap();
                    ((*db).to_string(), path)
                })
                .collect(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let served = Arc::clone(&stores);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (stores, tls) = (Arc::clone(&served), tls.clone());
                std::thread::spawn(move || {
                    let _ = serve(stream, &stores, tls);
                });
            }
        });
        (stores.iter())
            .map(|(database, path)| SqlServer {
                port,
                database: database.clone(),
                path: path.clone(),
                _dir: Arc::clone(&dir),
            })
            .collect()
    }

    /// Runs T-SQL as a client would (same engine, no wire); the rows of its results as text
    /// (`NULL`, numbers, `0x…` for binary).
    pub fn sql(&self, sql: &str) -> Vec<Vec<String>> {
        let mut session = Session::open(&self.path, &self.database).unwrap();
        session
            .text_rows(sql)
            .unwrap_or_else(|e| panic!("emulated SQL Server refused {sql}: {e}"))
    }

    /// Runs `sql` through FreeTDS's `tsql` (Debian's `freetds-bin`), a SQL Server client
    /// independent of Sluice's, over the wire: its output, tab-separated with a header line per
    /// result, without the lines of its own (prompts' locale, row counts, blank lines).
    pub fn tsql(&self, sql: &str) -> Vec<String> {
        let mut child = std::process::Command::new("tsql")
            .args(["-H", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", USER, "-P", PASSWORD, "-D", &self.database, "-o", "q"])
            .env("TDSVER", "7.4")
            .env("LANG", "C.UTF-8")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("tsql (Debian package freetds-bin) must be installed");
        let mut stdin = child.stdin.take().unwrap();
        let input = format!("{sql}\ngo\nexit\n");
        // Written from a thread: a long statement and a long output do not wait on each other.
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "tsql failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text.lines()
            .map(|l| l.trim_end_matches('\r').to_string())
            .filter(|l| {
                !l.trim().is_empty()
                    && !l.starts_with("locale")
                    && !l.contains("rows affected")
                    && !l.contains("row affected")
            })
            .collect()
    }

    /// A session kept open (a transaction across several calls).
    pub fn session(&self) -> Session {
        Session::open(&self.path, &self.database).unwrap()
    }

    /// Enables CDC on the database and on `tables` (`schema.table`).
    pub fn enable_cdc(&self, tables: &[&str]) {
        self.sql("EXEC sys.sp_cdc_enable_db");
        for t in tables {
            let (schema, table) = t.split_once('.').unwrap();
            self.sql(&format!(
                "EXEC sys.sp_cdc_enable_table @source_schema = N'{schema}', @source_name = N'{table}', @role_name = NULL, @supports_net_changes = 0"
            ));
        }
    }
}

fn serve(
    mut stream: TcpStream,
    stores: &[(String, PathBuf)],
    tls: Option<Arc<rustls::ServerConfig>>,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let Some((kind, prelogin)) = tds::read_message(&mut stream)? else {
        return Ok(());
    };
    if kind != tds::PRELOGIN {
        return Ok(());
    }
    let Some(config) = tls else {
        tds::write_message(
            &mut stream,
            tds::REPLY,
            &tds::prelogin_reply(tds::ENCRYPT_NOT_SUP),
        )?;
        return session(&mut stream, stores);
    };
    tds::write_message(
        &mut stream,
        tds::REPLY,
        &tds::prelogin_reply(tds::ENCRYPT_REQ),
    )?;
    // A client that cannot encrypt is turned away, as SQL Server forcing encryption does.
    if tds::prelogin_encryption(&prelogin) == Some(tds::ENCRYPT_NOT_SUP) {
        return Ok(());
    }
    let mut secure = tls::accept(stream, config)?;
    session(&mut secure, stores)
}

/// A session after the pre-login: the login, then requests until the client leaves.
fn session(stream: &mut (impl Read + Write), stores: &[(String, PathBuf)]) -> io::Result<()> {
    let Some((kind, data)) = tds::read_message(stream)? else {
        return Ok(());
    };
    if kind != tds::LOGIN7 {
        return Ok(());
    }
    let login = tds::parse_login(&data)?;
    let mut out = Vec::new();
    let wanted = if login.database.is_empty() {
        stores.first().map(|(db, _)| db.clone()).unwrap_or_default()
    } else {
        login.database.clone()
    };
    if login.user != USER || login.password != PASSWORD {
        tds::error(
            &mut out,
            18456,
            &format!("Login failed for user '{}'.", login.user),
        );
        return tds::write_message(stream, tds::REPLY, &out);
    }
    let Some((database, path)) = (stores.iter()).find(|(db, _)| wanted.eq_ignore_ascii_case(db))
    else {
        tds::error(
            &mut out,
            4060,
            &format!("Cannot open database \"{wanted}\" requested by the login. The login failed."),
        );
        return tds::write_message(stream, tds::REPLY, &out);
    };
    tds::write_message(stream, tds::REPLY, &tds::login_reply(database))?;
    let mut session = Session::open(path, database).map_err(io::Error::other)?;
    while let Some((kind, data)) = tds::read_message(stream)? {
        let request = match kind {
            tds::BATCH => Ok(tds::parse_batch(&data)),
            tds::RPC => tds::parse_rpc(&data),
            tds::ATTENTION => {
                let mut out = Vec::new();
                tds::done(&mut out, 0x20, 0);
                tds::write_message(stream, tds::REPLY, &out)?;
                continue;
            }
            other => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("message type {other}"),
            )),
        };
        let mut out = Vec::new();
        match request {
            Ok(request) => respond(&mut out, &mut session, &request),
            Err(e) => tds::error(&mut out, 50000, &e.to_string()),
        }
        tds::write_message(stream, tds::REPLY, &out)?;
    }
    Ok(())
}

fn respond(out: &mut Vec<u8>, session: &mut Session, request: &tds::Request) {
    let (outputs, error) = session.run(&request.sql, &request.params);
    let n = outputs.len();
    for (i, output) in outputs.into_iter().enumerate() {
        let more = if i + 1 < n || error.is_some() {
            tds::DONE_MORE
        } else {
            0
        };
        match output {
            Output::Rows { columns, rows } => {
                tds::col_metadata(out, &columns);
                let count = rows.len() as u64;
                for row in rows {
                    if let Err(e) = tds::row(out, &columns, &row) {
                        tds::error(out, 8115, &e);
                        return;
                    }
                }
                tds::done(out, tds::DONE_COUNT | more, count);
            }
            Output::Count(c) => tds::done(out, tds::DONE_COUNT | more, c),
            Output::Nothing => tds::done(out, more, 0),
        }
    }
    if let Some(e) = error {
        tds::error(out, 50000, &e);
    } else if n == 0 {
        tds::done(out, 0, 0);
    }
}
