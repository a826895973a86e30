//! kill -9 at random moments under a writer, for every source: `items` seeded with rows, a
//! writer of inserts, updates and deletes (every tenth step a transaction of three
//! statements) running all along, the pipeline started and killed again and again (most runs
//! live under a second, so the first kills cut the initial snapshot; some rounds signal an
//! incremental or a blocking snapshot first and cut it), then a last run until quiet: the
//! whole output replayed is the table, no deleted row alive and none missing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{items_replayed, items_state, seed_items, writer_step, Backend};
use crate::moments::Moments;
use crate::pg;

/// Rows `items` is seeded with.
const SEEDED: usize = 20_000;

/// What a round does before its kill.
fn signal_of(backend: &dyn Backend, round: usize) -> Option<String> {
    let kind = match round % 5 {
        2 => "incremental",
        4 => "blocking",
        _ => return None,
    };
    let signal = serde_json::json!({
        "id": format!("kill-{round}"),
        "type": "execute-snapshot",
        "data": {"data-collections": [backend.collection("items")], "type": kind},
    });
    Some(format!("{signal}\n"))
}

/// Runs the scenario with `kills` kills; panics saying what differs.
pub fn run(backend: &dyn Backend, kills: usize) {
    seed_items(backend, SEEDED);
    let dir = tempfile::tempdir().unwrap();
    let signals = dir.path().join("signals.jsonl");
    let keys = [
        ("signal.enabled.channels", "file".into()),
        ("signal.file", (&signals).into()),
        ("signal.poll.interval.ms", 50u32.into()),
        ("incremental.snapshot.chunk.size", 500u32.into()),
    ];
    let path = backend.pipeline(dir.path(), &keys);
    let stop = AtomicBool::new(false);
    let out = dir.path().join("out.jsonl");
    let size = || std::fs::metadata(&out).map_or(0, |m| m.len());
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut step = 1;
            while !stop.load(Ordering::Relaxed) {
                let steps: Vec<String> = (step..step + 20)
                    .map(|i| writer_step(backend, i, SEEDED))
                    .collect();
                backend.execute(&steps.join("; "));
                step += 20;
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let mut moments = Moments::from_clock();
        for round in 0..kills {
            let before = size();
            let mut child = pg::start(&path, &[]);
            let t0 = Instant::now();
            while size() == before {
                assert!(
                    !writer.is_finished(),
                    "{}: the writer failed",
                    backend.name()
                );
                if let Some(status) = child.try_wait().unwrap() {
                    stop.store(true, Ordering::Relaxed);
                    panic!(
                        "{}: the pipeline stopped ({status}): {}",
                        backend.name(),
                        pg::log_of(&child)
                    );
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(90),
                    "{}: no output",
                    backend.name()
                );
                std::thread::sleep(Duration::from_millis(2));
            }
            let window = match signal_of(backend, round) {
                Some(signal) => {
                    std::fs::write(&signals, signal).unwrap();
                    // Long enough for the snapshot to be under way when the kill comes.
                    200 + moments.below(1000)
                }
                None => moments.below(400),
            };
            std::thread::sleep(Duration::from_millis(window));
            child.kill().unwrap();
            child.wait().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let child = pg::start(&path, &["--stop-when-idle", "3s"]);
    pg::finish(child);
    let replayed = items_replayed(backend, &pg::lines(dir.path()));
    let table = items_state(backend);
    let alive: Vec<&i64> = replayed.keys().filter(|k| !table.contains_key(k)).collect();
    let missing: Vec<&i64> = table.keys().filter(|k| !replayed.contains_key(k)).collect();
    let stale = table
        .iter()
        .filter(|(k, v)| replayed.get(k).is_some_and(|r| r != *v))
        .count();
    assert!(
        alive.is_empty() && missing.is_empty() && stale == 0,
        "{}: after {kills} kills, {} deleted rows alive downstream (first {:?}), {} rows missing (first {:?}), {stale} rows stale",
        backend.name(),
        alive.len(),
        alive.iter().take(5).collect::<Vec<_>>(),
        missing.len(),
        missing.iter().take(5).collect::<Vec<_>>(),
    );
}
