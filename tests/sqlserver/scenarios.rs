//! The scenarios every source runs (`sluice_test_support::scenario`), against the emulated SQL
//! Server: every type at its limits read the same by the snapshot, the change tables and
//! `tsql`, and values drawn across each type's range; kill -9 at random moments under a writer; blocking snapshots in the middle of a
//! writer.

use sluice_test_support::scenario::{self, sqlserver::SqlServerBackend};

#[test]
fn every_type_at_its_limits_reads_the_same_in_the_snapshot_the_stream_and_the_client() {
    scenario::boundary::run(&SqlServerBackend::new("boundary"));
}

/// The boundary scenario with values drawn across each type's range (seeded; the seed is
/// printed and `SLUICE_TEST_SEED` draws the same values again).
#[test]
fn values_drawn_across_each_types_range_read_the_same_in_the_snapshot_the_stream_and_the_client() {
    scenario::generated::run(&SqlServerBackend::new("generated"));
}

#[test]
fn kill_9_at_random_moments_under_a_writer_loses_nothing() {
    let kills = scenario::rounds("SLUICE_TEST_KILLS", 10);
    scenario::kill::run(&SqlServerBackend::new("killrandom"), kills);
}

#[test]
fn blocking_snapshots_in_the_middle_of_a_writer_lose_nothing() {
    let rounds = scenario::rounds("SLUICE_TEST_BLOCKING_ROUNDS", 3);
    scenario::blocking::run(&SqlServerBackend::new("blockingwriter"), rounds);
}

/// 60 rows of 5 MB (`varchar(max)`; each more than a 4 MiB queue) through the snapshot and one
/// transaction updating every row (whole before and after images): peak RSS under 256 MiB.
#[test]
fn rows_of_megabytes_pass_in_bounded_memory() {
    scenario::memory::run(&SqlServerBackend::new("bigrows"), (60, 5_000_000), 256);
}

/// A `money` value the TDS client cannot decode exactly: `fail` stops with one line naming
/// the column, `warn` leaves the row out, in the snapshot and in the change tables.
#[test]
fn a_value_the_source_cannot_represent_follows_the_failure_handling_mode() {
    scenario::failure::run(&SqlServerBackend::new("refusedvalue"));
}
