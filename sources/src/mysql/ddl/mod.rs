//! The schema model the binlog's DDL keeps up to date, as Debezium's MySQL connector keeps
//! its own: each statement of a QUERY event (or of the snapshot's `SHOW CREATE TABLE`) is
//! parsed (sqlparser's MySQL dialect) and applied to the tables it names, and what changed is
//! returned as the schema history's [`TableChange`]s, which become schema change events and
//! history records. A statement the parser cannot read is an error ([`Unparsed`]): the caller
//! decides, as `schema.history.internal.skip.unparseable.ddl` says, whether to stop or skip.

mod alter;
mod column;
mod mariadb;
mod syntax;

use std::collections::{BTreeMap, HashMap};

use sluice_kit::history::{table_id, ChangeKind, HistoryRecord, TableChange, TableDef};
use sqlparser::ast::{
    CreateTable, CreateTableLikeKind, CreateTableOptions, Expr, ObjectName, ObjectNamePart,
    ObjectType, SqlOption, Statement, TableConstraint, Use,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Tokenizer;

/// A statement the parser could not read, or one whose effect the model cannot follow.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Unparsed(pub String);

/// One schema change event's worth of a statement: Debezium gives one per statement, and one
/// per table of `DROP TABLE a, b` and `RENAME TABLE a TO b, c TO d`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Applied {
    /// The database (the event's key; empty for server-wide statements such as `SET`).
    pub database: String,
    /// `source.table`: the statement's tables, comma-joined; empty for a statement that
    /// changed no table the model knows (Debezium's database-level fallback); none for
    /// database statements (`CREATE DATABASE`, `USE`, `SET`).
    pub table: Option<String>,
    /// The event's statement when it is not the whole statement (one table of a
    /// `DROP TABLE a, b`: `DROP TABLE `db`.`a``).
    pub ddl: Option<String>,
    /// The changed tables.
    pub changes: Vec<TableChange>,
}

impl Applied {
    /// An event about database `database` as a whole.
    fn database(database: &str, table: Option<&str>) -> Self {
        Applied {
            database: database.to_owned(),
            table: table.map(str::to_owned),
            ddl: None,
            changes: Vec::new(),
        }
    }
}

/// A `CREATE TABLE` without its partitioning clause (always last; MySQL wraps it in a
/// `/*!50100 ... */` comment), which the parser does not read and which changes no column.
fn without_partitioning(ddl: &str) -> std::borrow::Cow<'_, str> {
    let upper = ddl.to_ascii_uppercase();
    if !upper.trim_start().starts_with("CREATE") {
        return ddl.into();
    }
    let cut = [
        "/*!50100 PARTITION BY",
        "/*!50500 PARTITION BY",
        "PARTITION BY",
    ]
    .iter()
    .filter_map(|p| upper.find(p))
    .min();
    match cut {
        Some(i) => ddl[..i].trim_end().to_owned().into(),
        None => ddl.into(),
    }
}

/// Whether an `ALTER TABLE` changes no column: only table options (`ENGINE=`, `COMMENT=`,
/// `DEFAULT CHARSET=`, `FORCE`, `ROW_FORMAT=`, ...), indexes, foreign keys, checks and
/// partitions. Words that can change a column (`COLUMN`, `MODIFY`, `CHANGE`, `CONVERT`,
/// `RENAME`, keys) or an `ADD`/`DROP` of anything else say it may.
fn changes_no_column(ddl: &str) -> bool {
    let upper = ddl.to_ascii_uppercase();
    let words: Vec<&str> = upper
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .filter(|w| !w.is_empty())
        .collect();
    if words.first() != Some(&"ALTER") || !words.contains(&"TABLE") {
        return false;
    }
    let risky = [
        "COLUMN", "MODIFY", "CHANGE", "CONVERT", "RENAME", "PRIMARY", "UNIQUE",
    ];
    if words.iter().any(|w| risky.contains(w)) {
        return false;
    }
    let harmless_objects = [
        "PARTITION",
        "PARTITIONING",
        "INDEX",
        "KEY",
        "FOREIGN",
        "CONSTRAINT",
        "CHECK",
        "FULLTEXT",
        "SPATIAL",
        "IF",
    ];
    words
        .windows(2)
        .all(|w| !matches!(w[0], "ADD" | "DROP") || harmless_objects.contains(&w[1]))
        && !words.last().is_some_and(|w| matches!(*w, "ADD" | "DROP"))
}

