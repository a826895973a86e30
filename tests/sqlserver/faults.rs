//! Bad setups get one line that says what to do; a kill -9 loses nothing.

use super::*;

#[test]
fn cdc_not_enabled_and_a_wrong_password_are_one_clear_line() {
    let server = SqlServer::start("plainDB");
    server.sql("CREATE TABLE dbo.t (id int PRIMARY KEY)");
    let dir = tempfile::tempdir().unwrap();
    let e = error_line(&pipeline(dir.path(), &server, &[]));
    assert!(
        e.contains("CDC is not enabled on the database `plainDB`")
            && e.contains("sp_cdc_enable_db"),
        "{e}"
    );
    server.sql("EXEC sys.sp_cdc_enable_db");
    let e = error_line(&pipeline(dir.path(), &server, &[]));
    assert!(
        e.contains("no table of the database `plainDB` is in capture mode")
            && e.contains("sp_cdc_enable_table"),
        "{e}"
    );
    let wrong = source(&server).set("database.password", "wrong-password");
    let path = base(dir.path(), wrong).write(dir.path());
    let e = error_line(&path);
    assert!(
        e.contains("Login failed for user 'sa'") && !e.contains("wrong-password"),
        "{e}"
    );
}

#[test]
fn kill_9_under_a_writer_resumes_without_loss() {
    let server = SqlServer::start("killDB");
    server.sql("CREATE TABLE dbo.items (id int PRIMARY KEY, name nvarchar(40))");
    for i in 0..50 {
        server.sql(&format!("INSERT INTO dbo.items VALUES ({i}, N'row {i}')"));
    }
    server.enable_cdc(&["dbo.items"]);
    let dir = tempfile::tempdir().unwrap();
    // Small polls and pieces: an update's two rows often come in two pieces.
    let path = pipeline(
        dir.path(),
        &server,
        &[
            ("max.iteration.transactions", 3u32.into()),
            ("streaming.fetch.size", 3u32.into()),
        ],
    );
    let writer = {
        let mut session = server.session();
        std::thread::spawn(move || {
            for i in 0..300 {
                let sql = match i % 3 {
                    0 => format!("BEGIN TRANSACTION; INSERT INTO dbo.items VALUES ({}, N'new {i}'); UPDATE dbo.items SET name = N'changed {i}' WHERE id = {}; COMMIT", 1000 + i, i % 50),
                    1 => format!("UPDATE dbo.items SET name = N'again {i}' WHERE id = {}", 1000 + i - 1),
                    _ => format!("DELETE FROM dbo.items WHERE id = {}", 1000 + i - 2),
                };
                session.text_rows(&sql).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        })
    };
    let topic = "server1.killDB.dbo.items";
    // Killed at different moments: some after their offsets were committed (every second),
    // some before.
    let mut resumed = 0;
    for round in 0..4 {
        let mut child = start(&path, &[]);
        let have = lines(dir.path()).len();
        wait_events(dir.path(), have + 20, &mut child);
        std::thread::sleep(std::time::Duration::from_millis(700 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        let log = sluice_test_support::pg::log_of(&child);
        resumed += usize::from(
            log.contains("Streaming from the change tables") && !log.contains("Snapshot completed"),
        );
    }
    writer.join().unwrap();
    assert!(
        resumed > 0,
        "no restart resumed the stream from a committed position"
    );
    let mut child = start(&path, &[]);
    let expected: std::collections::BTreeMap<i64, String> = server
        .sql("SELECT id, name FROM dbo.items")
        .into_iter()
        .map(|r| (r[0].parse().unwrap(), r[1].clone()))
        .collect();
    wait_for(dir.path(), "the table's state", &mut child, |_| {
        super::rebuilt(dir.path(), topic) == expected
    });
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_stream_started_without_a_snapshot_resumes_from_where_it_started() {
    let server = SqlServer::start("nodataDB");
    server.sql("CREATE TABLE dbo.t (id int PRIMARY KEY, name nvarchar(10))");
    server.sql("INSERT INTO dbo.t VALUES (1, N'before')");
    server.enable_cdc(&["dbo.t"]);
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(
        dir.path(),
        &server,
        &[
            ("snapshot.mode", "no_data".into()),
            ("include.schema.changes", true.into()),
        ],
    );
    run_until_idle(&path);
    // The schema snapshot: the table's schema change event, no rows.
    let topics = |dir: &Path| -> Vec<String> {
        lines(dir)
            .iter()
            .map(|e| e["topic"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(topics(dir.path()), ["server1"]);
    // Changes made while it was stopped come at the next start (and no second schema event).
    server.sql("INSERT INTO dbo.t VALUES (2, N'while off')");
    let mut child = start(&path, &[]);
    wait_events(dir.path(), 2, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(topics(dir.path()), ["server1", "server1.nodataDB.dbo.t"]);
    let p = payloads(dir.path());
    assert_eq!(
        (p[1]["op"].as_str(), p[1]["after"]["id"].as_i64()),
        (Some("c"), Some(2))
    );
}

#[test]
fn a_stopped_sql_server_agent_is_named_when_nothing_was_captured() {
    let server = SqlServer::start("agentDB");
    server.sql("CREATE TABLE dbo.t (id int PRIMARY KEY)");
    server.enable_cdc(&["dbo.t"]);
    server.sql("UPDATE sys.dm_server_services SET status = 1");
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(dir.path(), &server, &[]);
    let log = run_until_idle(&path);
    assert!(log.contains("SQL Server Agent is not running"), "{log}");
    // Running: no such warning.
    server.sql("UPDATE sys.dm_server_services SET status = 4");
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(dir.path(), &server, &[]);
    let log = run_until_idle(&path);
    assert!(!log.contains("SQL Server Agent is not running"), "{log}");
}

#[test]
fn a_second_capture_instance_loses_and_repeats_nothing() {
    let server = SqlServer::start("evolveDB");
    server.sql("CREATE TABLE dbo.t (id int PRIMARY KEY, v nvarchar(5))");
    server.enable_cdc(&["dbo.t"]);
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(dir.path(), &server, &[]);
    let mut child = start(&path, &[]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    server.sql("INSERT INTO dbo.t VALUES (1, N'a')");
    wait_events(dir.path(), 1, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(1500)); // its offset committed
    child.kill().unwrap();
    child.wait().unwrap();
    // While it is down: a change only the first instance has, a second instance (the
    // schema-change procedure), and changes both have.
    server.sql("INSERT INTO dbo.t VALUES (2, N'b')");
    server.sql("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL, @capture_instance = N'dbo_t_v2'");
    server.sql("INSERT INTO dbo.t VALUES (3, N'c'); UPDATE dbo.t SET v = N'z' WHERE id = 1");
    let mut child = start(&path, &[]);
    wait_events(dir.path(), 4, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let events: Vec<String> = payloads(dir.path())
        .iter()
        .map(|p| {
            let row = if p["after"].is_null() {
                &p["before"]
            } else {
                &p["after"]
            };
            format!("{}{}", p["op"].as_str().unwrap(), row["id"])
        })
        .collect();
    assert_eq!(events, ["c1", "c2", "c3", "u1"]);
}

#[test]
fn a_position_the_cleanup_job_passed_stops_or_snapshots_again_when_needed() {
    let server = SqlServer::start("cleanDB");
    server.sql("CREATE TABLE dbo.t (id int PRIMARY KEY)");
    server.enable_cdc(&["dbo.t"]);
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(dir.path(), &server, &[]);
    let mut child = start(&path, &[]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    server.sql("INSERT INTO dbo.t VALUES (1)");
    wait_events(dir.path(), 1, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(1500)); // its offset committed
    child.kill().unwrap();
    child.wait().unwrap();
    // While it is down: two changes, and the cleanup job deletes the first of them.
    server.sql("INSERT INTO dbo.t VALUES (2)");
    server.sql("INSERT INTO dbo.t VALUES (3)");
    let max = server.sql("SELECT sys.fn_cdc_get_max_lsn()")[0][0].clone();
    server.sql(&format!(
        "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_t', @low_water_mark = {max}"
    ));
    let e = error_line(&path);
    assert!(
        e.contains("the CDC cleanup job deleted the changes after it") && e.contains("when_needed"),
        "{e}"
    );
    // `when_needed`: a new snapshot fills the gap.
    pipeline(
        dir.path(),
        &server,
        &[("snapshot.mode", "when_needed".into())],
    );
    let mut child = start(&path, &[]);
    wait_events(dir.path(), 4, &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    let tail: Vec<String> = payloads(dir.path())[1..]
        .iter()
        .map(|p| format!("{}{}", p["op"].as_str().unwrap(), p["after"]["id"]))
        .collect();
    assert_eq!(tail, ["r1", "r2", "r3"]);
}

/// Runs `path` until it has been idle for half a second; what it logged (it must succeed).
fn run_until_idle(path: &Path) -> String {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", path.to_str().unwrap(), "--stop-when-idle", "500ms"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{log}");
    log
}

#[test]
fn a_capture_instance_switch_is_an_alter_event_where_the_newer_instance_takes_over() {
    let server = SqlServer::start("switchDB");
    server.sql("CREATE TABLE dbo.t (id int PRIMARY KEY, v nvarchar(5))");
    server.enable_cdc(&["dbo.t"]);
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline(
        dir.path(),
        &server,
        &[("include.schema.changes", true.into())],
    );
    let mut child = start(&path, &[]);
    wait_events(dir.path(), 1, &mut child);
    server.sql("INSERT INTO dbo.t VALUES (1, N'a')");
    wait_events(dir.path(), 2, &mut child);
    // Seed 003's procedure: the column added, a second capture instance that captures it.
    server.sql("ALTER TABLE dbo.t ADD w int");
    server.sql("INSERT INTO dbo.t (id, v, w) VALUES (2, N'b', 5)");
    server.sql("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL, @capture_instance = N'dbo_t_v2'");
    server.sql("INSERT INTO dbo.t (id, v, w) VALUES (3, N'c', 7)");
    wait_events(dir.path(), 5, &mut child);
    // A graceful stop commits what was delivered: the recovery below starts after the switch
    // (a kill could leave the snapshot's first committed position, and the switch read again).
    sluice_test_support::pg::stop(&child);
    child.wait().unwrap();
    let all = lines(dir.path());
    let kinds: Vec<String> = all
        .iter()
        .map(|l| {
            let p = &l["value"]["payload"];
            match p["tableChanges"][0]["type"].as_str() {
                Some(kind) => kind.to_owned(),
                None => format!("{}{}", p["op"].as_str().unwrap(), p["after"]["id"]),
            }
        })
        .collect();
    assert_eq!(kinds, ["CREATE", "c1", "c2", "ALTER", "c3"]);
    let alter = &all[3]["value"]["payload"];
    let columns: Vec<&str> = alter["tableChanges"][0]["table"]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["id", "v", "w"]);
    assert_eq!(
        alter["source"]["commit_lsn"],
        all[4]["value"]["payload"]["source"]["commit_lsn"]
    );
    // The older instance's row carries its columns; the newer's has `w`.
    assert!(all[2]["value"]["payload"]["after"].get("w").is_none());
    assert_eq!(all[4]["value"]["payload"]["after"]["w"], 7);
    assert_eq!(all.len(), 5, "announced once");
    // The schema history: the snapshot's structure, then the newer instance's.
    let history = dir.path().join("data/sqlserver-schema-history.jsonl");
    let records = |path: &Path| -> Vec<Json> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let kinds: Vec<(String, usize)> = records(&history)
        .iter()
        .map(|r| {
            let change = &r["tableChanges"][0];
            let columns = change["table"]["columns"].as_array().unwrap().len();
            (change["type"].as_str().unwrap().to_owned(), columns)
        })
        .collect();
    assert_eq!(kinds, [("CREATE".to_owned(), 2), ("ALTER".to_owned(), 3)]);
    assert_eq!(records(&history)[0]["source"]["server"], "server1");
    assert_eq!(records(&history)[0]["databaseName"], "switchDB");
    // Lost, then written again by `snapshot.mode: recovery` from the current tables.
    std::fs::remove_file(&history).unwrap();
    pipeline(
        dir.path(),
        &server,
        &[
            ("include.schema.changes", true.into()),
            ("snapshot.mode", "recovery".into()),
        ],
    );
    run_until_idle(&path);
    let rebuilt = records(&history);
    assert_eq!(rebuilt.len(), 1, "{rebuilt:?}");
    assert_eq!(
        rebuilt[0]["tableChanges"][0]["table"]["columns"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

/// `/health/ready` waits for the source: while the server takes the connection and never
/// answers, the pipeline runs but is not ready, and its status says the source is not
/// connected.
#[test]
fn a_source_still_connecting_is_not_ready() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming().flatten() {
            held.push(stream);
        }
    });
    let server = SqlServer::start("unusedDB");
    let dir = tempfile::tempdir().unwrap();
    let admin = sluice_test_support::pg::free_port();
    let silent_source = source(&server)
        .set("connect.timeout.ms", 600_000u32)
        .set("database.port", silent_port);
    let path = base(dir.path(), silent_source)
        .setting("admin", &[("bind", format!("127.0.0.1:{admin}").into())])
        .write(dir.path());
    let mut child = start(&path, &[]);
    let get = |target: &str| sluice_test_support::pg::admin_get(admin, target);
    let t0 = std::time::Instant::now();
    let status: Json = loop {
        if let Some((200, body)) = get("/pipelines/sqlserver_test") {
            let j: Json = serde_json::from_str(&body).unwrap();
            if j["state"] == "running" {
                break j;
            }
        }
        assert!(t0.elapsed().as_secs() < 30, "the pipeline never ran");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(status["source_connected"], false, "{status}");
    // Still connecting a second later: not ready.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let (code, body) = get("/health/ready").unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("\"source_connected\":false"), "{body}");
    child.kill().unwrap();
    child.wait().unwrap();
}
