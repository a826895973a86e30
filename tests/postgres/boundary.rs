//! Every PostgreSQL type at its limits, read by the snapshot and by the replication stream,
//! agrees field for field and with `psql` (the scenario of `sluice_test_support::boundary`).

#[test]
fn every_type_at_its_limits_reads_the_same_in_the_snapshot_the_stream_and_the_client() {
    let backend = sluice_test_support::boundary::postgres::Postgres::new("pg_boundary");
    sluice_test_support::boundary::run(&backend);
}
