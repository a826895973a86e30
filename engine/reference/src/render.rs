//! The reference's Markdown: a section per component or part, a table of its keys (type,
//! default, Debezium's name, what it does) from the doc comments and serde attributes.

use std::fmt::Write as _;
use std::path::Path;

use quote::ToTokens;
use syn::{Expr, GenericArgument, Lit, PathArguments, Type};

use crate::scan::{renamed, Field, Index, Struct};

/// How a page's tables are written.
#[derive(Clone, Copy)]
pub(crate) struct Page {
    /// Whether the keys are Debezium's (a column says which are Sluice's own).
    pub(crate) debezium: bool,
}

/// How a struct's section is shown.
#[derive(Clone, Copy)]
pub(crate) struct Shown<'a> {
    /// What stands before its keys.
    pub(crate) prefix: &'a str,
    /// Whether its file's doc comment comes first.
    pub(crate) module_doc: bool,
}

/// Keys without a doc comment, found while rendering (each `struct.field`).
pub(crate) type Undocumented = Vec<String>;

/// The section of struct `s`: its heading, its doc, its keys.
pub(crate) fn section(
    index: &Index,
    (heading, s, how): (&str, &Struct, Shown<'_>),
    page: Page,
    undocumented: &mut Undocumented,
) -> String {
    let mut out = format!("{heading}\n\n");
    // A component's file (its `config.rs`) says what the component is; a part's struct does.
    for intro in [how.module_doc.then_some(&s.module_doc), Some(&s.doc)]
        .into_iter()
        .flatten()
    {
        if !intro.is_empty() {
            out.push_str(&paragraphs(intro));
            out.push_str("\n\n");
        }
    }
    let mut rows = Vec::new();
    let mut parts = Vec::new();
    keys(index, s, how.prefix, &mut rows, &mut parts, undocumented);
    if !rows.is_empty() {
        if page.debezium {
            out.push_str(
                "| key | type | default | Debezium | description |\n|---|---|---|---|---|\n",
            );
        } else {
            out.push_str("| key | type | default | description |\n|---|---|---|---|\n");
        }
        for row in rows {
            let own = row.description.contains("Sluice's own");
            let debezium = if own { "Sluice's own" } else { "same" };
            let cells = if page.debezium {
                vec![
                    row.key,
                    row.ty,
                    row.default,
                    debezium.to_owned(),
                    row.description,
                ]
            } else {
                vec![row.key, row.ty, row.default, row.description]
            };
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out.push('\n');
    }
    for (what, part) in parts {
        let link = match crate::part_link(&part) {
            Some((file, heading)) => format!("[{heading}]({file}#{})", anchor(heading)),
            None => format!("`{part}`"),
        };
        let _ = writeln!(out, "Also read from the same block: {what} ({link}).\n");
    }
    out
}

/// One key's row.
struct Row {
    key: String,
    ty: String,
    default: String,
    description: String,
}

fn keys(
    index: &Index,
    s: &Struct,
    prefix: &str,
    rows: &mut Vec<Row>,
    parts: &mut Vec<(String, String)>,
    undocumented: &mut Undocumented,
) {
    for f in &s.fields {
        let inner = unwrap_option(&f.ty);
        let named = type_name(inner);
        let nested = named
            .as_deref()
            .filter(|n| scalar(n).is_none())
            .and_then(|n| index.struct_near(n, &s.file))
            .filter(|n| n.name != s.name && n.derives);
        if f.skip {
            if let Some(part) = nested {
                parts.push((first_sentence(&f.doc), part.name.clone()));
            }
            continue;
        }
        if named.as_ref().is_some_and(|n| s.generics.contains(n)) {
            continue;
        }
        let key = format!(
            "{prefix}{}",
            f.rename
                .clone()
                .unwrap_or_else(|| renamed(&f.ident, s.rename_all.as_deref()))
        );
        if let Some(part) = nested {
            let prefix = if f.flatten {
                prefix.to_owned()
            } else {
                format!("{key}.")
            };
            keys(index, part, &prefix, rows, parts, undocumented);
            continue;
        }
        if f.doc.is_empty() {
            undocumented.push(format!("{}.{}", s.name, f.ident));
        }
        let mut description = one_line(&f.doc);
        if !f.aliases.is_empty() {
            let aliases: Vec<String> = f.aliases.iter().map(|a| format!("`{prefix}{a}`")).collect();
            let _ = write!(description, " Also read as {}.", aliases.join(", "));
        }
        if let Some(values) = variant_docs(index, inner, &description, &s.file) {
            description.push(' ');
            description.push_str(&values);
        }
        // A list of blocks: each entry's keys follow, as `key[].entry_key`.
        let entries = (generic_of(inner, "Vec").and_then(type_name))
            .and_then(|n| index.struct_near(&n, &s.file))
            .filter(|n| n.name != s.name && n.derives);
        rows.push(Row {
            key: format!("`{key}`"),
            ty: match entries {
                Some(_) => "list of blocks (their keys below)".to_owned(),
                None => kind(index, inner, &s.file),
            },
            default: match s.derives {
                true => default(index, f, &s.file),
                // A block read its own way: its doc says the default.
                false => "—".into(),
            },
            description: description.trim().to_owned(),
        });
        if let Some(entry) = entries {
            keys(
                index,
                entry,
                &format!("{key}[]."),
                rows,
                parts,
                undocumented,
            );
        }
    }
}

/// What each value of an enum does, where the key's own doc does not name them all.
fn variant_docs(index: &Index, ty: &Type, said: &str, file: &Path) -> Option<String> {
    let e = index.enum_near(&type_name(ty)?, file)?;
    if e.variants
        .iter()
        .all(|(n, _)| said.contains(&format!("`{n}`")))
    {
        return None;
    }
    let documented: Vec<String> = (e.variants.iter())
        .filter(|(_, d)| !d.is_empty())
        .map(|(n, d)| format!("`{n}`: {}", one_line(d).trim_end_matches('.')))
        .collect();
    (!documented.is_empty()).then(|| documented.join("; ") + ".")
}

/// `T` of `Option<T>`, else the type.
fn unwrap_option(ty: &Type) -> &Type {
    generic_of(ty, "Option").unwrap_or(ty)
}

fn generic_of<'t>(ty: &'t Type, wrapper: &str) -> Option<&'t Type> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != wrapper {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    args.args.iter().find_map(|a| match a {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    })
}

