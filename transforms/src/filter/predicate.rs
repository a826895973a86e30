//! The filter's predicate language: comparisons over event fields, combined with `&&`, `||`,
//! `!` (or `and`, `or`, `not`) and parentheses.
//!
//! ```text
//! after.status == 'shipped' && source.table =~ 'orders.*'
//! op != 'd' and (after.amount >= 100 or key.id < 10)
//! before.email is not null
//! ```
//!
//! Paths: `topic`, `key.<field>`, `value.<field>`, or a field of the value (`op`, `after.x`,
//! `source.table`, ...). Literals: 'text' or "text", numbers, `true`, `false`, `null`.
//! `=~` / `!~` match an anchored regex (the whole value), like Debezium's selectors.

use regex::Regex;
use sluice_engine::{ChangeEvent, Value};

/// A parse error: what is wrong and at which character (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based character position in the expression.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at character {}: {}", self.column, self.message)
    }
}

/// A compiled predicate.
#[derive(Debug, Clone)]
pub enum Expr {
    /// Both.
    And(Box<Expr>, Box<Expr>),
    /// Either.
    Or(Box<Expr>, Box<Expr>),
    /// Not.
    Not(Box<Expr>),
    /// A comparison.
    Cmp(Operand, CmpOp, Operand),
    /// Regex match (negated when the flag is set).
    Match(Operand, Box<Regex>, bool),
    /// Null check (negated when the flag is set).
    IsNull(Operand, bool),
    /// A bare operand: true when it is the boolean `true`.
    Truthy(Operand),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// A path or a literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// Dotted field path.
    Path(Vec<String>),
    /// Literal.
    Lit(Lit),
}

/// A literal or an evaluated value.
#[derive(Debug, Clone, PartialEq)]
pub enum Lit {
    /// null.
    Null,
    /// Boolean.
    Bool(bool),
    /// Number.
    Num(f64),
    /// Text.
    Str(String),
    /// A struct, array, map or bytes: not null, not comparable.
    Other,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Num(f64),
    Op(&'static str),
    LParen,
    RParen,
    End,
}

fn lex(src: &str) -> Result<Vec<(usize, Tok)>, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |i: usize, m: String| ParseError {
        column: i + 1,
        message: m,
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let two: String = chars[i..chars.len().min(i + 2)].iter().collect();
        let op = ["==", "!=", "<=", ">=", "=~", "!~", "&&", "||"]
            .into_iter()
            .find(|o| *o == two);
        if let Some(op) = op {
            out.push((start, Tok::Op(op)));
            i += 2;
            continue;
        }
        match c {
            '(' => out.push((start, Tok::LParen)),
            ')' => out.push((start, Tok::RParen)),
            '<' => out.push((start, Tok::Op("<"))),
            '>' => out.push((start, Tok::Op(">"))),
            '!' => out.push((start, Tok::Op("!"))),
            '=' => return Err(err(i, "`=` is not an operator: use `==` to compare".into())),
            '\'' | '"' => {
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(err(start, "unterminated string".into())),
                        Some('\\') if chars.get(i + 1).is_some() => {
                            s.push(chars[i + 1]);
                            i += 2;
                        }
                        Some(q) if *q == c => break,
                        Some(other) => {
                            s.push(*other);
                            i += 1;
                        }
                    }
                }
                out.push((start, Tok::Str(s)));
            }
            c if c.is_ascii_digit()
                || (c == '-' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())) =>
            {
                let mut j = i + 1;
                while j < chars.len()
                    && (chars[j].is_ascii_digit()
                        || chars[j] == '.'
                        || chars[j] == 'e'
                        || chars[j] == 'E')
                {
                    j += 1;
                }
                let text: String = chars[i..j].iter().collect();
                let n = text
                    .parse::<f64>()
                    .map_err(|_| err(i, format!("`{text}` is not a number")))?;
                out.push((start, Tok::Num(n)));
                i = j;
                continue;
            }
            c if c.is_alphabetic() || c == '_' => {
                let mut j = i;
                while j < chars.len()
                    && (chars[j].is_alphanumeric() || matches!(chars[j], '_' | '.' | '$'))
                {
                    j += 1;
                }
                out.push((start, Tok::Ident(chars[i..j].iter().collect())));
                i = j;
                continue;
            }
            other => return Err(err(i, format!("unexpected `{other}`"))),
        }
        i += 1;
    }
    out.push((chars.len(), Tok::End));
    Ok(out)
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    pos: usize,
    /// Parentheses and negations open around the current position.
    depth: usize,
    /// `&&` and `||` so far (each makes the expression one level deeper).
    joins: usize,
}

/// How many `&&` and `||` a condition may have.
const MAX_JOINS: usize = 1024;

