//! `sluice quickstart`: Sluice's main job on a machine with nothing but Rust. It makes a demo
//! SQLite inventory database in capture mode, keeps changing it for a few seconds, and runs
//! `pipelines/quickstart.yaml` (snapshot + stream, mask / hash / truncate / route, to the
//! console and a JSON-lines file), then prints what it did.

use std::collections::BTreeMap;
use std::io::{BufRead, Seek};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sluice_runtime::{PipelinePlan, RunOptions};
use sluice_sources::sqlite::demo;

/// The pipeline, as shipped in `pipelines/quickstart.yaml`.
const PIPELINE: &str = include_str!("../pipelines/quickstart.yaml");

/// Options of the command.
pub(crate) struct Quickstart {
    pub dir: PathBuf,
    pub fresh: bool,
    pub seconds: u64,
}

/// The file that marks a directory the quickstart made (the only kind `--fresh` deletes).
const MARKER: &str = ".sluice-quickstart";

/// Whether `dir` is one the quickstart made: it has the marker, or (made before the marker
/// existed) holds nothing but the quickstart's own files.
fn made_by_quickstart(dir: &std::path::Path) -> bool {
    if dir.join(MARKER).is_file() {
        return true;
    }
    const OWN: &[&str] = &[
        "inventory.db",
        "inventory.db-wal",
        "inventory.db-shm",
        "quickstart.yaml",
        "events.jsonl",
        "data",
    ];
    std::fs::read_dir(dir).is_ok_and(|entries| {
        let names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.iter().any(|n| n == "inventory.db") && names.iter().all(|n| OWN.contains(&n.as_str()))
    })
}

/// Runs the quickstart; the summary goes to standard error, events to standard output.
pub(crate) fn run(q: &Quickstart) -> anyhow::Result<()> {
    let db = prepare(q)?;
    // The pipeline reads its paths from SLUICE_QUICKSTART_DIR; this process is still single-threaded.
    std::env::set_var("SLUICE_QUICKSTART_DIR", &q.dir);
    let file = q.dir.join("quickstart.yaml");
    std::fs::write(&file, PIPELINE).with_context(|| format!("cannot write {}", file.display()))?;
    let config = crate::load(&file).map_err(anyhow::Error::msg)?;
    let events = q.dir.join("events.jsonl");
    let start_len = std::fs::metadata(&events).map(|m| m.len()).unwrap_or(0);

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop, seconds) = (db.clone(), stop.clone(), q.seconds);
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(7, |d| d.as_nanos() as u64);
        std::thread::spawn(move || demo::run_writer(&db, Duration::from_secs(seconds), seed, &stop))
    };
    eprintln!(
        "quickstart: running {} for about {} s while a writer changes the database; updates and deletes of customers are shown below",
        file.display(),
        q.seconds
    );
    let progress = show_progress(events.clone(), start_len, stop.clone());
    let plan = PipelinePlan::from_config(config);
    let options = RunOptions {
        stop_after_events: None,
        stop_when_idle: Some(Duration::from_secs(2)),
        handle_signals: true,
        stop: None,
        progress: crate::progress_view(),
    };
    let report = sluice_runtime::run(plan, options);
    stop.store(true, Ordering::Relaxed);
    let _ = progress.join();
    let written = writer
        .join()
        .map_err(|_| anyhow::anyhow!("the demo writer panicked"))?
        .map_err(|e| anyhow::anyhow!("the demo writer: {e}"))?;
    let report = report.map_err(|e| anyhow::anyhow!("{e}"))?;
    let counts = count(&events, start_len)?;
    eprintln!();
    eprintln!(
        "quickstart: done: {} events this run (committed position {})",
        report.events,
        report
            .committed
            .map(|p| p.to_string())
            .unwrap_or_else(|| "none".into())
    );
    eprintln!(
        "  the writer made {} inserts, {} updates, {} deletes",
        written.inserts, written.updates, written.deletes
    );
    eprintln!(
        "  events in {} by topic and op (r snapshot, c insert, u update, d delete, - tombstone):",
        events.display()
    );
    for ((topic, op), n) in &counts {
        eprintln!("    {topic:<24} {op}  {n}");
    }
    try_next(q, &db, &file, &events);
    Ok(())
}

