//! The `file` signal channel (Debezium's `FileSignalChannel`): JSON lines appended to a file.

use std::io::{Read, Seek};
use std::path::PathBuf;

/// JSON lines appended to a file; the file is emptied once its signals are read.
#[derive(Debug)]
pub struct FileChannel {
    /// The file.
    pub path: PathBuf,
}

impl FileChannel {
    /// Signals written since the last call.
    pub fn take(&mut self) -> Vec<String> {
        let Ok(mut file) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
        else {
            return Vec::new();
        };
        let mut text = String::new();
        if file.read_to_string(&mut text).is_err() || text.is_empty() {
            return Vec::new();
        }
        // Only whole lines; a line being written stays for the next read.
        let Some(end) = text.rfind('\n') else {
            return Vec::new();
        };
        let rest = text[end + 1..].to_owned();
        let lines: Vec<String> = text[..end]
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        // Empty the file, keeping a partial last line.
        let emptied = file.set_len(0).and_then(|_| file.rewind()).and_then(|_| {
            use std::io::Write;
            file.write_all(rest.as_bytes())
        });
        if let Err(e) = emptied {
            tracing::warn!(file = %self.path.display(), error = %e, "Cannot empty the signal file; its signals may be read again.");
        }
        lines
    }
}
