//! The polling core of the change-table sources (SQL Server's CDC, Db2's ASN capture): the
//! server fills a change table per captured table, and the source reads them between the last
//! commit LSN it read and the newest, merged in (commit LSN, change LSN, operation) order.
//! Debezium's Db2 connector is derived from its SQL Server one; here both are dialects of this
//! core, which holds what they share:
//!
//! - [`lsn`]: binary LSNs printed as Debezium prints them, and the stored position
//!   ([`ChangeOffset`]: `commit_lsn`, `change_lsn`, `event_serial_no`, `snapshot_completed`);
//! - [`merge`]: the poll's change tables read in pieces and merged; a dialect reads a piece;
//! - [`cursor`]: the restart skip rules and `event_serial_no`;
//! - [`mod@deliver`]: a poll's changes to events: skipped, paired, numbered, batched;
//! - [`out`]: batches with transaction metadata (BEGIN/END around each commit LSN);
//! - [`snapshots`]: incremental snapshots with LSNs for watermarks, and their signals;
//! - [`history`]: the schema history (Debezium's records), written as structures are found;
//! - [`rows`]: a change row (or an update's two) turned into events: a key update as delete,
//!   tombstone and create, as Debezium's relational emitter does;
//! - [`source`]: the source itself over a dialect ([`source::Dialect`]): the snapshot mode,
//!   the snapshot, the stream's polls and what happens between them.

pub mod cursor;
pub mod deliver;
pub mod history;
pub mod lsn;
pub mod merge;
pub mod out;
pub mod rows;
pub mod snapshots;
pub mod source;

pub use cursor::Cursor;
pub use deliver::{deliver, Emit};
pub use lsn::{ChangeLsn, ChangeOffset, Lsn};
pub use merge::{Change, Merge, PieceLimits, Pieces};
pub use out::{Stopped, TxOut};
