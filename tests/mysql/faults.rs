//! Faults on the mysql source: the server restarted mid-stream (the pipeline reconnects from
//! its committed position; nothing lost, nothing twice).

use sluice_test_support::mariadb::Restartable;
use sluice_test_support::pg::{self as run};

use super::{pipeline, ReplaceText};

#[test]
fn a_server_restart_mid_stream_loses_nothing_and_repeats_nothing() {
    let mut server = Restartable::start();
    server.sql(
        "",
        "CREATE DATABASE faults; CREATE TABLE faults.t (id INT PRIMARY KEY, v TEXT); \
         INSERT INTO faults.t VALUES (1, 'a'), (2, 'b')",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(dir.path(), server.port, "  database.include.list: faults\n")
        .replace_text("snapshot.mode: initial_only", "snapshot.mode: initial")
        .replace_text(
            "restart: { max_retries: 0 }",
            "restart: { max_retries: 100, initial_backoff: 100ms, max_backoff: 500ms }",
        );
    let mut child = run::start(&path, &[]);
    run::wait_lines(dir.path(), 2, &mut child);
    server.sql(
        "faults",
        "INSERT INTO t VALUES (3, 'c'); UPDATE t SET v = 'bb' WHERE id = 2",
    );
    run::wait_lines(dir.path(), 4, &mut child);
    server.stop();
    std::thread::sleep(std::time::Duration::from_millis(500));
    server.restart();
    // Written after the restart, some before the source is back: all arrive, once.
    server.sql(
        "faults",
        "INSERT INTO t VALUES (4, 'd'); BEGIN; INSERT INTO t VALUES (5, 'e'); DELETE FROM t WHERE id = 1; COMMIT",
    );
    // c 4, c 5, d 1 and its tombstone.
    run::wait_lines(dir.path(), 8, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(500));
    run::stop(&child);
    let log = run::finish(child);
    let lines = run::lines(dir.path());
    let ops: Vec<String> = lines
        .iter()
        .map(|l| {
            let p = &l["value"]["payload"];
            match p["op"].as_str() {
                Some(op) => format!("{op}{}", l["key"]["payload"]["id"]),
                None => format!("tombstone{}", l["key"]["payload"]["id"]),
            }
        })
        .collect();
    assert_eq!(
        ops,
        ["r1", "r2", "c3", "u2", "c4", "c5", "d1", "tombstone1"],
        "{log}"
    );
    assert!(log.contains("restart"), "the source restarted: {log}");
}
