//! Text in the character sets the mysql source decodes, snapshotted and streamed: every value
//! equals the server's own conversion of it to utf8mb4 (`CONVERT(c USING utf8mb4)`), the
//! independent check. The binlog carries each column's bytes in its own character set.

use sluice_test_support::mariadb;
use sluice_test_support::pg::{self as run};

use super::captured_pipeline;

/// A character set and text in it.
const SAMPLES: [(&str, &str); 20] = [
    ("latin2", "Zażółć gęślą jaźń"),
    ("latin7", "Ąčęėįšųūž"),
    ("greek", "Καλημέρα κόσμε"),
    ("hebrew", "שלום עולם"),
    ("cp1250", "Příliš žluťoučký kůň €"),
    ("cp1251", "Привет, мир €"),
    ("cp1256", "مرحبا بالعالم"),
    ("cp1257", "Ąčęėįšųūž €"),
    ("cp866", "Привет, мир"),
    ("koi8r", "Привет, мир"),
    ("koi8u", "Привіт, їжак"),
    ("macroman", "café ß ñ ü"),
    ("cp932", "日本語テキスト～①"),
    ("eucjpms", "日本語のテキスト"),
    ("gbk", "中文字符测试"),
    ("big5", "中文字元測試"),
    ("euckr", "한국어 텍스트"),
    ("utf16", "snowman ☃ and ß"),
    ("utf16le", "☃ ß 中"),
    ("ucs2", "ß 中 ж"),
];

#[test]
fn text_in_other_character_sets_reads_as_the_server_converts_it() {
    let server = mariadb::server();
    let db = mariadb::database("mysql_charsets");
    let columns: Vec<String> = SAMPLES
        .iter()
        .map(|(cs, _)| format!("c_{cs} VARCHAR(60) CHARACTER SET {cs}"))
        .collect();
    let values = |id: i32, suffix: &str| {
        let texts: Vec<String> = SAMPLES
            .iter()
            .map(|(_, t)| format!("'{t}{suffix}'"))
            .collect();
        format!("({id}, {})", texts.join(", "))
    };
    mariadb::sql(
        &db,
        &format!(
            "CREATE TABLE t (id INT PRIMARY KEY, {}); INSERT INTO t VALUES {}",
            columns.join(", "),
            values(1, "")
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = captured_pipeline(dir.path(), server.port, &db);
    let mut child = run::start(&path, &[]);
    run::wait_lines(dir.path(), 1, &mut child);
    mariadb::sql(&db, &format!("INSERT INTO t VALUES {}", values(2, " 2")));
    run::wait_lines(dir.path(), 2, &mut child);
    run::stop(&child);
    let log = run::finish(child);
    let events = run::lines(dir.path());
    for (i, op) in [(1, "r"), (2, "c")] {
        let event = events
            .iter()
            .find(|e| e["key"]["payload"]["id"] == i)
            .unwrap_or_else(|| panic!("no event of row {i}: {log}"));
        assert_eq!(event["value"]["payload"]["op"], op);
        for (cs, text) in SAMPLES {
            // The server's own reading of what it stored, as hex of its UTF-8.
            let hex = mariadb::sql(
                &db,
                &format!("SELECT HEX(CONVERT(c_{cs} USING utf8mb4)) FROM t WHERE id = {i}"),
            );
            let theirs = String::from_utf8(
                (0..hex.trim().len())
                    .step_by(2)
                    .map(|j| u8::from_str_radix(&hex.trim()[j..j + 2], 16).unwrap())
                    .collect(),
            )
            .unwrap();
            let ours = event["value"]["payload"]["after"][format!("c_{cs}")]
                .as_str()
                .unwrap_or_else(|| panic!("no c_{cs} in {event}"));
            assert_eq!(ours, theirs, "{cs}, row {i} ({op})");
            assert!(
                theirs.starts_with(text),
                "{cs}: the server stored {theirs:?}"
            );
        }
    }
}
