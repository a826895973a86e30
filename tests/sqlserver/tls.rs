//! TLS to SQL Server (`database.encrypt: true`) against the emulator forcing encryption: the
//! snapshot and the stream over TLS with the server's certificate named or trusted, and one
//! clear line when the certificate cannot be checked or the source does not encrypt. FreeTDS's
//! `tsql`, an independent client, reads the same table over the emulator's TLS.

use std::io::Write;
use std::process::{Command, Stdio};

use super::*;

fn table(server: &SqlServer) {
    server.sql("CREATE TABLE dbo.t (id int PRIMARY KEY, name nvarchar(20))");
    server.sql("INSERT INTO dbo.t VALUES (1, N'one'), (2, N'two')");
    server.enable_cdc(&["dbo.t"]);
}

#[test]
fn snapshot_and_stream_over_tls_with_the_servers_certificate_named_or_trusted() {
    let (server, certificate) = SqlServer::start_tls("tlsDB");
    table(&server);
    for trust in [
        ("database.serverCertificate", Scalar::from(&certificate)),
        ("database.trustServerCertificate", true.into()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let keys = [("database.encrypt", true.into()), trust.clone()];
        let path = pipeline(dir.path(), &server, &keys);
        let mut child = start(&path, &[]);
        wait_events(dir.path(), 2, &mut child);
        server.sql("UPDATE dbo.t SET name = N'changed' WHERE id = 2");
        wait_events(dir.path(), 3, &mut child);
        child.kill().unwrap();
        child.wait().unwrap();
        let ops: Vec<(String, i64)> = payloads(dir.path())
            .iter()
            .map(|p| {
                (
                    p["op"].as_str().unwrap().to_owned(),
                    p["after"]["id"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(ops[..2], [("r".into(), 1), ("r".into(), 2)], "{trust:?}");
        assert_eq!(ops[2..], [("u".into(), 2)], "{trust:?}");
        server.sql("UPDATE dbo.t SET name = N'two' WHERE id = 2");
    }
}

#[test]
fn an_unchecked_certificate_and_a_source_that_does_not_encrypt_are_one_clear_line() {
    let (server, _) = SqlServer::start_tls("tlsBadDB");
    table(&server);
    let dir = tempfile::tempdir().unwrap();
    // The self-signed certificate is not among the system's roots.
    let encrypt = [("database.encrypt", true.into())];
    let e = error_line(&pipeline(dir.path(), &server, &encrypt));
    assert!(
        e.contains("TLS to 127.0.0.1:") && e.contains("database.serverCertificate"),
        "{e}"
    );
    // The server forces encryption; the source asked for none.
    let e = error_line(&pipeline(dir.path(), &server, &[]));
    assert!(
        e.contains("logging in to 127.0.0.1:") && e.contains("database.encrypt: true"),
        "{e}"
    );
    // TLS settings without TLS are refused before anything runs, at their line.
    let path = pipeline(
        dir.path(),
        &server,
        &[("database.trustServerCertificate", true.into())],
    );
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("validate")
        .arg(&path)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && e.contains("pipeline.yaml:")
            && e.contains("set `database.encrypt: true`"),
        "{e}"
    );
}

#[test]
fn tsql_reads_the_table_over_the_emulators_tls() {
    let (server, certificate) = SqlServer::start_tls("tlsTsqlDB");
    table(&server);
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("freetds.conf");
    std::fs::write(
        &conf,
        format!(
            "[global]\n\tencryption = require\n\tca file = {}\n",
            certificate.display()
        ),
    )
    .unwrap();
    // Bounded: a handshake the emulator got wrong fails the test instead of hanging it.
    let mut child = Command::new("timeout")
        .args([
            "30",
            "tsql",
            "-H",
            "127.0.0.1",
            "-p",
            &server.port.to_string(),
        ])
        .args([
            "-U",
            USER,
            "-P",
            PASSWORD,
            "-D",
            &server.database,
            "-o",
            "q",
        ])
        .env("TDSVER", "7.4")
        .env("LANG", "C.UTF-8")
        .env("FREETDSCONF", &conf)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tsql (Debian package freetds-bin) must be installed");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"SELECT id, name FROM dbo.t ORDER BY id\ngo\nexit\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("1\tone") && text.contains("2\ttwo"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
