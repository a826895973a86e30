//! A disk that fills up in the middle of a write: the file sink's partial write is cut back
//! before the retry, so the output holds every event once, in order, and no fragment. The
//! disk is a real size-limited tmpfs (mounted by the test: it needs root, as CI has).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use sluice_test_support::pipeline::{Component, Pipeline, Scalar};

const TOTAL: u64 = 4_000;

/// Unmounts the tmpfs when the test ends, however it ends.
struct Mounted<'a>(&'a Path);

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

#[test]
fn a_full_disk_mid_write_leaves_no_fragment_after_the_retry() {
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(&disk)
        .status()
        .expect("mount");
    assert!(
        status.success(),
        "mounting a 4 MiB tmpfs failed (the test needs root)"
    );
    let _mounted = Mounted(&disk);
    // Leave about 0.8 MiB free: the events need about 2.5 MiB.
    std::fs::write(disk.join("filler"), vec![0u8; 3_300 << 10]).unwrap();
    let source = Component::new("datagen")
        .set("rate", 0u32)
        .set("max.events", TOTAL as i64)
        .set(
            "mix",
            Scalar::map(&[("insert", 60u32.into()), ("update", 40u32.into())]),
        );
    let retry = Scalar::map(&[
        ("max_retries", 1000u32.into()),
        ("initial_backoff", "20ms".into()),
        ("max_backoff", "100ms".into()),
    ]);
    let out = Component::new("file")
        .named("out")
        .set("path", disk.join("out.jsonl"))
        .set("schemas.enable", false)
        .set("retry", retry);
    let file = Pipeline::new("full", dir.path().join("data"))
        .top("max_batch_size", 200u32)
        .setting("offsets", &[("flush_interval", "20ms".into())])
        .source(source)
        .sink(out)
        .write(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg(&file)
        .env("SLUICE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (full, filled) = std::sync::mpsc::channel();
    // Reads stderr to its end (a closed pipe would stop the pipeline), saying when the disk
    // filled.
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut chunk) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&chunk[..n]);
            if String::from_utf8_lossy(&all).contains("Sink write failed; retrying") {
                let _ = full.send(());
            }
        }
        String::from_utf8_lossy(&all).into_owned()
    });
    filled
        .recv_timeout(Duration::from_secs(60))
        .expect("the disk never filled");
    // Space comes back: the retries go through.
    std::fs::remove_file(disk.join("filler")).unwrap();
    let status = child.wait().unwrap();
    let log = reader.join().unwrap();
    assert!(status.success(), "{log}");
    assert!(log.contains("No space left"), "{log}");
    let text = std::fs::read_to_string(disk.join("out.jsonl")).unwrap();
    let steps: Vec<u64> = text
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("a corrupt line in the output ({e}): {l:.80}"));
            v["value"]["source"]["seq"].as_u64()
        })
        .collect();
    assert!(text.ends_with('\n'));
    assert_eq!(
        steps,
        (1..=TOTAL).collect::<Vec<_>>(),
        "every event once, in order"
    );
}
