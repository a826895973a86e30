//! A signal that cannot be carried out never stops a pipeline: each is refused with one
//! warning and an `ABORTED` notification naming the reason, through every channel, and the
//! stream goes on without losing a change. A filter cannot change data.

use serde_json::Value as Json;

use super::common::*;

/// Malformed and impossible signals (the data part of `execute-snapshot` and friends).
const BAD: &[(&str, &str)] = &[
    (
        "execute-snapshot",
        r#"{"data-collections": ["public.items"], "additional-conditions": [{"data-collection": "public.items", "filter": "v >"}]}"#,
    ),
    (
        "execute-snapshot",
        r#"{"data-collections": ["public.items"], "additional-conditions": [{"data-collection": "public.items", "filter": "1=1; drop table items"}]}"#,
    ),
    (
        "execute-snapshot",
        r#"{"data-collections": ["public.items"], "additional-conditions": [{"data-collection": "public.items", "filter": "nope = 1"}]}"#,
    ),
    (
        "execute-snapshot",
        r#"{"data-collections": ["public.items"], "additional-conditions": [{"data-collection": "public.items", "filter": "v > 'x'"}]}"#,
    ),
    (
        "execute-snapshot",
        r#"{"data-collections": ["public.items"], "additional-conditions": [{"data-collection": "public.items", "filter": "v > 0) or (true"}], "type": "blocking"}"#,
    ),
    (
        "execute-snapshot",
        r#"{"data-collections": ["public.items"], "additional-conditions": [{"data-collection": "public.items", "filter": "v >"}], "type": "blocking"}"#,
    ),
    (
        "execute-snapshot",
        r#"{"data-collections": ["public.nothing_like_this"]}"#,
    ),
    (
        "execute-snapshot",
        r#"{"data-collections": "public.items"}"#,
    ),
    (
        "execute-snapshot",
        r#"{"data-collections": ["public.items"], "type": "sideways"}"#,
    ),
    ("execute-snapshot", r#"not json"#),
    ("execute-snapshot", r#"[]"#),
    (
        "execute-snapshot",
        r#"{"data-collections": ["public.items"], "additional-conditions": [{"filter": "v > 1"}]}"#,
    ),
    (
        "execute-snapshot",
        r#"{"data-collections": ["public.items"], "additional-conditions": "v > 1"}"#,
    ),
    ("execute-snapshot", r#"{"data-collections": ["("]}"#),
    ("stop-snapshot", r#"{"data-collections": ["public.items"]}"#),
    ("stop-snapshot", r#"{"type": "blocking"}"#),
    ("stop-snapshot", r#"oops"#),
    ("log", r#"{"no-message": 1}"#),
    ("log", r#"17"#),
    ("explode", r#"{}"#),
    ("", r#"{}"#),
    (
        "execute-snapshot",
        r#"{"data-collections": ["public.items"], "additional-conditions": [{"data-collection": "public.items", "filter": "1/(v-v) > 0"}]}"#,
    ),
];

fn escaped(s: &str) -> String {
    s.replace('\'', "''")
}

/// Every bad signal through the signaling table, the file channel and HTTP: the pipeline keeps
/// running, each gives one `Signal refused` warning and an `ABORTED` notification (a filter that
/// fails only when run aborts its snapshot the same way), no table is dropped or written, and
/// every change written meanwhile arrives.
#[test]
fn bad_signals_through_every_channel_are_refused_and_the_stream_goes_on() {
    let db = fresh_db("bad_signals");
    psql(&db, "create table debezium_signal (id varchar(64) primary key, type varchar(32) not null, data text); create table items (id int primary key, v int)");
    psql(
        &db,
        "insert into items select g, g from generate_series(1, 20) g",
    );
    let dir = tempfile::tempdir().unwrap();
    let signal_file = dir.path().join("signals.jsonl");
    let admin = free_port();
    let keys: &[(&str, Scalar)] = &[
        (
            "table.include.list",
            "public.items,public.debezium_signal".into(),
        ),
        ("snapshot.mode", "no_data".into()),
        ("signal.data.collection", "public.debezium_signal".into()),
        ("signal.enabled.channels", "source,file,http".into()),
        ("signal.file", signal_file.as_path().into()),
        ("signal.poll.interval.ms", "50".into()),
        ("notification.enabled.channels", "sink".into()),
        ("notification.sink.topic.name", "notes".into()),
    ];
    let file = base(dir.path(), &db, source(&db).set_all(keys), false)
        .setting("admin", &[("bind", format!("127.0.0.1:{admin}").into())])
        .write(dir.path());
    let mut child = start(&file, &[]);
    active_slot_pid(&db, &mut child);
    let mut expected_rows = 0;
    for (round, channel) in ["table", "file", "http"].iter().enumerate() {
        for (i, (kind, data)) in BAD.iter().enumerate() {
            let id = format!("{channel}-{i}");
            match *channel {
                "table" => psql(
                    &db,
                    &format!(
                        "insert into debezium_signal values ('{id}', '{kind}', '{}')",
                        escaped(data)
                    ),
                ),
                "file" => {
                    let line =
                        serde_json::json!({"id": id, "type": kind, "data": data}).to_string();
                    use std::io::Write;
                    let mut f = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&signal_file)
                        .unwrap();
                    writeln!(f, "{line}").unwrap();
                    String::new()
                }
                _ => {
                    let data: Json =
                        serde_json::from_str(data).unwrap_or(Json::String(data.to_string()));
                    let signal =
                        serde_json::json!({"id": id, "type": kind, "data": data}).to_string();
                    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
                        .args(["signal"])
                        .arg(&file)
                        .arg(&signal)
                        .output()
                        .unwrap();
                    let said = String::from_utf8_lossy(&out.stderr).into_owned();
                    assert!(out.status.success(), "`sluice signal` failed: {said}");
                    said
                }
            };
            // A change after every signal: none may be lost.
            psql(
                &db,
                &format!("insert into items values ({}, 0)", 1000 + round * 100 + i),
            );
            expected_rows += 1;
        }
    }
    let t0 = std::time::Instant::now();
    loop {
        let changes = lines(dir.path())
            .iter()
            .filter(|e| e["topic"] == "dbserver1.public.items" && e["value"]["op"] == "c")
            .count();
        if changes == expected_rows {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the pipeline stopped: {}",
            log_of(&child)
        );
        assert!(
            t0.elapsed().as_secs() < 120,
            "{changes} of {expected_rows} changes arrived"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The runtime-failing filter's snapshot is aborted, not the pipeline. A signal may be
    // handled after the change that followed it has arrived (the channels are read apart from
    // the stream): the test waits until every refusal, abort and blocking snapshot is logged
    // (a fixed wait of 2.5 s once missed one under CI's load), then checks nothing more comes.
    let signals = BAD.len() - 2;
    let count_in = |log: &str, what: &str| log.lines().filter(|l| l.contains(what)).count();
    let t0 = std::time::Instant::now();
    loop {
        let log = sluice_test_support::pg::log_so_far(&child);
        if count_in(&log, "Signal refused") >= 3 * signals
            && count_in(&log, "Incremental snapshot aborted") >= 3
            && count_in(&log, "Blocking snapshot: streaming resumes") >= 3
        {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "{}", log_of(&child));
        assert!(
            t0.elapsed().as_secs() < 60,
            "not every signal was handled within 60 s: {log}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "{}", log_of(&child));
    stop(&child);
    let log = finish(child);
    assert_eq!(
        psql(&db, "select count(*) from items").trim(),
        (20 + expected_rows).to_string(),
        "a filter changed data"
    );
    let count = |what: &str| count_in(&log, what);
    // Every signal but the one whose filter is valid SQL (`v > 0) or (true`: a blocking
    // snapshot of the whole table, read-only) is refused at once, but the one whose filter
    // fails only when run (`1/(v-v)`), whose snapshot is aborted.
    assert_eq!(count("Signal refused"), 3 * signals, "{log}");
    assert_eq!(count("Incremental snapshot aborted"), 3, "{log}");
    assert_eq!(count("Blocking snapshot: streaming resumes"), 3, "{log}");
    let aborted = lines(dir.path())
        .iter()
        .filter(|e| e["topic"] == "notes" && e["value"]["type"] == "ABORTED")
        .count();
    assert_eq!(
        aborted,
        3 * (signals + 1),
        "one ABORTED notification per refusal and abort"
    );
    drop_db(&db);
}