fn type_name(ty: &Type) -> Option<String> {
    let Type::Path(p) = ty else { return None };
    p.path.segments.last().map(|s| s.ident.to_string())
}

fn is_option(ty: &Type) -> bool {
    generic_of(ty, "Option").is_some()
}

/// What a value of `ty` is, in words.
fn kind(index: &Index, ty: &Type, file: &Path) -> String {
    if let Some(item) = generic_of(ty, "Vec") {
        let item = kind(index, item, file);
        return match item.len() {
            1 => "list of blocks".to_owned(),
            _ => format!("list of {item}"),
        };
    }
    let name = type_name(ty).unwrap_or_default();
    if let Some(words) = scalar(&name) {
        return words.to_owned();
    }
    match index.enum_near(&name, file) {
        Some(e) => {
            let names: Vec<String> = e.variants.iter().map(|(n, _)| format!("`{n}`")).collect();
            format!("one of {}", names.join(", "))
        }
        None => name,
    }
}

/// The values that are not blocks of keys, in words.
fn scalar(name: &str) -> Option<&'static str> {
    Some(match name {
        "bool" => "boolean",
        "u8" | "u16" | "u32" | "u64" | "usize" | "i16" | "i32" | "i64" | "NonZeroU32"
        | "NonZeroUsize" => "integer",
        "f32" | "f64" => "number",
        "String" | "str" | "Arc" => "text",
        "PathBuf" => "path",
        "Secret" => "secret (never logged)",
        "RegexList" => "anchored regexes, comma-separated or a list",
        "AnchoredRegex" | "Regex" => "regex",
        "DurationSpec" => "duration",
        "ByteSize" => "size",
        "Properties" | "BTreeMap" | "HashMap" => "map",
        "FieldList" => "field names, comma-separated",
        "SubjectStrategy" => "subject name strategy",
        _ => return None,
    })
}

/// The default of field `f`: its default function's value, its type's, or `required`.
fn default(index: &Index, f: &Field, file: &Path) -> String {
    match &f.default {
        None if is_option(&f.ty) => "—".into(),
        None => "required".into(),
        Some(Some(function)) => {
            let name = function.rsplit("::").next().unwrap_or(function);
            match index.default_near(name, file) {
                Some(expr) => format!("`{}`", value(expr)),
                None => format!("`{function}()`"),
            }
        }
        Some(None) => type_default(index, &f.ty, file),
    }
}

fn type_default(index: &Index, ty: &Type, file: &Path) -> String {
    if is_option(ty) || generic_of(ty, "Vec").is_some() {
        return "—".into();
    }
    let name = type_name(ty).unwrap_or_default();
    match name.as_str() {
        "bool" => "`false`".into(),
        "u8" | "u16" | "u32" | "u64" | "usize" | "i16" | "i32" | "i64" | "f32" | "f64" => {
            "`0`".into()
        }
        "String" => "`\"\"`".into(),
        "RegexList" | "Properties" | "BTreeMap" | "HashMap" => "—".into(),
        other => match index.enum_near(other, file).and_then(|e| e.default.clone()) {
            Some(d) => format!("`{d}`"),
            None => "—".into(),
        },
    }
}

