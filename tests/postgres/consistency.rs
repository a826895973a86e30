//! Snapshot/stream consistency and crashes: no gap, no duplicate across the boundary, no loss.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::common::*;
use super::moments::Moments;

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
        &[
            ("table.include.list", "public.items".into()),
            ("snapshot.fetch.size", "100".into()),
        ],
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
        &[("table.include.list", "public.items".into())],
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
    let keys: &[(&str, Scalar)] = &[
        ("table.include.list", "public.items".into()),
        ("snapshot.fetch.size", "500".into()),
    ];
    let file = pipeline(dir.path(), &db, keys, false);
    // The first run writes into a FIFO that this test reads at its own pace: backpressure
    // holds the snapshot open until the kill.
    let first = base(dir.path(), &db, source(&db).set_all(keys), false);
    let (first_file, fifo) = fifo_variant(dir.path(), first, false);
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
            &[
                ("table.include.list", "public.items".into()),
                ("snapshot.mode", mode.into()),
            ],
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

/// `snapshot.mode: configuration_based`: the flags decide each start, as Debezium's
/// `ConfigurationBasedSnapshotter`: data without the stream, then the stream without data,
/// then a new snapshot when the slot is gone only with `snapshot.on.data.error`.
#[test]
fn configuration_based_follows_its_flags_across_restarts() {
    let db = fresh_db("confbased");
    psql(&db, "create table items (id int primary key)");
    psql(&db, "insert into items select generate_series(1, 5)");
    let dir = tempfile::tempdir().unwrap();
    let with_flags = |flags: &[&str]| {
        let mut component = source(&db)
            .set("table.include.list", "public.items")
            .set("snapshot.mode", "configuration_based");
        for flag in flags {
            let key = format!("snapshot.mode.configuration.based.{flag}");
            component = component.set(&key, true);
        }
        base(dir.path(), &db, component, false).write(dir.path())
    };
    let ops = |dir: &std::path::Path| {
        lines(dir)
            .iter()
            .map(|e| e["value"]["op"].as_str().unwrap_or("-").to_owned())
            .collect::<Vec<_>>()
    };
    // Data, no stream: the snapshot, then the pipeline ends by itself.
    finish(start(&with_flags(&["snapshot.data"]), &[]));
    assert_eq!(ops(dir.path()), ["r"; 5]);
    psql(&db, "insert into items values (6)");
    // The stream, no data: from the stored position.
    finish(start(
        &with_flags(&["start.stream"]),
        &["--stop-when-idle", "1s"],
    ));
    let seen = ops(dir.path());
    assert_eq!(&seen[5..], ["c"], "streamed without a snapshot: {seen:?}");
    // The slot is gone: without snapshot.on.data.error the start refuses...
    psql(
        "postgres",
        &format!("select pg_drop_replication_slot('{db}')"),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg(with_flags(&["start.stream"]))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no longer exists"), "{stderr}");
    // ...and with it a new snapshot is taken, then the stream goes on.
    finish(start(
        &with_flags(&["start.stream", "snapshot.on.data.error"]),
        &["--stop-when-idle", "1s"],
    ));
    let reads = ops(dir.path()).iter().filter(|o| *o == "r").count();
    assert_eq!(reads, 5 + 6, "a new snapshot of the six rows");
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
    let keys: &[(&str, Scalar)] = &[
        ("table.include.list", "public.items".into()),
        ("snapshot.select.statement.overrides", "public.items".into()),
        (
            "snapshot.select.statement.overrides.public.items",
            "SELECT id, n FROM public.items WHERE id <= 3".into(),
        ),
    ];
    let file = pipeline(dir.path(), &db, keys, false);
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

#[test]
fn a_parallel_chunked_snapshot_reads_every_row_once_with_debezium_markers() {
    let db = fresh_db("parallel");
    psql(
        &db,
        "create table items (id serial primary key, n int not null, note text not null);
         insert into items (n, note) select g, 'seed' || g from generate_series(1, 1500) g;
         analyze items;
         create table tags (name text primary key, v int);
         insert into tags select 'tag' || g, g from generate_series(1, 300) g;
         create table logs (line text);
         insert into logs select 'line' || g from generate_series(1, 200) g;
         create table empty (id bigint primary key);
         create table big (id bigint primary key, v int);
         insert into big select g * 3, g from generate_series(1, 2500) g;",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        &[
            (
                "table.include.list",
                "public.items,public.tags,public.logs,public.empty,public.big".into(),
            ),
            ("snapshot.max.threads", "3".into()),
            ("snapshot.chunk.size", "200".into()),
        ],
        false,
    );
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || psql(&db, WRITER))
    };
    let child = start(&file, &["--stop-when-idle", "3s"]);
    writer.join().expect("writer");
    let log = finish(child);
    // items: 1500/200 -> 8 ranges; big: never analyzed, its key span 3..7500 -> 38 ranges; the
    // others are one unit each.
    assert!(log.contains("units=49"), "{log}");
    let events = lines(dir.path());
    let snapshot: Vec<&Json> = events.iter().filter(|e| e["value"]["op"] == "r").collect();
    let count = |table: &str| {
        snapshot
            .iter()
            .filter(|e| e["value"]["source"]["table"] == table)
            .count()
    };
    assert_eq!(count("tags"), 300);
    assert_eq!(count("logs"), 200);
    assert_eq!(count("big"), 2500);
    let mut big: Vec<i64> = snapshot
        .iter()
        .filter(|e| e["value"]["source"]["table"] == "big")
        .map(|e| e["key"]["id"].as_i64().unwrap())
        .collect();
    big.sort_unstable();
    big.dedup();
    assert_eq!(big.len(), 2500, "a row of a chunked table was read twice");
    // Markers: one `first` (the first event), one `last` (the last snapshot event), and per
    // table at most one first/last_in_data_collection.
    let markers: Vec<&str> = snapshot
        .iter()
        .map(|e| e["value"]["source"]["snapshot"].as_str().unwrap())
        .collect();
    assert_eq!(markers[0], "first");
    assert_eq!(markers[markers.len() - 1], "last");
    assert_eq!(markers.iter().filter(|m| **m == "first").count(), 1);
    assert_eq!(markers.iter().filter(|m| **m == "last").count(), 1);
    assert_eq!(
        markers
            .iter()
            .filter(|m| **m == "last_in_data_collection")
            .count(),
        3,
        "four tables with rows: three end with last_in_data_collection, one with last"
    );
    // With a concurrent writer on `items`, no gap and no duplicate across the boundary.
    let items: Vec<Json> = events
        .iter()
        .filter(|e| e["topic"] == "dbserver1.public.items")
        .cloned()
        .collect();
    let mut born: BTreeMap<i64, usize> = BTreeMap::new();
    for e in &items {
        if matches!(e["value"]["op"].as_str(), Some("r" | "c")) {
            *born.entry(e["key"]["id"].as_i64().unwrap()).or_default() += 1;
        }
    }
    assert!(
        born.values().all(|n| *n == 1),
        "an items key was read twice"
    );
    assert_eq!(replay(&items), table_state(&db));
    drop_db(&db);
}

