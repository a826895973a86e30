//! Heartbeats of the SQLite source (`heartbeat.interval.ms`): between polls, when one is due,
//! `heartbeat.action.query` runs on the database (an insert into a captured table keeps the
//! change sequence moving) and the kit's heartbeat record goes out at the current position.

use std::time::{Duration, Instant};

use rusqlite::Connection;
use sluice_engine::{Batch, Position};
use sluice_kit::records::heartbeat::Heartbeats;

use super::Out;

/// When heartbeats are due and what they say.
pub(super) struct Beat {
    records: Heartbeats,
    every: Duration,
    next: Instant,
    query: Option<String>,
}

impl Beat {
    /// Heartbeats for these options, when `heartbeat.interval.ms` is set.
    pub(super) fn new(common: &sluice_kit::config::SourceCommon) -> Option<Self> {
        (common.heartbeat_interval_ms > 0).then(|| {
            let every = Duration::from_millis(common.heartbeat_interval_ms);
            Beat {
                records: Heartbeats::new(&common.heartbeat_topic_prefix, &common.topic_prefix),
                every,
                next: Instant::now() + every,
                query: common.heartbeat_action_query.clone(),
            }
        })
    }

    /// Sends a heartbeat at `position` when one is due; `false` once the source is stopping.
    pub(super) fn tick(&mut self, conn: &Connection, position: Position, out: &Out) -> bool {
        if Instant::now() < self.next {
            return true;
        }
        self.next = Instant::now() + self.every;
        if let Some(query) = &self.query {
            if let Err(e) = conn.execute_batch(query) {
                tracing::warn!(error = %e, "heartbeat.action.query failed.");
            }
        }
        let ts_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        out.send(Batch {
            events: vec![self.records.event(ts_ms, position.clone())],
            position: Some(position),
        })
    }
}
