//! The `file` signal channel (Debezium's `FileSignalChannel`): JSON lines appended to a file.

use std::io::{Read, Seek};
use std::path::PathBuf;
use std::time::{Duration, Instant};

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

/// The `file` channel as a source reads it: every `signal.poll.interval.ms`.
#[derive(Debug)]
pub struct PolledFile {
    channel: FileChannel,
    every: Duration,
    next: Instant,
}

impl PolledFile {
    /// The channel, when `signal.enabled.channels` has `file` and `signal.file` is set.
    pub fn new(common: &crate::config::SourceCommon) -> Option<Self> {
        let path = common.signal_file.clone()?;
        common.signal_channel("file").then(|| PolledFile {
            channel: FileChannel { path },
            every: Duration::from_millis(common.signal_poll_interval_ms.max(10)),
            next: Instant::now(),
        })
    }

    /// The signals written since the last read, when a read is due (else none).
    pub fn poll(&mut self) -> Vec<String> {
        if Instant::now() < self.next {
            return Vec::new();
        }
        self.next = Instant::now() + self.every;
        self.channel.take()
    }

    /// How often it is read.
    pub fn every(&self) -> Duration {
        self.every
    }

    /// When the next read is due.
    pub fn due(&self) -> Instant {
        self.next
    }
}
