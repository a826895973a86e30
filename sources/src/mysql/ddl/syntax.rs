//! MySQL column syntax the parser's grammar lacks, rewritten on its tokens into syntax it
//! reads, keeping what Debezium's own parser reports of it:
//!
//! - `NATIONAL CHAR(3)`, `NATIONAL VARCHAR(8)`, `NCHAR VARCHAR(8)`, `LONG VARCHAR`,
//!   `LONG VARBINARY`: one type named by all its words (`` `NATIONAL CHAR`(3) ``, a type name
//!   the parser takes as it is; Debezium's `typeName` is those words);
//! - the `BINARY` attribute of a character type (`CHAR(4) BINARY`, `VARCHAR(5) CHARACTER SET
//!   utf8mb4 BINARY`): Debezium names the type `CHAR BINARY`;
//! - the `CHARSET x` shorthand of a column: `CHARACTER SET x`;
//! - `ADD [COLUMN] (a INT, b TEXT)`: `ADD COLUMN a INT, ADD COLUMN b TEXT`;
//! - `CONVERT TO CHARACTER SET x [COLLATE y]`: taken out (as `ALGORITHM = DEFAULT`, which
//!   changes no column) and returned, for the model to apply: every character column and the
//!   table's default become `x`.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Word};

/// Character types that take the `BINARY` attribute.
const CHARACTER_TYPES: [&str; 9] = [
    "CHAR",
    "CHARACTER",
    "VARCHAR",
    "TINYTEXT",
    "TEXT",
    "MEDIUMTEXT",
    "LONGTEXT",
    "NCHAR",
    "NVARCHAR",
];

/// Words that open a key or constraint in an `ADD (...)` list (not a column).
const NOT_COLUMNS: [&str; 9] = [
    "INDEX",
    "KEY",
    "PRIMARY",
    "UNIQUE",
    "CONSTRAINT",
    "FOREIGN",
    "FULLTEXT",
    "SPATIAL",
    "CHECK",
];

/// The rewritten tokens, and the character sets of `CONVERT TO` clauses by statement index.
pub(super) fn rewrite(tokens: Vec<Token>) -> (Vec<Token>, Vec<(usize, String)>) {
    let tokens: Vec<Token> = tokens
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let (tokens, converted) = words(&tokens);
    (binary_attribute(add_lists(&tokens)), converted)
}

/// Types of several words, the `CHARSET` shorthand and `CONVERT TO` clauses.
fn words(tokens: &[Token]) -> (Vec<Token>, Vec<(usize, String)>) {
    let mut out = Vec::with_capacity(tokens.len());
    let mut converted = Vec::new();
    let mut statement = 0;
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        if matches!(t, Token::SemiColon) {
            statement += 1;
        }
        if let Some((name, used)) = compound_type(&tokens[i..]) {
            out.push(quoted(&name));
            i += used;
            continue;
        }
        if is(t, "CHARSET") && !matches!(tokens.get(i + 1), Some(Token::Eq)) && !after_default(&out)
        {
            out.push(word("CHARACTER"));
            out.push(word("SET"));
            i += 1;
            continue;
        }
        if is(t, "CONVERT") && is_at(tokens, i + 1, "TO") {
            if let Some((charset, used)) = convert_to(&tokens[i + 2..]) {
                converted.push((statement, charset));
                out.extend([word("ALGORITHM"), Token::Eq, word("DEFAULT")]);
                i += 2 + used;
                continue;
            }
        }
        out.push(t.clone());
        i += 1;
    }
    (out, converted)
}

/// Every `ADD [COLUMN] ( ... )` list as single `ADD`s ([`add_list`]).
fn add_lists(tokens: &[Token]) -> Vec<Token> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if is(&tokens[i], "ADD") {
            if let Some(used) = add_list(&tokens[i..], &mut out) {
                i += used;
                continue;
            }
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    out
}

