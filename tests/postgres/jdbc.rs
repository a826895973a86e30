//! The `jdbc` sink into a PostgreSQL database of its own, fed by the PostgreSQL source: the
//! target's tables are compared with the source's (`psql`'s text of both), through a snapshot,
//! inserts, updates, deletes, a column added at the source, a replay from scratch and a kill -9
//! during delivery.

use std::time::{Duration, Instant};

use super::common::*;

const COLUMNS: &str = "id, name, score, born, updated, doc, uid, tags";

fn setup(db: &str) {
    psql(db, "CREATE TABLE customers (id int PRIMARY KEY, name text, score numeric(10,2), born date, updated timestamptz, doc jsonb, uid uuid, tags text[]);\
        INSERT INTO customers SELECT g, 'name ' || g, g * 1.25, date '2000-01-01' + g, timestamptz '2024-03-01 10:00:00.123456+00' + g * interval '1 hour', jsonb_build_object('n', g), md5(g::text)::uuid, ARRAY['a' || g, 'b\"q'] FROM generate_series(1, 50) g;");
}

/// A pipeline from `db`'s customers into the jdbc sink at `url` as `user` (`more` jdbc
/// keys).
pub(super) fn pipeline_into(
    dir: &std::path::Path,
    db: &str,
    (url, user): (&str, &str),
    more: &[(&str, Scalar)],
) -> std::path::PathBuf {
    let jdbc = Component::new("jdbc")
        .named("db")
        .set("connection.url", url)
        .set("connection.username", user)
        .set_all(more);
    let source = source(db).set("table.include.list", "public.customers");
    base(dir, db, source, true).sink(jdbc).write(dir)
}

/// A pipeline from `source` into the PostgreSQL database `target` (`more` jdbc keys).
fn jdbc_pipeline(
    dir: &std::path::Path,
    source: &str,
    target: &str,
    more: &[(&str, Scalar)],
) -> std::path::PathBuf {
    let url = format!("jdbc:postgresql://{}:{}/{target}", host(), port());
    pipeline_into(dir, source, (&url, "postgres"), more)
}

/// The jdbc keys of an upserting sink that deletes and evolves the target's schema.
pub(super) fn upsert() -> Vec<(&'static str, Scalar)> {
    vec![
        ("insert.mode", "upsert".into()),
        ("primary.key.mode", "record_key".into()),
        ("delete.enabled", true.into()),
        ("schema.evolution", "basic".into()),
    ]
}

fn rows(db: &str, table: &str, columns: &str) -> String {
    psql(db, &format!("SELECT {columns} FROM {table} ORDER BY id"))
}

