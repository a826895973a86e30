//! The SQLite source's steps as the kit's driver runs them
//! ([`sluice_kit::lifecycle::drive`]). SQLite calls block, so each step's reading runs on a
//! reader thread of its own while this side emits the batches it sends, hands it the signals
//! of the `file`, `http` and `kafka` channels, and tells it what was committed (for the
//! purge); the connection and the captured tables go to the thread and come back with its
//! result.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::Connection;
use sluice_engine::event::BatchCut;
use sluice_engine::{Batch, ComponentError, SourceContext};
use sluice_kit::lifecycle::Prepared;
use sluice_kit::signal::{Channels, Received};
use sluice_kit::snapshot::{Plan, Stored};

use super::table::Table;
use super::{capture, fatal, sql_error, Offset, Out, SqliteSource};

/// The reader's connection and the captured tables, handed to the reader thread for each step
/// and back.
pub(super) struct Reader {
    pub(super) conn: Connection,
    pub(super) tables: Vec<Table>,
}

/// What the snapshot, the resume and the stream share.
pub struct Capture {
    /// `None` while a step's thread holds it.
    reader: Option<Reader>,
    /// The committed position.
    resume: Option<Offset>,
    pump: Pump,
}

/// How forwarding a step ended.
enum Forwarded<T> {
    /// The step returned this, and everything it sent was emitted.
    Done(T),
    /// The pipeline stopped first (with what the step returned, if it had).
    Stopped(Option<T>),
}

/// The reader's side of the steps: where its batches go, its signals, its purge requests.
struct Pump {
    out: Arc<Out>,
    rx: tokio::sync::mpsc::Receiver<Batch>,
    stop: Arc<AtomicBool>,
    /// The newest committed change sequence the reader may purge up to.
    purge: Arc<Mutex<Option<i64>>>,
    channels: Channels,
    signal_tx: crossbeam_channel::Sender<Vec<Received>>,
    signals: crossbeam_channel::Receiver<Vec<Received>>,
}

/// What a step's work gets on the reader thread.
#[derive(Clone, Copy)]
pub(super) struct Work<'a> {
    pub(super) out: &'a Out,
    pub(super) signals: &'a crossbeam_channel::Receiver<Vec<Received>>,
    pub(super) purge: &'a Mutex<Option<i64>>,
}

#[async_trait]
impl sluice_kit::lifecycle::DatabaseSource for SqliteSource {
    type Reached = ();
    type Prepared = Capture;
    /// The change sequence the stream goes on after.
    type From = i64;
    type Error = ComponentError;

    fn connector(&self) -> &'static str {
        "sqlite"
    }

    fn common_mut(&mut self) -> &mut sluice_kit::config::SourceCommon {
        &mut self.config.common
    }

    /// The database opens.
    async fn reach(&mut self, _ctx: &mut SourceContext) -> Result<(), ComponentError> {
        self.open().map(drop)
    }

    async fn prepare(
        &mut self,
        (): (),
        ctx: &mut SourceContext,
    ) -> Result<Prepared<Capture>, ComponentError> {
        let resume: Option<Offset> = (ctx.resume_from())
            .map(|p| Offset::parse(p, "sqlite"))
            .transpose()
            .map_err(|e| ComponentError::from_classified(e.to_string(), e))?;
        // SQLite calls block (up to the busy timeout): off the runtime's threads.
        let source = self.clone();
        let opened = tokio::task::spawn_blocking(move || {
            let conn = source.open()?;
            let tables = source.tables(&conn)?;
            Ok::<_, ComponentError>(Reader { conn, tables })
        });
        let reader =
            (opened.await).map_err(|e| fatal(format!("reading the capture tables: {e}")))??;
        let pump = Pump::open(self, ctx).await?;
        let stored = Stored {
            offset: resume.is_some(),
            snapshot_completed: resume.as_ref().is_some_and(|r| r.at.snapshot_completed),
            position_available: true,
            history_available: true,
        };
        let state = Capture {
            reader: Some(reader),
            resume,
            pump,
        };
        Ok(Prepared {
            state,
            stored,
            lost: "the change tables were reset".to_owned(),
        })
    }

    async fn snapshot(
        &mut self,
        state: &mut Capture,
        _plan: &Plan,
        ctx: &mut SourceContext,
    ) -> Result<Option<i64>, ComponentError> {
        let reader = self.clone();
        let cut_off = state.resume.as_ref().map(|r| r.at.seq);
        state
            .step(self, ctx, move |mut held, work| {
                let seq = reader.snapshot(&mut held.conn, &held.tables, work.out, cut_off);
                (held, seq)
            })
            .await
    }

    async fn resume(
        &mut self,
        state: &mut Capture,
        _plan: &Plan,
        ctx: &mut SourceContext,
    ) -> Result<Option<i64>, ComponentError> {
        let stored = state.resume.as_ref().map(|r| r.at.seq);
        state
            .step(self, ctx, move |held, _| {
                let seq = match stored {
                    Some(seq) => Ok(seq),
                    None => (capture::clock(&held.conn))
                        .map_err(|e| sql_error("reading the change sequence", e)),
                };
                (held, seq.map(Some))
            })
            .await
    }

    async fn stream(
        &mut self,
        mut state: Capture,
        seq: i64,
        ctx: &mut SourceContext,
    ) -> Result<(), ComponentError> {
        let reader = self.clone();
        let progress = state.resume.take().and_then(|r| r.incremental);
        let streamed = state
            .step(self, ctx, move |mut held, work| {
                let done = reader.stream_from(&mut held, seq, progress, &work);
                (held, done.map(|()| None::<()>))
            })
            .await;
        streamed.map(drop)
    }
}