/// The database and table a `CREATE`/`ALTER`/`DROP TABLE` statement names (`session` when it
/// names no database), read off its text: for deciding about a statement the parser refused.
pub(crate) fn target_of(ddl: &str, session: &str) -> Option<Key> {
    let mut words = ddl.split_whitespace().peekable();
    for w in words.by_ref() {
        if w.eq_ignore_ascii_case("TABLE") {
            break;
        }
    }
    let mut name = words.next()?;
    while ["IF", "NOT", "EXISTS"]
        .iter()
        .any(|k| name.eq_ignore_ascii_case(k))
    {
        name = words.next()?;
    }
    let name = name.trim_end_matches([',', '(', ';']);
    let parts: Vec<String> = name
        .split('.')
        .map(|p| p.trim_matches('`').to_owned())
        .collect();
    match parts.as_slice() {
        [db, table] => Some((db.clone(), table.clone())),
        [table] => Some((session.to_owned(), table.clone())),
        _ => None,
    }
}

/// `character_set_server` of a `SET character_set_server=x, ...` statement.
fn server_charset_of(ddl: &str) -> Option<String> {
    let lower = ddl.trim_start().to_ascii_lowercase();
    let rest = lower.strip_prefix("set ")?;
    let at = rest.find("character_set_server")?;
    let value = rest[at + "character_set_server".len()..]
        .trim_start()
        .strip_prefix('=')?;
    let value = value
        .split([',', ';'])
        .next()?
        .trim()
        .trim_matches(['\'', '"']);
    (!value.is_empty()).then(|| value.to_owned())
}

/// `("db", "t")` of a history id `"db"."t"`.
pub(crate) fn key_of(id: &str) -> Option<Key> {
    let (db, table) = id
        .strip_prefix('"')?
        .strip_suffix('"')?
        .split_once("\".\"")?;
    Some((db.to_owned(), table.to_owned()))
}

fn quoted_id((db, table): &(String, String)) -> String {
    format!("{}.{}", super::quote(db), super::quote(table))
}

fn change(key: &(String, String), kind: ChangeKind, table: Option<TableDef>) -> TableChange {
    TableChange {
        kind,
        id: table_id(&[&key.0, &key.1]),
        previous_id: None,
        // Debezium writes `"comment": null` beside a table, nothing beside a drop.
        comment: table.as_ref().map(|_| serde_json::Value::Null),
        table,
    }
}

/// A table's identity in the model.
type Key = (String, String);

/// The databases and tables the DDL seen so far describes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Model {
    /// `character_set_server`, for databases created without a character set.
    server_charset: Option<String>,
    /// Each database's default character set.
    databases: HashMap<String, Option<String>>,
    tables: BTreeMap<Key, TableDef>,
    /// `lower_case_table_names` is not 0: a name matches a table whatever its case (the
    /// server stores names in lower case, statements keep the case they were written in),
    /// and a table keeps the case of the statement that made it, as Debezium's model does.
    case_insensitive: bool,
}

/// The last part of a name, and the database part if written (`db.t`).
fn split(name: &ObjectName, session: &str) -> Key {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => i.value.clone(),
            other => other.to_string(),
        })
        .collect();
    match parts.as_slice() {
        [.., db, table] => (db.clone(), table.clone()),
        [table] => (session.to_owned(), table.clone()),
        [] => (session.to_owned(), String::new()),
    }
}

fn option_text(e: &Expr) -> String {
    let text = e.to_string();
    text.trim_matches(|c| c == '\'' || c == '"' || c == '`')
        .to_owned()
}

/// `(charset, comment)` of a table's options.
fn table_options(options: &CreateTableOptions) -> (Option<String>, Option<String>) {
    let list: &[SqlOption] = match options {
        CreateTableOptions::None => &[],
        CreateTableOptions::With(o)
        | CreateTableOptions::Options(o)
        | CreateTableOptions::Plain(o)
        | CreateTableOptions::TableProperties(o) => o,
    };
    let (mut charset, mut collation, mut comment) = (None, None, None);
    for option in list {
        if let SqlOption::KeyValue { key, value } = option {
            match key.to_string().to_uppercase().as_str() {
                "DEFAULT CHARSET" | "CHARSET" | "CHARACTER SET" | "DEFAULT CHARACTER SET" => {
                    charset = Some(option_text(value))
                }
                "DEFAULT COLLATE" | "COLLATE" => collation = Some(option_text(value)),
                "COMMENT" => comment = Some(option_text(value)),
                _ => {}
            }
        }
    }
    let charset =
        charset.or_else(|| collation.and_then(|c: String| c.split('_').next().map(str::to_owned)));
    (charset, comment)
}

