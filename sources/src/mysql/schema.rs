//! The mysql source's schema model and schema change events (`include.schema.changes`, on by
//! default as in Debezium's MySQL connector): the snapshot describes the captured databases
//! with the statements Debezium's snapshot writes (`SET character_set_server=...`, `DROP
//! TABLE IF EXISTS`, `DROP DATABASE IF EXISTS`, `CREATE DATABASE`, `USE`, then each table's
//! `SHOW CREATE TABLE`), and the stream applies each DDL statement of the binlog. Both go
//! through the DDL model (`ddl`), so the events' `tableChanges` are the structures the
//! statements give, as Debezium's parser gives them.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use sluice_engine::event::SourceTimestamps;
use sluice_engine::{ChangeEvent, Position};
use sluice_kit::records::schema_change::{SchemaChange, SchemaChangeEvents};

use serde_json::Value as Json;
use sluice_kit::history::{HistoryRecord, SchemaHistory};

use super::ddl::{key_of, target_of, Applied, Model};
use super::error::MysqlError;
use super::quote;
use super::{At, MysqlOffset, MysqlSource};

/// The model, its history and its events.
pub(super) struct Schemas {
    /// The tables as the DDL seen so far describes them.
    pub model: Model,
    events: Option<SchemaChangeEvents>,
    skip_unparseable: bool,
    history: SchemaHistory,
}

impl Schemas {
    /// Forgets every table of the model, keeping how the server compares table names.
    pub(super) fn clear_model(&mut self) {
        let case_insensitive = self.model.case_insensitive();
        self.model = Model::new(None);
        self.model.set_case_insensitive(case_insensitive);
    }
}

/// Where a history record was made: Debezium's offset fields (`snapshot: INITIAL` for the
/// snapshot's statements, the next event's position and the writer's id for a streamed one).
pub(super) fn history_position(at: &At, next_pos: u64) -> Json {
    let mut p = serde_json::Map::new();
    p.insert("ts_sec".into(), Json::from(at.ts_ms / 1000));
    p.insert("file".into(), Json::from(&*at.file));
    p.insert("pos".into(), Json::from(next_pos));
    if at.snapshot == "false" {
        p.insert("server_id".into(), Json::from(at.server_id));
    } else {
        p.insert("snapshot".into(), Json::from("INITIAL"));
    }
    Json::Object(p)
}

/// Binlog file names order by their numeric suffix (`binlog.000010` after `binlog.000009`).
fn file_order(name: &str) -> (u64, &str) {
    let digits = name
        .rsplit('.')
        .next()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0);
    (digits, name)
}

/// Where a history record's `position` is in the binlog (records without one first).
fn position_order(position: &Json) -> Option<((u64, &str), u64)> {
    Some((
        file_order(position["file"].as_str()?),
        position["pos"].as_u64()?,
    ))
}

/// Whether the history record at `position` happened at or before the offset `at`.
fn at_or_before(position: &Json, at: &MysqlOffset) -> bool {
    let (Some(file), Some(pos)) = (position["file"].as_str(), position["pos"].as_u64()) else {
        return false;
    };
    (file_order(file), pos) <= (file_order(&at.file), at.pos)
}

/// The first words of the statements that can change a table's structure: the only ones the
/// stream parses (the binlog also carries `GRANT`, `CREATE USER`, `FLUSH`, procedures and
/// triggers, which change no table and which Debezium's grammar reads without effect).
pub(super) fn changes_structure(statement: &str) -> bool {
    let statement = without_comments(statement);
    let mut words = statement
        .split(|c: char| c.is_whitespace() || c == '(')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_uppercase);
    let Some(first) = words.next() else {
        return false;
    };
    if !matches!(first.as_str(), "CREATE" | "ALTER" | "DROP" | "RENAME") {
        return false;
    }
    words
        .find(|w| {
            !matches!(
                w.as_str(),
                "OR" | "REPLACE" | "TEMPORARY" | "ONLINE" | "OFFLINE" | "IGNORE"
            )
        })
        .is_some_and(|object| {
            matches!(
                object.as_str(),
                "TABLE"
                    | "TABLES"
                    | "DATABASE"
                    | "SCHEMA"
                    | "INDEX"
                    | "UNIQUE"
                    | "FULLTEXT"
                    | "SPATIAL"
            )
        })
}

