//! Connecting, checking the server's setup, and reading table definitions from the catalog.

use std::collections::HashMap;

use tokio_postgres::{Client, NoTls};

use crate::postgres::config::{PostgresConfig, SslMode};
use crate::postgres::error::PgError;
use crate::postgres::server::owned::{Kind, Owned};
use crate::postgres::values::types::{PgKind, TypeInfo};

/// Resolved connection settings, shared by the SQL and the replication connections.
#[derive(Clone)]
pub(crate) struct ConnInfo {
    /// Host (or socket directory).
    pub host: String,
    /// Port.
    pub port: u16,
    /// User.
    pub user: String,
    /// Password, if any (never logged).
    pub password: Option<String>,
    /// Database.
    pub dbname: String,
    /// TLS mode.
    pub sslmode: SslMode,
    /// CA certificate for verify-ca / verify-full.
    pub sslrootcert: Option<std::path::PathBuf>,
    /// Client certificate and key for certificate authentication.
    pub client_cert: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

impl std::fmt::Debug for ConnInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "postgres://{}@{}:{}/{}",
            self.user, self.host, self.port, self.dbname
        )
    }
}

impl ConnInfo {
    /// The client certificate and key paths, if set.
    pub(crate) fn client(&self) -> Option<(&std::path::Path, &std::path::Path)> {
        self.client_cert
            .as_ref()
            .map(|(c, k)| (c.as_path(), k.as_path()))
    }

    /// Combines `database.url` with the individual fields (fields win).
    pub(crate) fn from_config(c: &PostgresConfig) -> Result<Self, PgError> {
        let mut info = ConnInfo {
            host: "localhost".into(),
            port: 5432,
            user: "postgres".into(),
            password: None,
            dbname: "postgres".into(),
            sslmode: SslMode::Prefer,
            sslrootcert: c.sslrootcert.clone(),
            client_cert: c.sslcert.clone().zip(c.sslkey.clone()),
        };
        if let Some(url) = &c.url {
            let parsed: tokio_postgres::Config = url.expose().parse().map_err(|e| {
                PgError::Setup(format!("`database.url` is not a valid PostgreSQL URL: {e}"))
            })?;
            if let Some(tokio_postgres::config::Host::Tcp(h)) = parsed.get_hosts().first() {
                info.host = h.clone();
            }
            if let Some(p) = parsed.get_ports().first() {
                info.port = *p;
            }
            if let Some(u) = parsed.get_user() {
                info.user = u.to_owned();
            }
            if let Some(p) = parsed.get_password() {
                info.password = Some(String::from_utf8_lossy(p).into_owned());
            }
            if let Some(d) = parsed.get_dbname() {
                info.dbname = d.to_owned();
            }
            info.sslmode = match parsed.get_ssl_mode() {
                tokio_postgres::config::SslMode::Disable => SslMode::Disable,
                tokio_postgres::config::SslMode::Require => SslMode::Require,
                _ => SslMode::Prefer,
            };
        }
        let connection = &c.connection;
        if let Some(h) = &connection.hostname {
            info.host = h.clone();
        }
        if let Some(p) = connection.port {
            info.port = p;
        }
        if let Some(u) = &connection.user {
            info.user = u.clone();
        }
        if let Some(d) = &c.dbname {
            info.dbname = d.clone();
        }
        if let Some(s) = c.sslmode {
            info.sslmode = s;
        }
        if let Some(p) = connection.password().map_err(PgError::Setup)? {
            info.password = Some(p);
        }
        Ok(info)
    }