/// One table's change, as a statement applied.
fn one(key: &Key, kind: ChangeKind, table: Option<TableDef>) -> Applied {
    Applied {
        database: key.0.clone(),
        table: Some(key.1.clone()),
        ddl: None,
        changes: vec![change(key, kind, table)],
    }
}

impl Model {
    /// An empty model on a server whose `character_set_server` is `server_charset`.
    pub(crate) fn new(server_charset: Option<String>) -> Self {
        Model {
            server_charset,
            ..Model::default()
        }
    }

    /// Names match whatever their case (`lower_case_table_names` is not 0).
    pub(crate) fn set_case_insensitive(&mut self, case_insensitive: bool) {
        self.case_insensitive = case_insensitive;
    }

    /// Whether names match whatever their case.
    pub(crate) fn case_insensitive(&self) -> bool {
        self.case_insensitive
    }

    /// The key of the table `name` names in `session`: on a case-insensitive server, the
    /// known table's key when one matches whatever the case.
    fn key(&self, name: &ObjectName, session: &str) -> Key {
        let key = split(name, session);
        self.known(&key.0, &key.1)
            .map(|(k, _)| k.clone())
            .unwrap_or(key)
    }

    /// The table `db`.`table` and its key in the model (on a case-insensitive server,
    /// whatever the case of the names).
    pub(crate) fn known(&self, db: &str, table: &str) -> Option<(&Key, &TableDef)> {
        let exact = self
            .tables
            .get_key_value(&(db.to_owned(), table.to_owned()));
        if exact.is_some() || !self.case_insensitive {
            return exact;
        }
        self.tables
            .iter()
            .find(|((d, t), _)| d.eq_ignore_ascii_case(db) && t.eq_ignore_ascii_case(table))
    }

    /// Sets `character_set_server` (the snapshot reads it).
    pub(crate) fn set_server_charset(&mut self, charset: Option<String>) {
        self.server_charset = charset;
    }

    /// The structure of `db`.`table`.
    #[cfg(test)]
    pub(crate) fn table(&self, db: &str, table: &str) -> Option<&TableDef> {
        self.known(db, table).map(|(_, t)| t)
    }

    /// The tables, by database and name.
    #[cfg(test)]
    pub(crate) fn tables(&self) -> impl Iterator<Item = (&Key, &TableDef)> {
        self.tables.iter()
    }

    fn database_charset(&self, db: &str) -> Option<String> {
        let charset = match self.case_insensitive {
            false => self.databases.get(db),
            true => self
                .databases
                .iter()
                .find(|(d, _)| d.eq_ignore_ascii_case(db))
                .map(|(_, c)| c),
        };
        charset
            .cloned()
            .flatten()
            .or_else(|| self.server_charset.clone())
    }

    /// Replays one history record (Debezium's recovery): its table changes when it has
    /// some, else its statement (`SET`, `USE`, `CREATE DATABASE` keep the character sets).
    pub(crate) fn replay(&mut self, record: &HistoryRecord) -> Result<(), Unparsed> {
        if record.table_changes.is_empty() {
            return self
                .apply(record.database_name.as_deref().unwrap_or(""), &record.ddl)
                .map(|_| ());
        }
        for c in &record.table_changes {
            if let Some(previous) = c.previous_id.as_deref().and_then(key_of) {
                self.tables.remove(&previous);
            }
            let key = key_of(&c.id)
                .ok_or_else(|| Unparsed(format!("the history names the table `{}`", c.id)))?;
            match (&c.kind, &c.table) {
                (ChangeKind::Drop, _) => {
                    self.tables.remove(&key);
                }
                (_, Some(def)) => {
                    self.tables.insert(key, def.clone());
                }
                (_, None) => {}
            }
        }
        Ok(())
    }

