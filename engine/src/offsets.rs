//! Committed source positions, keyed by pipeline name.
//!
//! The default store is one JSON file under the pipeline's data directory. A commit writes a
//! temporary file, fsyncs it, renames it over the old one and fsyncs the directory, so the file
//! always holds either the previous or the new commit, even after kill -9 or a power cut.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::{Classify, ErrorClass};
use crate::event::Position;

/// An offset store failure.
#[derive(Debug, thiserror::Error)]
pub enum OffsetError {
    /// Reading or writing the file failed.
    #[error("offset store {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A store outside this process (a Kafka topic) failed.
    #[error("offset store {store}: {message}")]
    Remote {
        /// Which store (`kafka topic sluice-offsets`).
        store: String,
        /// What went wrong and how to fix it.
        message: String,
        /// Whether retrying may help.
        retryable: bool,
    },
    /// Another running pipeline holds the data directory.
    #[error(
        "data_dir {path} is in use by {holder}: two running pipelines cannot share one data_dir; stop that one, or give this one a `data_dir` of its own"
    )]
    InUse {
        /// The directory.
        path: PathBuf,
        /// Who holds it, as its lock file says (`pipeline orders, process 4242`).
        holder: String,
    },
    /// The file exists but is not an offsets file.
    #[error("offset store {path} is corrupt ({detail}); move it away to start from scratch")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        detail: String,
    },
}

impl Classify for OffsetError {
    fn class(&self) -> ErrorClass {
        match self {
            OffsetError::Io { source, .. } => source.class(),
            OffsetError::Corrupt { .. } | OffsetError::InUse { .. } => ErrorClass::Fatal,
            OffsetError::Remote {
                retryable: true, ..
            } => ErrorClass::Retryable,
            OffsetError::Remote { .. } => ErrorClass::Fatal,
        }
    }
}

/// Where committed positions live.
pub trait OffsetStore: Send + Sync {
    /// The committed position of `pipeline`, if any.
    fn load(&self, pipeline: &str) -> Result<Option<Position>, OffsetError>;
    /// Durably records `position` for `pipeline`.
    fn commit(&self, pipeline: &str, position: &Position) -> Result<(), OffsetError>;
    /// Durably forgets `pipeline`'s committed position: it starts again as a new pipeline
    /// (with its snapshot mode's snapshot). Nothing to forget is fine.
    fn reset(&self, pipeline: &str) -> Result<(), OffsetError>;
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct OffsetFile {
    pipelines: BTreeMap<String, Committed>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Committed {
    position: Position,
    committed_at_ms: u64,
}

/// A JSON file replaced atomically on every commit.
#[derive(Debug)]
pub struct FileOffsetStore {
    path: PathBuf,
    lock: Mutex<()>,
}

impl FileOffsetStore {
    /// The store at `<data_dir>/offsets.json`; the directory is created if missing.
    pub fn open(data_dir: &Path) -> Result<Self, OffsetError> {
        std::fs::create_dir_all(data_dir).map_err(|source| OffsetError::Io {
            path: data_dir.to_owned(),
            source,
        })?;
        Ok(FileOffsetStore {
            path: data_dir.join("offsets.json"),
            lock: Mutex::new(()),
        })
    }

    /// The file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<OffsetFile, OffsetError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| OffsetError::Corrupt {
                path: self.path.clone(),
                detail: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(OffsetFile::default()),
            Err(source) => Err(OffsetError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }

    fn write(&self, file: &OffsetFile) -> Result<(), OffsetError> {
        let io = |source| OffsetError::Io {
            path: self.path.clone(),
            source,
        };
        let tmp = self.path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(file).map_err(|e| io(std::io::Error::other(e)))?;
        {
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
            f.write_all(&bytes).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        if let Some(dir) = self.path.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io)?;
        }
        Ok(())
    }
}

impl OffsetStore for FileOffsetStore {
    fn load(&self, pipeline: &str) -> Result<Option<Position>, OffsetError> {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        Ok(self
            .read()?
            .pipelines
            .get(pipeline)
            .map(|c| c.position.clone()))
    }

    fn commit(&self, pipeline: &str, position: &Position) -> Result<(), OffsetError> {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut file = self.read()?;
        let committed_at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        file.pipelines.insert(
            pipeline.to_owned(),
            Committed {
                position: position.clone(),
                committed_at_ms,
            },
        );
        self.write(&file)
    }

