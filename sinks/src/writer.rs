//! A dedicated OS thread for blocking writes (files, stdout).
//!
//! The sink's async task hands encoded bytes over a bounded crossbeam channel and awaits a
//! oneshot reply, so blocking I/O and fsync never stall an actor's executor.

use std::io::Write;
use std::thread::JoinHandle;

use sluice_engine::{Classify, ComponentError};
use tokio::sync::oneshot;

enum Request {
    Write {
        bytes: Vec<u8>,
        sync: bool,
        reply: oneshot::Sender<std::io::Result<Vec<u8>>>,
    },
}

/// What the thread does with each buffer.
pub(crate) trait Target: Send + 'static {
    /// Writes all of `bytes`.
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    /// Makes written bytes durable.
    fn sync(&mut self) -> std::io::Result<()>;
}

impl Target for std::fs::File {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        Write::write_all(self, bytes)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        self.sync_data()
    }
}

/// Standard output.
pub(crate) struct Stdout;

impl Target for Stdout {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        out.write_all(bytes)?;
        out.flush()
    }
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A writer thread and the channel to it.
pub(crate) struct WriterThread {
    tx: Option<crossbeam_channel::Sender<Request>>,
    handle: Option<JoinHandle<()>>,
    what: String,
}

impl WriterThread {
    /// Starts a thread writing to `target`; `what` names it in errors.
    pub(crate) fn spawn(what: String, mut target: impl Target) -> Result<Self, ComponentError> {
        let (tx, rx) = crossbeam_channel::bounded::<Request>(1);
        let handle = std::thread::Builder::new()
            .name(format!("sluice-writer-{what}"))
            .spawn(move || {
                for Request::Write {
                    mut bytes,
                    sync,
                    reply,
                } in rx
                {
                    let result = target
                        .write_all(&bytes)
                        .and_then(|()| if sync { target.sync() } else { Ok(()) })
                        .map(|()| {
                            bytes.clear();
                            bytes
                        });
                    let _ = reply.send(result);
                }
            })
            .map_err(|e| {
                ComponentError::fatal(format!("{what}: cannot start the writer thread"))
                    .with_source(e)
            })?;
        Ok(WriterThread {
            tx: Some(tx),
            handle: Some(handle),
            what,
        })
    }

    /// Writes `bytes` (and syncs when asked); gives the emptied buffer back for reuse.
    pub(crate) async fn write(
        &self,
        bytes: Vec<u8>,
        sync: bool,
    ) -> Result<Vec<u8>, ComponentError> {
        let (reply, rx) = oneshot::channel();
        let gone =
            || ComponentError::retryable(format!("{}: the writer thread stopped", self.what));
        let tx = self.tx.as_ref().ok_or_else(gone)?.clone();
        // The channel holds one request and this sink waits for every reply, so the send
        // never blocks for long; keep it off the executor anyway.
        tokio::task::spawn_blocking(move || tx.send(Request::Write { bytes, sync, reply }))
            .await
            .map_err(|_| gone())?
            .map_err(|_| gone())?;
        match rx.await {
            Ok(Ok(buffer)) => Ok(buffer),
            Ok(Err(e)) => Err(ComponentError::from_classified(
                format!("{}: write failed", self.what),
                ClassifiedIo(e),
            )),
            Err(_) => Err(gone()),
        }
    }
}

impl Drop for WriterThread {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// An I/O error with its retry class.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(crate) struct ClassifiedIo(pub std::io::Error);

impl Classify for ClassifiedIo {
    fn class(&self) -> sluice_engine::ErrorClass {
        self.0.class()
    }
}