    /// Parses `ddl` (run in database `session`) and applies each statement; returns what
    /// changed, by database, in statement order.
    pub(crate) fn apply(&mut self, session: &str, ddl: &str) -> Result<Vec<Applied>, Unparsed> {
        let text = without_partitioning(ddl);
        // The statement on one line, cut, for messages.
        let shown: String = (ddl.split_whitespace().collect::<Vec<_>>().join(" "))
            .chars()
            .take(200)
            .collect();
        let unparsed = |e: &dyn std::fmt::Display| {
            Unparsed(format!(
                "the DDL statement `{shown}` cannot be parsed ({e})"
            ))
        };
        let tokens = Tokenizer::new(&MySqlDialect {}, &text)
            .tokenize()
            .map_err(|e| unparsed(&e))?;
        let tokens: Vec<_> = (tokens.into_iter())
            .filter(|t| !matches!(t, sqlparser::tokenizer::Token::Whitespace(_)))
            .collect();
        if mariadb::versioned(&tokens) {
            return Err(Unparsed(format!(
                "`{shown}` makes or alters a system-versioned table: its binlog rows carry hidden history columns, updates add history rows and deletes arrive as updates, which Sluice does not translate; leave the table out (table.exclude.list) or capture a table without system versioning"
            )));
        }
        // The statement as written first; then MariaDB's own syntax rewritten (see
        // `mariadb`), then MySQL's beyond the parser's grammar too (see `syntax`).
        let mut converted = Vec::new();
        let mut guards = Vec::new();
        let parse = |tokens: Vec<_>| {
            Parser::new(&MySqlDialect {})
                .with_tokens(tokens)
                .parse_statements()
        };
        let parsed = parse(tokens.clone()).or_else(|e| {
            let (tokens, found) = mariadb::rewrite(tokens);
            guards = found;
            parse(tokens.clone()).or_else(|_| {
                let (tokens, conversions) = syntax::rewrite(tokens);
                let statements = parse(tokens).map_err(|_| e)?;
                converted = conversions;
                Ok::<_, sqlparser::parser::ParserError>(statements)
            })
        });
        let statements = match parsed {
            Ok(statements) => statements,
            // Table options and partitions change no column: Debezium's event with no table
            // changes (it, too, leaves `DEFAULT CHARSET=` and partitions out of the model).
            Err(_) if changes_no_column(ddl) => {
                return Ok(vec![Applied::database(session, Some(""))]);
            }
            // The parser's own message, with its line and column in the statement.
            Err(e) => {
                let e = Parser::parse_sql(&MySqlDialect {}, &text)
                    .err()
                    .unwrap_or(e);
                return Err(unparsed(&e));
            }
        };
        if let Some(charset) = server_charset_of(ddl) {
            self.server_charset = Some(charset);
        }
        let mut out = Vec::new();
        let mut session = session.to_owned();
        for (i, statement) in statements.into_iter().enumerate() {
            let altered = match &statement {
                Statement::AlterTable(at) => Some(self.key(&at.name, &session)),
                _ => None,
            };
            let guarded: Vec<&mariadb::Guard> = (guards.iter())
                .filter(|(n, _)| *n == i)
                .map(|(_, g)| g)
                .collect();
            let mut applied = self.statement(&mut session, statement, &guarded)?;
            let charset = converted.iter().find(|(n, _)| *n == i).map(|(_, c)| c);
            if let (Some(charset), Some(key)) = (charset, altered) {
                self.convert(&key, charset, &mut applied);
            }
            out.extend(applied);
        }
        Ok(out)
    }

