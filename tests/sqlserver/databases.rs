//! Several databases in one source (`database.names: a,b`), as Debezium's SQL Server task reads
//! several partitions: each database snapshotted in turn, then polled in turn, each with its
//! own position; a kill -9 loses nothing of either; a database added to the list is
//! snapshotted alone; signals go to the database they name.

use super::*;

/// A pipeline reading the databases `names` of the servers' port, its source's `keys` set.
fn pipeline_of(dir: &Path, servers: &[SqlServer], names: &str, keys: &[(&str, Scalar)]) -> PathBuf {
    let source = source(&servers[0]).set("database.names", names);
    base(dir, source.set_all(keys)).write(dir)
}

/// Two databases on one server, each with a captured table and rows.
fn two_databases(prefix: &str) -> Vec<SqlServer> {
    let servers = SqlServer::start_many(&[&format!("{prefix}Sales"), &format!("{prefix}Hr")]);
    for (s, rows) in servers.iter().zip([3, 2]) {
        s.sql("CREATE TABLE dbo.t (id int PRIMARY KEY, name nvarchar(50) NOT NULL)");
        for i in 1..=rows {
            s.sql(&format!(
                "INSERT INTO dbo.t VALUES ({i}, N'{}-{i}')",
                s.database
            ));
        }
        s.enable_cdc(&["dbo.t"]);
    }
    servers
}

/// The rows of `dbo.t` in `server`, as `rebuilt` gives them.
fn table(server: &SqlServer) -> std::collections::BTreeMap<i64, String> {
    (server.sql("SELECT id, name FROM dbo.t").into_iter())
        .map(|r| (r[0].parse().unwrap(), r[1].clone()))
        .collect()
}

/// Waits until the committed position holds, for each database of the output, a position
/// after its last event (a whole poll: no change LSN).
fn wait_committed(dir: &Path, child: &mut std::process::Child) {
    wait_for(dir, "the offsets of every database", child, |lines| {
        let Ok(text) = std::fs::read_to_string(dir.join("data/offsets.json")) else {
            return false;
        };
        let file: Json = serde_json::from_str(&text).unwrap_or_default();
        let position = file["pipelines"]["sqlserver_test"]["position"]
            .as_str()
            .unwrap_or("{}");
        let position: Json = serde_json::from_str(position).unwrap_or_default();
        lines.iter().all(|l| {
            let source = &l["value"]["payload"]["source"];
            let Some(db) = source["db"].as_str() else {
                return true;
            };
            let stored = &position["partitions"][db];
            stored["change_lsn"].is_null()
                && stored["commit_lsn"].as_str() >= source["commit_lsn"].as_str()
        })
    });
}

