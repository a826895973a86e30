//! Snapshot/stream consistency and crashes: no gap, no duplicate across the boundary, no loss.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::common::*;

/// Replays a key's events: the state Sluice's output says the table is in.
fn replay(events: &[Json]) -> BTreeMap<i64, Json> {
    let mut state = BTreeMap::new();
    for e in events {
        let key = e["key"]["id"].as_i64().expect("key");
        if e["value"].is_null() {
            state.remove(&key);
            continue;
        }
        match e["value"]["op"].as_str() {
            Some("r" | "c" | "u") => {
                state.insert(key, e["value"]["after"].clone());
            }
            Some("d") => {
                state.remove(&key);
            }
            other => panic!("unexpected op {other:?}"),
        }
    }
    state
}

fn table_state(db: &str) -> BTreeMap<i64, Json> {
    psql(db, "select id, n, note from items order by id")
        .lines()
        .map(|l| {
            let mut parts = l.splitn(3, '|');
            let id: i64 = parts.next().unwrap().parse().unwrap();
            let n: i64 = parts.next().unwrap().parse().unwrap();
            let note = parts.next().unwrap();
            (id, serde_json::json!({"id": id, "n": n, "note": note}))
        })
        .collect()
}

const WRITER: &str = "do $$ begin for i in 1..400 loop \
    insert into items (n, note) values (i, 'w' || i); \
    update items set n = n + 1, note = 'u' || i where id = 1 + (i * 7) % 1500; \
    delete from items where id = 2 + (i * 13) % 1500; \
    commit; perform pg_sleep(0.002); end loop; end $$";

#[test]
fn snapshot_meets_the_stream_with_a_concurrent_writer() {
    let db = fresh_db("concurrent");
    psql(
        &db,
        "create table items (id serial primary key, n int not null, note text not null)",
    );
    psql(
        &db,
        "insert into items (n, note) select g, 'seed' || g from generate_series(1, 1500) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.items\n  snapshot.fetch.size: 100\n",
        false,
    );
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || psql(&db, WRITER))
    };
    let mut child = start(&file, &["--stop-when-idle", "3s"]);
    writer.join().expect("writer");
    let _ = &mut child;
    finish(child);
    let events = lines(dir.path());
    // No duplicate across the boundary: a key is read by the snapshot or created by the
    // stream, once.
    let mut born: BTreeMap<i64, usize> = BTreeMap::new();
    for e in &events {
        if matches!(e["value"]["op"].as_str(), Some("r" | "c")) {
            *born.entry(e["key"]["id"].as_i64().unwrap()).or_default() += 1;
        }
    }
    assert!(
        born.values().all(|n| *n == 1),
        "a key was both snapshotted and created, or twice"
    );
    // No gap: replaying the output gives the table's final state.
    assert_eq!(replay(&events), table_state(&db));
    drop_db(&db);
}

#[test]
fn kill_9_during_the_stream_loses_nothing() {
    let db = fresh_db("kill_stream");
    psql(
        &db,
        "create table items (id serial primary key, n int not null, note text not null)",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.items\n",
        false,
    );
    let mut child = start(&file, &[]);
    // Wait until the (empty) snapshot is done and streaming runs.
    let slot_active = || {
        psql(
            &db,
            &format!(
                "select count(*) from pg_replication_slots where slot_name = '{db}' and active"
            ),
        )
        .trim()
            == "1"
    };
    let t0 = Instant::now();
    while !slot_active() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "slot never became active"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            psql(&db, "do $$ begin for i in 1..3000 loop insert into items (n, note) values (i, 'x'); commit; end loop; end $$")
        })
    };
    wait_lines(dir.path(), 500, &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    writer.join().unwrap();
    let child = start(&file, &["--stop-when-idle", "3s"]);
    finish(child);
    let mut ids: Vec<i64> = lines(dir.path())
        .iter()
        .map(|e| e["key"]["id"].as_i64().unwrap())
        .collect();
    let total = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids,
        (1..=3000).collect::<Vec<_>>(),
        "rows were lost across kill -9"
    );
    assert!(total >= 3000);
    drop_db(&db);
}