    /// Opens a SQL connection with the session settings the text parsers expect.
    pub(crate) async fn connect(&self, application: &str) -> Result<Client, PgError> {
        let mut config = tokio_postgres::Config::new();
        config
            .host(&self.host)
            .port(self.port)
            .user(&self.user)
            .dbname(&self.dbname)
            .application_name(application)
            .options("-c DateStyle=ISO -c TimeZone=UTC -c IntervalStyle=iso_8601 -c extra_float_digits=3 -c lc_monetary=C -c bytea_output=hex");
        if let Some(p) = &self.password {
            config.password(p);
        }
        use tokio_postgres::config::SslMode as Mode;
        // (mode, check the chain, check the host name); `prefer` as libpq: TLS when the server
        // offers it (no certificate check), else plain.
        let (mode, verify, host) = match self.sslmode {
            SslMode::Disable => (Mode::Disable, false, false),
            SslMode::Prefer => (Mode::Prefer, false, false),
            SslMode::Require => (Mode::Require, false, false),
            SslMode::VerifyCa => (Mode::Require, true, false),
            SslMode::VerifyFull => (Mode::Require, true, true),
        };
        let tls = match self.sslmode {
            SslMode::Disable => None,
            _ => Some(crate::postgres::wire::tls::client_config(
                verify,
                host,
                self.sslrootcert.as_deref().filter(|_| verify),
                self.client(),
            )?),
        };
        config.ssl_mode(mode);
        let failed = |e: tokio_postgres::Error| {
            // `db error` alone says nothing: the server's own message does.
            let reason = match e.as_db_error() {
                Some(db) => db.message().to_owned(),
                None => e.to_string(),
            };
            let message = format!(
                "cannot connect to PostgreSQL at {}:{} as `{}`: {reason}",
                self.host, self.port, self.user
            );
            // Refused, reset, a server starting up or out of connections: retried with
            // backoff. Bad credentials or a missing database: fatal.
            match e.code().map(|c| c.code()) {
                Some(code) if code.starts_with("28") || code.starts_with("3D") => {
                    PgError::Setup(message)
                }
                _ => PgError::Unavailable(message),
            }
        };
        let client = match tls {
            None => {
                let (client, connection) = config.connect(NoTls).await.map_err(failed)?;
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "PostgreSQL connection closed.");
                    }
                });
                client
            }
            Some(tls) => {
                let (client, connection) = config
                    .connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
                    .await
                    .map_err(failed)?;
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "PostgreSQL connection closed.");
                    }
                });
                client
            }
        };
        Ok(client)
    }
}

/// Checks `wal_level` and the REPLICATION privilege; the messages say how to fix them.
pub(crate) async fn check_setup(client: &Client, info: &ConnInfo) -> Result<(), PgError> {
    let row = client
        .query_one(
            "SELECT current_setting('wal_level'), (SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user)",
            &[],
        )
        .await
        .map_err(|e| PgError::query("reading the server settings", e))?;
    let wal_level: String = row.get(0);
    if wal_level != "logical" {
        return Err(PgError::Setup(format!(
            "PostgreSQL runs with wal_level={wal_level}; logical decoding needs wal_level=logical: run `ALTER SYSTEM SET wal_level = logical` and restart the server"
        )));
    }
    let can_replicate: Option<bool> = row.get(1);
    if can_replicate != Some(true) {
        return Err(PgError::Setup(format!(
            "user `{}` lacks the REPLICATION privilege: run `ALTER ROLE \"{}\" REPLICATION`",
            info.user, info.user
        )));
    }
    Ok(())
}

/// A captured table as the catalog describes it.
#[derive(Debug, Clone)]
pub(crate) struct TableDef {
    /// `pg_class.oid`.
    pub oid: u32,
    /// Schema name.
    pub schema: String,
    /// Table name.
    pub name: String,
    /// Columns in attribute order.
    pub columns: Vec<ColumnDef>,
    /// Primary key column names, in key order (empty: no primary key).
    pub primary_key: Vec<String>,
}

/// A column as the catalog describes it.
#[derive(Debug, Clone)]
pub(crate) struct ColumnDef {
    /// Name.
    pub name: String,
    /// The resolved kind.
    pub kind: PgKind,
    /// `NOT NULL`.
    pub not_null: bool,
    /// The default expression, if any.
    pub default_expr: Option<String>,
    /// Type oid.
    pub type_oid: u32,
    /// Type modifier.
    pub typmod: i32,
    /// `pg_type.typname`.
    pub type_name: String,
}

/// Resolves type oids to [`PgKind`]s, caching what it learned.
#[derive(Debug, Default)]
pub(crate) struct TypeResolver {
    cache: HashMap<(u32, i32), PgKind>,
}

