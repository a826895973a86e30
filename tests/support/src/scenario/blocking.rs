//! Blocking snapshots signalled in the middle of a writer, for every source that has them: the
//! pipeline streams `items`; again and again a writer runs inserts, updates and deletes (every
//! tenth step a transaction) and a blocking `execute-snapshot` is signalled while it runs; once
//! the writer is done and a row only the stream can create has come out, the whole output
//! replayed is the table, every time.

use std::time::{Duration, Instant};

use super::{items_replayed, items_state, seed_items, writer_step, Backend};
use crate::pg;

/// Rows `items` is seeded with.
const SEEDED: usize = 2_000;
/// Writer steps per round; the signal goes out after a third of them.
const STEPS: usize = 240;

/// The number of `op` events of `items` in `events`.
fn count(events: &[serde_json::Value], op: &str) -> usize {
    events
        .iter()
        .filter(|e| {
            e["topic"]
                .as_str()
                .is_some_and(|t| t.to_ascii_lowercase().ends_with(".items"))
                && e["value"]["payload"]["op"] == op
        })
        .count()
}

/// Runs `rounds` rounds; panics at the first whose output is not the table.
pub fn run(backend: &dyn Backend, rounds: usize) {
    seed_items(backend, SEEDED);
    let dir = tempfile::tempdir().unwrap();
    let signals = dir.path().join("signals.jsonl");
    let keys = [
        ("signal.enabled.channels", "file".into()),
        ("signal.file", (&signals).into()),
        ("signal.poll.interval.ms", 20u32.into()),
    ];
    let path = backend.pipeline(dir.path(), &keys);
    let mut child = pg::start(&path, &[]);
    pg::wait_for(dir.path(), "the initial snapshot", &mut child, |e| {
        count(e, "r") >= SEEDED
    });
    let (table, id, n, note) = (
        backend.table("items"),
        backend.column("id"),
        backend.column("n"),
        backend.column("note"),
    );
    for round in 0..rounds {
        let reads_before = count(&pg::lines(dir.path()), "r");
        let first = 1 + round * STEPS;
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| {
                for i in first..first + STEPS {
                    backend.execute(&writer_step(backend, i, SEEDED));
                }
            });
            // A third of the way in: the writer goes on while the snapshot reads.
            let t0 = Instant::now();
            while backend
                .query(&format!(
                    "SELECT COUNT(*) FROM {table} WHERE {id} > {}",
                    SEEDED + first + STEPS / 3
                ))
                .first()
                .and_then(|r| r.first().cloned().flatten())
                .unwrap_or_default()
                == "0"
                && t0.elapsed() < Duration::from_secs(30)
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            let signal = serde_json::json!({
                "id": format!("blocking-{round}"),
                "type": "execute-snapshot",
                "data": {"data-collections": [backend.collection("items")], "type": "blocking"},
            });
            std::fs::write(&signals, format!("{signal}\n")).unwrap();
            writer.join().unwrap();
        });
        // A row only the stream can create, after all the writer's: the backlog is out.
        let end = format!("end{round}");
        let end_id = 10_000_000 + round;
        backend.execute(&format!(
            "INSERT INTO {table} ({id}, {n}, {note}) VALUES ({end_id}, 0, '{end}')"
        ));
        let note_field = backend.field("note");
        pg::wait_for(
            dir.path(),
            &format!("round {round}'s end row and snapshot"),
            &mut child,
            |e| {
                count(e, "r") >= reads_before + SEEDED / 2
                    && e.iter().any(|e| {
                        let p = &e["value"]["payload"];
                        p["op"] == "c" && p["after"][&note_field] == end.as_str()
                    })
            },
        );
        let replayed = items_replayed(backend, &pg::lines(dir.path()));
        let state = items_state(backend);
        if replayed != state {
            let wrong: Vec<String> = state
                .keys()
                .chain(replayed.keys())
                .filter(|k| state.get(k) != replayed.get(k))
                .take(8)
                .map(|k| {
                    format!(
                        "{k}: table {:?}, output {:?}",
                        state.get(k),
                        replayed.get(k)
                    )
                })
                .collect();
            pg::stop(&child);
            let _ = child.wait();
            panic!(
                "{}: round {round}: the output is not the table ({} keys differ): {}",
                backend.name(),
                wrong.len(),
                wrong.join("; ")
            );
        }
    }
    pg::stop(&child);
    pg::finish(child);
}