#[test]
fn kill_9_during_the_snapshot_restarts_it_and_loses_nothing() {
    let db = fresh_db("kill_snapshot");
    psql(
        &db,
        "create table items (id serial primary key, n int not null, note text not null)",
    );
    psql(
        &db,
        "insert into items (n, note) select g, repeat('x', 200) from generate_series(1, 60000) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        "  table.include.list: public.items\n  snapshot.fetch.size: 500\n",
        false,
    );
    // The first run writes into a FIFO that this test reads at its own pace: backpressure
    // holds the snapshot open until the kill, whatever the machine's speed.
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let yaml = std::fs::read_to_string(&file).unwrap();
    let out = format!("{}/out.jsonl", dir.path().display());
    let first_run = yaml
        .replace(&out, &format!("{}\n    fsync: false", fifo.display()))
        .replace(
            "offsets:",
            "max_queue_size: 1000\nmax_batch_size: 100\noffsets:",
        );
    let first_file = dir.path().join("first.yaml");
    std::fs::write(&first_file, first_run).unwrap();
    let mut child = start(&first_file, &[]);
    let mut seen: Vec<Json> = Vec::new();
    {
        use std::io::BufRead;
        let reader = std::io::BufReader::new(std::fs::File::open(&fifo).unwrap());
        for line in reader.lines().take(2000) {
            seen.push(serde_json::from_str(&line.unwrap()).unwrap());
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
    // The committed position at the kill is inside the snapshot (or nothing was committed yet).
    let offsets = std::fs::read_to_string(dir.path().join("data/offsets.json")).unwrap_or_default();
    assert!(
        !offsets.contains("lsn") || offsets.contains(r#"snapshot_completed\":false"#),
        "the kill landed after the snapshot: {offsets}"
    );
    assert_eq!(seen.len(), 2000);
    psql(
        &db,
        "insert into items (n, note) values (-1, 'after the crash')",
    );
    let child = start(&file, &["--stop-when-idle", "3s"]);
    finish(child);
    let mut events = lines(dir.path());
    events.extend(seen);
    let mut ids: Vec<i64> = events
        .iter()
        .map(|e| e["key"]["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids,
        (1..=60001).collect::<Vec<_>>(),
        "rows were lost across kill -9 in the snapshot"
    );
    drop_db(&db);
}

/// `snapshot.mode` across restarts: `initial` resumes without a new snapshot, and refuses with
/// a clear line when the slot is gone; `when_needed` then takes a new snapshot; `always`
/// snapshots on every start.
#[test]
fn snapshot_modes_across_restarts() {
    let db = fresh_db("modes");
    psql(&db, "create table items (id int primary key)");
    psql(&db, "insert into items select generate_series(1, 5)");
    let dir = tempfile::tempdir().unwrap();
    let with_mode = |mode: &str| {
        pipeline(
            dir.path(),
            &db,
            &format!("  table.include.list: public.items\n  snapshot.mode: {mode}\n"),
            false,
        )
    };
    let reads = |dir: &std::path::Path| {
        lines(dir)
            .iter()
            .filter(|e| e["value"]["op"] == "r")
            .count()
    };
    // initial: a snapshot, then a restart streams without a new one.
    finish(start(&with_mode("initial"), &["--stop-when-idle", "1s"]));
    assert_eq!(reads(dir.path()), 5);
    psql(&db, "insert into items values (6)");
    finish(start(&with_mode("initial"), &["--stop-when-idle", "1s"]));
    assert_eq!(reads(dir.path()), 5, "initial took a second snapshot");
    assert!(lines(dir.path())
        .iter()
        .any(|e| e["value"]["op"] == "c" && e["key"]["id"] == 6));
    // always: a new snapshot on every start.
    finish(start(&with_mode("always"), &["--stop-when-idle", "1s"]));
    assert_eq!(reads(dir.path()), 5 + 6);
    // The slot disappears: initial refuses, when_needed re-snapshots.
    psql(
        "postgres",
        &format!("select pg_drop_replication_slot('{db}')"),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg(with_mode("initial"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no longer exists") && stderr.contains("when_needed"),
        "{stderr}"
    );
    finish(start(
        &with_mode("when_needed"),
        &["--stop-when-idle", "1s"],
    ));
    assert_eq!(reads(dir.path()), 5 + 6 + 6);
    drop_db(&db);
}

/// `snapshot.select.statement.overrides` (Debezium's form: the list, then one key per table)
/// replaces a table's snapshot query; the stream is unaffected.
#[test]
fn snapshot_select_overrides_filter_the_snapshot() {
    let db = fresh_db("overrides");
    psql(&db, "create table items (id int primary key, n int)");
    psql(
        &db,
        "insert into items select g, g * 10 from generate_series(1, 10) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let source = "  table.include.list: public.items\n  snapshot.select.statement.overrides: public.items\n  snapshot.select.statement.overrides.public.items: SELECT id, n FROM public.items WHERE id <= 3\n";
    let file = pipeline(dir.path(), &db, source, false);
    let mut child = start(&file, &[]);
    wait_lines(dir.path(), 3, &mut child);
    psql(&db, "insert into items values (11, 110)");
    wait_lines(dir.path(), 4, &mut child);
    stop(&child);
    finish(child);
    let events = lines(dir.path());
    let reads: Vec<i64> = events
        .iter()
        .filter(|e| e["value"]["op"] == "r")
        .map(|e| e["key"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(reads, vec![1, 2, 3]);
    assert_eq!(events.last().unwrap()["value"]["after"]["n"], 110);
    drop_db(&db);
}
