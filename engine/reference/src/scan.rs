//! Reads the config types out of the repository's Rust files: every struct and enum that
//! derives `Deserialize` with its doc comments and serde attributes, the functions that give
//! defaults, and the components the `impl_component!` macro registers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use syn::{Attribute, Expr, Fields, Item, Lit, Type};

/// A field of a config struct as serde reads it.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    /// The Rust name.
    pub(crate) ident: String,
    /// `#[serde(rename)]`.
    pub(crate) rename: Option<String>,
    pub(crate) aliases: Vec<String>,
    /// `None`: no `default` (required unless an `Option`); `Some(None)`: `#[serde(default)]`;
    /// `Some(Some(f))`: `#[serde(default = "f")]`.
    pub(crate) default: Option<Option<String>>,
    /// `#[serde(skip)]` (or `skip_deserializing`): not a key; a part read beside.
    pub(crate) skip: bool,
    pub(crate) flatten: bool,
    pub(crate) ty: Type,
    pub(crate) doc: String,
}

/// A config struct.
#[derive(Debug, Clone)]
pub(crate) struct Struct {
    pub(crate) name: String,
    pub(crate) doc: String,
    /// The doc comment of the file it is in (`//!`).
    pub(crate) module_doc: String,
    pub(crate) rename_all: Option<String>,
    pub(crate) fields: Vec<Field>,
    /// The file, relative to the repository.
    pub(crate) file: PathBuf,
    /// Its type parameters (a field of one of them is a component block, not a key).
    pub(crate) generics: Vec<String>,
    /// Whether it derives `Deserialize` (a block of keys; else a value read its own way).
    pub(crate) derives: bool,
}

/// A config enum: its variants as serde names them, the default one, and their docs.
#[derive(Debug, Clone)]
pub(crate) struct Enum {
    pub(crate) variants: Vec<(String, String)>,
    pub(crate) default: Option<String>,
}

/// A component `impl_component!` registers.
#[derive(Debug, Clone)]
pub(crate) struct Component {
    /// `Source`, `Sink`, `Transform`.
    pub(crate) role: String,
    /// Its `type`.
    pub(crate) kind: String,
    /// Its config struct.
    pub(crate) config: String,
    pub(crate) file: PathBuf,
}

/// What the scan found.
#[derive(Debug, Default)]
pub(crate) struct Index {
    pub(crate) structs: BTreeMap<String, Vec<Struct>>,
    /// Enums by name, with the file each is in (several share a name: `SslMode`).
    pub(crate) enums: BTreeMap<String, Vec<(PathBuf, Enum)>>,
    /// Default functions by name: their body's single expression.
    pub(crate) defaults: BTreeMap<String, Vec<(PathBuf, Expr)>>,
    pub(crate) components: Vec<Component>,
}

impl Index {
    /// Scans the Rust files under `dirs` (relative to `root`), tests left out.
    pub(crate) fn scan(root: &Path, dirs: &[&str]) -> Result<Index, String> {
        let mut files = Vec::new();
        for dir in dirs {
            collect(&root.join(dir), &mut files)?;
        }
        files.sort();
        let mut index = Index::default();
        for file in files {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let parsed = syn::parse_file(&text)
                .map_err(|e| format!("cannot parse {}: {e}", file.display()))?;
            let relative = file.strip_prefix(root).unwrap_or(&file).to_path_buf();
            let module_doc = doc(&parsed.attrs);
            index.items(&parsed.items, &relative, &module_doc);
        }
        Ok(index)
    }

