//! Incremental snapshots driven by signals, merged with the stream by watermarks.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::common::*;

/// The table state the output describes: last event per key, deletes and tombstones removing.
fn replay(events: &[Json], topic: &str) -> BTreeMap<String, Json> {
    let mut state = BTreeMap::new();
    for e in events.iter().filter(|e| e["topic"] == topic) {
        let key = e["key"].to_string();
        match e["value"]["op"].as_str() {
            _ if e["value"].is_null() => {
                state.remove(&key);
            }
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

fn table_state(db: &str, columns: &[&str], key: &[&str]) -> BTreeMap<String, Json> {
    let sql = format!(
        "select json_build_object({}), json_build_object({}) from items",
        key.iter()
            .map(|k| format!("'{k}', {k}"))
            .collect::<Vec<_>>()
            .join(", "),
        columns
            .iter()
            .map(|c| format!("'{c}', {c}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    psql(db, &sql)
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('|').unwrap();
            let k: Json = serde_json::from_str(k).unwrap();
            (k.to_string(), serde_json::from_str(v).unwrap())
        })
        .collect()
}

/// Waits until the output describes `theirs` (or `seconds` pass, which only bounds a failure:
/// the stream may lag behind other databases' WAL), and returns what it describes.
fn await_state(
    dir: &std::path::Path,
    child: &mut std::process::Child,
    theirs: &BTreeMap<String, Json>,
    seconds: u64,
) -> BTreeMap<String, Json> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        let ours = replay(&lines(dir), "dbserver1.public.items");
        if ours == *theirs || std::time::Instant::now() > deadline {
            return ours;
        }
        assert!(child.try_wait().unwrap().is_none(), "sluice stopped early");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Waits until the pipeline logs that its incremental snapshot completed.
fn await_completed(child: &mut std::process::Child) {
    let t0 = std::time::Instant::now();
    while !log_so_far(child).contains("notification=\"COMPLETED\"") {
        assert!(
            child.try_wait().unwrap().is_none() && t0.elapsed().as_secs() < 120,
            "the snapshot did not complete:\n{}",
            log_so_far(child)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

struct Case {
    name: &'static str,
    rows: u32,
    chunk: usize,
    strategy: &'static str,
    composite: bool,
    sslmode: &'static str,
    /// Streamed changes expected between the snapshot's first and last row: proof that the
    /// writers crossed the chunks' windows. How many depends on how fast the snapshot runs
    /// against the writers, so this is a floor well below what a run usually shows.
    overlap: usize,
    /// `read.only: true`, as a role that cannot write (`default_transaction_read_only`).
    read_only: bool,
}

fn run_case(c: &Case) {
    let db = fresh_db(c.name);
    psql(&db, SIGNAL_TABLE);
    let (create, key): (&str, &[&str]) = if c.composite {
        (
            "create table items (region int not null, id int not null, n int not null, note text, primary key (region, id)); create index on items (id)",
            &["region", "id"],
        )
    } else {
        (
            "create table items (region int not null, id int primary key, n int not null, note text)",
            &["id"],
        )
    };
    psql(&db, create);
    psql(
        &db,
        &format!(
            "insert into items select g % 7, g, g, 'seed' from generate_series(1, {}) g",
            c.rows
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let keys: &[(&str, Scalar)] = &[
        ("table.include.list", "public.items".into()),
        ("snapshot.mode", "no_data".into()),
        (
            "signal.data.collection",
            format!("{db}.public.debezium_signal").into(),
        ),
        (
            "incremental.snapshot.chunk.size",
            c.chunk.to_string().into(),
        ),
        (
            "incremental.snapshot.watermarking.strategy",
            c.strategy.into(),
        ),
        ("database.sslmode", c.sslmode.into()),
    ];
    let mut component = source(&db).set_all(keys);
    let role = format!("ro_{db}");
    if c.read_only {
        // A role that can read and replicate but not write; the publication made beforehand.
        psql(
            &db,
            &format!(
                "drop role if exists {role}; create role {role} login replication; \
                 grant select on all tables in schema public to {role}; \
                 alter role {role} set default_transaction_read_only = on; \
                 create publication {db} for table items, debezium_signal"
            ),
        );
        component = component
            .set("database.user", &role)
            .set("publication.autocreate.mode", "disabled")
            .set("read.only", true);
    }
    let file = base(dir.path(), &db, component, false).write(dir.path());
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    // The stream is flowing once a change made now comes out.
    psql(&db, "update items set note = 'flowing' where id = 1");
    wait_lines(dir.path(), 1, &mut child);
    // A malformed signal first: logged and ignored, the stream goes on.
    psql(
        &db,
        "insert into debezium_signal values ('bad-1', 'execute-snapshot', '{not json')",
    );
    psql(
        &db,
        "insert into debezium_signal values ('inc-1', 'execute-snapshot', '{\"data-collections\": [\"public.items\"], \"type\": \"incremental\"}')",
    );
    // The writers (two sessions): inserts, updates and deletes all over the key range while
    // chunks are read, at least 4,000 rounds (12,000 changes) and on until the snapshot has
    // completed, so that they overlap the whole snapshot however fast that runs.
    let rows = c.rows;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let writer_db = db.clone();
            let writing = done.clone();
            std::thread::spawn(move || {
                // Rounds in blocks of 200, the writers taking turns: keys never collide.
                let mut from = 1 + 200 * w;
                while from <= 4000 || !writing.load(std::sync::atomic::Ordering::Relaxed) {
                    psql(
                        &writer_db,
                        &format!(
                            "do $$ begin for i in {from}..{} loop \
                             insert into items values (i % 7, {rows} + i, i, 'new'); \
                             update items set n = n + 1, note = 'u' || i where id = 1 + (i * 37) % {rows}; \
                             delete from items where id = 1 + (i * 101) % {rows}; \
                             if i % 20 = 0 then commit; end if; end loop; end $$",
                            from + 199
                        ),
                    );
                    from += 400;
                }
            })
        })
        .collect();
    await_completed(&mut child);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    // Done when the output describes the table (no timing assumption: the stream may lag
    // behind other databases' WAL); the deadline only bounds a failure.
    let theirs = table_state(&db, &["region", "id", "n", "note"], key);
    let ours = await_state(dir.path(), &mut child, &theirs, 120);
    stop(&child);
    let log = finish(child);
    let events = lines(dir.path());
    let missing: Vec<&String> = theirs
        .keys()
        .filter(|k| !ours.contains_key(*k))
        .take(5)
        .collect();
    let stale: Vec<&String> = theirs
        .keys()
        .filter(|k| ours.get(*k).is_some_and(|v| Some(v) != theirs.get(*k)))
        .take(5)
        .collect();
    let extra: Vec<&String> = ours
        .keys()
        .filter(|k| !theirs.contains_key(*k))
        .take(5)
        .collect();
    for k in stale.iter().chain(&missing) {
        let seen: Vec<String> = events
            .iter()
            .filter(|e| *k == &e["key"].to_string())
            .map(|e| {
                format!(
                    "{}:{}:{}",
                    e["value"]["op"], e["value"]["source"]["snapshot"], e["value"]["after"]["n"]
                )
            })
            .collect();
        eprintln!(
            "{k}: table {:?}, events {seen:?}",
            theirs.get(*k).map(|v| v["n"].clone())
        );
    }
    assert!(
        ours == theirs,
        "the output does not describe the table: missing {missing:?}, stale {stale:?}, resurrected {extra:?}\n{}",
        {
            let all: Vec<&str> = log.lines().collect();
            all[all.len().saturating_sub(40)..].join("\n")
        }
    );
    // The writer's changes were streamed while the snapshot ran (between its first and last
    // row), or the test would not test the de-duplication.
    let is_snapshot_row = |e: &&Json| e["value"]["source"]["snapshot"] == "incremental";
    let first = events.iter().position(|e| is_snapshot_row(&e)).unwrap_or(0);
    let last = events
        .iter()
        .rposition(|e| is_snapshot_row(&e))
        .unwrap_or(0);
    let during = events[first..last]
        .iter()
        .filter(|e| e["topic"] == "dbserver1.public.items" && !is_snapshot_row(e))
        .count();
    eprintln!("{}: {during} streamed changes during the snapshot", c.name);
    assert!(
        during >= c.overlap,
        "only {during} streamed changes during the snapshot"
    );
    assert!(
        log.contains("Signal refused") && log.contains("bad-1"),
        "{log}"
    );
    assert!(log.contains("notification=\"COMPLETED\""), "{log}");
    let watermarks = psql(
        &db,
        "select count(*) from debezium_signal where type like 'snapshot-window-%'",
    );
    if c.read_only {
        assert_eq!(
            watermarks.trim(),
            "0",
            "a read-only snapshot writes no watermark"
        );
    } else if c.strategy == "insert_insert" {
        assert_ne!(watermarks.trim(), "0");
    }
    assert!(
        events
            .iter()
            .any(|e| e["value"]["source"]["snapshot"] == "incremental"),
        "no incremental snapshot row"
    );
    assert!(events
        .iter()
        .all(|e| e["topic"] != "dbserver1.public.debezium_signal"));
    drop_db(&db);
    if c.read_only {
        psql("postgres", &format!("drop role if exists {role}"));
    }
}

#[test]
fn incremental_snapshot_with_a_concurrent_writer_insert_insert() {
    run_case(&Case {
        name: "inc_ii",
        rows: 100_000,
        chunk: 1024,
        strategy: "insert_insert",
        composite: false,
        sslmode: "disable",
        overlap: 10_000,
        read_only: false,
    });
}

#[test]
fn incremental_snapshot_composite_key_small_chunks_insert_delete() {
    run_case(&Case {
        name: "inc_id",
        rows: 20_000,
        chunk: 97,
        strategy: "insert_delete",
        composite: true,
        sslmode: "disable",
        overlap: 1_000,
        read_only: false,
    });
}

/// `read.only: true` as a role that cannot write: windows bounded by WAL positions.
#[test]
fn read_only_incremental_snapshot_with_a_concurrent_writer() {
    run_case(&Case {
        name: "inc_ro",
        rows: 50_000,
        chunk: 1024,
        strategy: "insert_insert",
        composite: false,
        sslmode: "disable",
        // CI saw 4,786 on a fast run: enough to show the windows were crossed by changes.
        overlap: 2_000,
        read_only: true,
    });
}

/// Both connections encrypted (`require`): the stall an earlier machine showed over TLS.
#[test]
fn incremental_snapshot_over_tls_with_a_concurrent_writer() {
    if psql("postgres", "show ssl").trim() != "on" {
        eprintln!("skipped: this PostgreSQL runs without TLS");
        return;
    }
    run_case(&Case {
        name: "inc_tls",
        rows: 60_000,
        chunk: 500,
        strategy: "insert_insert",
        composite: false,
        sslmode: "require",
        overlap: 5_000,
        read_only: false,
    });
}

/// A fresh database with the signaling table and 60,000 `items` rows, and a pipeline that
/// streams them with incremental snapshots in chunks of 500.
fn seeded_items(name: &str) -> (String, tempfile::TempDir, std::path::PathBuf) {
    let db = fresh_db(name);
    psql(&db, SIGNAL_TABLE);
    psql(
        &db,
        "create table items (region int not null, id int primary key, n int not null, note text)",
    );
    psql(
        &db,
        "insert into items select g % 7, g, g, 'seed' from generate_series(1, 60000) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        &[
            ("table.include.list", "public.items".into()),
            ("snapshot.mode", "no_data".into()),
            ("signal.data.collection", "public.debezium_signal".into()),
            ("incremental.snapshot.chunk.size", "500".into()),
        ],
        false,
    );
    (db, dir, file)
}

/// Asks for an incremental snapshot of `items` with the signal `id`.
fn signal_items(db: &str, id: &str) {
    psql(
        db,
        &format!("insert into debezium_signal values ('{id}', 'execute-snapshot', '{{\"data-collections\": [\"public.items\"]}}')"),
    );
}

/// The incremental snapshot's chunks in the committed position (0 before the first).
fn committed_chunks(dir: &std::path::Path, db: &str) -> u64 {
    let text = std::fs::read_to_string(dir.join("data/offsets.json")).unwrap_or_default();
    let v: Json = serde_json::from_str(&text).unwrap_or_default();
    let position: Json = v["pipelines"][db]["position"]
        .as_str()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_default();
    position["incremental"]["chunks"].as_u64().unwrap_or(0)
}

/// Waits until the committed position holds at least `chunks` delivered chunks.
fn await_committed_chunks(
    dir: &std::path::Path,
    db: &str,
    chunks: u64,
    child: &mut std::process::Child,
) {
    let t0 = std::time::Instant::now();
    while committed_chunks(dir, db) < chunks {
        if t0.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            panic!("the snapshot does not progress");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Restarts the pipeline until its output describes `items` exactly, stops it, and returns the
/// chunk the snapshot `id` resumed after.
fn restart_until_described(
    db: &str,
    dir: &std::path::Path,
    file: &std::path::Path,
    id: &str,
) -> usize {
    let mut child = start(file, &[]);
    let theirs = table_state(db, &["region", "id", "n", "note"], &["id"]);
    let ours = await_state(dir, &mut child, &theirs, 300);
    stop(&child);
    let log = finish(child);
    assert!(
        ours == theirs,
        "the output does not describe the table after the restart"
    );
    let resumed = regex::Regex::new(&format!(
        r"Resuming the incremental snapshot after its last delivered chunk\. id={id} tables=\[.*\] chunks=(\d+)"
    ))
    .unwrap()
    .captures(&log)
    .unwrap_or_else(|| panic!("no resume:\n{log}"))[1]
        .parse::<usize>()
        .unwrap();
    resumed
}

/// kill -9 in the middle of an incremental snapshot: the restarted pipeline continues from the
/// last chunk whose rows were delivered (not from the start of the table), and the output still
/// describes the table exactly.
#[test]
fn kill_9_during_an_incremental_snapshot_resumes_from_the_last_chunk() {
    let (db, dir, file) = seeded_items("inc_kill");
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    signal_items(&db, "inc-k");
    let incremental = |dir: &std::path::Path| {
        lines(dir)
            .iter()
            .filter(|e| e["value"]["source"]["snapshot"] == "incremental")
            .count()
    };
    // Killed once the committed position holds at least 20 delivered chunks.
    await_committed_chunks(dir.path(), &db, 20, &mut child);
    child.kill().unwrap();
    let _ = child.wait();
    let before = incremental(dir.path());
    // What the restart must resume after: the chunks acknowledged by the sink (rows written
    // after them, not yet acknowledged at the kill, come again).
    let at_kill = committed_chunks(dir.path(), &db) as usize;
    psql(
        &db,
        "update items set n = -1 where id % 1000 = 0; delete from items where id % 997 = 0",
    );
    let resumed = restart_until_described(&db, dir.path(), &file, "inc-k");
    // It resumed where it stopped: the chunks delivered before the kill are not read again.
    assert!(
        resumed >= at_kill && resumed >= 20,
        "resumed at chunk {resumed}, {at_kill} were acknowledged before the kill"
    );
    // Only the rows after the acknowledged chunks came twice (the table lost about 60 rows).
    let total = incremental(dir.path());
    let again = 60_000usize.saturating_sub(at_kill * 500);
    assert!(
        total <= before + again,
        "{total} snapshot rows, {before} before the kill: more than the {again} after the acknowledged chunks came again"
    );
    drop_db(&db);
}

/// A graceful stop (SIGTERM) in the middle of an incremental snapshot while a writer changes
/// rows: the pipeline exits cleanly, and the restarted one continues from its last delivered
/// chunk and ends describing the table exactly.
#[test]
fn sigterm_during_an_incremental_snapshot_under_a_writer_stops_cleanly_and_resumes() {
    let (db, dir, file) = seeded_items("inc_term");
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    // The writer: batches of updates of random rows, until told to stop.
    let writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let writer = {
        let (db, writing) = (db.clone(), writing.clone());
        std::thread::spawn(move || {
            let mut batches = 0u32;
            while writing.load(std::sync::atomic::Ordering::SeqCst) {
                psql(
                    &db,
                    "update items set n = n + 1, note = 'written' where id in \
                     (select (random() * 59999)::int + 1 from generate_series(1, 50))",
                );
                batches += 1;
            }
            batches
        })
    };
    signal_items(&db, "inc-t");
    await_committed_chunks(dir.path(), &db, 20, &mut child);
    stop(&child);
    // A clean exit, within a bound that only a pipeline ignoring the signal would reach.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "sluice did not stop within 60 s of SIGTERM:\n{}",
                log_so_far(&child)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let log = log_of(&child);
    assert!(status.success(), "sluice failed on SIGTERM: {log}");
    assert!(log.contains("Pipeline stopped."), "no clean stop:\n{log}");
    writing.store(false, std::sync::atomic::Ordering::SeqCst);
    let batches = writer.join().unwrap();
    assert!(batches > 0, "the writer never ran");
    let resumed = restart_until_described(&db, dir.path(), &file, "inc-t");
    assert!(
        resumed >= 20,
        "resumed at chunk {resumed}: before what was committed"
    );
    drop_db(&db);
}

/// The `file` channel beside the `source` one: additional conditions, pause and resume, stop,
/// and a corpus of malformed signals (each logged with its reason and ignored; the stream and
/// later signals go on).
#[test]
fn file_signals_conditions_pause_resume_stop_and_malformed_ones() {
    let db = fresh_db("inc_file");
    psql(&db, SIGNAL_TABLE);
    psql(
        &db,
        "create table items (region int not null, id int primary key, n int not null, note text)",
    );
    psql(
        &db,
        "insert into items select g % 7, g, g, 'seed' from generate_series(1, 3000) g",
    );
    psql(&db, "create table big (id int primary key)");
    psql(&db, "insert into big select generate_series(1, 50000)");
    let dir = tempfile::tempdir().unwrap();
    let signals = dir.path().join("signals.jsonl");
    std::fs::write(&signals, "").unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        &[
            ("table.include.list", "public.items,public.big".into()),
            ("snapshot.mode", "no_data".into()),
            ("signal.data.collection", "public.debezium_signal".into()),
            ("signal.enabled.channels", "source,file".into()),
            ("signal.file", (&signals).into()),
            ("signal.poll.interval.ms", "50".into()),
            ("incremental.snapshot.chunk.size", "100".into()),
        ],
        false,
    );
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    let send = |lines: &[&str]| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&signals)
            .unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
    };
    let rows = |table: &str| -> Vec<Json> {
        lines(dir.path())
            .into_iter()
            .filter(|e| {
                e["value"]["source"]["snapshot"] == "incremental"
                    && e["value"]["source"]["table"] == table
            })
            .collect()
    };
    let wait = |what: &str, done: &dyn Fn() -> bool, child: &mut std::process::Child| {
        let t0 = std::time::Instant::now();
        while !done() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "sluice stopped while waiting for {what}"
            );
            if t0.elapsed() > std::time::Duration::from_secs(120) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("timed out waiting for {what}");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    // Malformed signals, then a valid one with an additional condition, then pause.
    send(&[
        "{not json",
        r#"{"id": "m1", "type": "reboot", "data": {}}"#,
        r#"{"id": "m2", "type": "stop-snapshot", "data": {"data-collections": ["public.items"]}}"#,
        r#"{"id": "m3", "type": "execute-snapshot", "data": {"data-collections": ["public.(items"]}}"#,
        r#"{"id": "m4", "type": "execute-snapshot", "data": {"data-collections": ["public.nope"]}}"#,
        r#"{"id": "m5", "type": "execute-snapshot", "data": {"data-collections": []}}"#,
        r#"{"id": "c1", "type": "execute-snapshot", "data": {"data-collections": ["public.items"], "additional-conditions": [{"data-collection": "public.items", "filter": "region = 3"}]}}"#,
        r#"{"id": "p1", "type": "pause-snapshot", "data": {}}"#,
    ]);
    let expected: usize = psql(&db, "select count(*) from items where region = 3")
        .trim()
        .parse()
        .unwrap();
    // Paused right after its first chunk at most: a pause that did not hold would finish the
    // 429 rows in well under a second.
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(
        rows("items").len() <= 100,
        "the snapshot went on while paused"
    );
    psql(
        &db,
        "insert into items values (3, 100000, 1, 'during the pause')",
    );
    send(&[r#"{"id": "r1", "type": "resume-snapshot", "data": {}}"#]);
    wait(
        "the conditional snapshot",
        &|| rows("items").len() >= expected,
        &mut child,
    );
    let read = rows("items");
    assert!(
        read.iter().all(|e| e["value"]["after"]["region"] == 3),
        "a row outside the condition"
    );
    // Stop: a snapshot of `big` stopped right after it starts reads one chunk at most.
    psql(
        &db,
        "insert into debezium_signal values ('b1', 'execute-snapshot', '{\"data-collections\": [\"public.big\"]}'); \
         insert into debezium_signal values ('s1', 'stop-snapshot', '{\"type\": \"incremental\"}')",
    );
    psql(
        &db,
        "insert into debezium_signal values ('l1', 'log', '{\"message\": \"after the stop\"}')",
    );
    psql(&db, "insert into items values (4, 100001, 1, 'last')");
    wait(
        "the last insert",
        &|| lines(dir.path()).iter().any(|e| e["key"]["id"] == 100001),
        &mut child,
    );
    stop(&child);
    let log = finish(child);
    assert!(rows("big").len() <= 100, "the stopped snapshot went on");
    for reason in [
        "not a signal",
        "unknown signal type `reboot`",
        "`type` is required",
        "not a valid regex",
        "no captured table matches",
        "Signal with nothing to do",
        "notification=\"PAUSED\"",
        "notification=\"RESUMED\"",
        "notification=\"ABORTED\"",
        "after the stop",
    ] {
        assert!(log.contains(reason), "`{reason}` not in the log:\n{log}");
    }
    assert_eq!(
        std::fs::read_to_string(&signals).unwrap(),
        "",
        "the signal file is emptied once read"
    );
    drop_db(&db);
}

/// Rows of 20 KB: a chunk is cut at a quarter of the queue's bytes (about 50 rows of the 1024
/// asked for), the next ones ask for as many rows as fitted, and every row arrives once.
#[test]
fn an_incremental_snapshot_of_wide_rows_cuts_its_chunks_by_bytes() {
    let db = fresh_db("inc_wide");
    psql(&db, SIGNAL_TABLE);
    psql(
        &db,
        "create table items (id int primary key, note text not null); \
         insert into items select g, repeat(md5(g::text), 625) from generate_series(1, 2000) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        dir.path(),
        &db,
        &[
            ("table.include.list", "public.items".into()),
            ("snapshot.mode", "no_data".into()),
            ("signal.data.collection", "public.debezium_signal".into()),
        ],
        false,
    );
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    signal_items(&db, "wide-1");
    await_completed(&mut child);
    wait_lines(dir.path(), 2000, &mut child);
    stop(&child);
    finish(child);
    let mut ids: Vec<i64> = lines(dir.path())
        .iter()
        .filter(|e| e["value"]["source"]["snapshot"] == "incremental")
        .map(|e| {
            assert_eq!(
                e["value"]["after"]["note"].as_str().map(str::len),
                Some(20_000)
            );
            e["key"]["id"].as_i64().unwrap()
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=2000).collect::<Vec<_>>(), "every row once");
    let windows: u32 = psql(
        &db,
        "select count(*) from debezium_signal where type = 'snapshot-window-open'",
    )
    .trim()
    .parse()
    .unwrap();
    // 40 MB of rows in chunks of about 1 MiB: some 40 chunks, not 2 of 1024 rows.
    assert!(windows >= 30, "{windows} chunks: not cut by bytes");
    drop_db(&db);
}
