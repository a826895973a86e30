//! What this pipeline created on the server (replication slots, publications), recorded in its
//! data directory: only those are ever dropped or have their table list replaced. A slot or a
//! publication that was there before belongs to the user (another connector may use it).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::postgres::error::PgError;
use crate::postgres::server::catalog::ConnInfo;

/// A kind of server object.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// A replication slot.
    Slot,
    /// A publication.
    Publication,
}

/// The record (`<data_dir>/postgres-created.json`: a JSON list of `kind host:port/db/name`).
#[derive(Debug)]
pub(crate) struct Owned {
    path: PathBuf,
    server: String,
    entries: BTreeSet<String>,
}

impl Owned {
    /// The record of `data_dir` for the server and database of `info`.
    pub(crate) fn load(data_dir: &Path, info: &ConnInfo) -> Result<Self, PgError> {
        let path = data_dir.join("postgres-created.json");
        let entries = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                PgError::Setup(format!(
                    "{} is not a list of created slots and publications ({e}): fix or remove it",
                    path.display()
                ))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeSet::new(),
            Err(e) => {
                return Err(PgError::Setup(format!(
                    "cannot read {}: {e}",
                    path.display()
                )))
            }
        };
        Ok(Owned {
            path,
            server: format!("{}:{}/{}", info.host, info.port, info.dbname),
            entries,
        })
    }

    fn entry(&self, kind: Kind, name: &str) -> String {
        let kind = match kind {
            Kind::Slot => "slot",
            Kind::Publication => "publication",
        };
        format!("{kind} {}/{name}", self.server)
    }

    /// Whether this pipeline created `name`.
    pub(crate) fn owns(&self, kind: Kind, name: &str) -> bool {
        self.entries.contains(&self.entry(kind, name))
    }

    /// Records that this pipeline created `name` (written before the caller goes on).
    pub(crate) fn record(&mut self, kind: Kind, name: &str) -> Result<(), PgError> {
        let entry = self.entry(kind, name);
        if self.entries.insert(entry) {
            self.write()?;
        }
        Ok(())
    }

    /// Forgets `name` (it was dropped).
    pub(crate) fn forget(&mut self, kind: Kind, name: &str) -> Result<(), PgError> {
        let entry = self.entry(kind, name);
        if self.entries.remove(&entry) {
            self.write()?;
        }
        Ok(())
    }

    fn write(&self) -> Result<(), PgError> {
        let fail = |e: std::io::Error| {
            PgError::Setup(format!("cannot write {}: {e}", self.path.display()))
        };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(fail)?;
        }
        let text = serde_json::to_vec_pretty(&self.entries)
            .map_err(|e| PgError::Setup(format!("cannot encode the created objects: {e}")))?;
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(fail)?;
        std::fs::rename(&tmp, &self.path).map_err(fail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(db: &str) -> ConnInfo {
        ConnInfo {
            host: "127.0.0.1".into(),
            port: 5432,
            user: "postgres".into(),
            password: None,
            dbname: db.into(),
            sslmode: crate::postgres::config::SslMode::Disable,
            sslrootcert: None,
            client_cert: None,
        }
    }

    #[test]
    fn records_survive_a_restart_and_are_per_database() {
        let dir = tempfile::tempdir().unwrap();
        let mut owned = Owned::load(dir.path(), &info("a")).unwrap();
        assert!(!owned.owns(Kind::Slot, "debezium"));
        owned.record(Kind::Slot, "debezium").unwrap();
        owned.record(Kind::Publication, "p").unwrap();
        let again = Owned::load(dir.path(), &info("a")).unwrap();
        assert!(again.owns(Kind::Slot, "debezium"));
        assert!(again.owns(Kind::Publication, "p"));
        assert!(!again.owns(Kind::Slot, "p"));
        let other = Owned::load(dir.path(), &info("b")).unwrap();
        assert!(
            !other.owns(Kind::Slot, "debezium"),
            "another database's slot"
        );
        let mut again = again;
        again.forget(Kind::Slot, "debezium").unwrap();
        assert!(!Owned::load(dir.path(), &info("a"))
            .unwrap()
            .owns(Kind::Slot, "debezium"));
    }

    #[test]
    fn a_damaged_record_is_one_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("postgres-created.json"), "{oops").unwrap();
        let e = Owned::load(dir.path(), &info("a")).unwrap_err().to_string();
        assert!(e.contains("postgres-created.json"), "{e}");
    }
}
