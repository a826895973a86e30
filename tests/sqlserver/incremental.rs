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
    let keys = [
        ("snapshot.mode", "no_data".into()),
        ("table.include.list", "dbo.customers".into()),
        (
            "signal.data.collection",
            "incrDB.dbo.debezium_signal".into(),
        ),
        ("incremental.snapshot.chunk.size", 7u32.into()),
    ];
    let path = pipeline(dir.path(), &server, &keys);
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
    let keys = [
        ("snapshot.mode", "no_data".into()),
        ("signal.enabled.channels", "file".into()),
        ("signal.file", (&signals).into()),
        ("signal.poll.interval.ms", 50u32.into()),
        ("incremental.snapshot.chunk.size", 2u32.into()),
    ];
    let path = pipeline(dir.path(), &server, &keys);
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
    let keys = [
        ("snapshot.mode", "no_data".into()),
        ("signal.enabled.channels", "file".into()),
        ("signal.file", (&signals).into()),
        ("signal.poll.interval.ms", 50u32.into()),
    ];
    let mut child = start(&pipeline(dir.path(), &server, &keys), &[]);
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

/// Chunks by a primary key of a date, a decimal and a `uniqueidentifier`, then by a
/// `surrogate-key` of type `datetime` (running opposite to the primary key): every row once,
/// in the order of the columns chunks are read by; a surrogate key the table does not have, or
/// of a type SQL Server does not order by (`ntext`), aborts the snapshot with a reason, and the
/// stream goes on.
#[test]
fn chunks_go_by_keys_of_any_type_and_by_a_surrogate_key() {
    let server = SqlServer::start("incrKeysDB");
    server.sql("CREATE TABLE dbo.orders (day date NOT NULL, amount decimal(10,2) NOT NULL, code uniqueidentifier NOT NULL, stamp datetime NOT NULL UNIQUE, n int, memo ntext, PRIMARY KEY (day, amount, code))");
    let rows = 40;
    for i in 0..rows {
        // `stamp` falls as `i` rises; its milliseconds are ones `datetime` holds exactly.
        let s = 10_000 - i * 7;
        let stamp = format!(
            "2024-03-01 {:02}:{:02}:{:02}.{}",
            s / 3600,
            s / 60 % 60,
            s % 60,
            ["000", "003", "007"][i % 3]
        );
        server.sql(&format!(
            "INSERT INTO dbo.orders VALUES ('2024-01-0{}', {}.{:02}, '{:08X}-0000-4000-8000-{:012X}', '{stamp}', {i}, N'memo')",
            1 + i % 3,
            i % 5,
            i * 3 % 100,
            i * 2654435761 % 4294967296,
            i
        ));
    }
    server.enable_cdc(&["dbo.orders"]);
    let dir = tempfile::tempdir().unwrap();
    let signals = dir.path().join("signals.jsonl");
    std::fs::write(&signals, "").unwrap();
    let keys = [
        ("snapshot.mode", "no_data".into()),
        ("signal.enabled.channels", "file".into()),
        ("signal.file", (&signals).into()),
        ("signal.poll.interval.ms", 50u32.into()),
        ("incremental.snapshot.chunk.size", 3u32.into()),
    ];
    let path = pipeline(dir.path(), &server, &keys);
    let mut child = start(&path, &[]);
    let signal = |id: &str, key: Option<&str>| {
        let mut data = serde_json::json!({"data-collections": ["dbo.orders"]});
        if let Some(key) = key {
            data["surrogate-key"] = key.into();
        }
        format!(
            "{}\n",
            serde_json::json!({"id": id, "type": "execute-snapshot", "data": data})
        )
    };
    let append = |text: String| {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&signals)
            .unwrap();
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    append(signal("by-key", None));
    wait_events(dir.path(), rows, &mut child);
    append(signal("by-stamp", Some("stamp")));
    wait_events(dir.path(), 2 * rows, &mut child);
    let wait_log = |child: &std::process::Child, what: &str| {
        let t0 = std::time::Instant::now();
        while !sluice_test_support::pg::log_so_far(child).contains(what) {
            assert!(t0.elapsed().as_secs() < 60, "no `{what}`");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    append(signal("by-nothing", Some("nope")));
    wait_log(&child, "is not a captured column");
    append(signal("by-memo", Some("memo")));
    wait_log(&child, "which SQL Server does not order by");
    server.sql("UPDATE dbo.orders SET n = -1 WHERE n = 0");
    wait_events(dir.path(), 2 * rows + 1, &mut child);
    sluice_test_support::pg::stop(&child);
    let log = sluice_test_support::pg::finish(child);
    assert!(
        log.contains("the surrogate key `nope` is not a captured column of dbo.orders")
            && log.contains("the key column `memo` of dbo.orders is of type ntext"),
        "{log}"
    );
    let all = payloads(dir.path());
    assert_eq!(all.len(), 2 * rows + 1, "{log}");
    assert_eq!(all[2 * rows]["op"], "u", "the stream goes on");
    let n = |p: &Json| p["after"]["n"].as_i64().unwrap();
    let by_key: Vec<i64> = all[..rows].iter().map(n).collect();
    let by_stamp: Vec<i64> = all[rows..2 * rows].iter().map(n).collect();
    // The primary key's order, worked out here: day, then amount, then code (upper-case text).
    let mut expected: Vec<(usize, usize, String, i64)> = (0..rows)
        .map(|i| {
            let code = format!("{:08X}", i * 2654435761 % 4294967296);
            (i % 3, (i % 5) * 100 + i * 3 % 100, code, i as i64)
        })
        .collect();
    expected.sort();
    let expected: Vec<i64> = expected.into_iter().map(|e| e.3).collect();
    assert_eq!(by_key, expected, "the primary key's order, each row once");
    let falling: Vec<i64> = (0..rows as i64).rev().collect();
    assert_eq!(
        by_stamp, falling,
        "the surrogate key's order, each row once"
    );
}
