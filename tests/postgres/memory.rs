//! Memory is bounded by bytes, whatever the row size: rows larger than a whole queue go
//! through one at a time, in the snapshot and in the stream, and the process stays near its
//! queues' bytes instead of holding a table's worth of rows.

use std::io::{Read, Seek, SeekFrom};
use std::time::{Duration, Instant};

use crate::common::*;

use sluice_test_support::procstat;

/// Counts the lines written to a growing file, reading only what is new since the last call.
struct Lines {
    file: std::fs::File,
    read: u64,
    lines: usize,
}

impl Lines {
    fn count(&mut self) -> usize {
        let mut chunk = vec![0u8; 1 << 20];
        let _ = self.file.seek(SeekFrom::Start(self.read));
        while let Ok(n) = self.file.read(&mut chunk) {
            if n == 0 {
                break;
            }
            self.read += n as u64;
            self.lines += chunk[..n].iter().filter(|b| **b == b'\n').count();
        }
        self.lines
    }
}

/// 60 rows of 5 MB each (300 MB, each row more than the default 4 MiB queue): the snapshot and
/// then an update of every row in one transaction pass through a pipeline with default limits
/// while its peak RSS stays under 192 MiB. Before batches were cut by bytes the snapshot's 60
/// rows went as one batch (and the replication client buffered the whole transaction), and
/// the process held the table several times over.
#[test]
fn rows_larger_than_the_queue_pass_one_at_a_time_in_bounded_memory() {
    let db = fresh_db("big_rows");
    psql(
        &db,
        "create table big (id int primary key, v text not null); \
         insert into big select g, repeat(chr(65 + g % 26), 5000000) from generate_series(1, 60) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        &[("table.include.list", "public.big".into())],
        false,
    );
    let mut child = start(&file, &[]);
    let t0 = Instant::now();
    let out = loop {
        if let Ok(file) = std::fs::File::open(dir.path().join("out.jsonl")) {
            break file;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "sluice stopped: {}",
            log_so_far(&child)
        );
        assert!(t0.elapsed() < Duration::from_secs(60), "no output file");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut lines = Lines {
        file: out,
        read: 0,
        lines: 0,
    };
    let wait_for = |n: usize, lines: &mut Lines, child: &mut std::process::Child| {
        let t0 = Instant::now();
        while lines.count() < n {
            assert!(
                child.try_wait().unwrap().is_none(),
                "sluice stopped: {}",
                log_so_far(child)
            );
            assert!(
                t0.elapsed() < Duration::from_secs(300),
                "{} of {n} events arrived",
                lines.lines
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_for(60, &mut lines, &mut child);
    let after_snapshot = procstat::peak_rss_mib(child.id());
    active_slot_pid(&db, &mut child);
    psql(&db, "update big set v = v || 'x'");
    wait_for(120, &mut lines, &mut child);
    let peak = procstat::peak_rss_mib(child.id());
    eprintln!("peak RSS: {after_snapshot} MiB after the snapshot, {peak} MiB after the stream");
    stop(&child);
    finish(child);
    let events = lines_of(&dir.path().join("out.jsonl"));
    assert_eq!(events.len(), 120);
    for (i, e) in events.iter().enumerate() {
        let v = e["value"]["after"]["v"].as_str().unwrap_or_default();
        let id = e["key"]["id"].as_i64().unwrap_or_default();
        let expected = if i < 60 { 5_000_000 } else { 5_000_001 };
        assert_eq!(v.len(), expected, "event {i} (id {id}) has its whole value");
    }
    assert!(
        after_snapshot < 192,
        "peak RSS {after_snapshot} MiB after the snapshot of 300 MB of rows"
    );
    assert!(
        peak < 192,
        "peak RSS {peak} MiB after streaming 300 MB of updates in one transaction"
    );
    drop_db(&db);
}

/// The file's JSON lines, parsed one at a time.
fn lines_of(path: &std::path::Path) -> Vec<serde_json::Value> {
    use std::io::BufRead;
    let reader = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    reader
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect()
}
