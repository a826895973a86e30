//! Every SQLite declared type at its limits, read by the snapshot and by the change tables,
//! agrees field for field and with the `sqlite3` shell (the scenario of
//! `sluice_test_support::boundary`).

#[test]
fn every_type_at_its_limits_reads_the_same_in_the_snapshot_the_stream_and_the_client() {
    let backend = sluice_test_support::boundary::sqlite::Sqlite::new();
    sluice_test_support::boundary::run(&backend);
}
