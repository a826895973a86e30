//! Secrets never reach the logs: failing runs at debug level, with a password in the database
//! URL, librdkafka SASL and SSL key passwords, a schema registry URL with credentials and the
//! registry's basic-auth user info, print none of them.

use std::process::Command;

use crate::broker;

const SECRETS: &[&str] = &[
    "URLSECRET222",
    "REGSECRET456",
    "BASICSECRET789",
    "SASLSECRET000",
    "SSLKEYSECRET111",
    "PWSECRET333",
];

fn failing_run(dir: &std::path::Path, name: &str, yaml: String) -> String {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg(&path)
        .env("SLUICE_LOG", "debug")
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{name} should fail:\n{log}");
    log
}

#[test]
fn failing_runs_never_print_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let pg = format!(
        "  type: postgres\n  database.url: postgres://nobody:URLSECRET222@127.0.0.1:{}/no_such_db\n  topic.prefix: x\n",
        crate::pg::port()
    );
    let kafka = |servers: &str, producer: &str| {
        format!(
            "  - name: k\n    type: kafka\n    bootstrap.servers: {servers}\n    connect.timeout: 2s\n    format: avro\n    \
             schema.registry.url: http://reguser:REGSECRET456@127.0.0.1:1\n    basic.auth.user.info: 'user:BASICSECRET789'\n    producer: {{ {producer} }}\n"
        )
    };
    let logs = [
        // The broker cannot be reached, with SASL configured.
        failing_run(
            dir.path(),
            "broker",
            format!(
                "name: a\ndata_dir: {d}/a\nrestart: {{ max_retries: 0 }}\nsource:\n{pg}sinks:\n{}",
                kafka(
                    "127.0.0.1:1",
                    "security.protocol: SASL_PLAINTEXT, sasl.mechanism: PLAIN, sasl.username: u, sasl.password: SASLSECRET000, ssl.key.password: SSLKEYSECRET111"
                )
            ),
        ),
        // The broker is there; the registry is not.
        failing_run(
            dir.path(),
            "registry",
            format!(
                "name: b\ndata_dir: {d}/b\nrestart: {{ max_retries: 0 }}\nsource:\n{pg}sinks:\n{}",
                kafka(
                    &broker::shared(),
                    "sasl.password: SASLSECRET000, ssl.key.password: SSLKEYSECRET111"
                )
            ),
        ),
        // The database refuses (no such database).
        failing_run(
            dir.path(),
            "database",
            format!(
                "name: c\ndata_dir: {d}/c\nrestart: {{ max_retries: 0 }}\nsource:\n{pg}sinks:\n  - name: f\n    type: file\n    path: {d}/out.jsonl\n"
            ),
        ),
        // The database cannot be reached, with the password in its own field.
        failing_run(
            dir.path(),
            "password",
            format!(
                "name: e\ndata_dir: {d}/e\nrestart: {{ max_retries: 0 }}\nsource:\n  type: postgres\n  database.hostname: 127.0.0.1\n  database.port: 1\n  database.user: someone\n  database.password: PWSECRET333\n  database.dbname: x\n  topic.prefix: x\nsinks:\n  - name: f\n    type: file\n    path: {d}/out.jsonl\n"
            ),
        ),
    ];
    // A configuration error on a secret field names the field, not the value.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "name: f\nsource:\n  type: postgres\n  database.password: [PWSECRET333]\n  topic.prefix: x\nsinks:\n  - type: stdout\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg(&bad)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("database.password"), "{said}");
    assert!(!said.contains("PWSECRET333"), "{said}");
    for log in &logs {
        assert!(log.lines().count() > 3, "a debug-level log: {log}");
        for secret in SECRETS {
            assert!(!log.contains(secret), "{secret} printed:\n{log}");
        }
    }
    assert!(logs[1].contains("schema registry"), "{}", logs[1]);
    assert!(
        logs[2].contains("cannot connect to PostgreSQL"),
        "{}",
        logs[2]
    );
}
