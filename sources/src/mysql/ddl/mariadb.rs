//! MariaDB's own DDL syntax (Debezium's MariaDB connector grammar, `MariaDBParser.g4`),
//! rewritten on the tokens into syntax the parser reads, with what the model must know of it
//! returned as [`Guard`]s:
//!
//! - `ADD [COLUMN] IF NOT EXISTS c ...`, `ADD [COLUMN] IF NOT EXISTS (a ..., b ...)`: the
//!   clause applies only to a column the table lacks ([`Guard::AddIfAbsent`]; MariaDB leaves
//!   an existing column as it is, where Debezium's listener redefines it);
//! - `MODIFY|CHANGE|ALTER [COLUMN] IF EXISTS c`, `RENAME COLUMN IF EXISTS c`: only to a column
//!   the table has ([`Guard::IfPresent`]; Debezium stops on a missing one);
//! - `ADD PRIMARY KEY IF NOT EXISTS (...)`: only to a table without one
//!   ([`Guard::KeyIfAbsent`]);
//! - `IF [NOT] EXISTS` of indexes, keys, constraints, partitions, `DROP IF EXISTS c`,
//!   `RENAME TABLE IF EXISTS`: dropped (the model already ignores what is not there);
//! - `WAIT n` / `NOWAIT` after a table's name, `ALGORITHM = NOCOPY`, `COMPRESSED[=zlib]`
//!   columns, `PERSISTENT` generated columns (`STORED`): dropped or renamed, as they change no
//!   column's structure;
//! - system versioning (`WITH|WITHOUT SYSTEM VERSIONING`, `ADD|DROP SYSTEM VERSIONING`,
//!   `AS ROW START|END` columns, `PERIOD FOR SYSTEM_TIME`) is found by [`versioned`], for the
//!   model to refuse the statement (a versioned table's binlog rows carry hidden history
//!   columns, its updates add history rows and its deletes arrive as updates: events Debezium
//!   gets wrong and Sluice does not translate yet).
//!
//! The model tries a statement as written first: only one the parser refuses is rewritten, and
//! each rule looks at its neighbours, so a column named `compressed`, `wait` or `nowait` stays.

use sqlparser::tokenizer::Token;

/// What a rewritten clause asks of the model, for one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Guard {
    /// `ADD COLUMN IF NOT EXISTS`: applies to the column only when the table lacks it.
    AddIfAbsent(String),
    /// `MODIFY|CHANGE|ALTER|RENAME COLUMN IF EXISTS`: applies only when the table has it.
    IfPresent(String),
    /// `ADD PRIMARY KEY IF NOT EXISTS`: applies only when the table has no primary key.
    KeyIfAbsent,
}

/// Objects other than columns that `ADD`/`DROP` take with `IF [NOT] EXISTS`.
const OBJECTS: [&str; 9] = [
    "INDEX",
    "KEY",
    "UNIQUE",
    "CONSTRAINT",
    "FOREIGN",
    "FULLTEXT",
    "SPATIAL",
    "PARTITION",
    "CHECK",
];

/// Words that start a statement whose table names may be followed by `WAIT n` / `NOWAIT`.
const WAITING: [&str; 5] = ["ALTER", "DROP", "TRUNCATE", "RENAME", "OPTIMIZE"];

/// Types a `COMPRESSED` attribute follows when they have no `(n)`.
const COMPRESSIBLE: [&str; 8] = [
    "TINYBLOB",
    "BLOB",
    "MEDIUMBLOB",
    "LONGBLOB",
    "TINYTEXT",
    "TEXT",
    "MEDIUMTEXT",
    "LONGTEXT",
];

/// What may follow a column's `COMPRESSED` attribute.
const AFTER_ATTRIBUTE: [&str; 17] = [
    "NOT",
    "NULL",
    "DEFAULT",
    "COMMENT",
    "CHARACTER",
    "CHARSET",
    "COLLATE",
    "PRIMARY",
    "UNIQUE",
    "KEY",
    "AUTO_INCREMENT",
    "INVISIBLE",
    "AFTER",
    "FIRST",
    "CHECK",
    "REFERENCES",
    "GENERATED",
];

