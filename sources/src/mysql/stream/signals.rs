//! What the stream does between binlog events for signals: the `file` and `http` channels,
//! the incremental snapshot's chunks and windows, and blocking snapshots.

use mysql_async::prelude::Queryable;
use sluice_engine::{Position, SourceContext};

use super::{captured, State};
use crate::mysql::error::MysqlError;
use crate::mysql::incremental::BinlogPos;
use crate::mysql::MysqlSource;
use sluice_kit::incremental::Step;

impl MysqlSource {
    /// Between binlog events: the `file` and `http` channels' signals, then (between
    /// transactions) the incremental snapshot's chunk out of its window once the stream has
    /// passed its position, and the next chunks read while the stream stays there.
    pub(super) async fn incremental_step(
        &self,
        state: &mut State<'_>,
        ctx: &mut SourceContext,
    ) -> Result<(), MysqlError> {
        // Between transactions only: a blocking snapshot they ask for then runs at once, with
        // the position after the last transaction.
        if state.between_transactions() {
            let received = state.inc.channels.take();
            let snapshot = |r: &sluice_kit::signal::Received| {
                sluice_kit::signal::from_json_line(&r.line)
                    .is_ok_and(|s| s.kind == "execute-snapshot")
            };
            if received.iter().any(snapshot) {
                // Not fatal: the signal then selects the tables the stream knows.
                if let Err(e) = self.meet_tables(state).await {
                    tracing::warn!(error = %e, "Cannot describe the captured tables the stream has not met; a snapshot signal selects the ones it knows.");
                }
            }
            let tables = captured(&state.by_name, &state.mapped, &state.late);
            if self.channel_signals(received, &tables, &mut state.inc) {
                state.out.window = None;
            }
        }
        let tables = captured(&state.by_name, &state.mapped, &state.late);
        if state.between_transactions() && state.inc.blocking.is_some() {
            let at = state.out.done_position();
            return self.run_blocking(state, at, ctx).await;
        }
        let between = state.between_transactions();
        let out = &mut state.out;
        if between {
            // A few chunks at a time, so that the binlog is read in between.
            for _ in 0..16 {
                if let Some(window) = &out.window {
                    if !window.passed_by(&BinlogPos::new(&state.file, state.last_end)) {
                        break;
                    }
                }
                if let Some(window) = out.window.take() {
                    let rows = window.close(&mut state.inc.tracker);
                    out.progress = state.inc.tracker.delivered_json().map(ToOwned::to_owned);
                    let at = out.done_position();
                    for e in state.inc.tracker.around(rows, |_| at.clone()) {
                        out.push(e);
                    }
                    out.send(at, ctx).await;
                    continue;
                }
                if !state.inc.tracker.wants_chunk() {
                    break;
                }
                match self.read_chunk(&mut state.inc, &tables, &out.done).await? {
                    Step::Window(window) => out.window = Some(*window),
                    Step::Passed => {}
                    Step::Later => break,
                }
            }
        }
        out.progress = state.inc.tracker.delivered_json().map(ToOwned::to_owned);
        let at = out.done_position();
        let notes = state.inc.tracker.around(Vec::new(), |_| at.clone());
        if !notes.is_empty() {
            for e in notes {
                out.push(e);
            }
            if between {
                out.send(at, ctx).await;
            }
        }
        Ok(())
    }

    /// The captured tables the stream has not met, described from the server now (see
    /// `State::late`); the ones met before are described again (they may have changed). Every
    /// captured table the stream did not start with is described (a TABLE_MAP seen since is
    /// forgotten at the next rotation); one that cannot be is left out, with a warning.
    pub(super) async fn meet_tables(&self, state: &mut State<'_>) -> Result<(), MysqlError> {
        let conn = match &mut state.lookup {
            Some(conn) => conn,
            None => state.lookup.insert(self.connect().await?),
        };
        let names: Vec<(String, String)> = conn
            .query("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED') ORDER BY TABLE_SCHEMA, TABLE_NAME")
            .await
            .map_err(|e| MysqlError::query("listing the tables", e))?;
        let unmet: Vec<(String, String)> = names
            .into_iter()
            .filter(|(d, t)| self.config.selects(d, t))
            .filter(|(d, t)| !state.by_name.contains_key(&(d.as_str(), t.as_str())))
            .collect();
        let mut late = Vec::with_capacity(unmet.len());
        for (db, name) in unmet {
            let modelled =
                (state.schemas.model.known(&db, &name)).map(|(k, t)| (k.1.clone(), t.clone()));
            match self
                .table(conn, db.clone(), name.clone(), modelled.as_ref())
                .await
            {
                Ok(table) => late.push(table),
                Err(e) => {
                    tracing::warn!(table = %format!("{db}.{name}"), error = %e, "A captured table cannot be described; a snapshot signal cannot select it.")
                }
            }
        }
        state.late = late;
        Ok(())
    }

    /// Runs the blocking snapshot the signals asked for, if any: rows at `before`, the last
    /// batch at the position after the last committed transaction.
    pub(super) async fn run_blocking(
        &self,
        state: &mut State<'_>,
        before: Position,
        ctx: &mut SourceContext,
    ) -> Result<(), MysqlError> {
        let Some(request) = state.inc.blocking.take() else {
            return Ok(());
        };
        let after = state.out.done_position();
        let tables = captured(&state.by_name, &state.mapped, &state.late);
        match self
            .blocking_snapshot(request, &tables, (before, after.clone()), ctx)
            .await
        {
            Ok(()) => {}
            // The server refused a statement (an `additional-conditions` filter it cannot
            // read, a server without the snapshot's position): the signal will never work,
            // so the stream goes on past it rather than read it again at every restart.
            Err(e @ (MysqlError::Setup(_) | MysqlError::Value(_)))
            | Err(
                e @ MysqlError::Query {
                    source: mysql_async::Error::Server(_),
                    ..
                },
            ) => {
                tracing::warn!(notification = "ABORTED", error = %e, "Blocking snapshot failed; the stream goes on without it.");
                let _ = ctx
                    .emit(sluice_engine::Batch {
                        events: Vec::new(),
                        position: Some(after.clone()),
                    })
                    .await;
            }
            Err(e) => return Err(e),
        }
        state.out.sent = after;
        Ok(())
    }
}