/// Waits until no walsender holds the test's slot (a killed pipeline's walsender ends a moment
/// after it).
fn wait_slot_released(db: &str) {
    let t0 = Instant::now();
    while psql(
        db,
        &format!("select count(*) from pg_replication_slots where slot_name = '{db}' and active"),
    )
    .trim()
        != "0"
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the slot stayed active"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The output's size and its last complete line's `op`, read from the file's end only (the
/// output grows to tens of megabytes; the test must see a snapshot while it runs).
fn output_tail(dir: &std::path::Path) -> (u64, Option<String>) {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(dir.join("out.jsonl")) else {
        return (0, None);
    };
    let len = file.metadata().unwrap().len();
    let from = len.saturating_sub(64 * 1024);
    file.seek(SeekFrom::Start(from)).unwrap();
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).unwrap();
    let end = tail.iter().rposition(|b| *b == b'\n').unwrap_or(0);
    let last = tail[..end]
        .rsplit(|b| *b == b'\n')
        .next()
        .and_then(|l| serde_json::from_slice::<Json>(l).ok())
        .and_then(|e| e["value"]["op"].as_str().map(str::to_owned));
    (len, last)
}

/// The state the output says the table is in, read line by line.
fn replay_file(dir: &std::path::Path) -> BTreeMap<i64, Json> {
    use std::io::BufRead;
    let file = std::fs::File::open(dir.join("out.jsonl")).unwrap();
    let mut state = BTreeMap::new();
    for line in std::io::BufReader::new(file).lines() {
        let e: Json = serde_json::from_str(&line.unwrap()).unwrap();
        let key = e["key"]["id"].as_i64().expect("key");
        match e["value"]["op"].as_str() {
            Some("r" | "c" | "u") => {
                state.insert(key, e["value"]["after"].clone());
            }
            _ => {
                state.remove(&key);
            }
        }
    }
    state
}