impl Capture {
    /// Runs `work` with the reader on a thread of its own until it returns, emitting what it
    /// sends meanwhile; its result, `None` once the pipeline stops (the thread then stops
    /// too).
    async fn step<R: Send + 'static>(
        &mut self,
        source: &SqliteSource,
        ctx: &mut SourceContext,
        job: impl FnOnce(Reader, Work<'_>) -> (Reader, Result<Option<R>, ComponentError>)
            + Send
            + 'static,
    ) -> Result<Option<R>, ComponentError> {
        let held = (self.reader.take()).ok_or_else(|| fatal("the SQLite reader is gone"))?;
        let (out, signals, purge) = (
            self.pump.out.clone(),
            self.pump.signals.clone(),
            self.pump.purge.clone(),
        );
        let (done_tx, mut done_rx) = tokio::sync::oneshot::channel();
        // The reader logs inside the stage's span (pipeline, component).
        let span = tracing::Span::current();
        let thread = std::thread::Builder::new()
            .name("sqlite-reader".into())
            .spawn(move || {
                let _stage = span.enter();
                let work = Work {
                    out: &out,
                    signals: &signals,
                    purge: &purge,
                };
                let _ = done_tx.send(job(held, work));
            })
            .map_err(|e| fatal(format!("cannot start the SQLite reader thread: {e}")))?;
        let ended = self.pump.forward(source, ctx, &mut done_rx).await;
        if !matches!(ended, Ok(Forwarded::Done(_))) {
            // The reader sees the stop (or the closed channel) within one poll.
            self.pump.stop.store(true, Ordering::Relaxed);
            self.pump.rx.close();
        }
        let joined = tokio::task::spawn_blocking(move || thread.join())
            .await
            .map_err(|e| fatal(format!("the SQLite reader thread: {e}")))?;
        if joined.is_err() {
            return Err(fatal("the SQLite reader thread panicked"));
        }
        // What the reader ended with, when it did not finish its step: its error comes first
        // (before the channel's, as the stop it caused).
        let left = |result: Option<(Reader, Result<Option<R>, ComponentError>)>| match result {
            Some((_, Err(e))) => Err(e),
            _ => Ok(None),
        };
        match ended {
            Ok(Forwarded::Done((held, result))) => {
                self.reader = Some(held);
                result
            }
            Ok(Forwarded::Stopped(result)) => left(result.or_else(|| done_rx.try_recv().ok())),
            Err(e) => left(done_rx.try_recv().ok()).and(Err(e)),
        }
    }
}

impl Pump {
    /// The batch queue (bounded: a full queue stops the reader) and the signal channels, with
    /// the signals already waiting (a file's lines) queued for the reader's first look.
    async fn open(source: &SqliteSource, ctx: &mut SourceContext) -> Result<Self, ComponentError> {
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let stop = Arc::new(AtomicBool::new(false));
        let out = Arc::new(Out {
            tx,
            cut: BatchCut::for_limits(ctx.limits()),
            stop: stop.clone(),
            plan: ctx.snapshot_plan(),
            committed: ctx.committed(),
            commit_soon: ctx.commit_soon(),
        });
        let mut channels = Channels::open(&source.config.common, ctx)
            .await
            .map_err(|e| ComponentError::from_classified(e.to_string(), e))?;
        let (signal_tx, signals) = crossbeam_channel::unbounded();
        let waiting = channels.take();
        for r in &waiting {
            channels.handled(r);
        }
        if !waiting.is_empty() {
            // The receiver is ours: the send cannot fail.
            let _ = signal_tx.send(waiting);
        }
        Ok(Pump {
            out,
            rx,
            stop,
            purge: Arc::new(Mutex::new(None)),
            channels,
            signal_tx,
            signals,
        })
    }

    /// Emits the reader's batches and hands it the channels' signals until `done` says its
    /// step returned (the batches it sent before go out first), or the pipeline stops.
    async fn forward<T>(
        &mut self,
        source: &SqliteSource,
        ctx: &mut SourceContext,
        done: &mut tokio::sync::oneshot::Receiver<T>,
    ) -> Result<Forwarded<T>, ComponentError> {
        let mut committed = ctx.committed();
        loop {
            tokio::select! {
                _ = ctx.stopping() => return Ok(Forwarded::Stopped(None)),
                received = self.channels.next_batch(), if !self.channels.is_empty() => {
                    let received = received
                        .map_err(|e| ComponentError::from_classified(e.to_string(), e))?;
                    for r in &received {
                        self.channels.handled(r);
                    }
                    if self.signal_tx.send(received).is_err() {
                        return Ok(Forwarded::Stopped(None));
                    }
                }
                batch = self.rx.recv() => match batch {
                    Some(batch) => {
                        if ctx.emit(batch).await.is_err() {
                            return Ok(Forwarded::Stopped(None));
                        }
                    }
                    None => return Ok(Forwarded::Stopped(None)),
                },
                changed = committed.changed() => {
                    if changed.is_ok() && source.config.purge {
                        let done = committed.borrow_and_update().clone();
                        if let Some(Ok(offset)) = done.map(|p| Offset::parse(&p, "sqlite")) {
                            if offset.at.snapshot_completed {
                                if let Ok(mut p) = self.purge.lock() {
                                    *p = Some(offset.at.seq);
                                }
                            }
                        }
                    }
                }
                result = &mut *done => {
                    let Ok(result) = result else {
                        return Err(fatal("the SQLite reader thread panicked"));
                    };
                    while let Ok(batch) = self.rx.try_recv() {
                        if ctx.emit(batch).await.is_err() {
                            return Ok(Forwarded::Stopped(Some(result)));
                        }
                    }
                    return Ok(Forwarded::Done(result));
                }
            }
        }
    }
}