/// Waits until the target's rows equal the source's.
fn wait_same(source: &str, target: &str, columns: &str, child: &mut std::process::Child) {
    let t0 = Instant::now();
    loop {
        let want = rows(source, "customers", columns);
        let exists = psql(
            target,
            "SELECT count(*) FROM pg_tables WHERE tablename = 'dbserver1_public_customers'",
        );
        if exists.trim() == "1" && rows(target, "dbserver1_public_customers", columns) == want {
            return;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "sluice stopped: {}",
            log_so_far(child)
        );
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the target never matched the source"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn upserts_deletes_and_a_new_column_keep_the_target_equal_to_the_source() {
    let source = fresh_db("jdbc_src");
    let target = fresh_db("jdbc_dst");
    setup(&source);
    let dir = tempfile::tempdir().unwrap();
    let file = jdbc_pipeline(dir.path(), &source, &target, &upsert());
    let mut child = start(&file, &[]);
    wait_same(&source, &target, COLUMNS, &mut child);
    // The created table: Debezium's JDBC sink types, the key as primary key.
    let types = psql(&target, "SELECT column_name || ' ' || data_type FROM information_schema.columns WHERE table_name = 'dbserver1_public_customers' ORDER BY ordinal_position");
    assert_eq!(
        types.lines().collect::<Vec<_>>(),
        [
            "id integer",
            "name text",
            "score numeric",
            "born date",
            "updated timestamp with time zone",
            "doc json",
            "uid uuid",
            "tags ARRAY"
        ],
    );
    psql(&source, "UPDATE customers SET name = 'renamed', score = -0.05 WHERE id <= 10; DELETE FROM customers WHERE id > 45; INSERT INTO customers (id, name) VALUES (100, NULL);");
    wait_same(&source, &target, COLUMNS, &mut child);
    psql(&source, "ALTER TABLE customers ADD COLUMN email text; INSERT INTO customers (id, email) VALUES (101, 'x@y.z'); UPDATE customers SET email = 'e' || id WHERE id < 5;");
    wait_same(&source, &target, &format!("{COLUMNS}, email"), &mut child);
    stop(&child);
    finish(child);

    // A replay from scratch (the offsets gone): the snapshot's upserts change nothing.
    let before = rows(&target, "dbserver1_public_customers", "*");
    std::fs::remove_dir_all(dir.path().join("data")).unwrap();
    psql(
        &source,
        &format!("SELECT pg_drop_replication_slot('{source}')"),
    );
    let child = start(&file, &[]);
    let t0 = Instant::now();
    while !log_so_far(&child).contains("Snapshot completed") {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{}",
            log_so_far(&child)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    stop(&child);
    finish(child);
    assert_eq!(rows(&target, "dbserver1_public_customers", "*"), before);
    drop_db(&source);
    drop_db(&target);
}

#[test]
fn the_target_equals_the_source_after_a_kill_9_during_delivery() {
    let source = fresh_db("jdbc_kill_src");
    let target = fresh_db("jdbc_kill_dst");
    setup(&source);
    let dir = tempfile::tempdir().unwrap();
    let file = jdbc_pipeline(dir.path(), &source, &target, &upsert());
    let mut child = start(&file, &[]);
    wait_same(&source, &target, COLUMNS, &mut child);
    let writer_db = source.clone();
    let writer = std::thread::spawn(move || {
        for i in 0..40 {
            let base = 1000 + i * 50;
            psql(&writer_db, &format!("INSERT INTO customers (id, name) SELECT g, 'w' || g FROM generate_series({base}, {}) g; UPDATE customers SET score = {i} WHERE id = {};", base + 49, 1 + i));
            std::thread::sleep(Duration::from_millis(30));
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    let _ = wait_output(child);
    writer.join().unwrap();
    let mut child = start(&file, &[]);
    wait_same(&source, &target, COLUMNS, &mut child);
    stop(&child);
    finish(child);
    drop_db(&source);
    drop_db(&target);
}

#[test]
fn a_missing_table_a_wrong_login_and_a_keyless_upsert_stop_with_one_line() {
    let source = fresh_db("jdbc_err_src");
    let target = fresh_db("jdbc_err_dst");
    setup(&source);
    let dir = tempfile::tempdir().unwrap();
    let file = jdbc_pipeline(
        dir.path(),
        &source,
        &target,
        &[
            ("insert.mode", "upsert".into()),
            ("primary.key.mode", "record_key".into()),
        ],
    );
    let error = run_expecting_failure(&file);
    assert!(
        error.contains("sink `db`")
            && error.contains("table `dbserver1_public_customers` does not exist")
            && error.contains("schema.evolution: basic"),
        "{error}"
    );
    let file = jdbc_pipeline(dir.path(), &source, "no_such_database_x", &upsert());
    let o = std::process::Command::new(sluice())
        .arg("run")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("refused the connection") && stderr.contains("no_such_database_x"),
        "{stderr}"
    );
    let file = jdbc_pipeline(
        dir.path(),
        &source,
        &target,
        &[("insert.mode", "upsert".into())],
    );
    let o = std::process::Command::new(sluice())
        .arg("validate")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("pipeline.yaml:") && stderr.contains("set `primary.key.mode`"),
        "{stderr}"
    );
    drop_db(&source);
    drop_db(&target);
}

#[test]
fn the_example_pipeline_runs_as_shipped() {
    let source = fresh_db("jdbc_example_src");
    let target = fresh_db("jdbc_example_dst");
    setup(&source);
    let dir = tempfile::tempdir().unwrap();
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/postgres-jdbc.yaml");
    let o = std::process::Command::new(sluice())
        .args(["run", "--stop-when-idle", "3s"])
        .arg(&example)
        .env("PGDATABASE", &source)
        .env("TARGET_PGDATABASE", &target)
        .env("SLUICE_DATA_DIR", dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        rows(&target, "customers", COLUMNS),
        rows(&source, "customers", COLUMNS)
    );
    psql(
        &source,
        "SELECT pg_drop_replication_slot('sluice_jdbc_example')",
    );
    drop_db(&source);
    drop_db(&target);
}

#[test]
fn excluded_fields_stay_out_and_the_reduction_buffer_keeps_the_last_change_of_a_key() {
    let source = fresh_db("jdbc_reduce_src");
    let target = fresh_db("jdbc_reduce_dst");
    setup(&source);
    let dir = tempfile::tempdir().unwrap();
    let mut more = upsert();
    more.push((
        "field.exclude.list",
        "doc,dbserver1.public.customers:tags".into(),
    ));
    more.push(("use.reduction.buffer", true.into()));
    let file = jdbc_pipeline(dir.path(), &source, &target, &more);
    let mut child = start(&file, &[]);
    let kept = "id, name, score, born, updated, uid";
    wait_same(&source, &target, kept, &mut child);
    // Many changes of few keys in one transaction: one batch, reduced to the last of each.
    let mut tx = String::from("BEGIN;");
    for i in 0..200 {
        tx.push_str(&format!(
            "UPDATE customers SET score = {i} WHERE id = {};",
            1 + i % 3
        ));
    }
    tx.push_str("DELETE FROM customers WHERE id = 4; INSERT INTO customers (id, name) VALUES (4, 'back'); COMMIT;");
    psql(&source, &tx);
    wait_same(&source, &target, kept, &mut child);
    stop(&child);
    finish(child);
    let columns = psql(&target, "SELECT string_agg(column_name, ',' ORDER BY ordinal_position) FROM information_schema.columns WHERE table_name = 'dbserver1_public_customers'");
    assert_eq!(columns.trim(), "id,name,score,born,updated,uid");
    drop_db(&source);
    drop_db(&target);
}

/// TLS to the target from `connection.url`'s `sslmode`: `require` encrypts the sink's
/// connection (`pg_stat_ssl`), `disable` does not, and `verify-full` against a CA that did not
/// sign the server's certificate stops the start with one line.
#[test]
fn sslmode_in_the_url_encrypts_the_targets_connection_or_refuses_an_unknown_server() {
    assert_eq!(
        psql("postgres", "show ssl").trim(),
        "on",
        "the test server runs with TLS"
    );
    let source = fresh_db("jdbc_tls_src");
    let target = fresh_db("jdbc_tls_dst");
    setup(&source);
    let encrypted = |ssl: bool| {
        psql(&target, &format!("SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.datname = '{target}' AND a.application_name = 'sluice' AND s.ssl = {ssl}")).trim().to_owned()
    };
    for (mode, ssl) in [("require", true), ("disable", false)] {
        let dir = tempfile::tempdir().unwrap();
        let url_target = format!("{target}?sslmode={mode}");
        let file = jdbc_pipeline(dir.path(), &source, &url_target, &upsert());
        let mut child = start(&file, &[]);
        wait_same(&source, &target, COLUMNS, &mut child);
        assert_eq!(encrypted(ssl), "1", "{mode}: the sink's connection");
        assert_eq!(encrypted(!ssl), "0", "{mode}");
        stop(&child);
        finish(child);
        psql(
            &source,
            &format!("SELECT pg_drop_replication_slot('{source}')"),
        );
        // The next round's sink writes (and so connects) before the tables agree again.
        psql(&target, "DROP TABLE dbserver1_public_customers");
    }
    let certs = tempfile::tempdir().unwrap();
    sluice_test_support::certs::ca(certs.path(), "stranger");
    let dir = tempfile::tempdir().unwrap();
    let url_target = format!(
        "{target}?sslmode=verify-full&sslrootcert={}",
        certs.path().join("stranger.pem").display()
    );
    let file = jdbc_pipeline(dir.path(), &source, &url_target, &upsert());
    let line = run_expecting_failure(&file);
    assert!(
        line.contains("sink `db`") && line.contains("certificate"),
        "{line}"
    );
    drop_db(&source);
    drop_db(&target);
}
