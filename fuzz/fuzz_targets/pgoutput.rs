//! The pgoutput decoder: any bytes a server (or a man in the middle) sends.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sluice_sources::postgres::fuzzing::pgoutput(data);
});
