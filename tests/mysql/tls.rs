//! `database.ssl.mode` against a private MariaDB with TLS certificates made here by `openssl`
//! (a CA, and a server certificate for 127.0.0.1 it signs): a user the server lets in only over
//! TLS (`REQUIRE SSL`) snapshots and streams with every mode that encrypts, and each wrong
//! setup is one line.

use super::*;

#[test]
fn every_ssl_mode_that_encrypts_reads_a_server_that_requires_tls() {
    let certs = tempfile::tempdir().unwrap();
    let c = certs.path();
    let server = mariadb::Restartable::start_tls(c);
    server.sql(
        "",
        "CREATE DATABASE tls_db; CREATE TABLE tls_db.t (id INT PRIMARY KEY, v VARCHAR(10));\
         INSERT INTO tls_db.t VALUES (1, 'one');\
         CREATE USER 'tls'@'%' IDENTIFIED BY 'pw' REQUIRE SSL; GRANT ALL ON *.* TO 'tls'@'%'",
    );
    let dir = tempfile::tempdir().unwrap();
    let with = |name: &str, ssl: &[(&str, Scalar)]| {
        let d = dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        let source = source(&d, server.port)
            .set("database.user", "tls")
            .set_all(&[
                ("database.include.list", "tls_db".into()),
                ("database.password", "pw".into()),
            ])
            .set_all(ssl);
        base(&d, source).write(&d)
    };
    let ca_file = c.join("ca.pem");
    // Checked against the CA and the host name: the snapshot, then the stream (the binlog
    // connection is encrypted too: the user has no other way in).
    let path = with(
        "identity",
        &[
            ("database.ssl.mode", "verify_identity".into()),
            ("database.ssl.truststore", (&ca_file).into()),
            ("snapshot.mode", "initial".into()),
        ],
    );
    let mut child = sluice_test_support::pg::start(&path, &[]);
    let out = dir.path().join("identity");
    sluice_test_support::pg::wait_lines(&out, 1, &mut child);
    server.sql("", "INSERT INTO tls_db.t VALUES (2, 'two')");
    sluice_test_support::pg::wait_lines(&out, 2, &mut child);
    sluice_test_support::pg::stop(&child);
    sluice_test_support::pg::finish(child);
    let ids: Vec<(String, i64)> = sluice_test_support::pg::lines(&out)
        .iter()
        .map(|e| {
            let p = &e["value"]["payload"];
            (
                p["op"].as_str().unwrap().to_owned(),
                p["after"]["id"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ids, [("r".to_owned(), 1), ("c".to_owned(), 2)]);
    // `preferred` (the default), `required` and `verify_ca` read it too.
    for (name, ssl) in [
        ("preferred", vec![]),
        (
            "required",
            vec![("database.ssl.mode", Scalar::from("required"))],
        ),
        (
            "ca",
            vec![
                ("database.ssl.mode", Scalar::from("verify_ca")),
                ("database.ssl.truststore", (&ca_file).into()),
            ],
        ),
    ] {
        run_ok(&with(name, &ssl));
        assert_eq!(
            sluice_test_support::pg::lines(&dir.path().join(name)).len(),
            2,
            "{name}"
        );
    }
    // Without TLS the server turns the user away.
    let e = error_line(&with(
        "disabled",
        &[("database.ssl.mode", "disabled".into())],
    ));
    assert!(e.contains("Access denied"), "{e}");
    // A certificate another CA signed.
    let e = error_line(&with(
        "other",
        &[
            ("database.ssl.mode", "verify_ca".into()),
            ("database.ssl.truststore", c.join("other.pem").into()),
        ],
    ));
    assert!(
        e.contains("connecting to") && e.to_lowercase().contains("cert"),
        "{e}"
    );
    // A trust store a mode does not read is refused at start.
    let e = error_line(&with(
        "unread",
        &[("database.ssl.truststore", (&ca_file).into())],
    ));
    assert!(e.contains("verify_ca"), "{e}");
    // A mode that needs TLS against a server without it (the shared one).
    let plain = dir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let e = error_line(&pipeline(
        &plain,
        mariadb::server().port,
        &[("database.ssl.mode", "required".into())],
    ));
    assert!(e.contains("offers no TLS"), "{e}");
}