/// A type of several words at the start of `tokens`: its name and the tokens it takes.
fn compound_type(tokens: &[Token]) -> Option<(String, usize)> {
    let words: Vec<String> = tokens
        .iter()
        .take(3)
        .map_while(|t| match t {
            Token::Word(w) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
            _ => None,
        })
        .collect();
    let w = |i: usize| words.get(i).map(String::as_str);
    let used = match (w(0)?, w(1), w(2)) {
        ("NATIONAL", Some("CHAR" | "CHARACTER"), Some("VARYING")) => 3,
        ("NATIONAL", Some("CHAR" | "CHARACTER" | "VARCHAR"), _) => 2,
        ("NCHAR", Some("VARCHAR"), _) => 2,
        ("LONG", Some("VARCHAR" | "VARBINARY"), _) => 2,
        _ => return None,
    };
    Some((words[..used].join(" "), used))
}

/// The character set of `CHARACTER SET x [COLLATE y]` (or `CHARSET`, with optional `=`s) at
/// the start of `tokens`, and the tokens it takes.
fn convert_to(tokens: &[Token]) -> Option<(String, usize)> {
    let mut i = if is_at(tokens, 0, "CHARSET") {
        1
    } else if is_at(tokens, 0, "CHARACTER") && is_at(tokens, 1, "SET") {
        2
    } else {
        return None;
    };
    if matches!(tokens.get(i), Some(Token::Eq)) {
        i += 1;
    }
    let charset = match tokens.get(i)? {
        Token::Word(w) => w.value.to_ascii_lowercase(),
        Token::SingleQuotedString(s) => s.to_ascii_lowercase(),
        _ => return None,
    };
    i += 1;
    if is_at(tokens, i, "COLLATE") {
        i += 1;
        if matches!(tokens.get(i), Some(Token::Eq)) {
            i += 1;
        }
        i += 1;
    }
    Some((charset, i))
}

/// `ADD [COLUMN] ( ... )` at the start of `tokens`: each definition of the list gets its own
/// `ADD COLUMN` (a key or constraint its own `ADD`), written to `out`; the tokens taken.
fn add_list(tokens: &[Token], out: &mut Vec<Token>) -> Option<usize> {
    let open = if is_at(tokens, 1, "COLUMN") { 2 } else { 1 };
    if !matches!(tokens.get(open), Some(Token::LParen)) {
        return None;
    }
    let mut depth = 0usize;
    let mut items: Vec<Vec<Token>> = vec![Vec::new()];
    for (j, t) in tokens.iter().enumerate().skip(open) {
        match t {
            Token::LParen => {
                depth += 1;
                if depth == 1 {
                    continue;
                }
            }
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    for (n, item) in items.into_iter().filter(|i| !i.is_empty()).enumerate() {
                        if n > 0 {
                            out.push(Token::Comma);
                        }
                        out.push(word("ADD"));
                        if !item
                            .first()
                            .is_some_and(|t| NOT_COLUMNS.iter().any(|k| is(t, k)))
                        {
                            out.push(word("COLUMN"));
                        }
                        out.extend(item);
                    }
                    return Some(j + 1);
                }
            }
            Token::Comma if depth == 1 => {
                items.push(Vec::new());
                continue;
            }
            _ => {}
        }
        items.last_mut()?.push(t.clone());
    }
    None
}

