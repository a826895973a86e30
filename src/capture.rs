//! `sluice capture`: SQLite tables in and out of capture mode (the `sqlite` feature).

use std::path::PathBuf;

use clap::Subcommand;
use sluice_sources::sqlite::capture::{self, Connection, Enabled};

#[derive(Debug, Subcommand)]
pub(crate) enum CaptureAction {
    /// Put tables into capture mode (idempotent; a table whose columns changed is captured anew).
    Enable {
        /// The SQLite database file.
        database: PathBuf,
        /// Tables.
        #[arg(required = true)]
        tables: Vec<String>,
        /// Key columns for tables without a primary key (comma-separated).
        #[arg(long, value_delimiter = ',')]
        key: Option<Vec<String>>,
    },
    /// Take tables out of capture mode (their change tables and triggers are dropped).
    Disable {
        /// The SQLite database file.
        database: PathBuf,
        /// Tables.
        #[arg(required = true)]
        tables: Vec<String>,
    },
}

pub(crate) fn capture(action: CaptureAction) -> Result<(), String> {
    let path = match &action {
        CaptureAction::Enable { database, .. } | CaptureAction::Disable { database, .. } => {
            database.clone()
        }
    };
    if !path.exists() {
        return Err(format!("{}: no such database file", path.display()));
    }
    let mut conn = rusqlite_open(&path)?;
    match action {
        CaptureAction::Enable { tables, key, .. } => {
            for table in tables {
                let what = capture::enable(&mut conn, &table, key.as_deref())
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                let said = match what {
                    Enabled::Now => "capture enabled",
                    Enabled::Already => "already in capture mode",
                    Enabled::Recaptured => {
                        "its columns changed: captured anew (changes not delivered yet are kept; the change table gained the new columns)"
                    }
                };
                println!("{}: {table}: {said}", path.display());
            }
        }
        CaptureAction::Disable { tables, .. } => {
            for table in tables {
                let was = capture::disable(&mut conn, &table)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                println!(
                    "{}: {table}: {}",
                    path.display(),
                    if was {
                        "capture disabled"
                    } else {
                        "was not in capture mode"
                    }
                );
            }
        }
    }
    Ok(())
}

fn rusqlite_open(path: &std::path::Path) -> Result<Connection, String> {
    capture::open(path).map_err(|e| format!("{}: {e}", path.display()))
}
