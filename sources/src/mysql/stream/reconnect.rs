//! A binlog connection the server dropped (a sink stalled past `net_write_timeout`, a network
//! cut, a server restart) is opened again by the source from the event the stream got to, as
//! Debezium's binlog client does under `connect.keep.alive`: inside a transaction from its
//! first event, with the events already handled skipped (as after a restart inside it), else
//! from the next event. Nothing is sent twice; the pipeline does not restart. Attempts back off
//! up to `connect.keep.alive.interval.ms`; then the error goes to the pipeline, which restarts
//! the source from its committed position.

use std::time::{Duration, Instant};

use mysql_async::BinlogStream;
use sluice_engine::{Classify, ErrorClass, SourceContext};

use super::State;
use crate::mysql::error::MysqlError;
use crate::mysql::{MysqlOffset, MysqlSource};

/// Server errors that say the connection was cut rather than the request refused: net read
/// or write interrupted or timed out (1159, 1160, 1161), the server shutting down (1053), the
/// connection killed (1927, MariaDB's `ER_CONNECTION_KILLED`).
const CUT: [u16; 5] = [1053, 1159, 1160, 1161, 1927];

/// Whether `e` (`None`: the server ended the stream) is a dropped connection.
pub(super) fn dropped(e: Option<&mysql_async::Error>) -> bool {
    match e {
        None | Some(mysql_async::Error::Io(_)) => true,
        Some(mysql_async::Error::Driver(mysql_async::DriverError::ConnectionClosed)) => true,
        Some(mysql_async::Error::Server(s)) => CUT.contains(&s.code),
        Some(_) => false,
    }
}

impl State<'_> {
    /// Where the stream reads again after its connection dropped: the open transaction's
    /// first event with the events handled so far skipped (their rows placed already), else
    /// the next event. The open transaction is forgotten: reading it again begins it again.
    fn reconnect_point(&mut self) -> MysqlOffset {
        let gtids = self.out.gtids_text.clone();
        match self.out.tx.take() {
            Some(tx) => {
                // Every event up to the current one was handled whole; a restart's skip not
                // reached yet still holds.
                let (event, row) = tx
                    .skip
                    .map_or((tx.event + 1, 0), |skip| skip.max((tx.event + 1, 0)));
                let from = MysqlOffset {
                    file: tx.file,
                    pos: tx.pos,
                    event,
                    row,
                    gtids,
                    snapshot_completed: true,
                };
                self.resume = Some(from.clone());
                from
            }
            None => MysqlOffset {
                file: self.file.clone(),
                pos: self.last_end,
                event: 0,
                row: 0,
                gtids,
                snapshot_completed: true,
            },
        }
    }
}

impl MysqlSource {
    /// Opens the dropped binlog connection again (see the module's documentation); `cause`
    /// says why it dropped. `Err(MysqlError::Stopped)` when the pipeline stops meanwhile.
    pub(super) async fn reopen(
        &self,
        state: &mut State<'_>,
        cause: &str,
        ctx: &mut SourceContext,
    ) -> Result<BinlogStream, MysqlError> {
        let from = state.reconnect_point();
        // The new stream starts at `from` (its first rotate names no file: see
        // `rotated_file`), as a stream started there does.
        state.file_value = from.file.as_str().into();
        state.file.clone_from(&from.file);
        state.last_end = from.pos;
        state.gtid = None;
        state.seen_format = false;
        state.first_rotate = None;
        // The other connections are likely gone too (a server restart): opened when next used.
        state.lookup = None;
        state.inc.drop_connection();
        tracing::warn!(%cause, file = %from.file, pos = from.pos, event = from.event, "The binlog connection dropped; reconnecting from the event the stream got to.");
        let deadline = Instant::now() + Duration::from_millis(self.config.keep_alive_interval_ms);
        let mut wait = Duration::from_millis(100);
        // A connection dropped again soon after it was opened (a server or proxy that takes
        // it and drops it): wait before trying again.
        if state
            .reopened
            .is_some_and(|t| t.elapsed() < Duration::from_secs(10))
        {
            tokio::select! {
                _ = ctx.stopping() => return Err(MysqlError::Stopped),
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
        loop {
            let opened = tokio::select! {
                _ = ctx.stopping() => return Err(MysqlError::Stopped),
                opened = self.open_binlog(&from, false) => opened,
            };
            match opened {
                Ok((stream, charsets, _, _)) => {
                    state.charsets = charsets;
                    state.reopened = Some(Instant::now());
                    tracing::info!(file = %from.file, pos = from.pos, "Binlog connection open again.");
                    return Ok(stream);
                }
                Err(e)
                    if e.class() == ErrorClass::Retryable && Instant::now() + wait < deadline =>
                {
                    tracing::warn!(error = %e, retry_in = ?wait, "Reconnecting to the binlog failed; trying again.");
                    tokio::select! {
                        _ = ctx.stopping() => return Err(MysqlError::Stopped),
                        _ = tokio::time::sleep(wait) => {}
                    }
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::dropped;

    #[test]
    fn cut_connections_are_told_from_refusals() {
        let io = mysql_async::Error::Io(mysql_async::IoError::Io(std::io::Error::from(
            std::io::ErrorKind::UnexpectedEof,
        )));
        assert!(dropped(Some(&io)));
        assert!(dropped(None));
        let server = |code| {
            mysql_async::Error::Server(mysql_async::ServerError {
                code,
                message: String::new(),
                state: String::new(),
            })
        };
        assert!(dropped(Some(&server(1161))));
        // The binlog position gone, access denied: reconnecting will not help.
        assert!(!dropped(Some(&server(1236))));
        assert!(!dropped(Some(&server(1045))));
    }
}