/// `statement` without its `/* ... */` comments (MySQL's executable `/*! ... */` ones keep
/// their text) and `-- ` / `#` line comments.
fn without_comments(statement: &str) -> String {
    let mut out = String::with_capacity(statement.len());
    let mut rest = statement;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        let body = &rest[start + 2..];
        let Some(end) = body.find("*/") else {
            rest = "";
            break;
        };
        if let Some(executable) = body[..end].strip_prefix('!') {
            out.push(' ');
            out.push_str(executable.trim_start_matches(|c: char| c.is_ascii_digit()));
        }
        out.push(' ');
        rest = &body[end + 2..];
    }
    out.push_str(rest);
    out.lines()
        .map(|l| {
            let l = l.trim_start();
            if l.starts_with('#') || l.starts_with("-- ") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl MysqlSource {
    /// An empty model, with its history (`schema.history.internal.*`, by default
    /// `<data_dir>/mysql-schema-history.jsonl`) and the events `include.schema.changes` asks
    /// for.
    pub(super) async fn schemas(&self) -> Result<Schemas, MysqlError> {
        let history = SchemaHistory::open(
            &self.config.common.history,
            &self.data_dir,
            "mysql-schema-history.jsonl",
        )
        .await?;
        Ok(Schemas {
            history,
            model: Model::new(None),
            events: self.config.common.includes_schema_changes(true).then(|| {
                SchemaChangeEvents::new(
                    self.flavour.name(),
                    &self.config.common.topic_prefix,
                    self.source_schema.clone(),
                )
            }),
            skip_unparseable: self.config.common.history.skip_unparseable_ddl,
        })
    }

    /// Rebuilds the model from the history as it was at `at` (from no table: what the model
    /// held is forgotten); `Err` when the history is missing (the snapshotter decided already
    /// whether that may happen).
    pub(super) fn recover(
        &self,
        schemas: &mut Schemas,
        at: &MysqlOffset,
    ) -> Result<(), MysqlError> {
        schemas.clear_model();
        let mut records = schemas.history.records()?;
        // In the order of their positions (a stable sort): a snapshot taken again after a
        // cut-off one records its structure before the stream reads again (and records) the
        // statements made between the two snapshots.
        records.sort_by(|a, b| position_order(&a.position).cmp(&position_order(&b.position)));
        if records.is_empty() {
            return Err(
                sluice_kit::history::HistoryError::Missing(schemas.history.describe()).into(),
            );
        }
        let mut applied = 0;
        for record in records.iter().filter(|r| at_or_before(&r.position, at)) {
            if let Err(e) = schemas.model.replay(record) {
                tracing::warn!(
                    "{e}; the history record is skipped, as at the time it was written."
                );
            }
            applied += 1;
        }
        tracing::info!(records = records.len(), applied, history = %schemas.history.describe(), "Schema history recovered.");
        Ok(())
    }

    /// Whether a schema history is stored.
    pub(super) fn has_history(schemas: &Schemas) -> Result<bool, MysqlError> {
        Ok(schemas.history.exists()?)
    }

    /// The server's `character_set_server` and `collation_server`.
    pub(super) async fn server_charset(
        conn: &mut Conn,
    ) -> Result<(Option<String>, Option<String>), MysqlError> {
        conn.query_first("SELECT @@character_set_server, @@collation_server")
            .await
            .map_err(|e| MysqlError::query("reading the server's character set", e))
            .map(|r| r.unwrap_or((None, None)))
    }

    /// Records `applied` (the statement `ddl`, seen at `at`) in the history and returns its
    /// events.
    async fn record(
        &self,
        schemas: &mut Schemas,
        ddl: &str,
        applied: Vec<Applied>,
        (at, history_at): (&At, &Json),
        position: &Position,
    ) -> Result<Vec<ChangeEvent>, MysqlError> {
        let mut out = Vec::new();
        for a in applied {
            let ddl = a.ddl.as_deref().unwrap_or(ddl);
            let ts_ms = SourceTimestamps::now().millis();
            let record = HistoryRecord {
                source: serde_json::json!({ "server": self.config.common.topic_prefix }),
                position: history_at.clone(),
                ts_ms,
                database_name: Some(a.database.clone()),
                schema_name: None,
                ddl: ddl.to_owned(),
                table_changes: a.changes.clone(),
            };
            let config = &self.config;
            schemas
                .history
                .record(
                    record,
                    |id| key_of(id).is_some_and(|(d, t)| config.selects(&d, &t)),
                    |db| config.selects_database(db),
                )
                .await?;
            let Some(events) = &schemas.events else {
                continue;
            };
            // With the history narrowed to the captured databases (or tables), as Debezium's
            // `acceptableDatabase`: no event for another database's statement.
            let narrowed = config.common.history.only_captured_databases
                || config.common.history.only_captured_tables;
            if narrowed && !a.database.is_empty() && !config.selects_database(&a.database) {
                continue;
            }
            let change = SchemaChange {
                database: &a.database,
                schema: None,
                ddl: Some(ddl),
                changes: &a.changes,
            };
            let source = self.source(&a.database, a.table.as_deref(), at);
            out.push(events.event(&change, source, ts_ms, position.clone()));
        }
        Ok(out)
    }

    /// Describes the databases as Debezium's snapshot does (every table of every database but
    /// the system ones, by default), in the snapshot's transaction; returns the schema change events (none when they are off).
    pub(super) async fn snapshot_schema(
        &self,
        conn: &mut Conn,
        schemas: &mut Schemas,
        (file, pos): (&str, u64),
        position: &Position,
    ) -> Result<Vec<ChangeEvent>, MysqlError> {
        let (charset, collation) = Self::server_charset(conn).await?;
        schemas.model.set_server_charset(charset.clone());
        let mut statements: Vec<(String, String)> = vec![(
            String::new(),
            format!(
                "SET character_set_server={}, collation_server={}",
                charset.unwrap_or_default(),
                collation.unwrap_or_default()
            ),
        )];
        let all: Vec<(String, String)> = conn
            .query("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED')")
            .await
            .map_err(|e| MysqlError::query("listing the tables", e))?;
        let mut described: Vec<(String, String)> = all
            .into_iter()
            .filter(|(d, t)| self.config.describes(d, t))
            .collect();
        // Debezium's order: by `db.table`.
        described.sort_by(|a, b| format!("{}.{}", a.0, a.1).cmp(&format!("{}.{}", b.0, b.1)));
        for (db, name) in &described {
            statements.push((
                db.clone(),
                format!("DROP TABLE IF EXISTS {}.{}", quote(db), quote(name)),
            ));
        }
        let mut databases: Vec<&str> = described.iter().map(|(d, _)| d.as_str()).collect();
        databases.dedup();
        for db in databases {
            let q = |e| MysqlError::query(format!("describing the database `{db}`"), e);
            let locale: Option<(Option<String>, Option<String>)> = conn
                .exec_first("SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", (db,))
                .await
                .map_err(q)?;
            statements.push((
                db.to_owned(),
                format!("DROP DATABASE IF EXISTS {}", quote(db)),
            ));
            let mut create = format!("CREATE DATABASE {}", quote(db));
            let (charset, collation) = locale.unwrap_or((None, None));
            if let Some(charset) = charset {
                create.push_str(&format!(" CHARSET {charset}"));
            }
            if let Some(collation) = collation {
                create.push_str(&format!(" COLLATE {collation}"));
            }
            statements.push((db.to_owned(), create));
            statements.push((db.to_owned(), format!("USE {}", quote(db))));
            for (_, name) in described.iter().filter(|(d, _)| d == db) {
                let show: Result<Option<(String, String)>, _> = conn
                    .query_first(format!("SHOW CREATE TABLE {}.{}", quote(db), quote(name)))
                    .await;
                match show {
                    Ok(Some((_, ddl))) => statements.push((db.to_owned(), ddl)),
                    Ok(None) => {}
                    // Dropped since it was listed (information_schema is not transactional).
                    Err(mysql_async::Error::Server(e)) if e.code == 1146 => {}
                    Err(e) => return Err(q(e)),
                }
            }
        }
        let mut out = Vec::new();
        for (db, ddl) in statements {
            let applied = match schemas.model.apply(&db, &ddl) {
                Ok(applied) => applied,
                // A table that is not captured is described for the history's sake only.
                Err(e)
                    if schemas.skip_unparseable
                        || !target_of(&ddl, &db).is_some_and(|(d, t)| self.config.selects(&d, &t)) =>
                {
                    tracing::warn!(database = %db, "{e}; skipped (not captured, or `schema.history.internal.skip.unparseable.ddl`).");
                    continue;
                }
                Err(e) => {
                    return Err(MysqlError::Setup(format!("the snapshot's schema: {e}; set `schema.history.internal.skip.unparseable.ddl: true` to log and skip such statements")))
                }
            };
            // Debezium's snapshot statements: server 0, row 0, the snapshot's position.
            let at = At {
                ts_ms: SourceTimestamps::now().millis(),
                snapshot: "true",
                server_id: 0,
                file: file.into(),
                pos,
                row: 0,
                gtid: None,
                query: None,
            };
            let history_at = history_position(&at, at.pos);
            out.extend(
                self.record(schemas, &ddl, applied, (&at, &history_at), position)
                    .await?,
            );
        }
        Ok(out)
    }

    /// Applies a QUERY event's statement (run in database `session`) to the model; returns
    /// its schema change events. A statement the parser cannot read stops the stream, or is
    /// logged and skipped with `schema.history.internal.skip.unparseable.ddl`.
    pub(super) async fn streamed_ddl(
        &self,
        schemas: &mut Schemas,
        session: &str,
        ddl: &str,
        (at, next_pos): (&At, u64),
        position: &Position,
    ) -> Result<Vec<ChangeEvent>, MysqlError> {
        if !changes_structure(ddl) {
            tracing::debug!(statement = %ddl.chars().take(80).collect::<String>(), "A statement that changes no table's structure; skipped.");
            return Ok(Vec::new());
        }
        match schemas.model.apply(session, ddl) {
            Ok(applied) => {
                let history_at = history_position(at, next_pos);
                self.record(schemas, ddl, applied, (at, &history_at), position)
                    .await
            }
            Err(e) if schemas.skip_unparseable => {
                tracing::warn!(at = %format!("{}:{}", at.file, at.pos), "{e}; skipped (`schema.history.internal.skip.unparseable.ddl`): the tables it changes may now be described wrongly.");
                Ok(Vec::new())
            }
            // A table that is not captured: its structure is not worth stopping the stream.
            Err(e)
                if !target_of(ddl, session)
                    .is_some_and(|(d, t)| self.config.selects(&d, &t)) =>
            {
                tracing::warn!(at = %format!("{}:{}", at.file, at.pos), "{e}; skipped: it changes no captured table.");
                Ok(Vec::new())
            }
            Err(e) => Err(MysqlError::Setup(format!(
                "{e} at {}:{}: the mysql source stops rather than describe a table wrongly; rewrite the statement in a form MySQL also accepts if you can, or set `schema.history.internal.skip.unparseable.ddl: true` to log and skip such statements",
                at.file, at.pos
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_statements_that_can_change_a_table_are_parsed() {
        for yes in [
            "CREATE TABLE t (a INT)",
            "create or replace table t (a int)",
            "ALTER TABLE t ADD b INT",
            "ALTER ONLINE TABLE t ADD b INT",
            "DROP TEMPORARY TABLE IF EXISTS t",
            "RENAME TABLE a TO b",
            "CREATE UNIQUE INDEX i ON t (a)",
            "CREATE DATABASE d",
            "DROP SCHEMA d",
            "/* migration 7 */ ALTER TABLE t ADD b INT",
            "ALTER /*x*/ TABLE t ADD b INT",
            "-- note\nALTER TABLE t ADD b INT",
        ] {
            assert!(changes_structure(yes), "{yes}");
        }
        for no in [
            "GRANT ALL ON *.* TO x",
            "CREATE USER x",
            "FLUSH PRIVILEGES",
            "CREATE TRIGGER t BEFORE INSERT ON t FOR EACH ROW SET @a = 1",
            "CREATE OR REPLACE VIEW v AS SELECT 1",
            "DROP PROCEDURE p",
            "SAVEPOINT s",
            "",
        ] {
            assert!(!changes_structure(no), "{no}");
        }
    }
}
