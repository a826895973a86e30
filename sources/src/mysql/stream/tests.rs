//! Unit tests of the stream's bookkeeping.

use super::{gtid_source, mariadb_gtid, MysqlOffset, Offset, Tx};
use sluice_kit::records::transaction::TxCounts;

fn tx(event: u64, skip: Option<(u64, u32)>) -> Tx {
    Tx {
        file: "binlog.000001".into(),
        pos: 4,
        event,
        by_gtid: true,
        gtid: None,
        skip,
        id: String::new(),
        ts_ms: 0,
        counts: TxCounts::default(),
    }
}

#[test]
fn a_restarted_transaction_skips_the_events_and_rows_delivered_before() {
    // 3 events handled, 2 rows of the 4th (index 3) delivered.
    let skip = Some((3, 2));
    assert_eq!(tx(1, skip).delivered_rows(), usize::MAX);
    assert_eq!(tx(2, skip).delivered_rows(), usize::MAX);
    assert_eq!(tx(3, skip).delivered_rows(), 2);
    assert_eq!(tx(4, skip).delivered_rows(), 0);
    assert_eq!(tx(1, None).delivered_rows(), 0);
}

#[test]
fn offsets_read_without_event_and_write_it_only_inside_a_transaction() {
    let old = r#"{"file":"binlog.000002","pos":342,"row":0,"snapshot_completed":true}"#;
    let read = Offset::parse(&sluice_engine::Position::Opaque(old.into()), "mysql").unwrap();
    assert_eq!(read.at, MysqlOffset::at("binlog.000002", 342, true));
    assert_eq!(super::position(read.at.clone()).to_string(), old);
    let inside = MysqlOffset {
        event: 7,
        row: 3,
        ..read.at
    };
    let text = super::position(inside.clone()).to_string();
    assert!(text.contains(r#""event":7,"row":3"#), "{text}");
    let back = Offset::parse(&sluice_engine::Position::Opaque(text.into()), "mysql").unwrap();
    assert_eq!(back.at, inside);
}

#[test]
fn a_mariadb_gtid_reads_domain_server_and_sequence() {
    let mut body = 42u64.to_le_bytes().to_vec();
    body.extend(7u32.to_le_bytes());
    body.push(0);
    assert_eq!(mariadb_gtid(&body, 1).as_deref(), Some("7-1-42"));
    assert_eq!(mariadb_gtid(&body[..10], 1), None);
}

#[test]
fn the_first_rotate_keeps_the_requested_file_and_later_ones_name_theirs() {
    // Checksum bytes that happen to be digits ("binlog.000001" + "3..."): not a name.
    assert_eq!(
        super::rotated_file(b"binlog.0000013\x01\x02\x03", false),
        None
    );
    assert_eq!(
        super::rotated_file(b"mysql-bin.000123", true).as_deref(),
        Some("mysql-bin.000123")
    );
}

#[test]
fn a_gtids_source_is_its_domain_and_server() {
    assert_eq!(gtid_source("0-1-42"), "0-1");
    assert_eq!(gtid_source("4294967295-7-1"), "4294967295-7");
}