/// kill -9 at 20 random moments, half inside the initial snapshot and half in the stream, under
/// a writer that inserts, updates and deletes throughout: the state rebuilt from everything
/// the runs wrote equals the table. (A snapshot cut off used to drop the slot and take a new
/// one, so every change committed between the two snapshots was lost: deleted rows stayed.)
#[test]
fn kill_9_at_random_moments_under_a_writer_loses_nothing() {
    let db = fresh_db("kill_random");
    psql(&db, "create table items (id serial primary key, n int not null, note text not null); create table stop_writer (x int)");
    psql(
        &db,
        "insert into items (n, note) select g, 'x' || g from generate_series(1, 60000) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        &[("table.include.list", "public.items".into())],
        false,
    );
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            psql(
                &db,
                "do $$ declare top int; begin loop \
                exit when exists (select 1 from stop_writer); \
                insert into items (n, note) values (0, 'new') returning id into top; \
                update items set n = n + 1, note = 'u' where id = 1 + floor(random() * top)::int; \
                delete from items where id = 1 + floor(random() * top)::int; \
                commit; perform pg_sleep(0.005); end loop; end $$",
            )
        })
    };
    let mut moments = Moments::from_clock();
    let offsets = dir.path().join("data/offsets.json");
    let mut in_snapshot = 0;
    for round in 0..20 {
        // Even rounds: a fresh start (no offsets) with its snapshot, killed while it runs.
        if round % 2 == 0 {
            let _ = std::fs::remove_file(&offsets);
        }
        let (before, _) = output_tail(dir.path());
        let mut child = start(&file, &[]);
        if round % 2 == 0 {
            let t0 = Instant::now();
            while output_tail(dir.path()).0 == before {
                assert!(child.try_wait().unwrap().is_none(), "{}", log_of(&child));
                assert!(t0.elapsed() < Duration::from_secs(60), "no snapshot row");
                std::thread::sleep(Duration::from_millis(5));
            }
        } else {
            active_slot_pid(&db, &mut child);
        }
        let window = if round % 2 == 0 { 150 } else { 300 };
        std::thread::sleep(Duration::from_millis(moments.below(window)));
        child.kill().unwrap();
        child.wait().unwrap();
        let (after, last) = output_tail(dir.path());
        if after > before && last.as_deref() == Some("r") {
            in_snapshot += 1;
        }
        wait_slot_released(&db);
    }
    psql(&db, "insert into stop_writer values (1)");
    writer.join().unwrap();
    finish(start(&file, &["--stop-when-idle", "3s"]));
    assert!(
        in_snapshot >= 5,
        "only {in_snapshot} kills landed in a snapshot"
    );
    let rebuilt = replay_file(dir.path());
    let table = table_state(&db);
    let lost = table.keys().filter(|k| !rebuilt.contains_key(k)).count();
    let alive = rebuilt.keys().filter(|k| !table.contains_key(k)).count();
    assert!(
        lost == 0 && alive == 0,
        "{lost} rows missing, {alive} deleted rows alive (of {})",
        table.len()
    );
    assert_eq!(rebuilt, table);
    assert!(
        in_snapshot >= 5,
        "only {in_snapshot} kills landed in a snapshot"
    );
    drop_db(&db);
}

/// `snapshot.include.collection.list`: the snapshot reads the listed tables only; the others
/// are streamed.
#[test]
fn the_snapshot_collection_list_chooses_the_tables_read() {
    let db = fresh_db("snapshot_collections");
    psql(
        &db,
        "create table items (id int primary key); insert into items values (1), (2);
         create table other (id int primary key); insert into other values (10), (11);",
    );
    let dir = tempfile::tempdir().unwrap();
    let keys: &[(&str, Scalar)] = &[
        ("table.include.list", "public.items,public.other".into()),
        ("snapshot.include.collection.list", "public.items".into()),
    ];
    let file = pipeline(dir.path(), &db, keys, false);
    let mut child = start(&file, &[]);
    wait_lines(dir.path(), 2, &mut child);
    psql(&db, "insert into other values (12)");
    wait_lines(dir.path(), 3, &mut child);
    stop(&child);
    finish(child);
    let seen: Vec<(String, String, i64)> = lines(dir.path())
        .iter()
        .map(|e| {
            (
                e["topic"].as_str().unwrap().to_owned(),
                e["value"]["op"].as_str().unwrap().to_owned(),
                e["key"]["id"].as_i64().unwrap(),
            )
        })
        .collect();
    let (items, other) = (
        "dbserver1.public.items".to_owned(),
        "dbserver1.public.other".to_owned(),
    );
    assert_eq!(
        seen,
        [
            (items.clone(), "r".to_owned(), 1),
            (items, "r".to_owned(), 2),
            (other, "c".to_owned(), 12)
        ]
    );
    drop_db(&db);
}
