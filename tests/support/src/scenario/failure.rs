//! A value the source cannot represent, under `event.processing.failure.handling.mode`, for
//! every source that has one: `fail` (the default) stops the pipeline with one line that names
//! the column and the mode to change; `warn` leaves the row out with a warning naming the
//! column and the row's key, and the rows around it pass, in the snapshot and in the stream;
//! an update whose both images hold the value is left out once.

use std::process::Command;

use serde_json::Value as Json;

use super::Backend;
use crate::pg;
use crate::pipeline::Scalar;

/// A column type, a value of it the source cannot represent and one it can (SQL literals),
/// under the source's `settings` (besides the backend's own).
#[derive(Debug, Clone)]
pub struct Unrepresentable {
    pub sql_type: String,
    pub refused: String,
    pub fits: String,
    pub settings: Vec<(&'static str, Scalar)>,
}

/// The ids of the table's events, in order.
fn ids(backend: &dyn Backend, events: &[Json]) -> Vec<i64> {
    let id = backend.field("id");
    (events.iter())
        .filter_map(|e| e["value"]["payload"]["after"][id.as_str()].as_i64())
        .collect()
}

/// Runs the scenario; panics saying what differs.
pub fn run(backend: &dyn Backend) {
    let bad = backend
        .unrepresentable()
        .unwrap_or_else(|| panic!("{} names no value it cannot represent", backend.name()));
    let (int, _) = backend.types();
    let columns = [
        ("id".to_owned(), int.to_owned()),
        ("v".to_owned(), bad.sql_type.clone()),
        ("w".to_owned(), int.to_owned()),
    ];
    backend.create("refused", &columns);
    let (t, id, v, w) = (
        backend.table("refused"),
        backend.column("id"),
        backend.column("v"),
        backend.column("w"),
    );
    let insert =
        |n: i64, value: &str| format!("INSERT INTO {t} ({id}, {v}, {w}) VALUES ({n}, {value}, 0)");
    let rows = |first: i64| {
        [
            insert(first, &bad.fits),
            insert(first + 1, &bad.refused),
            insert(first + 2, &bad.fits),
        ]
        .join(";\n")
    };
    backend.execute(&rows(1));

    // `fail`: the snapshot stops at the row, one line naming the column and the mode.
    let dir = tempfile::tempdir().unwrap();
    let path = backend.pipeline(dir.path(), &bad.settings);
    // (Bounded: a run that goes on past the row ends once idle, and fails the assertion.)
    let out = Command::new(pg::sluice())
        .args(["run", "--stop-when-idle", "3s"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "{}: the run went on:\n{err}",
        backend.name()
    );
    let line = (err.lines())
        .rfind(|l| l.starts_with("error:"))
        .unwrap_or_default();
    let column = format!("column `{}`", backend.field("v"));
    assert!(
        line.contains(&column) && line.contains("event.processing.failure.handling.mode"),
        "{}: {line}\n{err}",
        backend.name()
    );
    assert!(!err.contains("panicked"), "{err}");

    // `warn`: the row is left out with a warning, in the snapshot and in the stream.
    let dir = tempfile::tempdir().unwrap();
    let mut warn = bad.settings.clone();
    warn.push(("event.processing.failure.handling.mode", "warn".into()));
    let path = backend.pipeline(dir.path(), &warn);
    let mut child = pg::start(&path, &[]);
    pg::wait_for(dir.path(), "the snapshot's rows", &mut child, |e| {
        ids(backend, e).contains(&3)
    });
    backend.execute(&rows(4));
    pg::wait_for(dir.path(), "the streamed rows", &mut child, |e| {
        ids(backend, e).contains(&6)
    });
    // An update of the refused row (the value in its before and its after image) is left out
    // once; the next row's update passes.
    backend.execute(&format!(
        "UPDATE {t} SET {w} = 1 WHERE {id} = 5;\nUPDATE {t} SET {w} = 1 WHERE {id} = 6"
    ));
    pg::wait_for(dir.path(), "the streamed updates", &mut child, |e| {
        ids(backend, e).iter().filter(|&&i| i == 6).count() == 2
    });
    pg::stop(&child);
    let log = pg::finish(child);
    let events = pg::lines(dir.path());
    assert_eq!(ids(backend, &events), [1, 3, 4, 6, 6], "{}", backend.name());
    let warned: Vec<&str> = (log.lines())
        .filter(|l| l.contains("cannot be represented"))
        .collect();
    assert_eq!(warned.len(), 3, "{}: {log}", backend.name());
    // Each warning names the column and the refused row's key (2 in the snapshot, 5 in the
    // stream, twice: its insert and its update).
    for (line, id) in warned.iter().zip(["2", "5", "5"]) {
        // Every source writes a key the same way: `{ID: 2}`.
        let key = format!(" key={{{}: {id}}}", backend.field("id"));
        assert!(
            line.contains(&format!("column=\"{}\"", backend.field("v"))) && line.contains(&key),
            "{}: the warning does not name the column and the key `{key}`: {line}",
            backend.name()
        );
    }
}
