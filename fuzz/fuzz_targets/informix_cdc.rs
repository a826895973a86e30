//! Informix CDC: a session's bytes cut into records and each decoded (a row read by a fixed
//! set of columns), the same bytes read as a packed DECIMAL, as SQLI answers and, as text, as
//! a TABSCHEMA column list; a reason or a wait for more, never a panic.
#![no_main]
use sluice_sources::informix::{columns, decimal, record, sqli};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let table = columns::parse_columns(
        "a smallint, b integer, c date, d char(3), e decimal(7,3), f boolean, h varchar(4), i lvarchar",
    );
    let mut frames = record::Frames::default();
    frames.push(data);
    while let Ok(Some(r)) = frames.next_record() {
        if let (record::Record::Row { row, .. }, Ok(table)) = (&r, &table) {
            let _ = columns::read_row(table, row.fixed, &row.variable);
        }
    }
    let _ = decimal::decode(data);
    let _ = sqli::ServerError::read(&mut sqli::Answer::new(data));
    let _ = sqli::Done::read(&mut sqli::Answer::new(data));
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = columns::parse_columns(text);
    }
});
