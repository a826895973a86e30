//! The `sluice` binary's command line: pipeline examples validate, bad files fail clearly.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;

use sluice_test_support::pipeline::{Component, Pipeline, Scalar};

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"));
    files.sort();
    files
}

#[test]
fn every_example_pipeline_validates() {
    let files = yaml_files(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("pipelines")
            .as_path(),
    );
    assert!(!files.is_empty(), "no example pipelines found");
    let out = sluice()
        .arg("validate")
        .args(&files)
        .output()
        .expect("run sluice validate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "validate failed:\n{stdout}\n{stderr}");
    assert_eq!(
        stdout.lines().filter(|l| l.contains(": ok")).count(),
        files.len(),
        "{stdout}"
    );
}

/// Each file in `tests/fixtures/bad` starts with `# expect: <text>`; validating it must exit 3
/// with exactly one error line that names the file, a line and column, and contains the text.
#[test]
fn bad_pipelines_give_one_clear_located_error() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad");
    let files = yaml_files(&dir);
    assert!(
        files.len() >= 15,
        "the bad-pipeline corpus shrank to {}",
        files.len()
    );
    let location = regex_lite_location();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read fixture");
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{} lacks an `# expect:` line", file.display()));
        for command in ["validate", "run"] {
            let out = sluice()
                .arg(command)
                .arg(&file)
                .output()
                .expect("run sluice");
            let stderr = String::from_utf8_lossy(&out.stderr);
            let name = file.display();
            assert_eq!(
                out.status.code(),
                Some(3),
                "{command} {name}: exit {:?}\n{stderr}",
                out.status
            );
            assert!(
                !stderr.contains("panicked"),
                "{command} {name} panicked:\n{stderr}"
            );
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(
                lines.len(),
                1,
                "{command} {name}: expected one line:\n{stderr}"
            );
            let line = lines[0];
            assert!(
                line.starts_with(&format!("error: {}:", file.display())),
                "{name}: {line}"
            );
            assert!(location(line), "{name}: no line:column in `{line}`");
            assert!(
                line.contains(expect),
                "{name}: `{line}` does not contain `{expect}`"
            );
        }
    }
}

/// `error: PATH:LINE:COLUMN: ...` with positive numbers.
fn regex_lite_location() -> impl Fn(&str) -> bool {
    |line: &str| {
        let Some(rest) = line.strip_prefix("error: ") else {
            return false;
        };
        let Some(yaml) = rest.find(".yaml:") else {
            return false;
        };
        let mut parts = rest[yaml + 6..].splitn(3, ':');
        let line_no = parts.next().and_then(|p| p.parse::<u64>().ok());
        let col = parts.next().and_then(|p| p.parse::<u64>().ok());
        matches!((line_no, col), (Some(l), Some(c)) if l > 0 && c > 0)
    }
}

#[test]
fn missing_file_is_one_line_and_exit_3() {
    let out = sluice()
        .args(["validate", "/nonexistent/pipeline.yaml"])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("/nonexistent/pipeline.yaml: cannot read the pipeline file"),
        "{stderr}"
    );
}

#[test]
fn help_is_available_everywhere() {
    for args in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["validate", "--help"],
    ] {
        let out = sluice().args(&args).output().expect("run");
        assert!(out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage"),
            "{args:?}"
        );
    }
}

#[test]
fn fan_out_with_per_sink_transforms_and_stop_after_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let source = Component::new("datagen").set("topic.prefix", "shop").set(
        "mix",
        Scalar::map(&[("insert", 70u32.into()), ("update", 30u32.into())]),
    );
    let route = Component::new("route")
        .set("regex", r"shop\.public\.(.*)")
        .set("replacement", "audit.$1");
    let file = Pipeline::new("fanout", d.join("data"))
        .source(source)
        .sink(
            Component::new("file")
                .named("raw")
                .set("path", d.join("raw.jsonl")),
        )
        .sink(
            Component::new("file")
                .named("routed")
                .set("path", d.join("routed.jsonl"))
                .set("schemas.enable", false)
                .transform(route),
        )
        .sink(Component::new("stdout").named("screen"))
        .write_as(&d.join("p.yaml"));
    let out = sluice()
        .args(["run", "--stop-after-events", "500"])
        .arg(&file)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let read = |name: &str| -> Vec<serde_json::Value> {
        std::fs::read_to_string(dir.path().join(name))
            .expect("read")
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect()
    };
    let (raw, routed) = (read("raw.jsonl"), read("routed.jsonl"));
    let screen: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("stdout json line"))
        .collect();
    assert_eq!(raw.len(), 500);
    assert_eq!(routed.len(), 500);
    assert_eq!(screen.len(), 500);
    assert!(raw.iter().all(|e| e["topic"] == "shop.public.customers"));
    assert!(routed.iter().all(|e| e["topic"] == "audit.customers"));
    // The raw sink keeps JsonConverter's envelope; the routed one and stdout have payloads only.
    assert!(raw[0]["value"]["schema"]["name"] == "shop.public.customers.Envelope");
    assert_eq!(raw[0]["value"]["payload"], routed[0]["value"]);
    assert_eq!(routed[0]["value"], screen[0]["value"]);
    assert!(stderr.contains("committed=500"), "{stderr}");
}

/// `offsets.type` is the same as `offsets.store`; the Kafka store's keys are its own.
#[test]
fn offset_stores_are_named_by_store_or_type() {
    let dir = tempfile::tempdir().expect("temp dir");
    let servers = ("bootstrap.servers", Scalar::from("127.0.0.1:9092"));
    for (offsets, ok) in [
        (vec![("type", Scalar::from("memory"))], true),
        (
            vec![
                ("store", "kafka".into()),
                servers.clone(),
                ("topic", "t".into()),
            ],
            true,
        ),
        (
            vec![
                ("type", "kafka".into()),
                servers.clone(),
                ("replication.factor", 1u32.into()),
            ],
            true,
        ),
        (vec![("type", "memory".into()), servers], false),
    ] {
        let path = Pipeline::new("p", dir.path().join("data"))
            .setting("offsets", &offsets)
            .source(Component::new("datagen"))
            .sink(Component::new("null"))
            .write_as(&dir.path().join("p.yaml"));
        let out = sluice()
            .arg("validate")
            .arg(&path)
            .output()
            .expect("run sluice");
        assert_eq!(
            out.status.success(),
            ok,
            "{offsets:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
