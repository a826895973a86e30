//! The `jdbc` sink into a MariaDB database (the private server of
//! `sluice_test_support::mariadb`), fed by the PostgreSQL source: the target's rows are
//! compared with the source's, each side printed by its own command-line client, through a
//! snapshot, updates, deletes, NULLs, a column added at the source, a kill -9 under a writer
//! and the replay after it; a value MariaDB cannot hold stops the pipeline or, under
//! `event.processing.failure.handling.mode: warn`, is left out with a warning.

use std::time::{Duration, Instant};

use sluice_test_support::mariadb;

use super::common::*;
use super::jdbc::{pipeline_into, upsert};

fn setup(db: &str) {
    psql(db, "CREATE TABLE customers (id int PRIMARY KEY, name text, score numeric(10,2), born date, updated timestamptz, doc jsonb, uid uuid, flag boolean, raw bytea, big bigint);\
        INSERT INTO customers SELECT g, 'name ' || g, g * 1.25, date '2000-01-01' + g, timestamptz '2024-03-01 10:00:00.123456+02' + g * interval '1 hour', jsonb_build_object('n', g), md5(g::text)::uuid, g % 2 = 0, decode(lpad(to_hex(g), 4, '0'), 'hex'), g * 10000000000 FROM generate_series(1, 50) g;");
}

/// A pipeline from `source` into the MariaDB database `target` (`more` jdbc keys).
fn pipeline_to(
    dir: &std::path::Path,
    source: &str,
    target: &str,
    more: &[(&str, Scalar)],
) -> std::path::PathBuf {
    let url = format!(
        "jdbc:mariadb://127.0.0.1:{}/{target}",
        mariadb::server().port
    );
    pipeline_into(dir, source, (&url, "root"), more)
}

/// The source's rows, one line each, as the target should hold them (times in UTC, booleans
/// as 1/0, bytes in hex).
fn source_rows(db: &str, extra: &str) -> String {
    psql(db, &format!("SELECT concat_ws('|', id, coalesce(name, 'NULL'), coalesce(score::text, 'NULL'), coalesce(born::text, 'NULL'), coalesce(to_char(updated AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), 'NULL'), coalesce(doc::text, 'NULL'), coalesce(uid::text, 'NULL'), coalesce(flag::int::text, 'NULL'), coalesce(encode(raw, 'hex'), 'NULL'), coalesce(big::text, 'NULL'){extra}) FROM customers ORDER BY id"))
}

/// The target's rows, printed by the `mariadb` client.
fn target_rows(db: &str, extra: &str) -> Option<String> {
    let exists = mariadb::sql(db, "SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dbserver1_public_customers'");
    (exists.trim() == "1").then(|| mariadb::sql(db, &format!("SELECT concat_ws('|', id, coalesce(name, 'NULL'), coalesce(score, 'NULL'), coalesce(born, 'NULL'), coalesce(updated, 'NULL'), coalesce(doc, 'NULL'), coalesce(uid, 'NULL'), coalesce(flag, 'NULL'), coalesce(lower(hex(raw)), 'NULL'), coalesce(big, 'NULL'){extra}) FROM dbserver1_public_customers ORDER BY id")))
}

