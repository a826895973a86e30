use proptest::prelude::*;

use super::*;

/// The guide's example (`CDC_REC_DISCARD` page): `insert into t1(c1) values (2000)` read as an
/// INSERT of 22 bytes, 58 with its header: an INTEGER 2000, a CHAR(10) NULL, two INTEGER NULLs.
#[test]
fn the_guides_insert_reads_as_its_row() {
    let payload = [
        0x00, 0x00, 0x07, 0xd0, 0x00, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x80,
        0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00,
    ];
    let mut bytes = Vec::new();
    for word in [36u32, 22, 66, 40] {
        bytes.extend_from_slice(&word.to_be_bytes());
    }
    bytes.extend_from_slice(&7u64.to_be_bytes());
    bytes.extend_from_slice(&[0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0]);
    bytes.extend_from_slice(&payload);
    assert_eq!(bytes.len(), 58);
    assert_eq!(record_len(&bytes), Ok(Some(58)));
    let record = parse(&bytes).unwrap_or_else(|e| panic!("{e}"));
    let expected = Record::Row {
        image: RowImage::Insert,
        sequence: 7,
        transaction: 9,
        table: 1,
        flags: 0,
        row: Row {
            fixed: &payload,
            variable: Vec::new(),
        },
    };
    assert_eq!(record, expected);
    assert_eq!(write(&expected), bytes, "written back the same");
}

fn samples() -> Vec<Vec<u8>> {
    let fixed = [0u8, 0, 0, 5];
    let rows = [
        Record::Begin {
            sequence: 1 << 40,
            transaction: 3,
            start: 1_700_000_000,
            user: 1001,
        },
        Record::TableSchema {
            table: 1,
            flags: 0,
            fixed_size: 4,
            fixed_columns: 1,
            variable_columns: 2,
            columns: "id integer, name varchar(20), note lvarchar(100)",
        },
        Record::Row {
            image: RowImage::After,
            sequence: (1 << 40) + 1,
            transaction: 3,
            table: 1,
            flags: 0,
            row: Row {
                fixed: &fixed,
                variable: vec![b"\x02ab", b""],
            },
        },
        Record::Discard {
            sequence: (1 << 40) + 1,
            transaction: 3,
        },
        Record::Truncate {
            sequence: (1 << 40) + 2,
            transaction: 3,
            table: 1,
        },
        Record::Commit {
            sequence: (1 << 40) + 3,
            transaction: 3,
            time: 1_700_000_001,
        },
        Record::Rollback {
            sequence: 9,
            transaction: 4,
        },
        Record::Timeout { sequence: 9 },
        Record::Error {
            flags: 1,
            code: -83713,
        },
    ];
    rows.iter().map(write).collect()
}

#[test]
fn every_type_reads_back_as_written_with_the_guides_header_sizes() {
    let sizes = [40, 36, 44, 28, 32, 36, 28, 24, 24];
    for (bytes, size) in samples().iter().zip(sizes) {
        assert_eq!(u32_at(bytes, 0) as usize, size, "{bytes:02x?}");
        let record = parse(bytes).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&write(&record), bytes);
    }
}

#[test]
fn what_is_no_record_is_refused_with_why() {
    let mut bytes = samples()[0].clone();
    bytes[11] = 65;
    assert_eq!(record_len(&bytes), Err(RecordError::Scheme(65)));
    let mut bytes = samples()[0].clone();
    bytes[15] = 77;
    assert_eq!(parse(&bytes), Err(RecordError::Type(77)));
    // A BEGINTX whose header is too short for its fields.
    let mut short = samples()[6].clone();
    short[15] = 1;
    assert_eq!(
        parse(&short),
        Err(RecordError::Header { kind: 1, size: 28 })
    );
    let whole = samples()[2].clone();
    assert_eq!(
        parse(&whole[..whole.len() - 1]),
        Err(RecordError::Truncated {
            needs: whole.len(),
            has: whole.len() - 1
        })
    );
    // Variable-length columns larger than the payload.
    let mut big = whole.clone();
    big[36..40].copy_from_slice(&100u32.to_be_bytes());
    assert!(matches!(parse(&big), Err(RecordError::Columns { .. })));
}

proptest! {
    /// Records read in pieces cut anywhere are the records written.
    #[test]
    fn records_cut_anywhere_are_joined_again(cuts in proptest::collection::vec(0usize..400, 0..12)) {
        let written = samples();
        let stream: Vec<u8> = written.concat();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (stream.len() + 1)).collect();
        cuts.sort_unstable();
        cuts.push(stream.len());
        let mut frames = Frames::default();
        let mut read = Vec::new();
        let mut from = 0;
        for cut in cuts {
            frames.push(&stream[from..cut]);
            from = cut;
            while let Some(record) = frames.next_record().map_err(|e| TestCaseError::fail(e.to_string()))? {
                read.push(write(&record));
            }
        }
        prop_assert_eq!(read, written);
        prop_assert_eq!(frames.pending(), 0);
    }

    /// Any bytes are a record, a reason, or a wait for more: never a panic.
    #[test]
    fn any_bytes_read_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), scheme in any::<bool>()) {
        let mut bytes = bytes;
        if scheme && bytes.len() >= 16 {
            bytes[8..12].copy_from_slice(&PACKET_SCHEME.to_be_bytes());
            let header = 16 + (bytes[3] as usize % 48);
            bytes[0..4].copy_from_slice(&(header as u32).to_be_bytes());
            let payload = u32::from(bytes[7]) % 64;
            bytes[4..8].copy_from_slice(&payload.to_be_bytes());
        }
        let mut frames = Frames::default();
        frames.push(&bytes);
        for _ in 0..8 {
            match frames.next_record() {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        let _ = parse(&bytes);
    }
}
