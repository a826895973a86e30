//! Heartbeats of the SQLite source (`heartbeat.interval.ms`): between polls, when the kit's
//! [`Heartbeat`] says one is due, `heartbeat.action.query` runs on the database (an insert into
//! a captured table keeps the change sequence moving) and the heartbeat record goes out at the
//! current position.

use rusqlite::Connection;
use sluice_engine::{Batch, Position};
use sluice_kit::records::heartbeat::Heartbeat;

use super::Out;

/// Sends a heartbeat at `position` when one is due; `false` once the source is stopping.
pub(super) fn tick(beat: &mut Heartbeat, conn: &Connection, position: Position, out: &Out) -> bool {
    if !beat.due() {
        return true;
    }
    let action = beat.action_query().map(|q| conn.execute_batch(q));
    let record = beat.record(action, position.clone());
    out.send(Batch {
        events: vec![record],
        position: Some(position),
    })
}