/// The tokens (without whitespace) with MariaDB's syntax rewritten, and the guards by
/// statement index.
pub(super) fn rewrite(tokens: Vec<Token>) -> (Vec<Token>, Vec<(usize, Guard)>) {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut guards = Vec::new();
    // The statement's index as the parser counts them (empty ones left out), where it starts
    // in `out`, and the parentheses' depth.
    let (mut statement, mut start, mut depth) = (0usize, 0usize, 0usize);
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        match t {
            Token::SemiColon => {
                if out.len() > start {
                    statement += 1;
                }
                out.push(t.clone());
                start = out.len();
                depth = 0;
                i += 1;
                continue;
            }
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        let mut guard = |g: Guard| guards.push((statement, g));
        // `IF NOT EXISTS` / `IF EXISTS` after ADD/MODIFY/CHANGE/ALTER/RENAME/DROP clauses.
        if let Some(used) = if_exists(&tokens[i..], &mut out, &mut guard) {
            i += used;
            continue;
        }
        if depth == 0 && waiting(&tokens, i, &out[start..]) {
            i += if is(t, "WAIT") { 2 } else { 1 };
            continue;
        }
        let after_algorithm = match out.as_slice() {
            [.., a, Token::Eq] | [.., a] => is(a, "ALGORITHM"),
            [] => false,
        };
        if is(t, "NOCOPY") && after_algorithm {
            out.push(word("DEFAULT"));
            i += 1;
            continue;
        }
        if is(t, "PERSISTENT") && matches!(out.last(), Some(Token::RParen)) {
            out.push(word("STORED"));
            i += 1;
            continue;
        }
        if is(t, "COMPRESSED") && compressed_attribute(&out, tokens.get(i + 1)) {
            i += 1;
            if matches!(tokens.get(i), Some(Token::Eq)) {
                i += 2;
            }
            continue;
        }
        if is(t, "REPLACE")
            && is_at(&tokens, i + 1, "SEQUENCE")
            && out.last().is_some_and(|o| is(o, "OR"))
        {
            // `CREATE OR REPLACE SEQUENCE`: a sequence is no table of the model.
            out.pop();
            i += 1;
            continue;
        }
        out.push(t.clone());
        i += 1;
    }
    (out, guards)
}

/// Whether a `COMPRESSED` after `out`, followed by `next`, is a column's attribute: after a
/// type (`BLOB`, `VARCHAR(20)`, a character set's or collation's name), before the end of the
/// definition or another attribute (not a column named `compressed`, not `ROW_FORMAT
/// COMPRESSED`).
fn compressed_attribute(out: &[Token], next: Option<&Token>) -> bool {
    let after_type = match out {
        [.., Token::RParen] => true,
        [.., before, Token::Word(w)] => {
            COMPRESSIBLE.iter().any(|t| w.value.eq_ignore_ascii_case(t))
                || is(before, "SET")
                || is(before, "COLLATE")
                || is(before, "CHARSET")
        }
        _ => false,
    };
    let ends = match next {
        None | Some(Token::Comma | Token::RParen | Token::Eq | Token::SemiColon) => true,
        Some(t) => AFTER_ATTRIBUTE.iter().any(|a| is(t, a)),
    };
    after_type && ends
}

/// `IF [NOT] EXISTS` after a clause's verb at the start of `tokens`: the clause is written to
/// `out` without it, its guard given; the tokens taken.
fn if_exists(
    tokens: &[Token],
    out: &mut Vec<Token>,
    guard: &mut impl FnMut(Guard),
) -> Option<usize> {
    let verb = match &tokens[0] {
        Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
        _ => return None,
    };
    if !matches!(
        verb.as_str(),
        "ADD" | "MODIFY" | "CHANGE" | "ALTER" | "RENAME" | "DROP"
    ) {
        return None;
    }
    // The words between the verb and `IF`: `COLUMN`, `PRIMARY KEY`, `INDEX`, `TABLE`, ...
    let mut j = 1;
    while j < tokens.len() && j <= 3 && !is(&tokens[j], "IF") {
        j += 1;
    }
    let not = is_at(tokens, j + 1, "NOT");
    let exists = j + if not { 2 } else { 1 };
    if !is_at(tokens, j, "IF") || !is_at(tokens, exists, "EXISTS") {
        return None;
    }
    let between = &tokens[1..j];
    let object = between
        .first()
        .is_some_and(|t| OBJECTS.iter().any(|o| is(t, o)));
    let primary = between.first().is_some_and(|t| is(t, "PRIMARY"));
    // `RENAME TABLE IF EXISTS` (`DROP TABLE IF EXISTS` the parser reads, and keeps).
    let table = verb == "RENAME" && between.first().is_some_and(|t| is(t, "TABLE"));
    let column = between.is_empty() || (between.len() == 1 && is(&between[0], "COLUMN"));
    if !(object || primary || table || column) {
        return None;
    }
    let rest = &tokens[exists + 1..];
    match (verb.as_str(), column, primary) {
        ("ADD", true, _) if matches!(rest.first(), Some(Token::LParen)) => {
            for name in listed_columns(rest) {
                guard(Guard::AddIfAbsent(name));
            }
        }
        ("ADD", true, _) => guard(Guard::AddIfAbsent(name_of(rest.first())?)),
        ("ADD", _, true) => guard(Guard::KeyIfAbsent),
        ("MODIFY" | "CHANGE" | "ALTER" | "RENAME", true, _) => {
            guard(Guard::IfPresent(name_of(rest.first())?))
        }
        _ => {}
    }
    out.push(tokens[0].clone());
    if verb == "DROP" && column {
        // `DROP IF EXISTS c`: the parser reads `DROP COLUMN c`.
        out.push(word("COLUMN"));
    } else {
        out.extend(between.iter().cloned());
    }
    Some(exists + 1)
}