/// The quickstart's directory (emptied with `--fresh` when it made it) and its database
/// (created, or kept to resume).
fn prepare(q: &Quickstart) -> anyhow::Result<std::path::PathBuf> {
    if q.fresh && q.dir.exists() {
        if !made_by_quickstart(&q.dir) {
            anyhow::bail!(
                "`{}` was not made by the quickstart (it has no {MARKER}): --fresh deletes only the quickstart's own directory; choose another --dir",
                q.dir.display()
            );
        }
        std::fs::remove_dir_all(&q.dir)
            .with_context(|| format!("cannot remove {}", q.dir.display()))?;
    }
    if !q.dir.exists() {
        std::fs::create_dir_all(&q.dir)
            .with_context(|| format!("cannot create {}", q.dir.display()))?;
        std::fs::write(
            q.dir.join(MARKER),
            "made by `sluice quickstart`; `--fresh` may delete this directory\n",
        )
        .with_context(|| format!("cannot write {}", q.dir.display()))?;
    }
    let db = q.dir.join("inventory.db");
    if db.exists() {
        eprintln!(
            "quickstart: resuming with {} (use --fresh to start over)",
            db.display()
        );
    } else {
        // The error's text holds its causes (a `:#` print would repeat them).
        demo::create_inventory(&db).map_err(|e| anyhow::anyhow!("{}: {e}", db.display()))?;
        eprintln!(
            "quickstart: created {} ({} customers, {} products, {} orders) and put its tables into capture mode",
            db.display(),
            demo::CUSTOMERS,
            demo::PRODUCTS,
            demo::ORDERS
        );
    }
    Ok(db)
}

/// Prints the events written so far, once a second, until `stop`.
fn show_progress(
    events: std::path::PathBuf,
    start_len: u64,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut shown = 0;
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_secs(1));
            let n = std::fs::read(&events)
                .map(|b| {
                    b.get(start_len as usize..)
                        .map_or(0, |new| new.iter().filter(|c| **c == b'\n').count())
                })
                .unwrap_or(0);
            if n != shown && !stop.load(Ordering::Relaxed) {
                sluice_runtime::metrics::progress::suspend(|| {
                    eprintln!("quickstart: {n} events in {} so far", events.display())
                });
                shown = n;
            }
        }
    })
}

/// What to try next.
fn try_next(q: &Quickstart, db: &Path, file: &Path, events: &Path) {
    eprintln!("  try next:");
    eprintln!("    run it again: it resumes where it stopped (or `--fresh` to start over)");
    let env = if q.dir == Path::new(".sluice/quickstart") {
        String::new()
    } else {
        format!("SLUICE_QUICKSTART_DIR={} ", q.dir.display())
    };
    eprintln!(
        "    change the database yourself (sqlite3 {}) while `{env}sluice run {}` runs",
        db.display(),
        file.display()
    );
    eprintln!("    look at one event: head -1 {}", events.display());
    eprintln!("    capture your own SQLite tables: sluice capture enable YOUR.db TABLE...");
}

/// Events per (topic, op) in the file after `from`.
fn count(path: &Path, from: u64) -> anyhow::Result<BTreeMap<(String, String), u64>> {
    let mut counts = BTreeMap::new();
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    file.seek(std::io::SeekFrom::Start(from))?;
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        let v: serde_json::Value = serde_json::from_str(&line)
            .with_context(|| format!("{} holds a line that is not JSON", path.display()))?;
        let topic = v["topic"].as_str().unwrap_or_default().to_owned();
        let op = v["value"]["op"].as_str().unwrap_or("-").to_owned();
        *counts.entry((topic, op)).or_insert(0) += 1;
    }
    Ok(counts)
}
