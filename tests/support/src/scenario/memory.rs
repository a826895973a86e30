//! Memory bounded by bytes, for every source: a table of rows larger than a queue (each
//! several MB), read by the snapshot, then one transaction updating every row (a log that
//! carries whole before and after images carries each row twice): the pipeline's peak RSS
//! stays under a bound, whatever the table's size.

use std::time::{Duration, Instant};

use super::Backend;
use crate::{pg, procstat};

/// What a run measured.
#[derive(Debug, Clone, Copy)]
pub struct Peaks {
    /// Peak RSS once the snapshot's rows are out, MiB.
    pub snapshot_mib: u64,
    /// Peak RSS once the transaction's updates are out, MiB.
    pub total_mib: u64,
}

/// Counts the events of each op in a growing `out.jsonl`, reading only what was written since
/// the last look and without parsing the lines (rows of megabytes).
struct Counts {
    file: std::fs::File,
    /// The start of the line not complete yet.
    read: u64,
    /// `r`, `c`, `u`, `d` events so far.
    ops: std::collections::HashMap<u8, usize>,
}

impl Counts {
    fn open(dir: &std::path::Path, child: &mut std::process::Child) -> Counts {
        let t0 = Instant::now();
        loop {
            if let Ok(file) = std::fs::File::open(dir.join("out.jsonl")) {
                return Counts {
                    file,
                    read: 0,
                    ops: Default::default(),
                };
            }
            if child.try_wait().unwrap().is_some() {
                panic!("sluice stopped: {}", pg::log_of(child));
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "no output file");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The events of `op` so far.
    fn of(&mut self, op: char) -> usize {
        use std::io::{Read, Seek, SeekFrom};
        let mut new = Vec::new();
        let _ = self.file.seek(SeekFrom::Start(self.read));
        let _ = self.file.read_to_end(&mut new);
        let complete = new.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        const NEEDLE: &[u8] = b"\"op\":\"";
        for line in new[..complete].split(|b| *b == b'\n') {
            let at = line.windows(NEEDLE.len()).position(|w| w == NEEDLE);
            if let Some(&kind) = at.and_then(|i| line.get(i + NEEDLE.len())) {
                *self.ops.entry(kind).or_default() += 1;
            }
        }
        self.read += complete as u64;
        let key = u8::try_from(op).unwrap_or(0);
        self.ops.get(&key).copied().unwrap_or(0)
    }

    /// Waits until `n` events of `op` are out.
    fn wait(&mut self, op: char, n: usize, child: &mut std::process::Child) {
        let t0 = Instant::now();
        while self.of(op) < n {
            if child.try_wait().unwrap().is_some() {
                panic!("sluice stopped: {}", pg::log_of(child));
            }
            assert!(
                t0.elapsed() < Duration::from_secs(600),
                "{} of {n} `{op}` events",
                self.of(op)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Runs `rows` rows of `row_bytes` characters through the snapshot and one updating
/// transaction; panics when the peak RSS passes `bound_mib`. The peaks measured.
pub fn run(backend: &dyn Backend, (rows, row_bytes): (usize, usize), bound_mib: u64) -> Peaks {
    let (int, _) = backend.types();
    let (large_type, fill) = (backend.large_text_type(), |n, c| backend.repeated(n, c));
    backend.create(
        "big",
        &[
            ("id".to_owned(), int.to_owned()),
            ("v".to_owned(), large_type.to_owned()),
        ],
    );
    let (table, id, v) = (
        backend.table("big"),
        backend.column("id"),
        backend.column("v"),
    );
    for i in 1..=rows {
        let c = char::from(b'A' + u8::try_from(i % 26).unwrap());
        backend.execute(&format!(
            "INSERT INTO {table} ({id}, {v}) VALUES ({i}, {})",
            fill(row_bytes, c)
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = backend.pipeline(dir.path(), &[]);
    let mut child = pg::start(&path, &[]);
    let mut counts = Counts::open(dir.path(), &mut child);
    counts.wait('r', rows, &mut child);
    let snapshot_mib = procstat::peak_rss_mib(child.id());
    backend.execute(
        &backend.transaction(&[format!("UPDATE {table} SET {v} = {}", fill(row_bytes, 'z'))]),
    );
    counts.wait('u', rows, &mut child);
    let total_mib = procstat::peak_rss_mib(child.id());
    pg::stop(&child);
    pg::finish(child);
    let peaks = Peaks {
        snapshot_mib,
        total_mib,
    };
    eprintln!(
        "{}: {rows} rows of {row_bytes} bytes: {peaks:?}",
        backend.name()
    );
    assert!(
        total_mib < bound_mib,
        "{}: peak RSS {total_mib} MiB (snapshot {snapshot_mib} MiB) for {rows} rows of {row_bytes} bytes, bound {bound_mib} MiB",
        backend.name()
    );
    peaks
}
