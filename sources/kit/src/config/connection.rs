//! How a database source reaches its server over the network: Debezium's `database.hostname`,
//! `database.port`, `database.user`, `database.password` and `database.password.file`, read
//! once by the kit as a part of every such source's block ([`super::DatabaseSource::CONNECTS`]).
//! What a source requires of them and its defaults (the database's port, PostgreSQL's URL)
//! are its own: it asks through [`Connection`]'s methods.

use std::path::PathBuf;

use serde::Deserialize;
use sluice_engine::config::Secret;

/// The keys a database source connects with.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Connection {
    /// The server's host name or address. Required by MySQL, MariaDB and SQL Server; Db2
    /// needs it unless `odbc.connection.string` is given; PostgreSQL's default is `localhost`
    /// (or `database.url`'s host).
    #[serde(rename = "database.hostname", default)]
    pub hostname: Option<String>,
    /// The server's port. Default: the database's own (PostgreSQL 5432, MySQL and MariaDB
    /// 3306, SQL Server 1433, Db2 50000).
    #[serde(rename = "database.port", default)]
    pub port: Option<u16>,
    /// The user Sluice logs in as. Required by MySQL, MariaDB and SQL Server; Db2 needs it
    /// unless `odbc.connection.string` is given; PostgreSQL's default is `postgres`.
    #[serde(rename = "database.user", default)]
    pub user: Option<String>,
    /// The user's password (kept secret; `${VAR}` takes it from the environment).
    #[serde(rename = "database.password", default)]
    pub password: Option<Secret>,
    /// A file holding the password (its first line), instead of `database.password`.
    #[serde(rename = "database.password.file", default)]
    pub password_file: Option<PathBuf>,
}

impl Connection {
    /// What every source requires: the password from one place at most.
    pub fn check(&self) -> Result<(), String> {
        if self.password.is_some() && self.password_file.is_some() {
            return Err("give `database.password` or `database.password.file`, not both".into());
        }
        Ok(())
    }

    /// Checks that the host and the user are given (a source that has no default for them).
    pub fn require_host_and_user(&self) -> Result<(), String> {
        match (&self.hostname, &self.user) {
            (None, _) => {
                Err("`database.hostname` is required: the server's host name or address".into())
            }
            (_, None) => Err("`database.user` is required: the user Sluice logs in as".into()),
            _ => Ok(()),
        }
    }

    /// The host (empty when not given: a source that requires it checked it).
    pub fn host(&self) -> &str {
        self.hostname.as_deref().unwrap_or_default()
    }

    /// The port, or the database's `default`.
    pub fn port_or(&self, default: u16) -> u16 {
        self.port.unwrap_or(default)
    }

    /// The user (empty when not given: a source that requires it checked it).
    pub fn login(&self) -> &str {
        self.user.as_deref().unwrap_or_default()
    }

    /// The password: the first line of `database.password.file` when that is given, else
    /// `database.password`. `Err` says which file cannot be read.
    pub fn password(&self) -> Result<Option<String>, String> {
        match &self.password_file {
            Some(file) => {
                let text = std::fs::read_to_string(file).map_err(|e| {
                    format!(
                        "cannot read `database.password.file` {}: {e}",
                        file.display()
                    )
                })?;
                Ok(Some(text.lines().next().unwrap_or_default().to_owned()))
            }
            None => Ok(self.password.as_ref().map(|p| p.expose().to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_comes_from_one_place_and_a_file_gives_its_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "s3cret\nignored\n").unwrap();
        let mut c = Connection::default();
        assert_eq!(c.password().unwrap(), None);
        c.password = Some(Secret::from("given".to_owned()));
        assert_eq!(c.password().unwrap().as_deref(), Some("given"));
        assert!(c.check().is_ok());
        c.password = None;
        c.password_file = Some(file);
        assert_eq!(c.password().unwrap().as_deref(), Some("s3cret"));
        c.password = Some(Secret::from("other".to_owned()));
        assert!(c.check().unwrap_err().contains("not both"));
        c.password_file = Some(dir.path().join("missing"));
        assert!(c.password().unwrap_err().contains("cannot read"));
    }

    #[test]
    fn a_source_without_defaults_names_what_is_missing() {
        let mut c = Connection::default();
        assert!(c
            .require_host_and_user()
            .unwrap_err()
            .contains("database.hostname"));
        c.hostname = Some("db".into());
        assert!(c
            .require_host_and_user()
            .unwrap_err()
            .contains("database.user"));
        c.user = Some("cdc".into());
        assert_eq!((c.host(), c.login(), c.port_or(3306)), ("db", "cdc", 3306));
    }
}
