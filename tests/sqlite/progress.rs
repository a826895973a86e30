//! Snapshot progress: bars per table on a terminal (rows of the counted total, rate, ETA;
//! each table a line once read), plain log lines when stderr is a pipe.

use super::*;

/// A database of two captured tables, `t` with `big` rows and `u` with 500, and its pipeline.
fn two_tables(dir: &Path, big: i64) -> PathBuf {
    let sql = format!(
        "create table t (id integer primary key, v text); create table u (id integer primary key, v text);
         with recursive n(i) as (select 1 union all select i + 1 from n where i < {big}) insert into t select i, 'x' from n;
         with recursive n(i) as (select 1 union all select i + 1 from n where i < 500) insert into u select i, 'y' from n;"
    );
    let (db, _conn) = captured(dir, &sql, &["t", "u"]);
    pipeline(dir, &db, &[])
}

/// `sluice run --stop-when-idle IDLE PIPELINE` on a pseudo-terminal (`script` runs it and
/// copies what it shows); what it showed, once it ended cleanly.
fn on_a_terminal(path: &Path, idle: &str) -> String {
    let command = format!(
        "{} run --stop-when-idle {idle} {}",
        env!("CARGO_BIN_EXE_sluice"),
        path.display()
    );
    let o = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .output()
        .expect("script (util-linux)");
    let shown = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{shown}");
    shown
}

#[test]
fn a_terminal_shows_a_bar_per_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = two_tables(dir.path(), 50_000);
    let shown = on_a_terminal(&path, "1s");
    // A bar against the counted rows, with its rate and time left.
    let bar = shown.split(['\r', '\n']).find(|l| {
        l.contains("app.main.t ")
            && l.contains("/50,000")
            && l.contains("rows/s")
            && l.contains("ETA")
    });
    assert!(bar.is_some(), "no bar for app.main.t: {shown}");
    // Each table, once read, a line.
    assert!(shown.contains("app.main.t: 50000 rows read in"), "{shown}");
    assert!(shown.contains("app.main.u: 500 rows read in"), "{shown}");
    assert_eq!(lines(dir.path()).len(), 50_500);
}

#[test]
fn a_pipe_gets_log_lines_and_no_bars() {
    let dir = tempfile::tempdir().unwrap();
    let path = two_tables(dir.path(), 2_000);
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "--stop-when-idle", "1s"])
        .arg(&path)
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("Snapshot read.") && err.contains("rows=2500"),
        "{err}"
    );
    assert!(
        !err.contains("rows read in") && !err.contains("ETA"),
        "no bars on a pipe: {err}"
    );
}

/// An incremental snapshot (started by a signal while streaming) on a terminal: a bar for its
/// table while it is read, then the table's line. (SQLite has no blocking snapshots.)
#[test]
fn a_terminal_shows_an_incremental_snapshots_bar() {
    let kind = "incremental";
    let (dir, signals, path) = super::signals::file_signals(20_000, 500);
    std::fs::write(
            &signals,
            format!("{{\"id\": \"p-1\", \"type\": \"execute-snapshot\", \"data\": {{\"data-collections\": [\"main.t\"], \"type\": \"{kind}\"}}}}\n"),
        )
        .unwrap();
    let shown = on_a_terminal(&path, "5s");
    let bar = shown
        .split(['\r', '\n'])
        .find(|l| l.contains("app.main.t ") && l.contains("rows/s"));
    assert!(bar.is_some(), "no bar for the {kind} snapshot: {shown}");
    assert!(
        shown.contains("app.main.t: 20000 rows read in"),
        "{kind}: {shown}"
    );
    let reads = lines(dir.path())
        .iter()
        .filter(|l| l["value"]["op"] == "r")
        .count();
    assert_eq!(reads, 20_000, "{kind}");
}
