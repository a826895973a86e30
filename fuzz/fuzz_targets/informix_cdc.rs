//! Informix CDC: a session's bytes cut into records and each decoded, and the same bytes read
//! as a packed DECIMAL; a reason or a wait for more, never a panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut frames = sluice_sources::informix::record::Frames::default();
    frames.push(data);
    while let Ok(Some(_)) = frames.next_record() {}
    let _ = sluice_sources::informix::decimal::decode(data);
});
