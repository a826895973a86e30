//! Db2 log sequence numbers (`VARCHAR(16) FOR BIT DATA`, printed as Debezium's Db2 `Lsn`
//! prints them, `00000000:00000000:0000000000000a2c`) and the source's position: the kit's
//! change-table types at 16 bytes.

/// A 16-byte LSN.
pub(crate) type Lsn = sluice_kit::change_tables::Lsn<16>;

/// Where the source is (Debezium's Db2 offsets: `commit_lsn`, `change_lsn`,
/// `event_serial_no`, `snapshot_completed`).
pub(crate) type Db2Offset = sluice_kit::change_tables::ChangeOffset<16>;
