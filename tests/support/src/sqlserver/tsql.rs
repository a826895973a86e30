//! T-SQL as the emulator's SQLite store runs it: names (`[db].[schema].[table]` becomes the
//! table `"schema.table"`), `TOP` as `LIMIT`, table hints and `OPTION` dropped, `N'…'`, `0x…`,
//! `@P1`, and the CDC functions (`sys.fn_cdc_get_max_lsn()`, `fn_cdc_get_all_changes_…`, …)
//! as queries on the emulated `cdc` tables.

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A name part; `true` when it was quoted (`[x]` or `"x"`).
    Ident(String, bool),
    Str(String),
    Num(String),
    Hex(String),
    /// `@P1` (a parameter) or `@@VERSION`.
    Var(String),
    Punct(String),
    /// Already SQLite text (a rewrite's output).
    Raw(String),
}

/// A string literal as the store keeps it: an ISO 8601 date and time (`2024-01-02T03:04:05`,
/// the form SQL Server reads as a `datetime` whatever the session's `DATEFORMAT`) with a space
/// for the `T`, as the store holds dates and times, so that comparing it with a date and time
/// column compares the values, as SQL Server's conversion to the column's type does.
fn stored_form(s: &str) -> std::borrow::Cow<'_, str> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        r.into_iter()
            .all(|i| b.get(i).is_some_and(u8::is_ascii_digit))
    };
    if b.len() >= 16
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
    {
        return format!("{} {}", &s[..10], &s[11..]).into();
    }
    s.into()
}

/// Splits T-SQL into tokens (comments and white space dropped).
pub fn tokenize(sql: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = sql.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '-' && chars.get(i + 1) == Some(&'-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '[' || c == '"' {
            let close = if c == '[' { ']' } else { '"' };
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err("unterminated quoted name".into()),
                    Some(&x) if x == close && chars.get(i + 1) == Some(&close) => {
                        s.push(close);
                        i += 2;
                    }
                    Some(&x) if x == close => {
                        i += 1;
                        break;
                    }
                    Some(&x) => {
                        s.push(x);
                        i += 1;
                    }
                }
            }
            out.push(Tok::Ident(s, true));
        } else if c == '\'' || ((c == 'N' || c == 'n') && chars.get(i + 1) == Some(&'\'')) {
            i += if c == '\'' { 1 } else { 2 };
            let mut s = String::new();
            loop {
                match chars.get(i) {
                    None => return Err("unterminated string".into()),
                    Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                        s.push('\'');
                        i += 2;
                    }
                    Some('\'') => {
                        i += 1;
                        break;
                    }
                    Some(&x) => {
                        s.push(x);
                        i += 1;
                    }
                }
            }
            out.push(Tok::Str(s));
        } else if c == '0' && matches!(chars.get(i + 1), Some('x' | 'X')) {
            let start = i + 2;
            i = start;
            while i < chars.len() && chars[i].is_ascii_hexdigit() {
                i += 1;
            }
            out.push(Tok::Hex(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || chars[i] == '.'
                    || chars[i] == 'e'
                    || chars[i] == 'E'
                    // An exponent's sign (`1.4e-45`).
                    || (matches!(chars[i], '-' | '+')
                        && matches!(chars[i - 1], 'e' | 'E')
                        && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
            out.push(Tok::Num(chars[start..i].iter().collect()));
        } else if c == '@' {
            let start = i;
            i += 1;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '@')
            {
                i += 1;
            }
            out.push(Tok::Var(chars[start..i].iter().collect()));
        } else if c.is_alphabetic() || c == '_' || c == '#' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric()
                    || chars[i] == '_'
                    || chars[i] == '$'
                    || chars[i] == '#')
            {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect(), false));
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            if ["<>", "<=", ">=", "!=", "||"].contains(&two.as_str()) {
                out.push(Tok::Punct(two));
                i += 2;
            } else {
                out.push(Tok::Punct(c.to_string()));
                i += 1;
            }
        }
    }
    Ok(out)
}

fn is_punct(t: Option<&Tok>, p: &str) -> bool {
    matches!(t, Some(Tok::Punct(x)) if x == p)
}

