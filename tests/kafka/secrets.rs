//! Secrets never reach the logs: failing runs at debug level, with a password in the database
//! URL, librdkafka SASL and SSL key passwords, a schema registry URL with credentials and the
//! registry's basic-auth user info, print none of them.

use std::process::Command;

use sluice_test_support::pipeline::{Component, Pipeline, Scalar};

use crate::broker;

const SECRETS: &[&str] = &[
    "URLSECRET222",
    "REGSECRET456",
    "BASICSECRET789",
    "SASLSECRET000",
    "SSLKEYSECRET111",
    "PWSECRET333",
];

fn failing_run(dir: &std::path::Path, name: &str, pipeline: Pipeline) -> String {
    let path = pipeline.write_as(&dir.join(format!("{name}.yaml")));
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
    let d = dir.path();
    let url = format!(
        "postgres://nobody:URLSECRET222@127.0.0.1:{}/no_such_db",
        crate::pg::port()
    );
    let pg = Component::new("postgres")
        .set("database.url", url)
        .set("topic.prefix", "x");
    let kafka = |servers: &str, producer: Scalar| {
        Component::new("kafka")
            .named("k")
            .set("bootstrap.servers", servers)
            .set("connect.timeout", "2s")
            .set("format", "avro")
            .set(
                "schema.registry.url",
                "http://reguser:REGSECRET456@127.0.0.1:1",
            )
            .set("basic.auth.user.info", "user:BASICSECRET789")
            .set("producer", producer)
    };
    let file = Component::new("file")
        .named("f")
        .set("path", d.join("out.jsonl"));
    // The pipeline `name`, its offsets kept in `dir/<name>`, without restarts.
    let base = |name: &str| {
        Pipeline::new(name, d.join(name)).setting("restart", &[("max_retries", 0u32.into())])
    };
    let sasl = [
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", "u"),
        ("sasl.password", "SASLSECRET000"),
        ("ssl.key.password", "SSLKEYSECRET111"),
    ];
    let passwords = [
        ("sasl.password", "SASLSECRET000"),
        ("ssl.key.password", "SSLKEYSECRET111"),
    ];
    let unreachable = Component::new("postgres")
        .set("database.hostname", "127.0.0.1")
        .set("database.port", 1u32)
        .set("database.user", "someone")
        .set("database.password", "PWSECRET333")
        .set("database.dbname", "x")
        .set("topic.prefix", "x");
    let logs = [
        // The broker cannot be reached, with SASL configured.
        failing_run(
            d,
            "broker",
            base("a")
                .source(pg.clone())
                .sink(kafka("127.0.0.1:1", sasl.into())),
        ),
        // The broker is there; the registry is not.
        failing_run(
            d,
            "registry",
            base("b")
                .source(pg.clone())
                .sink(kafka(&broker::shared(), passwords.into())),
        ),
        // The database refuses (no such database).
        failing_run(d, "database", base("c").source(pg).sink(file.clone())),
        // The database cannot be reached, with the password in its own field.
        failing_run(d, "password", base("e").source(unreachable).sink(file)),
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
