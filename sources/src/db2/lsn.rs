//! Db2 log sequence numbers (`VARCHAR(16) FOR BIT DATA`, printed as Debezium's Db2 `Lsn`
//! prints them, `00000000:00000000:0000000000000a2c`): the kit's change-table LSN at 16 bytes.

/// A 16-byte LSN.
pub(crate) type Lsn = sluice_kit::change_tables::Lsn<16>;
