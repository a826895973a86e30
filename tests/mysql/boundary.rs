//! Every MySQL/MariaDB type at its limits, read by the snapshot and by the binlog stream, agrees
//! field for field and with the `mariadb` client (the scenario of `sluice_test_support::boundary`).

#[test]
fn every_type_at_its_limits_reads_the_same_in_the_snapshot_the_stream_and_the_client() {
    let backend = sluice_test_support::boundary::mysql::Mysql::new("mysql_boundary");
    sluice_test_support::boundary::run(&backend);
}
