//! The pipeline file: any text is either a pipeline or one located error line.
#![no_main]

// The binary's closed sets of components, as `sluice run` loads them.
#[allow(dead_code)]
#[path = "../../src/registry.rs"]
mod registry;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = sluice_engine::config::parse_pipeline::<
        registry::SourceSpec,
        registry::TransformSpec,
        registry::SinkSpec,
    >(
        std::path::Path::new("fuzz.yaml"),
        text,
        std::collections::HashMap::new(),
    );
    if let Err(e) = parsed {
        let line = e.to_string();
        assert!(!line.is_empty());
    }
});
