//! A dedicated OS thread for blocking writes (files, stdout).
//!
//! The sink's async task encodes into a buffer and hands it over a bounded crossbeam channel;
//! the thread writes buffers in order and answers each on a oneshot channel, which is the
//! batch's delivery. Blocking I/O and fsync never stall an actor's executor.
//!
//! Syncs are group commits on a second thread (for targets that can sync from another handle,
//! files): a buffer that must be durable is answered once an fdatasync that started after its
//! write returns. Writing goes on meanwhile, and one fdatasync covers every buffer written
//! before it, so a slow disk costs fewer, larger syncs instead of a stalled writer. Unsynced
//! data stays bounded: its batches are not acknowledged, and the runtime keeps only a few
//! batches in flight.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use sluice_engine::{Classify, ComponentError, Delivery};
use tokio::sync::oneshot;

struct Request {
    bytes: Vec<u8>,
    sync: bool,
    /// The first buffer of a sink write (a batch): a failed write is cut back to here.
    first: bool,
    /// Which failures had been reported when this buffer was handed over (see `Rollback`).
    generation: u64,
    reply: oneshot::Sender<std::io::Result<()>>,
}

/// A failed write never leaves a fragment: the file is cut back to where the failed batch
/// began, and every buffer handed over before the failure was reported is refused (the runtime
/// writes the failed batch and all later ones again, in order). A failure's report (its
/// delivery resolving) moves the generation on; buffers of the failed generation are refused.
struct Rollback {
    /// The target's length after the last buffer written whole.
    written: u64,
    /// Where the current batch began.
    batch_start: u64,
    /// The generation whose buffers are refused after a failed write.
    failed: Option<u64>,
}

impl Rollback {
    /// Writes one request's bytes, or refuses them, or cuts a failed write back.
    fn write(&mut self, target: &mut impl Target, request: &Request) -> std::io::Result<()> {
        if self.failed.is_some_and(|g| request.generation <= g) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "an earlier write failed; this batch is written again",
            ));
        }
        if request.first {
            self.batch_start = self.written;
        }
        match target.write_all(&request.bytes) {
            Ok(()) => {
                self.written += request.bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                if let Err(cut) = target.rewind(self.batch_start) {
                    // The fragment stays: writing on would leave it inside the output.
                    self.failed = Some(u64::MAX);
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{e}; the partial write cannot be cut back ({cut}), so nothing more is written"),
                    ));
                }
                self.written = self.batch_start;
                self.failed = Some(request.generation);
                Err(e)
            }
        }
    }
}

/// What the thread does with each buffer.
pub(crate) trait Target: Send + 'static {
    /// Writes all of `bytes`.
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    /// Makes written bytes durable.
    fn sync(&mut self) -> std::io::Result<()>;
    /// The target's length when the writer starts.
    fn len(&self) -> u64 {
        0
    }
    /// Cuts the target back to `len` bytes (a stream cannot take back what it wrote).
    fn rewind(&mut self, _len: u64) -> std::io::Result<()> {
        Ok(())
    }
    /// A handle that makes bytes written through this one durable from another thread, when
    /// the target has one.
    fn syncer(&self) -> Option<Syncer> {
        None
    }
}

impl Target for std::fs::File {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        Write::write_all(self, bytes)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        self.sync_data()
    }
    fn len(&self) -> u64 {
        self.metadata().map_or(0, |m| m.len())
    }
    fn rewind(&mut self, len: u64) -> std::io::Result<()> {
        // Opened for appending: the next write goes to the new end.
        self.set_len(len)
    }
    fn syncer(&self) -> Option<Syncer> {
        // The same open file: fdatasync through it covers writes made through `self`.
        let file = self.try_clone().ok()?;
        Some(Box::new(move || file.sync_data()))
    }
}

type Reply = oneshot::Sender<std::io::Result<()>>;

/// Syncs, from another thread, what a [`Target`] wrote.
pub(crate) type Syncer = Box<dyn FnMut() -> std::io::Result<()> + Send>;