    fn statement(
        &mut self,
        session: &mut String,
        statement: Statement,
        guards: &[&mariadb::Guard],
    ) -> Result<Vec<Applied>, Unparsed> {
        let fallback = Applied::database(session, Some(""));
        Ok(vec![match statement {
            Statement::CreateTable(ct) => {
                let key = self.key(&ct.name, session);
                // MariaDB's `CREATE OR REPLACE TABLE` drops a table it finds (Debezium's
                // listener keeps the old structure: rows would decode against it).
                if self.tables.contains_key(&key) && !ct.or_replace {
                    return Ok(vec![fallback]);
                }
                let Some(def) = self.create(&ct, session)? else {
                    if ct.or_replace {
                        self.tables.remove(&key);
                    }
                    return Ok(vec![fallback]);
                };
                self.tables.insert(key.clone(), def.clone());
                one(&key, ChangeKind::Create, Some(def))
            }
            Statement::AlterTable(at) => {
                (self.alter_table(&at, session, guards)?).unwrap_or(fallback)
            }
            Statement::Drop {
                object_type: ObjectType::Table,
                names,
                if_exists,
                temporary,
                ..
            } => return Ok(self.drop_tables(session, &names, if_exists, temporary)),
            Statement::Drop {
                object_type: ObjectType::Schema | ObjectType::Database,
                names,
                ..
            } => {
                let db = names.first().map(|n| split(n, "").1).unwrap_or_default();
                let same = |d: &str| match self.case_insensitive {
                    true => d.eq_ignore_ascii_case(&db),
                    false => d == db,
                };
                self.databases.retain(|d, _| !same(d));
                self.tables.retain(|(d, _), _| !same(d));
                Applied::database(&db, None)
            }
            Statement::CreateDatabase {
                db_name,
                default_charset,
                default_collation,
                ..
            } => {
                let db = split(&db_name, "").1;
                let charset = default_charset.or_else(|| {
                    default_collation.and_then(|c| c.split('_').next().map(str::to_owned))
                });
                self.databases.insert(db.clone(), charset);
                Applied::database(&db, None)
            }
            Statement::Use(Use::Object(name) | Use::Database(name) | Use::Schema(name)) => {
                *session = split(&name, "").1;
                Applied::database(session, None)
            }
            Statement::RenameTable(renames) => return Ok(self.rename_tables(&renames, session)),
            Statement::CreateIndex(ci) if ci.unique => {
                let key = self.key(&ci.table_name, session);
                let Some(def) = self.tables.get_mut(&key) else {
                    return Ok(vec![fallback]);
                };
                let names: Vec<String> = ci
                    .columns
                    .iter()
                    .map(|c| c.column.expr.to_string())
                    .collect();
                if !alter::unique_becomes_key(def, &names) {
                    return Ok(vec![fallback]);
                }
                let def = def.clone();
                one(&key, ChangeKind::Alter, Some(def))
            }
            Statement::Set(_) => Applied::database(session, None),
            // Anything else changes no table's structure (CREATE INDEX, DROP INDEX, ALTER
            // DATABASE, ...): Debezium's database-level event with no table changes.
            _ => fallback,
        }])
    }

    /// `ALTER TABLE` of a table the model knows (`None`: one it does not, nothing to follow).
    fn alter_table(
        &mut self,
        at: &sqlparser::ast::AlterTable,
        session: &str,
        guards: &[&mariadb::Guard],
    ) -> Result<Option<Applied>, Unparsed> {
        let key = self.key(&at.name, session);
        let Some(mut def) = self.tables.get(&key).cloned() else {
            return Ok(None);
        };
        let (key, previous) = match alter::apply(&mut def, &at.operations, session, guards)? {
            Some(new) if new != key => {
                self.tables.remove(&key);
                (new, Some(table_id(&[&key.0, &key.1])))
            }
            _ => (key, None),
        };
        self.tables.insert(key.clone(), def.clone());
        let mut applied = one(&key, ChangeKind::Alter, Some(def));
        // Kept in the history (Debezium's events have no such field), so that a recovery
        // drops the old name.
        applied.changes[0].previous_id = previous;
        Ok(Some(applied))
    }

    /// `ALTER TABLE ... CONVERT TO CHARACTER SET charset` of table `key`: its character
    /// columns and its default take `charset` (the types are kept, as Debezium's parser keeps
    /// them), in the model and in the statement's table change.
    fn convert(&mut self, key: &Key, charset: &str, applied: &mut [Applied]) {
        let Some(def) = self.tables.get_mut(key) else {
            return;
        };
        def.default_charset_name = Some(charset.to_owned());
        for c in def.columns.iter_mut().filter(|c| c.charset_name.is_some()) {
            c.charset_name = Some(charset.to_owned());
        }
        let id = table_id(&[&key.0, &key.1]);
        for change in applied.iter_mut().flat_map(|a| &mut a.changes) {
            if change.id == id {
                change.table = Some(def.clone());
            }
        }
    }

