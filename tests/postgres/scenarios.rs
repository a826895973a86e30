//! The scenarios every source runs (`sluice_test_support::scenario`), against PostgreSQL:
//! every type at its limits read the same by the snapshot, the replication stream and `psql`;
//! kill -9 at random moments under a writer; blocking snapshots in the middle of a writer.

use sluice_test_support::scenario::{self, postgres::Postgres};

#[test]
fn every_type_at_its_limits_reads_the_same_in_the_snapshot_the_stream_and_the_client() {
    scenario::boundary::run(&Postgres::new("pg_boundary"));
}

/// Property test of the pgoutput and COPY readers: values drawn across each type's whole range
/// (seeded; `SLUICE_TEST_SEED` draws them again, `SLUICE_TEST_VALUES` sets how many).
#[test]
fn values_drawn_across_each_types_range_read_the_same_in_the_snapshot_the_stream_and_the_client() {
    scenario::generated::run(&Postgres::new("pg_generated"));
}

#[test]
fn kill_9_at_random_moments_under_a_writer_loses_nothing() {
    scenario::kill::run(
        &Postgres::new("pg_kill_random"),
        scenario::rounds("SLUICE_TEST_KILLS", 10),
    );
}

#[test]
fn blocking_snapshots_in_the_middle_of_a_writer_lose_nothing() {
    let rounds = scenario::rounds("SLUICE_TEST_BLOCKING_ROUNDS", 3);
    scenario::blocking::run(&Postgres::new("pg_blocking_writer"), rounds);
}

/// 60 rows of 5 MB (each more than a 4 MiB queue) through the snapshot and one transaction
/// updating every row (whole before and after images): peak RSS under 256 MiB.
#[test]
fn rows_of_megabytes_pass_in_bounded_memory() {
    scenario::memory::run(&Postgres::new("pg_big_rows"), (60, 5_000_000), 256);
}

/// `NaN` in a `NOT NULL` numeric: `fail` stops with one line naming the column, `warn` leaves
/// the row out with its key, in the snapshot and in the stream.
#[test]
fn a_value_the_source_cannot_represent_follows_the_failure_handling_mode() {
    scenario::failure::run(&Postgres::new("pg_refused_value"));
}