#[test]
fn each_database_is_snapshotted_in_turn_then_streamed_and_resumes_from_its_own_position() {
    let servers = two_databases("multi");
    let (sales, hr) = (&servers[0], &servers[1]);
    let dir = tempfile::tempdir().unwrap();
    let names = format!("{}, {}", sales.database, hr.database);
    let path = pipeline_of(dir.path(), &servers, &names, &[]);
    let mut child = start(&path, &[]);
    wait_events(dir.path(), 5, &mut child);
    let all = lines(dir.path());
    let topics: Vec<&str> = all.iter().map(|l| l["topic"].as_str().unwrap()).collect();
    let (ts, th) = ("server1.multiSales.dbo.t", "server1.multiHr.dbo.t");
    // The databases in the order listed, each a whole snapshot (`first` .. `last`).
    assert_eq!(topics, [ts, ts, ts, th, th]);
    let p = payloads(dir.path());
    let snap: Vec<&str> = p
        .iter()
        .map(|p| p["source"]["snapshot"].as_str().unwrap())
        .collect();
    assert_eq!(snap, ["first", "true", "last", "first", "last"]);
    assert_eq!(p[0]["source"]["db"], "multiSales");
    assert_eq!(p[4]["source"]["db"], "multiHr");
    assert_eq!(p[4]["after"]["name"], "multiHr-2");

    // Changes in both, read by one poll of each in turn.
    sales.sql("INSERT INTO dbo.t VALUES (10, N'ten')");
    hr.sql("UPDATE dbo.t SET name = N'hr-one' WHERE id = 1");
    hr.sql("INSERT INTO dbo.t VALUES (20, N'twenty')");
    wait_events(dir.path(), 8, &mut child);
    let p = payloads(dir.path());
    let dbs: Vec<(&str, &str)> = p[5..]
        .iter()
        .map(|p| {
            (
                p["source"]["db"].as_str().unwrap(),
                p["op"].as_str().unwrap(),
            )
        })
        .collect();
    let mut sorted = dbs.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [("multiHr", "c"), ("multiHr", "u"), ("multiSales", "c")]
    );
    // Each database's changes in its own commit order.
    let hr_ops: Vec<&str> = dbs
        .iter()
        .filter(|d| d.0 == "multiHr")
        .map(|d| d.1)
        .collect();
    assert_eq!(hr_ops, ["u", "c"]);

    // Killed once the offsets were committed (every second); changes to both while down;
    // the restart reads them, and nothing again.
    wait_committed(dir.path(), &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    let before = lines(dir.path()).len();
    sales.sql("DELETE FROM dbo.t WHERE id = 2");
    hr.sql("INSERT INTO dbo.t VALUES (21, N'twenty-one')");
    sales.sql("UPDATE dbo.t SET name = N'sales-ten' WHERE id = 10");
    let mut child = start(&path, &[]);
    // The delete, its tombstone, the insert and the update.
    wait_events(dir.path(), before + 4, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(400));
    child.kill().unwrap();
    child.wait().unwrap();
    let after: Vec<Json> = lines(dir.path())[before..].to_vec();
    assert_eq!(after.len(), 4, "nothing read twice: {after:?}");
    assert!(
        after
            .iter()
            .all(|l| l["value"]["payload"]["source"]["snapshot"] != "first"),
        "no database snapshotted again"
    );
    assert_eq!(rebuilt(dir.path(), ts), table(sales));
    assert_eq!(rebuilt(dir.path(), th), table(hr));
    // The committed position holds both databases' positions.
    let offsets = std::fs::read_to_string(dir.path().join("data/offsets.json")).unwrap();
    assert!(
        offsets.contains("partitions")
            && offsets.contains("multiSales")
            && offsets.contains("multiHr"),
        "{offsets}"
    );
}

