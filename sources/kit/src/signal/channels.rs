//! The channels a signal arrives by besides the source's own log (`file`, `http`, `kafka`),
//! opened from the shared options and read together, so that every source has every one of
//! them. The `source` channel (rows of the signaling table) is read from the source's own log
//! ([`super::from_insert`]).
//!
//! A source either waits for the next signal ([`Channels::next`], a `select!` arm of its
//! stream) or looks between log events ([`Channels::take`]); either way it says when a signal
//! was handled ([`Channels::handled`]), which commits the `kafka` channel's offset.

use std::collections::VecDeque;

use tokio::sync::mpsc;

use super::{from_json_line, PolledFile, Signal};
use crate::config::SourceCommon;

/// Why the channels cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// The configuration cannot work (the `http` channel without the admin endpoint, a build
    /// without the `kafka` channel): fatal.
    #[error("{0}")]
    Setup(String),
    /// The `kafka` channel's brokers cannot be reached or read: retryable.
    #[cfg(feature = "kafka-signals")]
    #[error(transparent)]
    Kafka(#[from] super::kafka::KafkaSignalError),
}

impl sluice_engine::Classify for ChannelError {
    fn class(&self) -> sluice_engine::ErrorClass {
        match self {
            ChannelError::Setup(_) => sluice_engine::ErrorClass::Fatal,
            #[cfg(feature = "kafka-signals")]
            ChannelError::Kafka(_) => sluice_engine::ErrorClass::Retryable,
        }
    }
}

/// One signal line as a channel delivered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// `file`, `http` or `kafka`.
    pub channel: &'static str,
    /// The signal as JSON (`{"id": .., "type": .., "data": ..}`).
    pub line: String,
    /// The `kafka` record's offset, committed once the signal was handled.
    offset: Option<i64>,
}

impl Received {
    /// The signal; a malformed line is logged with its channel and gives `None`.
    pub fn signal(&self) -> Option<Signal> {
        match from_json_line(&self.line) {
            Ok(signal) => Some(signal),
            Err(reason) => {
                tracing::warn!(channel = self.channel, %reason, line = %self.line, "Signal refused.");
                None
            }
        }
    }
}

/// The `file`, `http` and `kafka` channels of one source (those `signal.enabled.channels`
/// turns on).
pub struct Channels {
    file: Option<PolledFile>,
    http: Option<tokio::sync::OwnedMutexGuard<mpsc::Receiver<String>>>,
    #[cfg(feature = "kafka-signals")]
    kafka: Option<super::kafka::KafkaSignals>,
    /// Lines read from the file and not returned yet.
    ready: VecDeque<Received>,
}

impl std::fmt::Debug for Channels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channels")
            .field("file", &self.file.is_some())
            .field("http", &self.http.is_some())
            .field("kafka", &self.has_kafka())
            .finish()
    }
}

impl Channels {
    /// Opens the channels `common` turns on: the admin endpoint's queue (`http`; `Err` says how
    /// to turn the endpoint on when it is off), the topic (`kafka`: connected, created when
    /// missing), the file (`file`, read every `signal.poll.interval.ms`).
    pub async fn open(
        common: &SourceCommon,
        ctx: &sluice_engine::SourceContext,
    ) -> Result<Self, ChannelError> {
        let http = match super::http_queue(common, ctx).map_err(ChannelError::Setup)? {
            Some(queue) => Some(queue.lock_owned().await),
            None => None,
        };
        #[cfg(feature = "kafka-signals")]
        let kafka = match common.kafka_signals() {
            Some(settings) => Some(super::kafka::KafkaSignals::connect(settings).await?),
            None => None,
        };
        #[cfg(not(feature = "kafka-signals"))]
        if common.kafka_signals().is_some() {
            return Err(ChannelError::Setup(
                "this build of sluice has no `kafka` signal channel (build it with the `kafka` feature)".into(),
            ));
        }
        Ok(Channels {
            file: PolledFile::new(common),
            http,
            #[cfg(feature = "kafka-signals")]
            kafka,
            ready: VecDeque::new(),
        })
    }

    /// No channel: for a partition whose signals the source routes to it.
    pub fn none() -> Self {
        Channels {
            file: None,
            http: None,
            #[cfg(feature = "kafka-signals")]
            kafka: None,
            ready: VecDeque::new(),
        }
    }

    /// No channel at all: [`Self::next`] would wait forever.
    pub fn is_empty(&self) -> bool {
        self.file.is_none() && self.http.is_none() && !self.has_kafka()
    }

    fn has_kafka(&self) -> bool {
        #[cfg(feature = "kafka-signals")]
        return self.kafka.is_some();
        #[cfg(not(feature = "kafka-signals"))]
        false
    }

    fn queue_file_lines(&mut self, lines: Vec<String>) {
        self.ready.extend(lines.into_iter().map(|line| Received {
            channel: "file",
            line,
            offset: None,
        }));
    }