/// A default function's expression as the value it gives: literals as written, durations
/// as `500ms`, conversions left out.
fn value(expr: &Expr) -> String {
    match expr {
        Expr::Lit(l) => match &l.lit {
            Lit::Str(s) => s.value(),
            Lit::Int(i) => i.base10_digits().to_owned(),
            Lit::Float(f) => f.base10_digits().to_owned(),
            Lit::Bool(b) => b.value.to_string(),
            other => other.to_token_stream().to_string(),
        },
        Expr::MethodCall(m)
            if ["into", "to_owned", "to_string"].contains(&m.method.to_string().as_str()) =>
        {
            value(&m.receiver)
        }
        Expr::Call(c) => {
            let function = c.func.to_token_stream().to_string().replace(' ', "");
            let arg = c.args.first().map(value).unwrap_or_default();
            match function.rsplit("::").next().unwrap_or_default() {
                "from_millis" => format!("{arg}ms"),
                "from_secs" => format!("{arg}s"),
                "ByteSize" => size(&arg),
                "Some" | "DurationSpec" | "from" | "new" => arg,
                _ => expr.to_token_stream().to_string(),
            }
        }
        Expr::Paren(p) => value(&p.expr),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => format!("-{}", value(&u.expr)),
        // `Mode::AdaptiveTimeMicroseconds` as the name the configuration reads; constants
        // by what they are.
        Expr::Path(p) => match p.path.segments.last().map(|s| s.ident.to_string()) {
            Some(last) if last == "ZERO" => "0".to_owned(),
            Some(last) if p.path.segments.len() > 1 => snake(&last),
            _ => expr.to_token_stream().to_string(),
        },
        // `vec!["customers".to_owned()]` as `[customers]`.
        Expr::Macro(m) if m.mac.path.is_ident("vec") => {
            let items = m.mac.parse_body_with(
                syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated,
            );
            match items {
                Ok(items) => format!(
                    "[{}]",
                    items.iter().map(value).collect::<Vec<_>>().join(", ")
                ),
                Err(_) => expr.to_token_stream().to_string(),
            }
        }
        Expr::Binary(b) => match (
            value(&b.left).parse::<u64>(),
            value(&b.right).parse::<u64>(),
        ) {
            (Ok(l), Ok(r)) => match b.op {
                syn::BinOp::Shl(_) => l.checked_shl(u32::try_from(r).unwrap_or(64)),
                syn::BinOp::Mul(_) => l.checked_mul(r),
                syn::BinOp::Add(_) => l.checked_add(r),
                _ => None,
            }
            .map_or_else(|| expr.to_token_stream().to_string(), |v| v.to_string()),
            _ => expr.to_token_stream().to_string(),
        },
        other => other.to_token_stream().to_string(),
    }
}

/// `AdaptiveTimeMicroseconds` as `adaptive_time_microseconds` (serde's `snake_case`).
fn snake(ident: &str) -> String {
    let mut out = String::with_capacity(ident.len() + 4);
    for (i, c) in ident.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A byte count as the configuration writes sizes (`4MiB`).
fn size(bytes: &str) -> String {
    let Ok(n) = bytes.parse::<u64>() else {
        return bytes.to_owned();
    };
    for (unit, scale) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= scale && n % scale == 0 {
            return format!("{}{unit}", n / scale);
        }
    }
    n.to_string()
}

/// A doc comment on one line, for a table cell.
fn one_line(doc: &str) -> String {
    let line = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    unlink(&line).replace('|', "\\|")
}

/// Rustdoc's links to items (`[`read`]`) as plain code: they lead nowhere in the reference.
fn unlink(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("[`") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after[1..].find("`]") {
            Some(j) if !after[1 + j + 2..].starts_with('(') => {
                out.push_str(&after[..j + 2]);
                rest = &after[j + 3..];
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A doc comment's paragraphs, each on one line.
fn paragraphs(doc: &str) -> String {
    let mut out = Vec::new();
    let mut current = Vec::new();
    for line in doc.lines() {
        let t = line.trim();
        if t.is_empty() {
            if !current.is_empty() {
                out.push(current.join(" "));
                current.clear();
            }
        } else if t.starts_with("- ") && !current.is_empty() {
            out.push(current.join(" "));
            current = vec![t.to_owned()];
        } else {
            current.push(t.to_owned());
        }
    }
    if !current.is_empty() {
        out.push(current.join(" "));
    }
    unlink(&out.join("\n\n").replace("\n\n- ", "\n- "))
}

fn first_sentence(doc: &str) -> String {
    let line = one_line(doc);
    let end = line.find(". ").map_or(line.len(), |i| i + 1);
    line[..end].trim_end_matches('.').to_owned()
}

/// The Markdown anchor of a heading made of `text`.
pub(crate) fn anchor(text: &str) -> String {
    text.to_ascii_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}