impl TypeResolver {
    /// The kind of type `oid` with modifier `typmod`.
    pub(crate) async fn resolve(
        &mut self,
        client: &Client,
        oid: u32,
        typmod: i32,
    ) -> Result<PgKind, PgError> {
        if let Some(k) = self.cache.get(&(oid, typmod)) {
            return Ok(k.clone());
        }
        let info = type_info(client, oid, typmod).await?;
        let kind = PgKind::of(&info);
        self.cache.insert((oid, typmod), kind.clone());
        Ok(kind)
    }
}

async fn type_info(client: &Client, oid: u32, typmod: i32) -> Result<TypeInfo, PgError> {
    let (mut oid, mut typmod) = (oid, typmod);
    for _ in 0..16 {
        let row = client
            .query_one(
                "SELECT t.typname::text, t.typtype::text, t.typbasetype, t.typtypmod, t.typelem, t.typcategory::text, \
                 (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid) \
                 FROM pg_type t WHERE t.oid = $1",
                &[&oid],
            )
            .await
            .map_err(|e| PgError::query(format!("reading type {oid}"), e))?;
        let name: String = row.get(0);
        let typtype: String = row.get(1);
        let base: u32 = row.get(2);
        let base_typmod: i32 = row.get(3);
        let elem: u32 = row.get(4);
        let category: String = row.get(5);
        let labels: Option<Vec<String>> = row.get(6);
        if typtype == "d" {
            oid = base;
            if typmod < 0 {
                typmod = base_typmod;
            }
            continue;
        }
        let element = if category == "A" && elem != 0 {
            Some(Box::new(Box::pin(type_info(client, elem, typmod)).await?))
        } else {
            None
        };
        return Ok(TypeInfo {
            name,
            typmod,
            enum_labels: labels.filter(|_| typtype == "e"),
            element,
        });
    }
    Err(PgError::Setup(format!("type {oid}: domain chain too deep")))
}

/// Reads the definitions of the captured tables.
pub(crate) async fn captured_tables(
    client: &Client,
    config: &PostgresConfig,
    types: &mut TypeResolver,
) -> Result<Vec<TableDef>, PgError> {
    let rows = client
        .query(
            "SELECT c.oid, n.nspname::text, c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
             AND n.nspname NOT LIKE 'pg_toast%' ORDER BY n.nspname, c.relname",
            &[],
        )
        .await
        .map_err(|e| PgError::query("listing tables", e))?;
    let mut tables = Vec::new();
    for row in rows {
        let (oid, schema, name): (u32, String, String) = (row.get(0), row.get(1), row.get(2));
        if config.captures_table(&schema, &name) {
            tables.push(table_def(client, oid, schema, name, types).await?);
        }
    }
    Ok(tables)
}

/// Reads one table's definition.
pub(crate) async fn table_def(
    client: &Client,
    oid: u32,
    schema: String,
    name: String,
    types: &mut TypeResolver,
) -> Result<TableDef, PgError> {
    let rows = client
        .query(
            "SELECT a.attname::text, a.atttypid, a.atttypmod, a.attnotnull, pg_get_expr(d.adbin, d.adrelid), \
             (SELECT t.typname::text FROM pg_type t WHERE t.oid = a.atttypid) \
             FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&oid],
        )
        .await
        .map_err(|e| PgError::query(format!("reading the columns of {schema}.{name}"), e))?;
    let mut columns = Vec::with_capacity(rows.len());
    for r in rows {
        let (type_oid, typmod): (u32, i32) = (r.get(1), r.get(2));
        columns.push(ColumnDef {
            name: r.get(0),
            kind: types.resolve(client, type_oid, typmod).await?,
            not_null: r.get(3),
            default_expr: r.get(4),
            type_oid,
            typmod,
            type_name: r.get::<_, Option<String>>(5).unwrap_or_default(),
        });
    }
    let pk_rows = client
        .query(
            "SELECT a.attname::text FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY k(attnum, ord) \
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
             WHERE i.indrelid = $1 AND i.indisprimary ORDER BY k.ord",
            &[&oid],
        )
        .await
        .map_err(|e| PgError::query(format!("reading the primary key of {schema}.{name}"), e))?;
    Ok(TableDef {
        oid,
        schema,
        name,
        columns,
        primary_key: pk_rows.iter().map(|r| r.get(0)).collect(),
    })
}

