//! Incremental snapshots (Debezium's `execute-snapshot` signal) from the signaling table and
//! the `file` channel: chunks by primary key, changes during a chunk's window win.

use super::*;

const SIGNALS: &str = "CREATE TABLE dbo.debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data nvarchar(2048))";

#[test]
fn a_signal_row_snapshots_a_table_in_chunks_while_a_writer_changes_it() {
    let server = SqlServer::start("incrDB");
    server.sql("CREATE TABLE dbo.customers (id int PRIMARY KEY, name nvarchar(40))");
    for i in 0..60 {
        server.sql(&format!(
            "INSERT INTO dbo.customers VALUES ({i}, N'row {i}')"
        ));
    }
    server.sql(SIGNALS);
    server.enable_cdc(&["dbo.customers", "dbo.debezium_signal"]);
    let dir = tempfile::tempdir().unwrap();
    let extra = "  snapshot.mode: no_data\n  table.include.list: dbo.customers\n  signal.data.collection: incrDB.dbo.debezium_signal\n  incremental.snapshot.chunk.size: 7\n";
    let path = pipeline(dir.path(), &server, extra);
    let mut child = start(&path, &[]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let writer = {
        let mut session = server.session();
        std::thread::spawn(move || {
            for i in 0..40 {
                let sql = match i % 2 {
                    0 => format!(
                        "UPDATE dbo.customers SET name = N'changed {i}' WHERE id = {}",
                        (i * 7) % 60
                    ),
                    _ => format!("DELETE FROM dbo.customers WHERE id = {}", (i * 11) % 60),
                };
                session.text_rows(&sql).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(15));
            }
        })
    };
    server.sql(r#"INSERT INTO dbo.debezium_signal VALUES ('s1', 'execute-snapshot', N'{"data-collections": ["incrDB.dbo.customers"], "type": "incremental"}')"#);
    writer.join().unwrap();
    let expected: std::collections::BTreeMap<i64, String> = server
        .sql("SELECT id, name FROM dbo.customers")
        .into_iter()
        .map(|r| (r[0].parse().unwrap(), r[1].clone()))
        .collect();
    let topic = "server1.incrDB.dbo.customers";
    wait_for(dir.path(), "the table's state", &mut child, |_| {
        rebuilt(dir.path(), topic) == expected
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let all = lines(dir.path());
    let reads: Vec<&Json> = all
        .iter()
        .map(|l| &l["value"]["payload"])
        .filter(|p| p["op"] == "r")
        .collect();
    assert!(reads.len() >= 20, "{} rows read", reads.len());
    assert!(reads
        .iter()
        .all(|p| p["source"]["snapshot"] == "incremental"));
    assert!(
        all.iter().all(|l| l["topic"] == topic),
        "only the captured table's events"
    );
    // The chunks came in key order.
    let ids: Vec<i64> = reads
        .iter()
        .map(|p| p["after"]["id"].as_i64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(rebuilt(dir.path(), topic), expected);
}

#[test]
fn the_file_channel_snapshots_with_additional_conditions_and_a_restart_goes_on() {
    // The condition names the table as Debezium's documentation does (`<database>.<schema>.<table>`).
    let server = SqlServer::start("incrFileDB");
    server.sql("CREATE TABLE dbo.t (id bigint PRIMARY KEY, color varchar(10))");
    for i in 0..30 {
        let color = if i % 3 == 0 { "blue" } else { "red" };
        server.sql(&format!("INSERT INTO dbo.t VALUES ({i}, '{color}')"));
    }
    server.enable_cdc(&["dbo.t"]);
    let dir = tempfile::tempdir().unwrap();
    let signals = dir.path().join("signals.jsonl");
    std::fs::write(&signals, "").unwrap();
    let extra = format!(
        "  snapshot.mode: no_data\n  signal.enabled.channels: file\n  signal.file: {}\n  signal.poll.interval.ms: 50\n  incremental.snapshot.chunk.size: 2\n",
        signals.display()
    );
    let path = pipeline(dir.path(), &server, &extra);
    let mut child = start(&path, &[]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::fs::write(&signals, "{\"id\":\"f1\",\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"dbo.t\"],\"additional-conditions\":[{\"data-collection\":\"incrFileDB.dbo.t\",\"filter\":\"color = 'blue'\"}]}}\n").unwrap();
    wait_events(dir.path(), 4, &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    // Killed after some chunks: the restart goes on from the last chunk delivered.
    let mut child = start(&path, &[]);
    wait_for(dir.path(), "the ten blue rows", &mut child, |l| {
        let ids: std::collections::BTreeSet<i64> = l
            .iter()
            .filter_map(|l| l["value"]["payload"]["after"]["id"].as_i64())
            .collect();
        ids.len() >= 10
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let ids: std::collections::BTreeSet<i64> = payloads(dir.path())
        .iter()
        .filter_map(|p| p["after"]["id"].as_i64())
        .collect();
    let blue: std::collections::BTreeSet<i64> = (0..30).filter(|i| i % 3 == 0).collect();
    assert_eq!(ids, blue, "the blue rows, and only them");
}

#[test]
fn a_blocking_snapshot_reads_the_tables_whole_then_the_stream_goes_on() {
    let server = SqlServer::start("blockDB");
    server.sql("CREATE TABLE dbo.t (id int PRIMARY KEY, color varchar(10))");
    for i in 0..12 {
        let color = if i % 2 == 0 { "blue" } else { "red" };
        server.sql(&format!("INSERT INTO dbo.t VALUES ({i}, '{color}')"));
    }
    server.enable_cdc(&["dbo.t"]);
    let dir = tempfile::tempdir().unwrap();
    let signals = dir.path().join("signals.jsonl");
    std::fs::write(&signals, "").unwrap();
    let extra = format!(
        "  snapshot.mode: no_data\n  signal.enabled.channels: file\n  signal.file: {}\n  signal.poll.interval.ms: 50\n",
        signals.display()
    );
    let mut child = start(&pipeline(dir.path(), &server, &extra), &[]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::fs::write(&signals, "{\"id\":\"b1\",\"type\":\"execute-snapshot\",\"data\":{\"type\":\"blocking\",\"data-collections\":[\"blockDB.dbo.t\"],\"additional-conditions\":[{\"data-collection\":\"dbo.t\",\"filter\":\"color = 'blue'\"}]}}\n").unwrap();
    wait_events(dir.path(), 6, &mut child);
    server.sql("INSERT INTO dbo.t VALUES (100, 'green')");
    wait_events(dir.path(), 7, &mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let p = payloads(dir.path());
    let reads: Vec<i64> = p
        .iter()
        .filter(|p| p["op"] == "r")
        .map(|p| p["after"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(reads, [0, 2, 4, 6, 8, 10], "the blue rows, read whole");
    assert_eq!(p[0]["source"]["snapshot"], "first");
    assert_eq!(p[5]["source"]["snapshot"], "last");
    assert_eq!(
        (p[6]["op"].as_str(), p[6]["after"]["id"].as_i64()),
        (Some("c"), Some(100)),
        "then the stream"
    );
    assert_eq!(p.len(), 7);
}
