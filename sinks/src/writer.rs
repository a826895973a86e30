//! A dedicated OS thread for blocking writes (files, stdout).
//!
//! The sink's async task encodes into a buffer and hands it over a bounded crossbeam channel;
//! the thread writes (and syncs) buffers in order and answers each on a oneshot channel, which
//! is the batch's delivery. Blocking I/O and fsync never stall an actor's executor, and encoding
//! the next batch overlaps syncing the previous one.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use sluice_engine::{Classify, ComponentError, Delivery};
use tokio::sync::oneshot;

struct Request {
    bytes: Vec<u8>,
    sync: bool,
    reply: oneshot::Sender<std::io::Result<()>>,
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
    spare: Arc<Mutex<Vec<Vec<u8>>>>,
    what: Arc<str>,
}

impl WriterThread {
    /// Starts a thread writing to `target`; `what` names it in errors.
    pub(crate) fn spawn(what: String, mut target: impl Target) -> Result<Self, ComponentError> {
        let (tx, rx) = crossbeam_channel::bounded::<Request>(2);
        let spare: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let recycled = spare.clone();
        let handle = std::thread::Builder::new()
            .name("sluice-writer".to_owned())
            .spawn(move || {
                for Request {
                    mut bytes,
                    sync,
                    reply,
                } in rx
                {
                    let result = target.write_all(&bytes).and_then(|()| {
                        if sync {
                            target.sync()
                        } else {
                            Ok(())
                        }
                    });
                    let _ = reply.send(result);
                    // Buffers are recycled (a few, of modest size) rather than freed: allocating
                    // and freeing megabyte buffers across threads fragments the heap.
                    bytes.clear();
                    if bytes.capacity() <= 4 << 20 {
                        if let Ok(mut pool) = recycled.lock() {
                            if pool.len() < 4 {
                                pool.push(bytes);
                            }
                        }
                    }
                }
            })
            .map_err(|e| {
                ComponentError::fatal(format!("{what}: cannot start the writer thread"))
                    .with_source(e)
            })?;
        Ok(WriterThread {
            tx: Some(tx),
            handle: Some(handle),
            spare,
            what: what.into(),
        })
    }

    /// An empty buffer, reused when one is available.
    pub(crate) fn take_buffer(&self) -> Vec<u8> {
        self.spare
            .lock()
            .ok()
            .and_then(|mut pool| pool.pop())
            .unwrap_or_else(|| Vec::with_capacity(1 << 20))
    }

    /// Queues `bytes` for writing (and syncing when asked); the delivery resolves when done.
    pub(crate) async fn submit(
        &self,
        bytes: Vec<u8>,
        sync: bool,
    ) -> Result<Delivery, ComponentError> {
        let what = self.what.clone();
        let gone = move || ComponentError::retryable(format!("{what}: the writer thread stopped"));
        let tx = self.tx.as_ref().ok_or_else(&gone)?.clone();
        let (reply, rx) = oneshot::channel();
        let request = Request { bytes, sync, reply };
        // The channel is small; when it is full, wait for room off the executor.
        match tx.try_send(request) {
            Ok(()) => {}
            Err(crossbeam_channel::TrySendError::Full(request)) => {
                tokio::task::spawn_blocking(move || tx.send(request))
                    .await
                    .map_err(|_| gone())?
                    .map_err(|_| gone())?;
            }
            Err(crossbeam_channel::TrySendError::Disconnected(_)) => return Err(gone()),
        }
        let what = self.what.clone();
        Ok(Box::pin(async move {
            match rx.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(ComponentError::from_classified(
                    format!("{what}: write failed"),
                    ClassifiedIo(e),
                )),
                Err(_) => Err(ComponentError::retryable(format!(
                    "{what}: the writer thread stopped"
                ))),
            }
        }))
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
