//! `docs/positions.md` shows every shape of a committed position with positions Sluice wrote;
//! this reads each with its source's reader and checks that the reader keeps all of it, so a
//! release that could no longer resume from one fails here.

use serde_json::Value;

/// The page, as checked in.
const PAGE: &str = include_str!("../../docs/positions.md");

/// The sections with examples and their source's reader (`None`: the source is not built).
type Reader = fn(&str) -> Result<Value, sluice_kit::position::PositionError>;

fn reader(section: &str) -> Option<Option<Reader>> {
    let found: Option<Reader> = match section {
        "Where it is kept" => return Some(None),
        #[cfg(feature = "postgres")]
        "PostgreSQL" => Some(crate::postgres::reread),
        #[cfg(feature = "mysql")]
        "MySQL and MariaDB" => Some(crate::mysql::reread),
        #[cfg(feature = "sqlite")]
        "SQLite" => Some(crate::sqlite::reread),
        #[cfg(feature = "sqlserver")]
        "SQL Server" => Some(crate::sqlserver::reread),
        #[cfg(feature = "db2")]
        "Db2" => Some(crate::db2::reread),
        // A source this build leaves out.
        #[allow(unreachable_patterns)]
        "PostgreSQL" | "MySQL and MariaDB" | "SQLite" | "SQL Server" | "Db2" => None,
        _ => return None,
    };
    Some(found)
}

/// The page's `json` blocks by section.
fn examples() -> Vec<(String, Vec<String>)> {
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    let mut block: Option<String> = None;
    for line in PAGE.lines() {
        let trimmed = line.trim();
        if let Some(title) = line.strip_prefix("## ") {
            sections.push((title.trim().to_owned(), Vec::new()));
        } else if trimmed == "```json" {
            block = Some(String::new());
        } else if trimmed == "```" {
            if let (Some(text), Some((_, blocks))) = (block.take(), sections.last_mut()) {
                blocks.push(text.trim().to_owned());
            }
        } else if let Some(text) = &mut block {
            text.push_str(trimmed);
        }
    }
    sections
}

#[test]
fn every_position_on_the_page_is_read_whole_by_its_source() {
    let mut checked = 0;
    for (section, blocks) in examples() {
        let Some(reader) = reader(&section) else {
            assert!(
                blocks.is_empty(),
                "section `{section}` has examples and no reader here"
            );
            continue;
        };
        let Some(reread) = reader else {
            continue;
        };
        assert!(!blocks.is_empty(), "section `{section}` shows no position");
        for text in blocks {
            let written: Value = serde_json::from_str(&text).unwrap();
            // A source reading several partitions keeps one position of its own each.
            let positions: Vec<Value> = match written.get("partitions") {
                Some(Value::Object(parts)) => parts.values().cloned().collect(),
                _ => vec![written],
            };
            for position in positions {
                let read = reread(&position.to_string())
                    .unwrap_or_else(|e| panic!("{section}: {position}: {e}"));
                assert_eq!(read, position, "{section}: read back differently");
                checked += 1;
            }
        }
    }
    #[cfg(all(
        feature = "postgres",
        feature = "mysql",
        feature = "sqlite",
        feature = "sqlserver",
        feature = "db2"
    ))]
    assert_eq!(checked, 18, "every example is read");
    let _ = checked;
}

#[test]
fn a_position_losing_a_member_is_caught() {
    // The check above compares what was read with what was written: a member a reader drops
    // shows as a difference.
    #[cfg(feature = "sqlite")]
    {
        let read = crate::sqlite::reread(r#"{"seq":3,"snapshot_completed":false,"extra":1}"#);
        let written: Value =
            serde_json::from_str(r#"{"seq":3,"snapshot_completed":false,"extra":1}"#).unwrap();
        assert_ne!(read.unwrap(), written);
    }
}