/// The group-commit thread: waits for replies owed a sync, syncs once for all that are waiting,
/// answers them.
fn spawn_syncer(
    what: &str,
    mut sync: Syncer,
) -> Result<(crossbeam_channel::Sender<Reply>, JoinHandle<()>), ComponentError> {
    let (tx, rx) = crossbeam_channel::unbounded::<Reply>();
    let span = tracing::Span::current();
    let handle = std::thread::Builder::new()
        .name("sluice-sync".to_owned())
        .spawn(move || {
            let _stage = span.enter();
            while let Ok(first) = rx.recv() {
                let waiting: Vec<Reply> = std::iter::once(first).chain(rx.try_iter()).collect();
                let result = sync();
                for reply in waiting {
                    let _ = reply.send(match &result {
                        Ok(()) => Ok(()),
                        Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
                    });
                }
            }
        })
        .map_err(|e| {
            ComponentError::fatal(format!("{what}: cannot start the sync thread")).with_source(e)
        })?;
    Ok((tx, handle))
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

/// Buffers kept for reuse at most, and the largest kept.
const SPARE_BUFFERS: usize = 4;
const SPARE_MAX_BYTES: usize = 4 << 20;

/// A writer thread and the channel to it.
pub(crate) struct WriterThread {
    tx: Option<crossbeam_channel::Sender<Request>>,
    handle: Option<JoinHandle<()>>,
    spare: Arc<Mutex<Vec<Vec<u8>>>>,
    what: Arc<str>,
    generation: Arc<std::sync::atomic::AtomicU64>,
}

impl WriterThread {
    /// Starts a thread writing to `target`; `what` names it in errors.
    pub(crate) fn spawn(what: String, mut target: impl Target) -> Result<Self, ComponentError> {
        let (tx, rx) = crossbeam_channel::bounded::<Request>(2);
        let spare: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let recycled = spare.clone();
        let syncer = target
            .syncer()
            .map(|sync| spawn_syncer(&what, sync))
            .transpose()?;
        // The thread logs inside the span of the stage that built it.
        let span = tracing::Span::current();
        let handle = std::thread::Builder::new()
            .name("sluice-writer".to_owned())
            .spawn(move || {
                let _stage = span.enter();
                let (to_syncer, syncer_thread) = syncer.unzip();
                let start = target.len();
                let mut rollback = Rollback {
                    written: start,
                    batch_start: start,
                    failed: None,
                };
                for request in rx {
                    let written = rollback.write(&mut target, &request);
                    let Request {
                        mut bytes,
                        sync,
                        reply,
                        ..
                    } = request;
                    match (written, sync, &to_syncer) {
                        (Err(e), _, _) => {
                            let _ = reply.send(Err(e));
                        }
                        (Ok(()), false, _) => {
                            let _ = reply.send(Ok(()));
                        }
                        (Ok(()), true, Some(to_syncer)) => {
                            if let Err(unsent) = to_syncer.send(reply) {
                                let _ = unsent.0.send(target.sync());
                            }
                        }
                        (Ok(()), true, None) => {
                            let _ = reply.send(target.sync());
                        }
                    }
                    // Every buffer goes back to the sink's thread, which allocated it: freed
                    // here, the allocator would keep its pages until that thread collects
                    // them (with 5 MB records the process held three times its live memory).
                    bytes.clear();
                    if let Ok(mut pool) = recycled.lock() {
                        pool.push(bytes);
                    }
                }
                // The syncer answers what it holds, then ends with its channel.
                drop(to_syncer);
                if let Some(handle) = syncer_thread {
                    let _ = handle.join();
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
            generation: Arc::default(),
        })
    }

    /// An empty buffer, reused when one is available. The buffers the writer gave back are
    /// freed here, on the thread that allocated them, beyond a few of modest size.
    pub(crate) fn take_buffer(&self) -> Vec<u8> {
        let mut freed = Vec::new();
        let reused = self.spare.lock().ok().and_then(|mut pool| {
            let mut i = 0;
            while i < pool.len() {
                if pool[i].capacity() > SPARE_MAX_BYTES || i >= SPARE_BUFFERS {
                    freed.push(pool.swap_remove(i));
                } else {
                    i += 1;
                }
            }
            pool.pop()
        });
        drop(freed);
        reused.unwrap_or_else(|| Vec::with_capacity(1 << 20))
    }

    /// Queues `bytes` for writing (and syncing when asked); the delivery resolves when done.
    /// `first` marks a sink write's (a batch's) first buffer.
    pub(crate) async fn submit(
        &self,
        bytes: Vec<u8>,
        first: bool,
        sync: bool,
    ) -> Result<Delivery, ComponentError> {
        let what = self.what.clone();
        let gone = move || ComponentError::retryable(format!("{what}: the writer thread stopped"));
        let tx = self.tx.as_ref().ok_or_else(&gone)?.clone();
        let (reply, rx) = oneshot::channel();
        let generation = self.generation.load(std::sync::atomic::Ordering::SeqCst);
        let reported = self.generation.clone();
        let request = Request {
            bytes,
            sync,
            first,
            generation,
            reply,
        };
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
                Ok(Err(e)) => {
                    // Reported: buffers handed over from now on belong to the rewrite.
                    reported.fetch_max(generation + 1, std::sync::atomic::Ordering::SeqCst);
                    Err(ComponentError::from_classified(
                        format!("{what}: write failed"),
                        ClassifiedIo(e),
                    ))
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts writes; its syncer records, for each sync, how many writes had completed when it
    /// started.
    struct Recorder {
        writes: Arc<AtomicUsize>,
        sync_starts: Arc<Mutex<Vec<usize>>>,
    }

    impl Target for Recorder {
        fn write_all(&mut self, _: &[u8]) -> std::io::Result<()> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn sync(&mut self) -> std::io::Result<()> {
            Err(std::io::Error::other("the syncer thread syncs"))
        }
        fn syncer(&self) -> Option<Syncer> {
            let (writes, starts) = (self.writes.clone(), self.sync_starts.clone());
            Some(Box::new(move || {
                let written = writes.load(Ordering::SeqCst);
                if let Ok(mut s) = starts.lock() {
                    s.push(written);
                }
                std::thread::yield_now();
                Ok(())
            }))
        }
    }

    #[test]
    fn a_synced_write_is_answered_after_a_sync_that_started_after_it() {
        let writes = Arc::new(AtomicUsize::new(0));
        let sync_starts = Arc::new(Mutex::new(Vec::new()));
        let target = Recorder {
            writes: writes.clone(),
            sync_starts: sync_starts.clone(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        runtime.block_on(async {
            let writer = WriterThread::spawn("test".to_owned(), target)
                .unwrap_or_else(|e| panic!("spawn: {e}"));
            let mut deliveries = Vec::new();
            for i in 0..40 {
                // Every third buffer asks for durability, as a batch's last chunk does.
                let sync = i % 3 == 2;
                let delivery = writer
                    .submit(vec![b'x'; 10], true, sync)
                    .await
                    .unwrap_or_else(|e| panic!("submit: {e}"));
                deliveries.push((i, sync, delivery));
            }
            for (i, sync, delivery) in deliveries {
                delivery
                    .await
                    .unwrap_or_else(|e| panic!("delivery {i}: {e}"));
                let covered = sync_starts
                    .lock()
                    .map(|s| s.iter().copied().max().unwrap_or(0))
                    .unwrap_or(0);
                if sync {
                    assert!(covered > i, "buffer {i} answered before a sync covered it");
                }
            }
        });
        assert_eq!(writes.load(Ordering::SeqCst), 40);
    }

    #[test]
    fn files_are_synced_from_the_sync_thread() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("out.jsonl");
        let file = std::fs::File::create(&path)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let writer = WriterThread::spawn("test".to_owned(), file)
                .unwrap_or_else(|e| panic!("spawn: {e}"));
            let mut deliveries = Vec::new();
            for i in 0..5u8 {
                deliveries.push(
                    writer
                        .submit(vec![b'a' + i, b'\n'], true, i % 2 == 0)
                        .await
                        .unwrap_or_else(|e| panic!("submit: {e}")),
                );
            }
            for d in deliveries {
                d.await.unwrap_or_else(|e| panic!("delivery: {e}"));
            }
        });
        assert_eq!(std::fs::read_to_string(&path)?, "a\nb\nc\nd\ne\n");
        Ok(())
    }

    /// Keeps bytes in memory; the write number `fail_at` stores half its bytes, then fails.
    struct Flaky {
        data: Arc<Mutex<Vec<u8>>>,
        writes: usize,
        fail_at: usize,
    }

    impl Target for Flaky {
        fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
            self.writes += 1;
            let mut data = self.data.lock().unwrap_or_else(|e| e.into_inner());
            if self.writes == self.fail_at {
                data.extend_from_slice(&bytes[..bytes.len() / 2]);
                return Err(std::io::Error::from_raw_os_error(28));
            }
            data.extend_from_slice(bytes);
            Ok(())
        }
        fn sync(&mut self) -> std::io::Result<()> {
            Ok(())
        }
        fn rewind(&mut self, len: u64) -> std::io::Result<()> {
            self.data
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .truncate(len as usize);
            Ok(())
        }
    }

    /// Batch B fails halfway through its second buffer while batch C is already queued: B's
    /// first buffer and the fragment are cut, B's third buffer and C are refused, and the
    /// rewrite of B and C (as the runtime does it) leaves exactly A, B, C.
    #[test]
    fn a_failed_write_is_cut_back_and_the_rewrite_follows_the_last_good_batch() {
        let data = Arc::new(Mutex::new(Vec::new()));
        let target = Flaky {
            data: data.clone(),
            writes: 0,
            fail_at: 3,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        runtime.block_on(async {
            let writer = WriterThread::spawn("test".to_owned(), target)
                .unwrap_or_else(|e| panic!("spawn: {e}"));
            let submit = |bytes: &[u8], first: bool| writer.submit(bytes.to_vec(), first, true);
            let a = submit(b"a1\n", true)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let b = [
                submit(b"b1\n", true)
                    .await
                    .unwrap_or_else(|e| panic!("{e}")),
                submit(b"b2-long\n", false)
                    .await
                    .unwrap_or_else(|e| panic!("{e}")),
                submit(b"b3\n", false)
                    .await
                    .unwrap_or_else(|e| panic!("{e}")),
            ];
            let c = submit(b"c1\n", true)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(a.await.is_ok());
            let [b1, b2, b3] = b;
            assert!(b1.await.is_ok());
            assert!(b2.await.is_err());
            assert!(b3.await.is_err(), "a buffer after the failure is refused");
            assert!(
                c.await.is_err(),
                "a batch queued before the report is refused"
            );
            for (bytes, first) in [
                (&b"b1\n"[..], true),
                (b"b2-long\n", false),
                (b"b3\n", false),
                (b"c1\n", true),
            ] {
                let d = submit(bytes, first).await.unwrap_or_else(|e| panic!("{e}"));
                d.await.unwrap_or_else(|e| panic!("rewrite: {e}"));
            }
        });
        let data = data.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(String::from_utf8_lossy(&data), "a1\nb1\nb2-long\nb3\nc1\n");
    }
}
