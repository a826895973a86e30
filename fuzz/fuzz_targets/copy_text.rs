//! COPY text: lines, fields, escapes, and every field read as a value of a PostgreSQL type.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sluice_sources::postgres::fuzzing::copy_text(data);
});