    fn reset(&self, pipeline: &str) -> Result<(), OffsetError> {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut file = self.read()?;
        if file.pipelines.remove(pipeline).is_none() {
            return Ok(());
        }
        self.write(&file)
    }
}

/// A running pipeline's hold on its data directory: an exclusive lock on `<data_dir>/lock`
/// (advisory, `flock`), which the kernel lifts when the holder closes it or its process ends,
/// also on kill -9. Two pipelines sharing a data directory would overwrite each other's
/// offsets, so the second is refused, in this process (`sluice serve`) or another.
#[derive(Debug)]
pub struct DataDirLock {
    _file: std::fs::File,
}

impl DataDirLock {
    /// Takes the lock of `data_dir` (created if missing) for `pipeline`, or says who holds it.
    pub fn acquire(data_dir: &Path, pipeline: &str) -> Result<Self, OffsetError> {
        let path = data_dir.join("lock");
        let io = |source| OffsetError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(data_dir).map_err(io)?;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(OffsetError::InUse {
                    path: data_dir.to_owned(),
                    holder: read_holder(&path),
                });
            }
            Err(std::fs::TryLockError::Error(source)) => return Err(io(source)),
        }
        let holder = format!("pipeline {pipeline}, process {}\n", std::process::id());
        file.set_len(0).map_err(io)?;
        file.write_all(holder.as_bytes()).map_err(io)?;
        Ok(DataDirLock { _file: file })
    }
}

/// Who holds a lock file, as its holder wrote it: `pipeline <name>, process <pid>`. The holder
/// writes it just after taking the lock, so an empty file is read again for a moment before
/// it is reported as "another pipeline".
fn read_holder(path: &Path) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let holder = std::fs::read_to_string(path).unwrap_or_default();
        let holder = holder.trim();
        if !holder.is_empty() {
            return holder.to_owned();
        }
        if std::time::Instant::now() >= deadline {
            return "another pipeline".to_owned();
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Offsets in memory only.
#[derive(Debug, Default)]
pub struct MemoryOffsetStore {
    offsets: Mutex<BTreeMap<String, Position>>,
}

impl OffsetStore for MemoryOffsetStore {
    fn load(&self, pipeline: &str) -> Result<Option<Position>, OffsetError> {
        Ok(self
            .offsets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(pipeline)
            .cloned())
    }

    fn commit(&self, pipeline: &str, position: &Position) -> Result<(), OffsetError> {
        self.offsets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(pipeline.to_owned(), position.clone());
        Ok(())
    }

    fn reset(&self, pipeline: &str) -> Result<(), OffsetError> {
        self.offsets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(pipeline);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_store_round_trips_and_keys_by_pipeline() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let store = FileOffsetStore::open(dir.path())?;
        assert_eq!(store.load("a")?, None);
        store.commit("a", &Position::Offset(42))?;
        store.commit("b", &Position::Opaque("{\"lsn\":7}".into()))?;
        let reopened = FileOffsetStore::open(dir.path())?;
        assert_eq!(reopened.load("a")?, Some(Position::Offset(42)));
        assert_eq!(
            reopened.load("b")?,
            Some(Position::Opaque("{\"lsn\":7}".into()))
        );
        assert!(!dir.path().join("offsets.json.tmp").exists());
        reopened.reset("a")?;
        reopened.reset("never")?;
        let again = FileOffsetStore::open(dir.path())?;
        assert_eq!(again.load("a")?, None, "reset: forgotten");
        assert_eq!(
            again.load("b")?,
            Some(Position::Opaque("{\"lsn\":7}".into())),
            "another pipeline's kept"
        );
        let memory = MemoryOffsetStore::default();
        memory.commit("a", &Position::Offset(1))?;
        memory.reset("a")?;
        assert_eq!(memory.load("a")?, None);
        Ok(())
    }

    #[test]
    fn a_data_dir_is_held_by_one_pipeline_at_a_time() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let data_dir = dir.path().join("orders");
        let held = DataDirLock::acquire(&data_dir, "orders")?;
        let err = DataDirLock::acquire(&data_dir, "copy")
            .err()
            .ok_or("a second lock was granted")?;
        assert_eq!(err.class(), ErrorClass::Fatal);
        let text = err.to_string();
        assert!(
            text.contains(&format!("pipeline orders, process {}", std::process::id())),
            "{text}"
        );
        assert!(text.contains("`data_dir` of its own"), "{text}");
        drop(held);
        let again = DataDirLock::acquire(&data_dir, "copy")?;
        drop(again);
        Ok(())
    }

    /// The holder writes its name just after taking the lock: one refused in between still
    /// names it (CI once saw "another pipeline" there).
    #[test]
    fn a_holder_caught_before_it_wrote_its_name_is_named() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("lock"), "")?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("lock"))?;
        file.lock()?;
        let path = dir.path().join("lock");
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            std::fs::write(path, "pipeline early, process 1\n")
        });
        let err = DataDirLock::acquire(dir.path(), "late")
            .err()
            .ok_or("a second lock was granted")?;
        writer.join().map_err(|_| "the writer panicked")??;
        assert!(
            err.to_string()
                .contains("in use by pipeline early, process 1"),
            "{err}"
        );
        drop(file);
        Ok(())
    }

    #[test]
    fn corrupt_file_is_a_clear_fatal_error() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("offsets.json"), "not json")?;
        let store = FileOffsetStore::open(dir.path())?;
        let err = store.load("a").err().ok_or("expected an error")?;
        assert_eq!(err.class(), ErrorClass::Fatal);
        assert!(err.to_string().contains("corrupt"));
        Ok(())
    }
}