/// Splits a batch into statements at top-level `;`.
pub fn statements(tokens: Vec<Tok>) -> Vec<Vec<Tok>> {
    let mut out = vec![Vec::new()];
    let mut depth = 0i32;
    for t in tokens {
        match &t {
            Tok::Punct(p) if p == "(" => depth += 1,
            Tok::Punct(p) if p == ")" => depth -= 1,
            Tok::Punct(p) if p == ";" && depth == 0 => {
                out.push(Vec::new());
                continue;
            }
            _ => {}
        }
        if let Some(last) = out.last_mut() {
            last.push(t);
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Joins `a . b . c` into one name; returns the parts and the index after them.
fn dotted(tokens: &[Tok], mut i: usize) -> (Vec<String>, usize) {
    let mut parts = Vec::new();
    while let Some(Tok::Ident(name, _)) = tokens.get(i) {
        parts.push(name.clone());
        if is_punct(tokens.get(i + 1), ".") && matches!(tokens.get(i + 2), Some(Tok::Ident(..))) {
            i += 2;
        } else {
            i += 1;
            break;
        }
    }
    (parts, i)
}

/// The index of the `)` matching the `(` at `open`.
fn matching(tokens: &[Tok], open: usize) -> Option<usize> {
    let mut depth = 0;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        if is_punct(Some(t), "(") {
            depth += 1;
        } else if is_punct(Some(t), ")") {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// A call's arguments, split at top-level commas.
fn arguments(tokens: &[Tok]) -> Vec<Vec<Tok>> {
    let mut out = vec![Vec::new()];
    let mut depth = 0;
    for t in tokens {
        if is_punct(Some(t), "(") {
            depth += 1;
        } else if is_punct(Some(t), ")") {
            depth -= 1;
        } else if is_punct(Some(t), ",") && depth == 0 {
            out.push(Vec::new());
            continue;
        }
        if let Some(last) = out.last_mut() {
            last.push(t.clone());
        }
    }
    out.retain(|a| !a.is_empty());
    out
}

/// The rewriting context: the schema names that make `a.b` a table rather than alias.column.
pub struct Names<'a> {
    pub schemas: &'a [String],
}

impl Names<'_> {
    fn is_schema(&self, s: &str) -> bool {
        self.schemas.iter().any(|x| x.eq_ignore_ascii_case(s))
    }
}

/// One statement's tokens as SQLite text.
pub fn to_sqlite(tokens: &[Tok], names: &Names) -> Result<String, String> {
    let mut out: Vec<String> = Vec::new();
    // LIMITs waiting for the end of their SELECT: (paren depth, limit text).
    let mut limits: Vec<(i32, String)> = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    let flush_limits = |out: &mut Vec<String>, limits: &mut Vec<(i32, String)>, depth: i32| {
        while limits.last().is_some_and(|(d, _)| *d == depth) {
            if let Some((_, l)) = limits.pop() {
                out.push(format!("LIMIT {l}"));
            }
        }
    };
    while i < tokens.len() {
        let t = &tokens[i];
        match t {
            Tok::Punct(p) if p == "(" => {
                depth += 1;
                out.push("(".into());
                i += 1;
            }
            Tok::Punct(p) if p == ")" => {
                flush_limits(&mut out, &mut limits, depth);
                depth -= 1;
                out.push(")".into());
                i += 1;
            }
            Tok::Punct(p) => {
                out.push(p.clone());
                i += 1;
            }
            Tok::Str(s) => {
                out.push(format!("'{}'", stored_form(s).replace('\'', "''")));
                i += 1;
            }
            Tok::Num(n) => {
                out.push(n.clone());
                i += 1;
            }
            Tok::Hex(h) => {
                out.push(format!(
                    "X'{}'",
                    if h.len() % 2 == 1 {
                        format!("0{h}")
                    } else {
                        h.clone()
                    }
                ));
                i += 1;
            }
            Tok::Raw(r) => {
                out.push(r.clone());
                i += 1;
            }
            Tok::Var(v) => {
                let n = v.trim_start_matches("@P").trim_start_matches("@p");
                if n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty() {
                    out.push(format!("?{n}"));
                } else if v.eq_ignore_ascii_case("@@VERSION") {
                    out.push(
                        "'Microsoft SQL Server 2022 (emulated by sluice-test-support)'".into(),
                    );
                } else {
                    return Err(format!("variable {v} is not emulated"));
                }
                i += 1;
            }
            Tok::Ident(word, quoted) => {
                if !quoted && word.eq_ignore_ascii_case("TOP") {
                    // TOP n / TOP (n): a LIMIT at the end of this SELECT.
                    let (limit, next) = if is_punct(tokens.get(i + 1), "(") {
                        let close = matching(tokens, i + 1).ok_or("TOP ( without )")?;
                        (to_sqlite(&tokens[i + 2..close], names)?, close + 1)
                    } else {
                        (to_sqlite(&tokens[i + 1..i + 2], names)?, i + 2)
                    };
                    limits.push((depth, limit));
                    i = next;
                    continue;
                }
                if !quoted
                    && (word.eq_ignore_ascii_case("WITH") || word.eq_ignore_ascii_case("OPTION"))
                    && is_punct(tokens.get(i + 1), "(")
                {
                    // Table hints and query options: nothing to emulate.
                    i = matching(tokens, i + 1).ok_or("WITH ( without )")? + 1;
                    continue;
                }
                let (parts, next) = dotted(tokens, i);
                // `schema.table (columns)` is a table; `sys.f(…)`, `cdc.fn_cdc_…(…)` and
                // one-part names are calls.
                let call = is_punct(tokens.get(next), "(")
                    && !(parts.len() == 1
                        && !quoted
                        && KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(word)))
                    && (parts.len() == 1
                        || parts[0].eq_ignore_ascii_case("sys")
                        || parts
                            .last()
                            .is_some_and(|p| p.to_ascii_lowercase().starts_with("fn_")));
                let parts: Vec<String> = if parts.len() >= 3 {
                    parts[parts.len() - 2..].to_vec()
                } else {
                    parts
                };
                if call {
                    let close = matching(tokens, next).ok_or("( without )")?;
                    let args = arguments(&tokens[next + 1..close]);
                    let args = args
                        .iter()
                        .map(|a| to_sqlite(a, names))
                        .collect::<Result<Vec<_>, _>>()?;
                    out.push(function(
                        parts.last().map(String::as_str).unwrap_or(""),
                        &args,
                    )?);
                    i = close + 1;
                    continue;
                }
                match parts.as_slice() {
                    [schema, table] if names.is_schema(schema) => {
                        out.push(quote(&format!("{schema}.{table}")))
                    }
                    [a, b] => out.push(format!("{}.{}", quote(a), quote(b))),
                    [one] if *quoted || one.contains('$') => out.push(quote(one)),
                    [one] => out.push(one.clone()),
                    _ => return Err("a name with no parts".into()),
                }
                i = next;
            }
        }
    }
    flush_limits(&mut out, &mut limits, 0);
    Ok(out.join(" "))
}

/// Words that a `(` may follow without making a call.
const KEYWORDS: &[&str] = &[
    "FROM",
    "IN",
    "AS",
    "VALUES",
    "OVER",
    "EXISTS",
    "AND",
    "OR",
    "NOT",
    "WHERE",
    "ON",
    "JOIN",
    "SELECT",
    "BY",
    "KEY",
    "UNIQUE",
    "CHECK",
    "INTO",
    "SET",
    "THEN",
    "ELSE",
    "WHEN",
    "REFERENCES",
    "TABLE",
    "UNION",
    "ALL",
    "ANY",
    "USING",
];

/// A function call as SQLite text.
fn function(name: &str, args: &[String]) -> Result<String, String> {
    let arg = |i: usize| {
        args.get(i)
            .cloned()
            .ok_or_else(|| format!("{name} needs argument {}", i + 1))
    };
    let lower = name.to_ascii_lowercase();
    Ok(match lower.as_str() {
        "fn_cdc_get_max_lsn" => "(SELECT max(start_lsn) FROM \"cdc.lsn_time_mapping\")".into(),
        "fn_cdc_get_min_lsn" => format!(
            "(SELECT start_lsn FROM \"cdc.change_tables\" WHERE capture_instance = {})",
            arg(0)?
        ),
        "fn_cdc_increment_lsn" => format!("emu_increment_lsn({})", arg(0)?),
        "fn_cdc_decrement_lsn" => format!("emu_decrement_lsn({})", arg(0)?),
        "fn_cdc_map_lsn_to_time" => format!(
            "(SELECT tran_end_time FROM \"cdc.lsn_time_mapping\" WHERE start_lsn = {})",
            arg(0)?
        ),
        "fn_cdc_map_time_to_lsn" => return Err("fn_cdc_map_time_to_lsn is not emulated".into()),
        "todatetimeoffset" => arg(0)?,
        "datepart" => "0".into(),
        "sysdatetimeoffset" => "(strftime('%Y-%m-%d %H:%M:%f', 'now') || ' +00:00')".into(),
        "getdate" | "sysdatetime" | "getutcdate" | "sysutcdatetime" => "strftime('%Y-%m-%d %H:%M:%f', 'now')".into(),
        "db_id" => "1".into(),
        "db_name" => "(SELECT name FROM \"sys.databases\")".into(),
        "object_id" => format!(
            "(SELECT object_id FROM \"sys.objects\" WHERE {} IN (schema_name || '.' || name, name))",
            arg(0)?
        ),
        "object_schema_name" => format!("(SELECT schema_name FROM \"sys.objects\" WHERE object_id = {})", arg(0)?),
        "object_name" => format!("(SELECT name FROM \"sys.objects\" WHERE object_id = {})", arg(0)?),
        "isnull" => format!("ifnull({}, {})", arg(0)?, arg(1)?),
        "len" => format!("length({})", arg(0)?),
        _ if lower.starts_with("fn_cdc_get_all_changes_") || lower.starts_with("fn_cdc_get_net_changes_") => {
            let instance = &name["fn_cdc_get_all_changes_".len()..];
            format!(
                "(SELECT * FROM {} WHERE \"__$start_lsn\" >= {} AND \"__$start_lsn\" <= {} AND \"__$operation\" IN (1, 2, 3, 4))",
                quote(&format!("cdc.{instance}_CT")),
                arg(0)?,
                arg(1)?
            )
        }
        _ => format!("{name}({})", args.join(", ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(sql: &str) -> String {
        let schemas = ["dbo".to_string(), "cdc".to_string(), "sys".to_string()];
        let toks = tokenize(sql).unwrap();
        to_sqlite(&toks, &Names { schemas: &schemas }).unwrap()
    }

    #[test]
    fn iso_dates_and_times_compare_as_stored() {
        assert_eq!(
            run("SELECT 1 WHERE a > '2024-01-02T03:04:05.003' AND b = 'T'"),
            "SELECT 1 WHERE a > '2024-01-02 03:04:05.003' AND b = 'T'"
        );
        assert_eq!(run("SELECT '2024-01-02Tx'"), "SELECT '2024-01-02Tx'");
    }

    #[test]
    fn names_top_and_hints() {
        assert_eq!(
            run("SELECT TOP(0) * FROM [testdb].[dbo].[customers] WITH (TABLOCKX)"),
            "SELECT * FROM \"dbo.customers\" LIMIT 0"
        );
        assert_eq!(
            run("SELECT MAX(start_lsn) FROM (SELECT TOP (@P1) start_lsn FROM [db].cdc.lsn_time_mapping WHERE tran_id <> 0x00 ORDER BY start_lsn) as next_lsns"),
            "SELECT MAX(start_lsn) FROM ( SELECT start_lsn FROM \"cdc.lsn_time_mapping\" WHERE tran_id <> X'00' ORDER BY start_lsn LIMIT ?1 ) as next_lsns"
        );
        assert_eq!(
            run("SELECT cdc_data.[__$seqval] FROM t"),
            "SELECT \"cdc_data\".\"__$seqval\" FROM t"
        );
    }

    #[test]
    fn cdc_functions() {
        assert_eq!(
            run("SELECT [db].sys.fn_cdc_get_max_lsn()"),
            "SELECT (SELECT max(start_lsn) FROM \"cdc.lsn_time_mapping\")"
        );
        assert!(run(
            "SELECT * FROM [db].cdc.[fn_cdc_get_all_changes_dbo_t](@P1, @P2, N'all update old')"
        )
        .contains("FROM \"cdc.dbo_t_CT\" WHERE \"__$start_lsn\" >= ?1 AND \"__$start_lsn\" <= ?2"));
    }
}
