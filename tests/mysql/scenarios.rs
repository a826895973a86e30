//! The scenarios every source runs (`sluice_test_support::scenario`), against MariaDB: every
//! type at its limits read the same by the snapshot, the binlog and the `mariadb` client;
//! kill -9 at random moments under a writer; blocking snapshots in the middle of a writer.

use sluice_test_support::scenario::{self, mysql::Mysql};

#[test]
fn every_type_at_its_limits_reads_the_same_in_the_snapshot_the_stream_and_the_client() {
    scenario::boundary::run(&Mysql::new("mysql_boundary"));
}

/// Property test of the binlog row decoder: values drawn across each type's whole range
/// (seeded; `SLUICE_TEST_SEED` draws them again, `SLUICE_TEST_VALUES` sets how many).
#[test]
fn values_drawn_across_each_types_range_read_the_same_in_the_snapshot_the_stream_and_the_client() {
    scenario::generated::run(&Mysql::new("mysql_generated"));
}

#[test]
fn kill_9_at_random_moments_under_a_writer_loses_nothing() {
    scenario::kill::run(
        &Mysql::new("mysql_kill_random"),
        scenario::rounds("SLUICE_TEST_KILLS", 10),
    );
}

#[test]
fn blocking_snapshots_in_the_middle_of_a_writer_lose_nothing() {
    let rounds = scenario::rounds("SLUICE_TEST_BLOCKING_ROUNDS", 3);
    scenario::blocking::run(&Mysql::new("mysql_blocking_writer"), rounds);
}

/// 60 rows of 5 MB (each more than a 4 MiB queue) through the snapshot and one transaction
/// updating every row (whole before and after images): peak RSS under 256 MiB.
#[test]
fn rows_of_megabytes_pass_in_bounded_memory() {
    scenario::memory::run(&Mysql::new("mysql_big_rows"), (60, 5_000_000), 256);
}

/// `BIGINT UNSIGNED` 2^64-1 under `bigint.unsigned.handling.mode: long`: `fail` stops with one
/// line naming the column, `warn` leaves the row out with its key, in the snapshot and in the
/// binlog stream.
#[test]
fn a_value_the_source_cannot_represent_follows_the_failure_handling_mode() {
    scenario::failure::run(&Mysql::new("mysql_refused_value"));
}