/// How deep parentheses and negations may nest: the parser and the expression it builds
/// recurse once per level, and a condition nested deeper is a mistake, not a filter.
const MAX_DEPTH: usize = 64;

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos.min(self.toks.len() - 1)].1
    }
    fn at(&self) -> usize {
        self.toks[self.pos.min(self.toks.len() - 1)].0 + 1
    }
    fn next(&mut self) -> Tok {
        let t = self.peek().clone();
        self.pos += 1;
        t
    }
    fn fail<T>(&self, message: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError {
            column: self.at(),
            message: message.into(),
        })
    }
    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Ident(i) if i.eq_ignore_ascii_case(w))
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.and()?;
        while matches!(self.peek(), Tok::Op("||")) || self.is_word("or") {
            self.next();
            self.join()?;
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.not()?;
        while matches!(self.peek(), Tok::Op("&&")) || self.is_word("and") {
            self.next();
            self.join()?;
            left = Expr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    /// One more `&&` or `||`, refused past [`MAX_JOINS`].
    fn join(&mut self) -> Result<(), ParseError> {
        self.joins += 1;
        if self.joins > MAX_JOINS {
            return self.fail(format!(
                "more than {MAX_JOINS} `&&` and `||`: a condition nested this deep is refused"
            ));
        }
        Ok(())
    }

    /// One level deeper, refused past [`MAX_DEPTH`].
    fn deeper(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.fail(format!(
                "parentheses and negations nested more than {MAX_DEPTH} levels deep"
            ));
        }
        Ok(())
    }

    fn not(&mut self) -> Result<Expr, ParseError> {
        if matches!(self.peek(), Tok::Op("!")) || self.is_word("not") {
            self.next();
            self.deeper()?;
            let inner = self.not()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.cmp()
    }

    fn cmp(&mut self) -> Result<Expr, ParseError> {
        if matches!(self.peek(), Tok::LParen) {
            self.next();
            self.deeper()?;
            let inner = self.or()?;
            self.depth -= 1;
            if !matches!(self.next(), Tok::RParen) {
                self.pos -= 1;
                return self.fail("expected `)`");
            }
            return Ok(inner);
        }
        let left = self.operand()?;
        if self.is_word("is") {
            self.next();
            let negated = self.is_word("not");
            if negated {
                self.next();
            }
            if !self.is_word("null") {
                return self.fail("expected `null` after `is`");
            }
            self.next();
            return Ok(Expr::IsNull(left, negated));
        }
        let op = match self.peek() {
            Tok::Op(o @ ("==" | "!=" | "<" | "<=" | ">" | ">=" | "=~" | "!~")) => *o,
            _ => return Ok(Expr::Truthy(left)),
        };
        self.next();
        if op == "=~" || op == "!~" {
            let Tok::Str(pattern) = self.peek().clone() else {
                return self.fail(format!("expected a quoted regex after `{op}`"));
            };
            let regex = Regex::new(&format!("^(?:{pattern})$")).or_else(|e| {
                self.fail(format!(
                    "invalid regex: {}",
                    e.to_string().lines().last().unwrap_or("invalid")
                ))
            })?;
            self.next();
            return Ok(Expr::Match(left, Box::new(regex), op == "!~"));
        }
        let right = self
            .operand()
            .or_else(|_| self.fail(format!("expected a value after `{op}`")))?;
        let op = match op {
            "==" => CmpOp::Eq,
            "!=" => CmpOp::Ne,
            "<" => CmpOp::Lt,
            "<=" => CmpOp::Le,
            ">" => CmpOp::Gt,
            _ => CmpOp::Ge,
        };
        Ok(Expr::Cmp(left, op, right))
    }

    fn operand(&mut self) -> Result<Operand, ParseError> {
        match self.peek().clone() {
            Tok::Str(s) => {
                self.next();
                Ok(Operand::Lit(Lit::Str(s)))
            }
            Tok::Num(n) => {
                self.next();
                Ok(Operand::Lit(Lit::Num(n)))
            }
            Tok::Ident(w) => {
                let lit = match w.to_ascii_lowercase().as_str() {
                    "true" => Some(Lit::Bool(true)),
                    "false" => Some(Lit::Bool(false)),
                    "null" => Some(Lit::Null),
                    "and" | "or" | "not" | "is" => {
                        return self.fail(format!("expected a field or a value, found `{w}`"))
                    }
                    _ => None,
                };
                self.next();
                if let Some(lit) = lit {
                    return Ok(Operand::Lit(lit));
                }
                if w.split('.').any(str::is_empty) {
                    self.pos -= 1;
                    return self.fail(format!("`{w}` is not a field path"));
                }
                Ok(Operand::Path(w.split('.').map(str::to_owned).collect()))
            }
            Tok::End => self.fail("expected a field or a value, found the end"),
            other => self.fail(format!(
                "expected a field or a value, found {}",
                describe(&other)
            )),
        }
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Op(o) => format!("`{o}`"),
        Tok::LParen => "`(`".into(),
        Tok::RParen => "`)`".into(),
        Tok::End => "the end".into(),
        Tok::Ident(i) => format!("`{i}`"),
        Tok::Str(s) => format!("'{s}'"),
        Tok::Num(n) => n.to_string(),
    }
}

/// Parses an expression.
pub fn parse(src: &str) -> Result<Expr, ParseError> {
    let mut p = Parser {
        toks: lex(src)?,
        pos: 0,
        depth: 0,
        joins: 0,
    };
    let expr = p.or()?;
    if !matches!(p.peek(), Tok::End) {
        let found = describe(p.peek());
        return p.fail(format!("expected `&&`, `||` or the end, found {found}"));
    }
    Ok(expr)
}

fn lit_of(v: &Value) -> Lit {
    match v {
        Value::Null => Lit::Null,
        Value::Boolean(b) => Lit::Bool(*b),
        Value::Int8(n) => Lit::Num(f64::from(*n)),
        Value::Int16(n) => Lit::Num(f64::from(*n)),
        Value::Int32(n) => Lit::Num(f64::from(*n)),
        Value::Int64(n) => Lit::Num(*n as f64),
        Value::Float32(n) => Lit::Num(f64::from(*n)),
        Value::Float64(n) => Lit::Num(*n),
        Value::String(s) => Lit::Str(s.to_string()),
        _ => Lit::Other,
    }
}

fn resolve(event: &ChangeEvent, path: &[String]) -> Lit {
    let (root, rest) = match path.split_first() {
        Some(p) => p,
        None => return Lit::Null,
    };
    let value_struct = event.value.as_ref().map(|r| &r.value);
    let (start, rest): (Option<&Value>, &[String]) = match root.as_str() {
        "topic" if rest.is_empty() => return Lit::Str(event.topic.to_string()),
        "key" => (event.key.as_ref().map(|r| &r.value), rest),
        "value" => (value_struct, rest),
        _ => (value_struct, path),
    };
    let mut current = match start {
        Some(v) => v,
        None => return Lit::Null,
    };
    for name in rest {
        current = match current.as_struct().and_then(|s| s.get(name)) {
            Some(v) => v,
            None => return Lit::Null,
        };
    }
    lit_of(current)
}

fn operand(event: &ChangeEvent, o: &Operand) -> Lit {
    match o {
        Operand::Lit(l) => l.clone(),
        Operand::Path(p) => resolve(event, p),
    }
}

fn compare(a: &Lit, op: CmpOp, b: &Lit) -> bool {
    use std::cmp::Ordering;
    let ord: Option<Ordering> = match (a, b) {
        (Lit::Num(x), Lit::Num(y)) => x.partial_cmp(y),
        (Lit::Str(x), Lit::Str(y)) => Some(x.cmp(y)),
        (Lit::Bool(x), Lit::Bool(y)) => Some(x.cmp(y)),
        (Lit::Null, Lit::Null) => Some(Ordering::Equal),
        _ => None,
    };
    match (op, ord) {
        (CmpOp::Eq, o) => o == Some(Ordering::Equal),
        (CmpOp::Ne, o) => o != Some(Ordering::Equal),
        (_, None) => false,
        (_, _) if matches!(a, Lit::Null) || matches!(b, Lit::Null) => false,
        (CmpOp::Lt, Some(o)) => o == Ordering::Less,
        (CmpOp::Le, Some(o)) => o != Ordering::Greater,
        (CmpOp::Gt, Some(o)) => o == Ordering::Greater,
        (CmpOp::Ge, Some(o)) => o != Ordering::Less,
    }
}

impl Expr {
    /// Evaluates the predicate on an event.
    pub fn eval(&self, event: &ChangeEvent) -> bool {
        match self {
            Expr::And(a, b) => a.eval(event) && b.eval(event),
            Expr::Or(a, b) => a.eval(event) || b.eval(event),
            Expr::Not(a) => !a.eval(event),
            Expr::Cmp(a, op, b) => compare(&operand(event, a), *op, &operand(event, b)),
            Expr::Match(a, regex, negated) => {
                let text = match operand(event, a) {
                    Lit::Str(s) => Some(s),
                    Lit::Num(n) => Some(n.to_string()),
                    Lit::Bool(b) => Some(b.to_string()),
                    Lit::Null | Lit::Other => None,
                };
                text.is_some_and(|t| regex.is_match(&t)) != *negated
            }
            Expr::IsNull(a, negated) => (operand(event, a) == Lit::Null) != *negated,
            Expr::Truthy(a) => operand(event, a) == Lit::Bool(true),
        }
    }
}