/// Waits until the target's rows equal the source's.
fn wait_same(source: &str, target: &str, extra: (&str, &str), child: &mut std::process::Child) {
    let t0 = Instant::now();
    loop {
        let want = source_rows(source, extra.0);
        let have = target_rows(target, extra.1);
        if have.as_deref() == Some(want.as_str()) {
            return;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "sluice stopped: {}",
            log_so_far(child)
        );
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the target never matched the source:\n{want}\n---\n{have:?}\n{}",
            log_so_far(child)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_mariadb_target_follows_the_source_through_changes_a_new_column_and_a_kill_9() {
    let source = fresh_db("jdbc_maria_src");
    let target = mariadb::database("jdbc_maria_dst");
    setup(&source);
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline_to(dir.path(), &source, &target, &upsert());
    let mut child = start(&file, &[]);
    wait_same(&source, &target, ("", ""), &mut child);
    // The created table: Debezium's JDBC sink types for MySQL, the key as primary key.
    let types = mariadb::sql(&target, "SELECT concat(COLUMN_NAME, ' ', COLUMN_TYPE, ' ', IS_NULLABLE, ' ', COLUMN_KEY) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dbserver1_public_customers' ORDER BY ORDINAL_POSITION");
    assert_eq!(
        types.lines().collect::<Vec<_>>(),
        [
            "id int(11) NO PRI",
            "name longtext YES ",
            "score decimal(10,2) YES ",
            "born date YES ",
            "updated datetime(6) YES ",
            "doc longtext YES ",
            "uid varchar(36) YES ",
            "flag tinyint(1) YES ",
            "raw longblob YES ",
            "big bigint(20) YES "
        ],
    );
    psql(&source, "UPDATE customers SET name = 'renamed', score = -0.05, flag = NULL WHERE id <= 10; DELETE FROM customers WHERE id > 45; INSERT INTO customers (id, name) VALUES (100, NULL);");
    wait_same(&source, &target, ("", ""), &mut child);
    psql(&source, "ALTER TABLE customers ADD COLUMN email text; INSERT INTO customers (id, email) VALUES (101, 'x@y.z'); UPDATE customers SET email = 'e' || id WHERE id < 5;");
    let email = (", coalesce(email, 'NULL')", ", coalesce(email, 'NULL')");
    wait_same(&source, &target, email, &mut child);
    // Killed under a writer: the restart replays what was not acknowledged (upserts: no
    // duplicates, no error) and the target ends equal to the source.
    let writer_db = source.clone();
    let writer = std::thread::spawn(move || {
        for i in 0..30 {
            let base = 1000 + i * 50;
            psql(&writer_db, &format!("INSERT INTO customers (id, name, raw) SELECT g, 'w' || g, '\\x00ff' FROM generate_series({base}, {}) g; UPDATE customers SET score = {i} WHERE id = {}; DELETE FROM customers WHERE id = {};", base + 49, 1 + i, base + 7));
            std::thread::sleep(Duration::from_millis(30));
        }
    });
    std::thread::sleep(Duration::from_millis(400));
    child.kill().unwrap();
    let _ = wait_output(child);
    writer.join().unwrap();
    let mut child = start(&file, &[]);
    wait_same(&source, &target, email, &mut child);
    stop(&child);
    finish(child);
    drop_db(&source);
}

#[test]
fn a_value_mariadb_cannot_hold_stops_the_pipeline_or_is_left_out_with_a_warning() {
    let source = fresh_db("jdbc_maria_bad_src");
    setup(&source);
    psql(
        &source,
        "UPDATE customers SET born = '0044-03-15 BC' WHERE id = 7",
    );
    let dir = tempfile::tempdir().unwrap();
    let target = mariadb::database("jdbc_maria_bad_dst");
    let file = pipeline_to(dir.path(), &source, &target, &upsert());
    let error = run_expecting_failure(&file);
    assert!(
        error.contains("sink `db`") && error.contains("outside the years MySQL holds"),
        "{error}"
    );
    let target = mariadb::database("jdbc_maria_warn_dst");
    let dir = tempfile::tempdir().unwrap();
    let mut more = upsert();
    more.push(("event.processing.failure.handling.mode", "warn".into()));
    let file = pipeline_to(dir.path(), &source, &target, &more);
    let mut child = start(&file, &[]);
    let t0 = Instant::now();
    while !log_so_far(&child).contains("outside the years MySQL holds") {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{}",
            log_so_far(&child)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The row left out is gone at the source too: the tables then agree.
    psql(&source, "DELETE FROM customers WHERE id = 7");
    wait_same(&source, &target, ("", ""), &mut child);
    stop(&child);
    let log = finish(child);
    assert!(log.contains("outside the years MySQL holds"), "{log}");
    drop_db(&source);
}

/// TLS to a MariaDB that lets the sink's user in only over TLS (`REQUIRE SSL`): `sslMode`
/// `verify-full` with the CA's certificate (`serverSslCert`) and `trust` write the rows;
/// without TLS the login is refused, and a CA that did not sign the server's certificate stops
/// the start with one line.
#[test]
fn sslmode_in_the_url_reaches_a_mariadb_that_requires_tls() {
    let certs = tempfile::tempdir().unwrap();
    let c = certs.path();
    let server = mariadb::Restartable::start_tls(c);
    server.sql(
        "",
        "CREATE DATABASE jdbc_tls; CREATE USER 'tls'@'%' IDENTIFIED BY 'pw' REQUIRE SSL; GRANT ALL ON *.* TO 'tls'@'%'",
    );
    let source = fresh_db("jdbc_maria_tls_src");
    setup(&source);
    let run = |params: &str| -> std::process::Output {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("jdbc:mariadb://127.0.0.1:{}/jdbc_tls{params}", server.port);
        let mut more: Vec<(&str, Scalar)> = vec![("connection.password", "pw".into())];
        more.extend(upsert());
        let file = pipeline_into(dir.path(), &source, (&url, "tls"), &more);
        let o = std::process::Command::new(sluice())
            .args(["run", "--stop-when-idle", "2s"])
            .arg(&file)
            .output()
            .unwrap();
        psql(
            &source,
            &format!("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{source}'"),
        );
        o
    };
    let count = || {
        server.sql(
            "jdbc_tls",
            "SELECT count(*) FROM dbserver1_public_customers",
        )
    };
    let o = run(&format!(
        "?sslMode=verify-full&serverSslCert={}",
        c.join("ca.pem").display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(count().trim(), "50");
    server.sql("jdbc_tls", "DELETE FROM dbserver1_public_customers");
    let o = run("?sslMode=trust");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(count().trim(), "50");
    for (params, says) in [
        ("", "refused the connection"),
        (
            &*format!(
                "?sslMode=verify-full&serverSslCert={}",
                c.join("other.pem").display()
            ),
            "cannot reach MySQL",
        ),
    ] {
        let o = run(params);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && stderr.contains(says),
            "{params}: {stderr}"
        );
    }
    drop_db(&source);
}
