//! `sluice run` killed with SIGKILL at several points, and stopped with SIGTERM.
//!
//! The pipeline is datagen → file. datagen's position is its step count and every change event
//! carries its step in `source.seq`, so the file can be checked exactly: each run writes a
//! contiguous range of steps that starts right after the position committed before it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice_test_support::pipeline::{Component, Pipeline, Scalar};

const TOTAL: u64 = 30_000;

fn pipeline(dir: &Path, rate: u64, max_events: Option<u64>) -> PathBuf {
    let mut source = Component::new("datagen").set("rate", rate as i64);
    if let Some(m) = max_events {
        source = source.set("max.events", m as i64);
    }
    let mix = Scalar::map(&[
        ("insert", 50u32.into()),
        ("update", 35u32.into()),
        ("delete", 15u32.into()),
    ]);
    let out = Component::new("file")
        .named("out")
        .set("path", dir.join("out.jsonl"))
        .set("schemas.enable", false);
    Pipeline::new("crash", dir.join("data"))
        .top("max_queue_size", 1000u32)
        .top("max_batch_size", 100u32)
        .setting("offsets", &[("flush_interval", "20ms".into())])
        .source(source.set("mix", mix))
        .sink(out)
        .write(dir)
}

fn start(pipeline: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run"])
        .arg(pipeline)
        .env("SLUICE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sluice")
}

/// Steps of the complete lines of the output file (tombstones carry none and are skipped).
fn steps(dir: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(dir.join("out.jsonl")).unwrap_or_default();
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    complete
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a valid JSON line");
            v["value"]["source"]["seq"].as_u64()
        })
        .collect()
}

fn committed(dir: &Path) -> u64 {
    let text = std::fs::read_to_string(dir.join("data/offsets.json")).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    v["pipelines"]["crash"]["position"].as_u64().unwrap_or(0)
}

fn wait_for_lines(dir: &Path, at_least: usize, child: &mut Child) {
    let start = Instant::now();
    while steps(dir).len() < at_least {
        if child.try_wait().expect("poll child").is_some()
            || start.elapsed() > Duration::from_secs(60)
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn kill_9_at_several_points_loses_nothing_and_redelivers_only_after_the_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = pipeline(dir.path(), 20_000, Some(TOTAL));
    // (lines seen in the file when the run is killed, position committed at that moment)
    let mut kills = Vec::new();
    for threshold in [2_000usize, 7_000, 13_000, 20_000] {
        let mut child = start(&file);
        wait_for_lines(dir.path(), threshold, &mut child);
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        kills.push((steps(dir.path()).len(), committed(dir.path())));
    }
    eprintln!("kills (lines, committed): {kills:?}");
    let mut last = start(&file);
    let status = last.wait().expect("final run");
    assert!(status.success(), "the final run failed: {status:?}");

    let all = steps(dir.path());
    let mut bounds: Vec<usize> = kills.iter().map(|(lines, _)| *lines).collect();
    bounds.insert(0, 0);
    bounds.push(all.len());
    let mut expected_start = 1;
    for (run, window) in bounds.windows(2).enumerate() {
        let segment = &all[window[0]..window[1]];
        if let Some(first) = segment.first() {
            assert_eq!(
                *first, expected_start,
                "run {run} started at step {first}, not right after the commit"
            );
        }
        for pair in segment.windows(2) {
            assert_eq!(
                pair[1],
                pair[0] + 1,
                "run {run} skipped or repeated a step inside its own output"
            );
        }
        if run < kills.len() {
            let committed = kills[run].1;
            let written = segment.last().copied().unwrap_or(expected_start - 1);
            assert!(
                committed <= written,
                "run {run} committed {committed} past what it wrote ({written})"
            );
            assert!(committed + 1 >= expected_start, "the commit went backwards");
            expected_start = committed + 1;
        }
    }
    assert_eq!(
        all.last().copied(),
        Some(TOTAL),
        "the last step never arrived"
    );
    let mut unique = all.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique, (1..=TOTAL).collect::<Vec<_>>(), "a step was lost");
    assert_eq!(committed(dir.path()), TOTAL);
    assert!(
        kills.iter().any(|(lines, _)| *lines > 0),
        "no kill landed while events were flowing"
    );
}

#[test]
fn sigterm_stops_gracefully_with_everything_written_committed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = pipeline(dir.path(), 20_000, None);
    let mut child = start(&file);
    wait_for_lines(dir.path(), 3_000, &mut child);
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = child.wait().expect("wait");
    assert!(
        exit.success(),
        "SIGTERM did not lead to a clean exit: {exit:?}"
    );
    let all = steps(dir.path());
    assert!(all.len() >= 3_000);
    let text = std::fs::read_to_string(dir.path().join("out.jsonl")).expect("read");
    assert!(
        text.ends_with('\n'),
        "the sink was not flushed to a line boundary"
    );
    assert_eq!(all, (1..=all.len() as u64).collect::<Vec<_>>());
    // Everything written was acknowledged and committed before exiting.
    assert_eq!(committed(dir.path()), *all.last().expect("steps"));
}