    fn items(&mut self, items: &[Item], file: &Path, module_doc: &str) {
        for item in items {
            match item {
                Item::Struct(s) => {
                    let container = serde_attrs(&s.attrs);
                    let fields = match &s.fields {
                        Fields::Named(named) => named.named.iter().filter_map(field).collect(),
                        // A newtype (`#[serde(transparent)]`): the keys of the type it wraps.
                        Fields::Unnamed(one) if one.unnamed.len() == 1 => (one.unnamed.iter())
                            .map(|f| Field {
                                ident: "0".into(),
                                rename: None,
                                aliases: Vec::new(),
                                default: None,
                                skip: false,
                                flatten: true,
                                ty: f.ty.clone(),
                                doc: String::new(),
                            })
                            .collect(),
                        _ => continue,
                    };
                    let name = s.ident.to_string();
                    self.structs.entry(name.clone()).or_default().push(Struct {
                        name,
                        doc: doc(&s.attrs),
                        module_doc: module_doc.to_owned(),
                        rename_all: container.rename_all,
                        fields,
                        file: file.to_path_buf(),
                        generics: s
                            .generics
                            .type_params()
                            .map(|p| p.ident.to_string())
                            .collect(),
                        derives: derives_deserialize(&s.attrs),
                    });
                }
                Item::Enum(e) if derives_deserialize(&e.attrs) => {
                    let container = serde_attrs(&e.attrs);
                    let mut variants = Vec::new();
                    let mut default = None;
                    for v in &e.variants {
                        let attrs = serde_attrs(&v.attrs);
                        if attrs.skip {
                            continue;
                        }
                        let ident = v.ident.to_string();
                        let name = attrs
                            .rename
                            .unwrap_or_else(|| renamed(&ident, container.rename_all.as_deref()));
                        if v.attrs.iter().any(|a| a.path().is_ident("default")) {
                            default = Some(name.clone());
                        }
                        variants.push((name, doc(&v.attrs)));
                    }
                    let found = self.enums.entry(e.ident.to_string()).or_default();
                    found.push((file.to_path_buf(), Enum { variants, default }));
                }
                Item::Fn(f) => {
                    if let [syn::Stmt::Expr(expr, None)] = f.block.stmts.as_slice() {
                        let entry = self.defaults.entry(f.sig.ident.to_string()).or_default();
                        entry.push((file.to_path_buf(), expr.clone()));
                    }
                }
                Item::Macro(m)
                    if m.mac
                        .path
                        .segments
                        .last()
                        .is_some_and(|s| s.ident == "impl_component") =>
                {
                    if let Ok((config, role, kind)) = m.mac.parse_body_with(component_head) {
                        self.components.push(Component {
                            role,
                            kind,
                            config,
                            file: file.to_path_buf(),
                        });
                    }
                }
                Item::Mod(m) if !is_test(&m.attrs) => {
                    if let Some((_, items)) = &m.content {
                        self.items(items, file, module_doc);
                    }
                }
                _ => {}
            }
        }
    }

    /// The struct `name`, the one nearest `near` (same file, then same folder) when several
    /// share the name.
    pub(crate) fn struct_near(&self, name: &str, near: &Path) -> Option<&Struct> {
        let found = self.structs.get(name)?;
        let dir = near.parent();
        found
            .iter()
            .find(|s| s.file == near)
            .or_else(|| found.iter().find(|s| s.file.parent() == dir))
            .or_else(|| found.first())
    }

    /// The enum `name`, the one nearest `near` (same file, then same folder, then the parent
    /// folder) when several share the name.
    pub(crate) fn enum_near(&self, name: &str, near: &Path) -> Option<&Enum> {
        let found = self.enums.get(name)?;
        let dir = near.parent();
        let parent = dir.and_then(Path::parent);
        (found.iter().find(|(f, _)| f == near))
            .or_else(|| found.iter().find(|(f, _)| f.parent() == dir))
            .or_else(|| (found.iter()).find(|(f, _)| f.parent().and_then(Path::parent) == parent))
            .or_else(|| found.first())
            .map(|(_, e)| e)
    }

    /// The expression of the default function `name`, the one nearest `near`.
    pub(crate) fn default_near(&self, name: &str, near: &Path) -> Option<&Expr> {
        let found = self.defaults.get(name)?;
        found
            .iter()
            .find(|(f, _)| f == near)
            .or_else(|| found.iter().find(|(f, _)| f.parent() == near.parent()))
            .or_else(|| found.first())
            .map(|(_, e)| e)
    }
}

/// `Config, Role, "kind", …`.
fn component_head(input: syn::parse::ParseStream<'_>) -> syn::Result<(String, String, String)> {
    let config: syn::Path = input.parse()?;
    input.parse::<syn::Token![,]>()?;
    let role: syn::Ident = input.parse()?;
    input.parse::<syn::Token![,]>()?;
    let kind: syn::LitStr = input.parse()?;
    input.parse::<proc_macro2::TokenStream>()?;
    let last = config.segments.last().map(|s| s.ident.to_string());
    Ok((last.unwrap_or_default(), role.to_string(), kind.value()))
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if !["tests", "target", "benches", "fuzz", "reference"].contains(&name) {
                collect(&path, out)?;
            }
        } else if name.ends_with(".rs") && !name.ends_with("tests.rs") {
            out.push(path);
        }
    }
    Ok(())
}

