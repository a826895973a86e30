//! The file store: one JSON record per line, as Debezium's `FileSchemaHistory` writes them.
//! A record is appended and synced before the change that follows it can be committed, so a
//! crash leaves at most a torn last line, which recovery ignores (its change was never
//! delivered).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use super::{HistoryError, HistoryRecord};

/// A history file.
#[derive(Debug)]
pub struct FileStore {
    path: PathBuf,
}

impl FileStore {
    /// The store at `path` (created, with its directory, on the first append).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileStore { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, what: &'static str, source: std::io::Error) -> HistoryError {
        HistoryError::Io {
            what,
            path: self.path.clone(),
            source,
        }
    }

    /// Whether the file holds a history.
    pub fn exists(&self) -> Result<bool, HistoryError> {
        match std::fs::metadata(&self.path) {
            Ok(m) => Ok(m.len() > 0),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(self.io("reading", e)),
        }
    }

    /// Appends `record` and syncs the file.
    pub fn append(&mut self, record: &HistoryRecord) -> Result<(), HistoryError> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| self.io("creating the directory of", e))?;
        }
        let mut line = serde_json::to_vec(record).map_err(HistoryError::Encode)?;
        line.push(b'\n');
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| self.io("opening", e))?;
        self.seal_torn_line(&mut file)?;
        file.write_all(&line).map_err(|e| self.io("writing", e))?;
        file.sync_data().map_err(|e| self.io("syncing", e))
    }

    /// A torn last line (a crash during an append) is ended, so that the next record starts on
    /// a line of its own; recovery skips the torn one.
    fn seal_torn_line(&self, file: &mut File) -> Result<(), HistoryError> {
        use std::io::{Read, Seek, SeekFrom};
        let len = file.metadata().map_err(|e| self.io("reading", e))?.len();
        if len == 0 {
            return Ok(());
        }
        let mut reader = File::open(&self.path).map_err(|e| self.io("reading", e))?;
        reader
            .seek(SeekFrom::Start(len - 1))
            .map_err(|e| self.io("reading", e))?;
        let mut last = [0u8; 1];
        reader
            .read_exact(&mut last)
            .map_err(|e| self.io("reading", e))?;
        if last[0] != b'\n' {
            file.write_all(b"\n").map_err(|e| self.io("writing", e))?;
        }
        Ok(())
    }

    /// Every record, oldest first. A line that is not a record is an error naming the line,
    /// except a torn last line.
    pub fn read_all(&self) -> Result<Vec<HistoryRecord>, HistoryError> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io("reading", e)),
        };
        let mut lines: Vec<(usize, String)> = Vec::new();
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| self.io("reading", e))?;
            if !line.trim().is_empty() {
                lines.push((i + 1, line));
            }
        }
        let mut records = Vec::with_capacity(lines.len());
        for (n, line) in lines {
            match serde_json::from_str::<HistoryRecord>(&line) {
                Ok(r) => records.push(r),
                // Cut off before its end: an append a crash interrupted (its change was never
                // delivered).
                Err(e) if e.is_eof() => {
                    tracing::warn!(path = %self.path.display(), line = n, "Skipping an incomplete schema history record (a crash while it was written).");
                }
                Err(e) => return Err(self.corrupt(n, e)),
            }
        }
        Ok(records)
    }

    fn corrupt(&self, line: usize, source: serde_json::Error) -> HistoryError {
        HistoryError::Corrupt {
            at: format!("{}:{line}", self.path.display()),
            source,
        }
    }
}