    /// What the channels hold now, without waiting: the file's new lines when a read is due,
    /// the lines the admin endpoint queued, the `kafka` records already fetched.
    pub fn take(&mut self) -> Vec<Received> {
        if let Some(lines) = self.file.as_mut().map(PolledFile::poll) {
            self.queue_file_lines(lines);
        }
        let mut out: Vec<Received> = self.ready.drain(..).collect();
        if let Some(rx) = self.http.as_mut() {
            while let Ok(line) = rx.try_recv() {
                out.push(http_line(line));
            }
        }
        #[cfg(feature = "kafka-signals")]
        if let Some(kafka) = &self.kafka {
            // Polled once: a record not fetched yet comes at the next look.
            while let Some(record) = futures_util::FutureExt::now_or_never(kafka.next()) {
                match record {
                    Ok((line, offset)) => out.push(Received {
                        channel: "kafka",
                        line,
                        offset: Some(offset),
                    }),
                    Err(e) => {
                        tracing::warn!(error = %e, "The kafka signal channel failed to read.");
                        break;
                    }
                }
            }
        }
        out
    }

    /// The next signal of any channel, waiting for it (cancel-safe: nothing read is lost when
    /// the future is dropped). `Err`: the `kafka` channel failed.
    pub async fn next(&mut self) -> Result<Received, ChannelError> {
        loop {
            if let Some(received) = self.ready.pop_front() {
                return Ok(received);
            }
            let due = self.file.as_ref().map(PolledFile::due);
            let http = &mut self.http;
            #[cfg(feature = "kafka-signals")]
            let kafka = self.kafka.as_ref();
            #[cfg(not(feature = "kafka-signals"))]
            let kafka: Option<&()> = None;
            let woke = tokio::select! {
                _ = async {
                    match due {
                        Some(at) => tokio::time::sleep_until(at.into()).await,
                        None => std::future::pending().await,
                    }
                } => Woke::File,
                line = async {
                    match http.as_mut() {
                        Some(rx) => rx.recv().await,
                        None => std::future::pending().await,
                    }
                } => Woke::Http(line),
                record = kafka_next(kafka) => Woke::Kafka(record?),
            };
            match woke {
                Woke::File => {
                    if let Some(lines) = self.file.as_mut().map(PolledFile::poll) {
                        self.queue_file_lines(lines);
                    }
                }
                Woke::Http(Some(line)) => return Ok(http_line(line)),
                // The endpoint is gone (the pipeline stops): no more from it.
                Woke::Http(None) => self.http = None,
                Woke::Kafka((line, offset)) => {
                    return Ok(Received {
                        channel: "kafka",
                        line,
                        offset: Some(offset),
                    })
                }
            }
        }
    }

    /// The next signals: waits for one ([`Self::next`]), then takes what else the channels
    /// hold ([`Self::take`]), so that signals written together are carried out together
    /// (a file's lines, say: `execute-snapshot` then `pause-snapshot` pauses before any chunk).
    /// Cancel-safe.
    pub async fn next_batch(&mut self) -> Result<Vec<Received>, ChannelError> {
        let first = self.next().await?;
        let mut all = vec![first];
        all.extend(self.take());
        Ok(all)
    }

    /// `received` was carried out: the `kafka` channel commits past its record, so a restart
    /// does not read it again.
    pub fn handled(&self, received: &Received) {
        #[cfg(feature = "kafka-signals")]
        if let (Some(kafka), Some(offset)) = (&self.kafka, received.offset) {
            kafka.commit(offset);
        }
        #[cfg(not(feature = "kafka-signals"))]
        let _ = received;
    }
}

/// What woke [`Channels::next`].
enum Woke {
    File,
    Http(Option<String>),
    Kafka((String, i64)),
}

#[cfg(feature = "kafka-signals")]
async fn kafka_next(
    kafka: Option<&super::kafka::KafkaSignals>,
) -> Result<(String, i64), ChannelError> {
    match kafka {
        Some(kafka) => Ok(kafka.next().await?),
        None => std::future::pending().await,
    }
}

#[cfg(not(feature = "kafka-signals"))]
async fn kafka_next(_: Option<&()>) -> Result<(String, i64), ChannelError> {
    std::future::pending().await
}

fn http_line(line: String) -> Received {
    Received {
        channel: "http",
        line,
        offset: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_line_gives_no_signal() {
        let bad = Received {
            channel: "file",
            line: "{not json".into(),
            offset: None,
        };
        assert_eq!(bad.signal(), None);
        let good = Received {
            channel: "http",
            line: r#"{"id":"a","type":"log","data":{"message":"hi"}}"#.into(),
            offset: None,
        };
        assert_eq!(good.signal().map(|s| s.kind), Some("log".to_owned()));
    }
}