/// The names of the column definitions of an `ADD (...)` list at the start of `tokens`.
fn listed_columns(tokens: &[Token]) -> Vec<String> {
    let mut names = Vec::new();
    let mut depth = 0usize;
    let mut item_start = true;
    for t in tokens {
        match t {
            Token::LParen => {
                depth += 1;
                item_start = depth == 1;
                continue;
            }
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            Token::Comma if depth == 1 => {
                item_start = true;
                continue;
            }
            _ => {}
        }
        if item_start && depth == 1 && !OBJECTS.iter().any(|o| is(t, o)) && !is(t, "PRIMARY") {
            names.extend(name_of(Some(t)));
        }
        item_start = false;
    }
    names
}

/// `WAIT n` or `NOWAIT` at `i`, right after the table names of a statement that takes them:
/// `statement` (the statement so far) is `ALTER|DROP|TRUNCATE|RENAME|OPTIMIZE [ONLINE|IGNORE|
/// TEMPORARY] [TABLE|TABLES] [IF [NOT] EXISTS] name [, name ...]` (names as `a` or `d.a`).
fn waiting(tokens: &[Token], i: usize, statement: &[Token]) -> bool {
    let t = &tokens[i];
    let wait = is(t, "WAIT") && matches!(tokens.get(i + 1), Some(Token::Number(..)));
    if !(wait || is(t, "NOWAIT")) {
        return false;
    }
    let Some(first) = statement.first() else {
        return false;
    };
    if !WAITING.iter().any(|w| is(first, w)) {
        return false;
    }
    let mut j = 1;
    while statement.get(j).is_some_and(|t| {
        ["ONLINE", "IGNORE", "TEMPORARY", "TABLE", "TABLES"]
            .iter()
            .any(|w| is(t, w))
    }) {
        j += 1;
    }
    if is_at(statement, j, "IF") {
        j += if is_at(statement, j + 1, "NOT") { 3 } else { 2 };
    }
    // name (. name)? (, name (. name)?)*
    let mut names = 0;
    loop {
        if !matches!(statement.get(j), Some(Token::Word(_))) {
            return false;
        }
        j += 1;
        if matches!(statement.get(j), Some(Token::Period)) {
            j += 1;
            if !matches!(statement.get(j), Some(Token::Word(_))) {
                return false;
            }
            j += 1;
        }
        names += 1;
        match statement.get(j) {
            None => return names > 0,
            Some(Token::Comma) => j += 1,
            Some(_) => return false,
        }
    }
}

/// Whether the statements (tokens without whitespace) make or alter a system-versioned table.
pub(super) fn versioned(tokens: &[Token]) -> bool {
    (0..tokens.len()).any(|i| versioning(&tokens[i..]))
}

/// Whether system versioning syntax starts `tokens`.
fn versioning(tokens: &[Token]) -> bool {
    let at = |i: usize, w: &str| is_at(tokens, i, w);
    ((at(0, "WITH") || at(0, "WITHOUT") || at(0, "ADD") || at(0, "DROP"))
        && at(1, "SYSTEM")
        && at(2, "VERSIONING"))
        || (at(0, "AS") && at(1, "ROW") && (at(2, "START") || at(2, "END")))
        || (at(0, "PERIOD") && at(1, "FOR") && at(2, "SYSTEM_TIME"))
}

fn name_of(t: Option<&Token>) -> Option<String> {
    match t? {
        Token::Word(w) => Some(w.value.clone()),
        _ => None,
    }
}

fn is(t: &Token, keyword: &str) -> bool {
    matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(keyword))
}

fn is_at(tokens: &[Token], i: usize, keyword: &str) -> bool {
    tokens.get(i).is_some_and(|t| is(t, keyword))
}

fn word(value: &str) -> Token {
    Token::make_word(value, None)
}