/// Creates the publication when asked (`publication.autocreate.mode`), or checks it exists.
/// Makes sure the publication exists and publishes the captured tables. A publication this
/// pipeline created (`owned`) is kept to the captured tables (`filtered`); one that was there
/// before only ever gains tables, since another connector may rely on the ones it has.
pub(crate) async fn ensure_publication(
    client: &Client,
    config: &PostgresConfig,
    tables: &[TableDef],
    owned: &mut Owned,
) -> Result<(), PgError> {
    use crate::postgres::config::PublicationAutocreate as Mode;
    let name = &config.publication_name;
    let exists = client
        .query_opt("SELECT 1 FROM pg_publication WHERE pubname = $1", &[name])
        .await
        .map_err(|e| PgError::query("looking up the publication", e))?
        .is_some();
    let quoted = |t: &TableDef| format!("{}.{}", quote_ident(&t.schema), quote_ident(&t.name));
    let execute = |sql: String| async move {
        client
            .batch_execute(&sql)
            .await
            .map_err(|e| PgError::query(format!("setting up publication `{name}`"), e))
    };
    match (config.publication_autocreate, exists) {
        (Mode::Disabled, false) => Err(PgError::Setup(format!(
            "publication `{name}` does not exist and `publication.autocreate.mode` is disabled: create it with `CREATE PUBLICATION {name} FOR TABLE ...`"
        ))),
        (Mode::AllTables, false) => {
            client
                .batch_execute(&format!("CREATE PUBLICATION {} FOR ALL TABLES", quote_ident(name)))
                .await
                .map_err(|e| PgError::query(format!("creating publication `{name}` (needs superuser for FOR ALL TABLES)"), e))?;
            owned.record(Kind::Publication, name)
        }
        (Mode::Filtered, exists) => {
            if tables.is_empty() {
                return Err(PgError::Setup("no table matches `table.include.list`: nothing to capture".into()));
            }
            let list = tables.iter().map(quoted).collect::<Vec<_>>().join(", ");
            if !exists {
                execute(format!("CREATE PUBLICATION {} FOR TABLE {list}", quote_ident(name))).await?;
                return owned.record(Kind::Publication, name);
            }
            if owned.owns(Kind::Publication, name) {
                return execute(format!("ALTER PUBLICATION {} SET TABLE {list}", quote_ident(name))).await;
            }
            let missing = unpublished(client, name, tables).await?;
            if missing.is_empty() {
                return Ok(());
            }
            let list = missing.iter().map(|t| quoted(t)).collect::<Vec<_>>().join(", ");
            tracing::info!(publication = %name, tables = %list, "Adding the captured tables to a publication this pipeline did not create (its other tables are kept).");
            execute(format!("ALTER PUBLICATION {} ADD TABLE {list}", quote_ident(name))).await
        }
        (_, true) => check_publication_covers(client, name, tables).await,
    }
}

/// The captured tables a publication does not publish.
async fn unpublished<'t>(
    client: &Client,
    name: &str,
    tables: &'t [TableDef],
) -> Result<Vec<&'t TableDef>, PgError> {
    let rows = client
        .query(
            "SELECT schemaname::text, tablename::text FROM pg_publication_tables WHERE pubname = $1",
            &[&name],
        )
        .await
        .map_err(|e| PgError::query("reading the publication's tables", e))?;
    let published: std::collections::HashSet<(String, String)> =
        rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    Ok(tables
        .iter()
        .filter(|t| !published.contains(&(t.schema.clone(), t.name.clone())))
        .collect())
}

/// An existing publication must publish every captured table, or their changes never arrive.
async fn check_publication_covers(
    client: &Client,
    name: &str,
    tables: &[TableDef],
) -> Result<(), PgError> {
    let missing: Vec<String> = unpublished(client, name, tables)
        .await?
        .iter()
        .map(|t| format!("{}.{}", t.schema, t.name))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(PgError::Setup(format!(
        "publication `{name}` does not publish {}: run `ALTER PUBLICATION {} ADD TABLE {}`, or set `publication.autocreate.mode: filtered`",
        missing.join(", "),
        quote_ident(name),
        missing.join(", ")
    )))
}

/// Double-quotes an identifier.
pub(crate) fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}
