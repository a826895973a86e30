//! SQL Server log sequence numbers (`binary(10)`, printed `00000027:00000758:0003`): the
//! kit's change-table LSN at 10 bytes.

/// A 10-byte LSN.
pub(crate) type Lsn = sluice_kit::change_tables::Lsn<10>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsns_print_and_parse_as_debezium() {
        let lsn = Lsn::from_bytes(&[0, 0, 0, 0x27, 0, 0, 0x07, 0x58, 0, 3]);
        assert_eq!(
            lsn.map(|l| l.to_string()).as_deref(),
            Some("00000027:00000758:0003")
        );
        assert_eq!(Lsn::parse("00000027:00000758:0003"), lsn);
    }
}