/// `CHAR(4) [CHARACTER SET x] [COLLATE y] BINARY`: the `BINARY` goes, the type becomes
/// `` `CHAR BINARY`(4) ``.
fn binary_attribute(mut tokens: Vec<Token>) -> Vec<Token> {
    let mut i = 0;
    while i < tokens.len() {
        let name = match &tokens[i] {
            Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
            Token::Word(w) if compound(&w.value) => w.value.clone(),
            _ => {
                i += 1;
                continue;
            }
        };
        let typed = i > 0 && matches!(tokens[i - 1], Token::Word(_));
        if !typed || !(CHARACTER_TYPES.contains(&name.as_str()) || compound(&name)) {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        if matches!(tokens.get(j), Some(Token::LParen)) {
            while j < tokens.len() && !matches!(tokens[j], Token::RParen) {
                j += 1;
            }
            j += 1;
        }
        loop {
            if is_at(&tokens, j, "CHARACTER") && is_at(&tokens, j + 1, "SET") {
                j += 3;
            } else if is_at(&tokens, j, "COLLATE") {
                j += 2;
            } else {
                break;
            }
        }
        if is_at(&tokens, j, "BINARY") {
            tokens.remove(j);
            tokens[i] = quoted(&format!("{name} BINARY"));
        }
        i += 1;
    }
    tokens
}

/// Whether `name` is a type [`compound_type`] made.
fn compound(name: &str) -> bool {
    name.starts_with("NATIONAL ") || name.starts_with("LONG ") || name == "NCHAR VARCHAR"
}

/// Whether the last token written is `DEFAULT` (a table's `DEFAULT CHARSET x`).
fn after_default(out: &[Token]) -> bool {
    out.last().is_some_and(|t| is(t, "DEFAULT"))
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

/// A type name the parser takes as it is (a quoted identifier).
fn quoted(name: &str) -> Token {
    Token::Word(Word {
        value: name.to_owned(),
        quote_style: Some('`'),
        keyword: Keyword::NoKeyword,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::tokenizer::Tokenizer;

    fn text(sql: &str) -> (String, Vec<(usize, String)>) {
        let tokens = Tokenizer::new(&MySqlDialect {}, sql).tokenize().unwrap();
        let (tokens, converted) = rewrite(tokens);
        let text: Vec<String> = tokens.iter().map(ToString::to_string).collect();
        (text.join(" "), converted)
    }

    #[test]
    fn national_long_and_binary_types_become_one_name() {
        let (t, _) = text("CREATE TABLE t (a NATIONAL CHAR(3), b national varchar(8) NOT NULL, c LONG VARCHAR, d LONG VARBINARY, e CHAR(4) BINARY, f VARCHAR(5) CHARACTER SET utf8mb4 BINARY, g BINARY(2), h NATIONAL CHAR(2) BINARY)");
        assert_eq!(t, "CREATE TABLE t ( a `NATIONAL CHAR` ( 3 ) , b `NATIONAL VARCHAR` ( 8 ) NOT NULL , c `LONG VARCHAR` , d `LONG VARBINARY` , e `CHAR BINARY` ( 4 ) , f `VARCHAR BINARY` ( 5 ) CHARACTER SET utf8mb4 , g BINARY ( 2 ) , h `NATIONAL CHAR BINARY` ( 2 ) )");
    }

    #[test]
    fn charset_shorthand_add_lists_and_convert_to() {
        let (t, c) = text("ALTER TABLE t ADD COLUMN (a INT DEFAULT 1, b VARCHAR(3) CHARSET latin1, INDEX i (a, b)), ADD (x INT)");
        assert_eq!(t, "ALTER TABLE t ADD COLUMN a INT DEFAULT 1 , ADD COLUMN b VARCHAR ( 3 ) CHARACTER SET latin1 , ADD INDEX i ( a , b ) , ADD COLUMN x INT");
        assert!(c.is_empty());
        let (t, c) = text("CREATE TABLE t (a INT) DEFAULT CHARSET latin1; ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin");
        assert_eq!(
            t,
            "CREATE TABLE t ( a INT ) DEFAULT CHARSET latin1 ; ALTER TABLE t ALGORITHM = DEFAULT"
        );
        assert_eq!(c, vec![(1, "utf8mb4".to_owned())]);
        let (_, c) = text("ALTER TABLE t CONVERT TO CHARSET = 'latin1', ADD COLUMN z INT");
        assert_eq!(c, vec![(0, "latin1".to_owned())]);
        // Strings and quoted names are left alone.
        let (t, _) = text("INSERT INTO t VALUES ('NATIONAL CHAR', `LONG`)");
        assert_eq!(t, "INSERT INTO t VALUES ( 'NATIONAL CHAR' , `LONG` )");
    }
}
