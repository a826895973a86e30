//! The scenarios every source runs (`sluice_test_support::scenario`), against SQLite in
//! capture mode: every declared type at its limits read the same by the snapshot, the change
//! tables and the `sqlite3` shell, and values drawn across each type's range; kill -9 at random moments under a writer. (SQLite has no
//! blocking snapshots: the kill scenario's blocking signal is refused, the rest goes on.)

use sluice_test_support::scenario::{self, sqlite::Sqlite};

#[test]
fn every_type_at_its_limits_reads_the_same_in_the_snapshot_the_stream_and_the_client() {
    scenario::boundary::run(&Sqlite::new());
}

/// The boundary scenario with values drawn across each declared type's range (seeded; the
/// seed is printed and `SLUICE_TEST_SEED` draws the same values again).
#[test]
fn values_drawn_across_each_types_range_read_the_same_in_the_snapshot_the_stream_and_the_client() {
    scenario::generated::run(&Sqlite::new());
}

#[test]
fn kill_9_at_random_moments_under_a_writer_loses_nothing() {
    scenario::kill::run(&Sqlite::new(), scenario::rounds("SLUICE_TEST_KILLS", 10));
}

/// 60 rows of 5 MB (each more than a 4 MiB queue) through the snapshot and one transaction
/// updating every row (whole before and after images): peak RSS under 256 MiB.
#[test]
fn rows_of_megabytes_pass_in_bounded_memory() {
    scenario::memory::run(&Sqlite::new(), (60, 5_000_000), 256);
}

/// Text in an INTEGER column: `fail` stops with one line naming the column, `warn` leaves the
/// row out, in the snapshot and in the stream.
#[test]
fn a_value_the_source_cannot_represent_follows_the_failure_handling_mode() {
    scenario::failure::run(&Sqlite::new());
}