fn is_test(attrs: &[Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.meta.to_token_stream_string().contains("test"))
}

trait MetaText {
    fn to_token_stream_string(&self) -> String;
}

impl MetaText for syn::Meta {
    fn to_token_stream_string(&self) -> String {
        quote::ToTokens::to_token_stream(self).to_string()
    }
}

fn derives_deserialize(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("derive") && a.meta.to_token_stream_string().contains("Deserialize")
    })
}

/// The doc comment: lines joined, one space after `///` dropped, paragraphs kept.
pub(crate) fn doc(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for a in attrs {
        if !a.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &a.meta {
            if let Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) = &nv.value
            {
                let v = s.value();
                lines.push(v.strip_prefix(' ').unwrap_or(&v).to_owned());
            }
        }
    }
    lines.join("\n").trim().to_owned()
}

/// The serde attributes of an item.
#[derive(Default)]
struct SerdeAttrs {
    rename: Option<String>,
    rename_all: Option<String>,
    aliases: Vec<String>,
    default: Option<Option<String>>,
    skip: bool,
    flatten: bool,
}

fn serde_attrs(attrs: &[Attribute]) -> SerdeAttrs {
    let mut out = SerdeAttrs::default();
    for a in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = a.parse_nested_meta(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            let value = if meta.input.peek(syn::Token![=]) {
                let expr: Expr = meta.value()?.parse()?;
                match expr {
                    Expr::Lit(syn::ExprLit {
                        lit: Lit::Str(s), ..
                    }) => Some(s.value()),
                    _ => None,
                }
            } else {
                if meta.input.peek(syn::token::Paren) {
                    meta.parse_nested_meta(|inner| {
                        if inner.input.peek(syn::Token![=]) {
                            let _: Expr = inner.value()?.parse()?;
                        }
                        Ok(())
                    })?;
                }
                None
            };
            match key.as_str() {
                "rename" => out.rename = value,
                "rename_all" => out.rename_all = value,
                "alias" => out.aliases.extend(value),
                "default" => out.default = Some(value),
                "skip" | "skip_deserializing" => out.skip = true,
                "flatten" => out.flatten = true,
                _ => {}
            }
            Ok(())
        });
    }
    out
}

fn field(f: &syn::Field) -> Option<Field> {
    let attrs = serde_attrs(&f.attrs);
    Some(Field {
        ident: f.ident.as_ref()?.to_string(),
        rename: attrs.rename,
        aliases: attrs.aliases,
        default: attrs.default,
        skip: attrs.skip,
        flatten: attrs.flatten,
        ty: f.ty.clone(),
        doc: doc(&f.attrs),
    })
}

/// A Rust name as serde's `rename_all` writes it.
pub(crate) fn renamed(ident: &str, rule: Option<&str>) -> String {
    let words = words(ident);
    match rule {
        Some("lowercase") => ident.to_ascii_lowercase(),
        Some("UPPERCASE") => ident.to_ascii_uppercase(),
        Some("snake_case") => words.join("_"),
        Some("kebab-case") => words.join("-"),
        Some("SCREAMING_SNAKE_CASE") => words.join("_").to_ascii_uppercase(),
        Some("camelCase") => {
            let mut c = ident.chars();
            c.next()
                .map(|f| f.to_ascii_lowercase().to_string() + c.as_str())
                .unwrap_or_default()
        }
        _ => ident.to_owned(),
    }
}

/// The lower-case words of a `CamelCase` or `snake_case` name.
fn words(ident: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in ident.split('_').filter(|p| !p.is_empty()) {
        let mut word = String::new();
        for c in part.chars() {
            if c.is_ascii_uppercase() && !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            word.push(c.to_ascii_lowercase());
        }
        if !word.is_empty() {
            out.push(word);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::renamed;

    #[test]
    fn names_as_serde_writes_them() {
        assert_eq!(
            renamed("RepeatableRead", Some("snake_case")),
            "repeatable_read"
        );
        assert_eq!(
            renamed("RepeatableRead", Some("kebab-case")),
            "repeatable-read"
        );
        assert_eq!(renamed("Compact", Some("lowercase")), "compact");
        assert_eq!(renamed("max_retries", None), "max_retries");
    }
}
