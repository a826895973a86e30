//! A signal as every channel gives it: one JSON line, parsed and interpreted.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(line) = std::str::from_utf8(data) {
        sluice_sources::postgres::fuzzing::signal(line);
    }
});