#[test]
fn a_database_added_to_the_list_is_snapshotted_alone() {
    let servers = two_databases("added");
    let (sales, hr) = (&servers[0], &servers[1]);
    let dir = tempfile::tempdir().unwrap();
    let path = pipeline_of(dir.path(), &servers, &sales.database, &[]);
    let mut child = start(&path, &[]);
    wait_events(dir.path(), 3, &mut child);
    sales.sql("INSERT INTO dbo.t VALUES (10, N'ten')");
    wait_events(dir.path(), 4, &mut child);
    // Killed once the offsets were committed (every second).
    wait_committed(dir.path(), &mut child);
    child.kill().unwrap();
    child.wait().unwrap();

    // The second database listed: its snapshot, not the first's again; both streamed.
    let names = format!("{},{}", sales.database, hr.database);
    pipeline_of(dir.path(), &servers, &names, &[]);
    sales.sql("INSERT INTO dbo.t VALUES (11, N'eleven')");
    let mut child = start(&path, &[]);
    wait_events(dir.path(), 7, &mut child);
    hr.sql("INSERT INTO dbo.t VALUES (30, N'thirty')");
    wait_events(dir.path(), 8, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let p = payloads(dir.path());
    let seen: Vec<(&str, &str)> = p[4..]
        .iter()
        .map(|p| {
            (
                p["source"]["db"].as_str().unwrap(),
                p["op"].as_str().unwrap(),
            )
        })
        .collect();
    // The first database has nothing to snapshot; the second's snapshot; then both streams.
    assert_eq!(
        seen,
        [
            ("addedHr", "r"),
            ("addedHr", "r"),
            ("addedSales", "c"),
            ("addedHr", "c")
        ]
    );
    assert_eq!(
        rebuilt(dir.path(), "server1.addedSales.dbo.t"),
        table(sales)
    );
    assert_eq!(rebuilt(dir.path(), "server1.addedHr.dbo.t"), table(hr));
}

#[test]
fn signals_go_to_the_database_they_name() {
    let servers = two_databases("sig");
    let (sales, hr) = (&servers[0], &servers[1]);
    for s in &servers {
        s.sql("CREATE TABLE dbo.dbz_signal (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))");
        s.enable_cdc(&["dbo.dbz_signal"]);
    }
    let dir = tempfile::tempdir().unwrap();
    let signals = dir.path().join("signals.jsonl");
    std::fs::write(&signals, "").unwrap();
    // The signaling table of the second database only, and the file channel.
    let keys = [
        ("snapshot.mode", "no_data".into()),
        ("signal.enabled.channels", "source,file".into()),
        (
            "signal.data.collection",
            format!("{}.dbo.dbz_signal", hr.database).into(),
        ),
        ("signal.file", (&signals).into()),
        ("signal.poll.interval.ms", 50u32.into()),
    ];
    let names = format!("{},{}", sales.database, hr.database);
    let path = pipeline_of(dir.path(), &servers, &names, &keys);
    let mut child = start(&path, &[]);
    std::thread::sleep(std::time::Duration::from_millis(800));
    // A file signal naming the first database's table: its rows only.
    std::fs::write(
        &signals,
        format!(
            "{{\"id\":\"f1\",\"type\":\"execute-snapshot\",\"data\":{{\"data-collections\":[\"{}.dbo.t\"]}}}}\n",
            sales.database
        ),
    )
    .unwrap();
    wait_events(dir.path(), 3, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let p = payloads(dir.path());
    assert_eq!(p.len(), 3, "{p:?}");
    assert!(
        p.iter()
            .all(|p| p["source"]["db"] == "sigSales" && p["op"] == "r"),
        "{p:?}"
    );
    // A row of the second database's signaling table (captured too: its insert is an
    // event): that database's table.
    hr.sql("INSERT INTO dbo.dbz_signal VALUES ('s1', 'execute-snapshot', '{\"data-collections\": [\"dbo.t\"]}')");
    wait_events(dir.path(), 6, &mut child);
    // The first database's table of that name is no signaling table: an ordinary change.
    sales.sql("INSERT INTO dbo.dbz_signal VALUES ('s2', 'execute-snapshot', '{\"data-collections\": [\"dbo.t\"]}')");
    wait_events(dir.path(), 7, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let p = payloads(dir.path());
    let seen: Vec<(String, String, String)> = p
        .iter()
        .map(|p| {
            (
                p["source"]["db"].as_str().unwrap().to_owned(),
                p["source"]["table"].as_str().unwrap().to_owned(),
                p["op"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let count = |db: &str, t: &str, op: &str| {
        seen.iter()
            .filter(|s| s.0 == db && s.1 == t && s.2 == op)
            .count()
    };
    assert_eq!(count("sigSales", "t", "r"), 3, "{seen:?}");
    assert_eq!(count("sigHr", "t", "r"), 2, "{seen:?}");
    assert_eq!(count("sigHr", "dbz_signal", "c"), 1, "{seen:?}");
    assert_eq!(count("sigSales", "dbz_signal", "c"), 1, "{seen:?}");
    assert_eq!(seen.len(), 7, "{seen:?}");
}

#[test]
fn kill_9_under_writers_to_both_databases_loses_nothing() {
    let servers = two_databases("kill");
    let dir = tempfile::tempdir().unwrap();
    let names = format!("{},{}", servers[0].database, servers[1].database);
    let path = pipeline_of(dir.path(), &servers, &names, &[]);
    let writers: Vec<_> = servers
        .iter()
        .map(|s| {
            let mut session = s.session();
            std::thread::spawn(move || {
                for i in 100..260 {
                    session
                        .text_rows(&format!("INSERT INTO dbo.t VALUES ({i}, N'w{i}')"))
                        .unwrap();
                    if i % 3 == 0 {
                        session
                            .text_rows(&format!(
                                "UPDATE dbo.t SET name = N'u{i}' WHERE id = {}",
                                i - 1
                            ))
                            .unwrap();
                    }
                    if i % 7 == 0 {
                        session
                            .text_rows(&format!("DELETE FROM dbo.t WHERE id = {}", i - 2))
                            .unwrap();
                    }
                    std::thread::sleep(std::time::Duration::from_millis(8));
                }
            })
        })
        .collect();
    // Killed at different moments, before and after offsets were committed.
    for round in 0..3 {
        let mut child = start(&path, &[]);
        let have = lines(dir.path()).len();
        wait_events(dir.path(), have + 15, &mut child);
        std::thread::sleep(std::time::Duration::from_millis(600 * round));
        child.kill().unwrap();
        child.wait().unwrap();
    }
    for w in writers {
        w.join().unwrap();
    }
    let mut child = start(&path, &[]);
    let expected: Vec<_> = servers.iter().map(table).collect();
    wait_for(dir.path(), "both tables' state", &mut child, |_| {
        (servers.iter().zip(&expected))
            .all(|(s, e)| rebuilt(dir.path(), &format!("server1.{}.dbo.t", s.database)) == *e)
    });
    child.kill().unwrap();
    child.wait().unwrap();
}