    /// `RENAME TABLE a TO b, c TO d`: one event per table, each with its own statement.
    fn rename_tables(
        &mut self,
        renames: &[sqlparser::ast::RenameTable],
        session: &str,
    ) -> Vec<Applied> {
        let mut out = Vec::new();
        for r in renames {
            let (old, new) = (self.key(&r.old_name, session), split(&r.new_name, session));
            let ddl = Some(format!("RENAME TABLE {} TO {}", r.old_name, r.new_name));
            let Some(def) = self.tables.remove(&old) else {
                out.push(Applied {
                    ddl,
                    ..Applied::database(&old.0, Some(&old.1))
                });
                continue;
            };
            self.tables.insert(new.clone(), def.clone());
            let mut applied = one(&new, ChangeKind::Alter, Some(def));
            applied.changes[0].previous_id = Some(table_id(&[&old.0, &old.1]));
            applied.ddl = ddl;
            out.push(applied);
        }
        out
    }

    /// `DROP TABLE a, b`: one event per table, each with its own statement.
    fn drop_tables(
        &mut self,
        session: &str,
        names: &[ObjectName],
        if_exists: bool,
        temporary: bool,
    ) -> Vec<Applied> {
        let keys: Vec<Key> = names.iter().map(|n| self.key(n, session)).collect();
        // `source.table`: the statement's tables of the event's database (Debezium's, whose
        // order follows a hash set: here the statement's).
        let of_database = |db: &str| {
            keys.iter()
                .filter(|k| k.0 == db)
                .map(|k| k.1.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        let prefix = format!(
            "DROP {}TABLE {}",
            if temporary { "TEMPORARY " } else { "" },
            if if_exists { "IF EXISTS " } else { "" }
        );
        keys.iter()
            .map(|key| {
                self.tables.remove(key);
                Applied {
                    database: key.0.clone(),
                    table: Some(of_database(&key.0)),
                    ddl: Some(format!("{prefix}{}", quoted_id(key))),
                    changes: vec![change(key, ChangeKind::Drop, None)],
                }
            })
            .collect()
    }

    /// The structure a `CREATE TABLE` gives.
    /// `None`: a `LIKE` of a table the model does not know (Debezium's fallback event).
    fn create(&self, ct: &CreateTable, session: &str) -> Result<Option<TableDef>, Unparsed> {
        if let Some(like) = &ct.like {
            let name = match like {
                CreateTableLikeKind::Parenthesized(l) | CreateTableLikeKind::Plain(l) => &l.name,
            };
            return Ok(self.tables.get(&self.key(name, session)).cloned());
        }
        if ct.query.is_some() {
            return Err(Unparsed(format!(
                "`CREATE TABLE {} ... AS SELECT`: the columns of a query are not known to the DDL parser",
                ct.name
            )));
        }
        let db = split(&ct.name, session).0;
        let (charset, comment) = table_options(&ct.table_options);
        let charset = charset.or_else(|| self.database_charset(&db));
        let mut def = TableDef {
            default_charset_name: charset.clone(),
            primary_key_column_names: Vec::new(),
            columns: Vec::with_capacity(ct.columns.len()),
            attributes: Vec::new(),
            comment,
        };
        let mut unique = None;
        for (i, c) in ct.columns.iter().enumerate() {
            let mut column = column::describe(c, i as i32 + 1, charset.as_deref())
                .map_err(|what| Unparsed(format!("{what} in `CREATE TABLE {}`", ct.name)))?;
            if column::is_primary(c) {
                column::make_required(&mut column);
                def.primary_key_column_names.push(column.name.clone());
            }
            if column::is_unique(c) && unique.is_none() {
                unique = Some(column.name.clone());
            }
            def.columns.push(column);
        }
        for constraint in &ct.constraints {
            if let TableConstraint::PrimaryKey(pk) = constraint {
                alter::set_primary_key(
                    &mut def,
                    pk.columns.iter().map(|c| c.column.expr.to_string()),
                );
            }
        }
        // A column declared UNIQUE is the key of a table that has no primary key.
        if let (Some(name), true) = (unique, def.primary_key_column_names.is_empty()) {
            def.primary_key_column_names.push(name);
        }
        for constraint in &ct.constraints {
            if let TableConstraint::Unique(u) = constraint {
                let names: Vec<String> = u
                    .columns
                    .iter()
                    .map(|c| c.column.expr.to_string())
                    .collect();
                alter::unique_becomes_key(&mut def, &names);
            }
        }
        Ok(Some(def))
    }
}

#[cfg(test)]
mod tests;
