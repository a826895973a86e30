//! `sluice serve`'s Kafka Connect-compatible REST API, driven as curl drives Kafka Connect: a
//! Debezium PostgreSQL connector's JSON registered unchanged, its topic consumed; validation,
//! secrets hidden, a configuration change, the connector kept across a restart of the server,
//! and deleted.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use sluice_test_support::pg::admin_call;
use sluice_test_support::{broker, pg};

use super::e2e::unique_prefix;

fn serve(port: u16, dir: &std::path::Path, bootstrap: &str) -> Child {
    let worker = dir.join("connect-distributed.properties");
    std::fs::write(
        &worker,
        "group.id=connect-cluster\nkey.converter=org.apache.kafka.connect.json.JsonConverter\nvalue.converter=org.apache.kafka.connect.json.JsonConverter\nkey.converter.schemas.enable=false\nvalue.converter.schemas.enable=false\noffset.storage.topic=connect-offsets\nproducer.linger.ms=5\n",
    )
    .unwrap();
    let child = pg::spawn_logged(
        Command::new(pg::sluice())
            .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
            .arg("--worker-config")
            .arg(&worker)
            .arg("--data-dir")
            .arg(dir.join("serve"))
            // Neither the flag nor the worker's file: the default `${KAFKA_BOOTSTRAP_SERVERS}`.
            .env("KAFKA_BOOTSTRAP_SERVERS", bootstrap),
    );
    let t0 = Instant::now();
    while admin_call(port, "GET", "/", None).is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{}",
            pg::log_so_far(&child)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

fn call(port: u16, method: &str, target: &str, body: Option<&Json>) -> (u16, Json) {
    let text = body.map(Json::to_string);
    let (status, answer) = admin_call(port, method, target, text.as_deref()).unwrap();
    let json = serde_json::from_str(&answer).unwrap_or(Json::String(answer));
    (status, json)
}

fn wait_running(port: u16, name: &str) {
    let t0 = Instant::now();
    loop {
        let (_, status) = call(port, "GET", &format!("/connectors/{name}/status"), None);
        if status["connector"]["state"] == "RUNNING" && status["tasks"][0]["state"] == "RUNNING" {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "{status}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn ids(records: &[broker::Consumed]) -> Vec<i64> {
    records
        .iter()
        .map(|r| {
            serde_json::from_slice::<Json>(r.value.as_ref().unwrap()).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect()
}

fn terminate(mut child: Child) {
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = child.wait().unwrap();
    let log = pg::log_of(&child);
    assert!(status.success(), "{log}");
    assert!(
        !log.contains("not-a-real-secret"),
        "a secret in the log: {log}"
    );
}

#[test]
fn a_debezium_connector_registered_through_the_rest_api_runs() {
    let db = pg::fresh_db("connect_api");
    pg::psql(
        &db,
        "create table customers (id int primary key, name text not null)",
    );
    pg::psql(
        &db,
        "insert into customers values (1, 'Sally'), (2, 'George')",
    );
    let dir = tempfile::tempdir().unwrap();
    let name = unique_prefix("connect");
    let bootstrap = broker::shared();
    let port = pg::free_port();
    let child = serve(port, dir.path(), &bootstrap);
    let mut config = serde_json::json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": pg::host(),
        "database.port": "x",
        "database.user": "postgres",
        "database.password": "not-a-real-secret",
        "database.dbname": db,
        "topic.prefix": name,
        "plugin.name": "pgoutput",
        "slot.name": db,
        "publication.name": db,
        "publication.autocreate.mode": "filtered",
        "table.include.list": "public.customers",
        "transforms": "unwrap",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
    });

    let (status, root) = call(port, "GET", "/", None);
    assert_eq!(status, 200);
    assert!(root["version"].is_string(), "{root}");
    let (_, plugins) = call(port, "GET", "/connector-plugins", None);
    assert!(
        plugins.as_array().unwrap().iter().any(|p| p["class"]
            == "io.debezium.connector.postgresql.PostgresConnector"
            && p["type"] == "source"),
        "{plugins}"
    );
    // Validation names the bad property, and hides the secret.
    let validate = "/connector-plugins/PostgresConnector/config/validate";
    let (status, checked) = call(port, "PUT", validate, Some(&config));
    assert_eq!(status, 200, "{checked}");
    assert_eq!(checked["error_count"], 1, "{checked}");
    let entry = |checked: &Json, key: &str| {
        checked["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["value"]["name"] == key)
            .cloned()
            .unwrap()
    };
    let port_entry = entry(&checked, "database.port");
    assert_eq!(
        port_entry["value"]["errors"].as_array().unwrap().len(),
        1,
        "{checked}"
    );
    assert_eq!(
        entry(&checked, "database.password")["value"]["value"],
        "[hidden]"
    );
    let (status, refused) = call(
        port,
        "POST",
        "/connectors",
        Some(&serde_json::json!({"name": name, "config": config})),
    );
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error_code"], 400);
    config["database.port"] = pg::port().into();
    let (_, checked) = call(port, "PUT", validate, Some(&config));
    assert_eq!(checked["error_count"], 0, "{checked}");

    // Registered as curl registers it.
    let request = serde_json::json!({"name": name, "config": config});
    let (status, info) = call(port, "POST", "/connectors", Some(&request));
    assert_eq!(status, 201, "{info}");
    assert_eq!(info["name"], name.as_str());
    assert_eq!(info["type"], "source");
    assert_eq!(info["config"]["database.password"], "[hidden]");
    let (status, again) = call(port, "POST", "/connectors", Some(&request));
    assert_eq!(
        (status, &again["message"]),
        (409, &Json::from(format!("Connector {name} already exists")))
    );
    wait_running(port, &name);
    let topic = format!("{name}.public.customers");
    let records = broker::consume(&bootstrap, &[&topic], 2, Duration::from_secs(60));
    assert_eq!(ids(&records), [1, 2]);
    let first: Json = serde_json::from_slice(records[0].value.as_ref().unwrap()).unwrap();
    assert_eq!(
        first,
        serde_json::json!({"id": 1, "name": "Sally"}),
        "the worker's schemaless converters, the unwrap SMT"
    );

    // The configuration shown hides the secret; sent back hidden, the secret is kept.
    let (_, shown) = call(port, "GET", &format!("/connectors/{name}/config"), None);
    assert_eq!(shown["database.password"], "[hidden]");
    let mut changed = shown.clone();
    changed["transforms.unwrap.add.fields"] = "op".into();
    let (status, info) = call(
        port,
        "PUT",
        &format!("/connectors/{name}/config"),
        Some(&changed),
    );
    assert_eq!(status, 200, "{info}");
    wait_running(port, &name);
    pg::psql(&db, "insert into customers values (3, 'Ann')");
    let records = broker::consume(&bootstrap, &[&topic], 3, Duration::from_secs(60));
    assert_eq!(
        ids(&records),
        [1, 2, 3],
        "restarted from its committed position"
    );
    let third: Json = serde_json::from_slice(records[2].value.as_ref().unwrap()).unwrap();
    assert_eq!(third["__op"], "c", "the changed configuration: {third}");
    // PATCH: the properties given change, a null removes one, the rest (the secret) stay.
    let patch = serde_json::json!({"transforms.unwrap.add.fields": null, "status.update.interval.ms": "5000"});
    let (status, info) = call(
        port,
        "PATCH",
        &format!("/connectors/{name}/config"),
        Some(&patch),
    );
    assert_eq!(status, 200, "{info}");
    assert_eq!(
        info["config"]["status.update.interval.ms"], "5000",
        "{info}"
    );
    assert!(
        info["config"]["transforms.unwrap.add.fields"].is_null(),
        "{info}"
    );
    assert_eq!(info["config"]["database.password"], "[hidden]");
    wait_running(port, &name);
    pg::psql(&db, "insert into customers values (33, 'Pat')");
    let records = broker::consume(&bootstrap, &[&topic], 4, Duration::from_secs(60));
    assert_eq!(
        ids(&records),
        [1, 2, 3, 33],
        "restarted from its committed position"
    );
    let patched: Json = serde_json::from_slice(records[3].value.as_ref().unwrap()).unwrap();
    assert!(
        patched.get("__op").is_none(),
        "the field is gone with its property: {patched}"
    );
    let saved =
        std::fs::read_to_string(dir.path().join(format!("serve/connectors/{name}.json"))).unwrap();
    assert!(
        saved.contains("not-a-real-secret"),
        "the secret kept, not the mask: {saved}"
    );

    // The server restarts: the connector comes back and goes on where it was.
    terminate(child);
    let child = serve(port, dir.path(), &bootstrap);
    let (_, list) = call(port, "GET", "/connectors?expand=status", None);
    assert!(
        list[&name]["status"]["connector"]["state"].is_string(),
        "{list}"
    );
    wait_running(port, &name);
    pg::psql(&db, "insert into customers values (4, 'Bob')");
    let records = broker::consume(&bootstrap, &[&topic], 5, Duration::from_secs(60));
    assert_eq!(ids(&records), [1, 2, 3, 33, 4]);

    // Paused and resumed: nothing lost.
    assert_eq!(
        call(port, "PUT", &format!("/connectors/{name}/pause"), None).0,
        202
    );
    let (_, status) = call(port, "GET", &format!("/connectors/{name}/status"), None);
    assert_eq!(status["connector"]["state"], "PAUSED", "{status}");
    pg::psql(&db, "insert into customers values (5, 'Eve')");
    assert_eq!(
        call(port, "PUT", &format!("/connectors/{name}/resume"), None).0,
        202
    );
    let records = broker::consume(&bootstrap, &[&topic], 6, Duration::from_secs(60));
    assert_eq!(ids(&records), [1, 2, 3, 33, 4, 5]);

    // Restarted (as curl -X POST sends it, and with its tasks): on from its position.
    let restart = format!("/connectors/{name}/restart");
    assert_eq!(call(port, "POST", &restart, None).0, 204);
    let (status, body) = call(
        port,
        "POST",
        &format!("{restart}?includeTasks=true&onlyFailed=false"),
        None,
    );
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["connector"]["state"], "RESTARTING", "{body}");
    wait_running(port, &name);
    pg::psql(&db, "insert into customers values (6, 'Max')");
    let records = broker::consume(&bootstrap, &[&topic], 7, Duration::from_secs(60));
    assert_eq!(ids(&records), [1, 2, 3, 33, 4, 5, 6]);

    let (status, _) = call(port, "DELETE", &format!("/connectors/{name}"), None);
    assert_eq!(status, 204);
    let (status, gone) = call(port, "GET", &format!("/connectors/{name}"), None);
    assert_eq!(
        (status, &gone["message"]),
        (404, &Json::from(format!("Connector {name} not found")))
    );

    // Registered again by `PUT .../config` (201: new): its offsets stayed, it goes on.
    let (status, info) = call(
        port,
        "PUT",
        &format!("/connectors/{name}/config"),
        Some(&config),
    );
    assert_eq!(status, 201, "{info}");
    wait_running(port, &name);
    pg::psql(&db, "insert into customers values (7, 'Ida')");
    let records = broker::consume(&bootstrap, &[&topic], 8, Duration::from_secs(60));
    assert_eq!(ids(&records), [1, 2, 3, 33, 4, 5, 6, 7]);
    assert_eq!(
        call(port, "DELETE", &format!("/connectors/{name}"), None).0,
        204
    );
    terminate(child);
    pg::drop_db(&db);
}
