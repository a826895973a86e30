//! The scenarios every source runs (`sluice_test_support::scenario`), against the emulated Db2
//! (ASN capture on PostgreSQL): every type at its limits read the same by the snapshot, the
//! change-data tables and `psql`, and values drawn across each type's range; kill -9 at random
//! moments under a writer; blocking snapshots in the middle of a writer.

use sluice_test_support::scenario::{self, db2::Db2Backend};

#[test]
fn every_type_at_its_limits_reads_the_same_in_the_snapshot_the_stream_and_the_client() {
    scenario::boundary::run(&Db2Backend::new("boundary"));
}

/// The boundary scenario with values drawn across each type's range (seeded; the seed is
/// printed and `SLUICE_TEST_SEED` draws the same values again).
#[test]
fn values_drawn_across_each_types_range_read_the_same_in_the_snapshot_the_stream_and_the_client() {
    scenario::generated::run(&Db2Backend::new("generated"));
}

#[test]
fn kill_9_at_random_moments_under_a_writer_loses_nothing() {
    let kills = scenario::rounds("SLUICE_TEST_KILLS", 10);
    scenario::kill::run(&Db2Backend::new("kill_random"), kills);
}

#[test]
fn blocking_snapshots_in_the_middle_of_a_writer_lose_nothing() {
    let rounds = scenario::rounds("SLUICE_TEST_BLOCKING_ROUNDS", 3);
    scenario::blocking::run(&Db2Backend::new("blocking_writer"), rounds);
}

/// 60 rows of 5 MB (each more than a 4 MiB queue) through the snapshot and one transaction
/// updating every row (whole before and after images): peak RSS under 256 MiB. The test's ODBC
/// driver reads blocks of one row here (IBM's reads Db2's in blocks of bytes).
#[test]
fn rows_of_megabytes_pass_in_bounded_memory() {
    scenario::memory::run(
        &Db2Backend::for_large_rows("big_rows"),
        (60, 5_000_000),
        256,
    );
}

/// A value the source cannot read (an emulator-only `infinity` date): `fail` stops with one
/// line naming the column, `warn` leaves the row out, in the snapshot and in the change-data
/// tables.
#[test]
fn a_value_the_source_cannot_represent_follows_the_failure_handling_mode() {
    scenario::failure::run(&Db2Backend::new("refusedvalue"));
}
