//! Pipeline files for the tests, built from typed parts instead of YAML text: every value is
//! written as one YAML scalar (text in double quotes, escaped as JSON, which YAML reads the
//! same way; a list or a map as one flow collection of such scalars), so a path with a colon
//! or a password with a `#` cannot change what the file says, and a test names only the keys
//! it is about.
//!
//! ```ignore
//! let path = Pipeline::new("orders", dir.join("data"))
//!     .setting("offsets", &[("flush_interval", "50ms".into())])
//!     .source(Component::new("sqlite").set("database.path", &db).set("topic.prefix", "app"))
//!     .sink(Component::new("file").named("file").set("path", dir.join("out.jsonl")))
//!     .write(dir);
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The `file` sink the tests read: JSON lines at `path`, with or without schemas.
pub fn file_sink(path: impl Into<Scalar>, schemas: bool) -> Component {
    Component::new("file")
        .set("path", path)
        .set("schemas.enable", schemas)
}

/// One value of a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Text(String),
    Integer(i64),
    Boolean(bool),
    /// A list of values, written as one flow sequence (`["a", "b"]`).
    List(Vec<Scalar>),
    /// A map of values by key, in the order given, written as one flow mapping
    /// (`{ "a": "b" }`).
    Map(Vec<(String, Scalar)>),
}

impl Scalar {
    /// A map of values of any kind (numbers, lists, maps) by key, in the order given.
    pub fn map(entries: &[(&str, Scalar)]) -> Self {
        Scalar::Map(
            (entries.iter())
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        )
    }

    fn yaml(&self) -> String {
        match self {
            Scalar::Text(text) => serde_json::to_string(text).unwrap(),
            Scalar::Integer(n) => n.to_string(),
            Scalar::Boolean(b) => b.to_string(),
            Scalar::List(items) => {
                let items: Vec<String> = items.iter().map(Scalar::yaml).collect();
                format!("[{}]", items.join(", "))
            }
            Scalar::Map(entries) => {
                let entries: Vec<String> = (entries.iter())
                    .map(|(k, v)| format!("{}: {}", Scalar::from(k.as_str()).yaml(), v.yaml()))
                    .collect();
                format!("{{ {} }}", entries.join(", "))
            }
        }
    }
}

impl From<&str> for Scalar {
    fn from(text: &str) -> Self {
        Scalar::Text(text.to_owned())
    }
}

impl From<String> for Scalar {
    fn from(text: String) -> Self {
        Scalar::Text(text)
    }
}

impl From<&String> for Scalar {
    fn from(text: &String) -> Self {
        Scalar::Text(text.clone())
    }
}

impl From<&Path> for Scalar {
    fn from(path: &Path) -> Self {
        Scalar::Text(path.display().to_string())
    }
}

impl From<PathBuf> for Scalar {
    fn from(path: PathBuf) -> Self {
        Scalar::Text(path.display().to_string())
    }
}

impl From<&PathBuf> for Scalar {
    fn from(path: &PathBuf) -> Self {
        Scalar::Text(path.display().to_string())
    }
}

impl From<i64> for Scalar {
    fn from(n: i64) -> Self {
        Scalar::Integer(n)
    }
}

impl From<u16> for Scalar {
    fn from(n: u16) -> Self {
        Scalar::Integer(n.into())
    }
}

impl From<u32> for Scalar {
    fn from(n: u32) -> Self {
        Scalar::Integer(n.into())
    }
}

impl From<bool> for Scalar {
    fn from(b: bool) -> Self {
        Scalar::Boolean(b)
    }
}

impl<const N: usize> From<[&str; N]> for Scalar {
    fn from(items: [&str; N]) -> Self {
        Scalar::List(items.iter().map(|&item| item.into()).collect())
    }
}

impl<const N: usize> From<[(&str, &str); N]> for Scalar {
    fn from(entries: [(&str, &str); N]) -> Self {
        Scalar::Map(
            (entries.iter())
                .map(|&(k, v)| (k.to_owned(), v.into()))
                .collect(),
        )
    }
}

/// A source, transform or sink: its `type`, its `name` (sinks and transforms), its keys in
/// the order given, and (a sink) its own chain of transforms.
#[derive(Debug, Clone, PartialEq)]
pub struct Component {
    kind: String,
    name: Option<String>,
    keys: Vec<(String, Scalar)>,
    transforms: Vec<Component>,
}

impl Component {
    /// A component of type `kind` (`postgres`, `file`, `filter`, ...).
    pub fn new(kind: &str) -> Self {
        Component {
            kind: kind.to_owned(),
            name: None,
            keys: Vec::new(),
            transforms: Vec::new(),
        }
    }

    /// Its `name`.
    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// Sets `key` (a Debezium property name, dots and all) to `value`; a key set twice keeps
    /// its last value.
    pub fn set(mut self, key: &str, value: impl Into<Scalar>) -> Self {
        let value = value.into();
        match self.keys.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.keys.push((key.to_owned(), value)),
        }
        self
    }

    /// Sets every key of `keys`, in order ([`Self::set`]).
    pub fn set_all(self, keys: &[(&str, Scalar)]) -> Self {
        keys.iter().fold(self, |c, (k, v)| c.set(k, v.clone()))
    }

    /// One more transform of this sink's own chain (its `transforms`), after the others.
    pub fn transform(mut self, transform: Component) -> Self {
        self.transforms.push(transform);
        self
    }

    /// The value `key` was set to.
    pub fn get(&self, key: &str) -> Option<&Scalar> {
        self.keys.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The block's lines, each indented by `indent`, the first after `first` (`- ` for an
    /// item of a list).
    fn write_to(&self, out: &mut String, indent: &str, first: &str) {
        let mut lead = first.to_owned();
        let rest = " ".repeat(first.len());
        let mut line = |out: &mut String, key: &str, value: &str| {
            let _ = writeln!(out, "{indent}{lead}{key}: {value}");
            lead.clone_from(&rest);
        };
        line(out, "type", &Scalar::from(self.kind.as_str()).yaml());
        if let Some(name) = &self.name {
            line(out, "name", &Scalar::from(name.as_str()).yaml());
        }
        for (key, value) in &self.keys {
            line(out, key, &value.yaml());
        }
        if !self.transforms.is_empty() {
            let _ = writeln!(out, "{indent}{rest}transforms:");
            let inner = format!("{indent}{rest}  ");
            (self.transforms.iter()).for_each(|t| t.write_to(out, &inner, "- "));
        }
    }
}

/// A pipeline file.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    name: String,
    data_dir: PathBuf,
    top: Vec<(String, Scalar)>,
    settings: Vec<(String, Vec<(String, Scalar)>)>,
    source: Option<Component>,
    transforms: Vec<Component>,
    sinks: Vec<Component>,
}

impl Pipeline {
    /// A pipeline named `name` keeping its offsets under `data_dir`.
    pub fn new(name: &str, data_dir: impl Into<PathBuf>) -> Self {
        Pipeline {
            name: name.to_owned(),
            data_dir: data_dir.into(),
            top: Vec::new(),
            settings: Vec::new(),
            source: None,
            transforms: Vec::new(),
            sinks: Vec::new(),
        }
    }

    /// A top-level section (`offsets`, `restart`, `admin`, ...) with its keys, in place of
    /// the one of that name set before.
    pub fn setting(mut self, section: &str, keys: &[(&str, Scalar)]) -> Self {
        let keys = keys
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        match self.settings.iter_mut().find(|(s, _)| s == section) {
            Some(slot) => slot.1 = keys,
            None => self.settings.push((section.to_owned(), keys)),
        }
        self
    }

    /// Its offsets kept under `data_dir` instead.
    pub fn data_dir(mut self, data_dir: impl Into<PathBuf>) -> Self {
        self.data_dir = data_dir.into();
        self
    }

    /// The sinks, in place of those added before.
    pub fn without_sinks(mut self) -> Self {
        self.sinks.clear();
        self
    }

    /// A top-level key with one value (`max_batch_size`, ...).
    pub fn top(mut self, key: &str, value: impl Into<Scalar>) -> Self {
        self.top.push((key.to_owned(), value.into()));
        self
    }

    /// The source.
    pub fn source(mut self, source: Component) -> Self {
        self.source = Some(source);
        self
    }

    /// One more transform, after the others.
    pub fn transform(mut self, transform: Component) -> Self {
        self.transforms.push(transform);
        self
    }

    /// One more sink.
    pub fn sink(mut self, sink: Component) -> Self {
        self.sinks.push(sink);
        self
    }

    /// The file's text.
    pub fn yaml(&self) -> String {
        let mut out = String::new();
        let text = |s: &str| Scalar::from(s).yaml();
        let _ = writeln!(out, "name: {}", text(&self.name));
        let _ = writeln!(out, "data_dir: {}", Scalar::from(&self.data_dir).yaml());
        for (key, value) in &self.top {
            let _ = writeln!(out, "{key}: {}", value.yaml());
        }
        for (section, keys) in &self.settings {
            let keys: Vec<String> = (keys.iter())
                .map(|(k, v)| format!("{k}: {}", v.yaml()))
                .collect();
            let _ = writeln!(out, "{section}: {{ {} }}", keys.join(", "));
        }
        if let Some(source) = &self.source {
            out.push_str("source:\n");
            source.write_to(&mut out, "  ", "");
        }
        for (list, items) in [("transforms", &self.transforms), ("sinks", &self.sinks)] {
            if !items.is_empty() {
                let _ = writeln!(out, "{list}:");
                items.iter().for_each(|c| c.write_to(&mut out, "  ", "- "));
            }
        }
        out
    }

    /// Writes the file as `dir/pipeline.yaml` and returns its path.
    pub fn write(&self, dir: &Path) -> PathBuf {
        self.write_as(&dir.join("pipeline.yaml"))
    }

    /// Writes the file at `path` and returns it.
    pub fn write_as(&self, path: &Path) -> PathBuf {
        std::fs::write(path, self.yaml()).unwrap();
        path.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_scalars_whatever_they_hold() {
        let group = Scalar::map(&[("n", 1i64.into())]);
        let yaml = Pipeline::new("p", "/tmp/a: b")
            .setting("offsets", &[("flush_interval", "50ms".into())])
            .setting("restart", &[("max_retries", 0i64.into())])
            .setting("offsets", &[("flush_interval", "1s".into())])
            .source(
                Component::new("postgres")
                    .set("database.password", "x # not a comment")
                    .set("database.port", 5432u16)
                    .set("database.port", 5433u16),
            )
            .transform(
                Component::new("filter")
                    .named("f")
                    .set("drop", true)
                    .set("fields", ["a", "b.c"]),
            )
            .sink(
                Component::new("file")
                    .named("out")
                    .set("path", "out.jsonl")
                    .set(
                        "retry",
                        Scalar::map(&[
                            ("max_retries", 5u32.into()),
                            ("max_backoff", "2s".into()),
                            ("groups", Scalar::List(vec![group])),
                        ]),
                    )
                    .transform(Component::new("columns").set("rename", [(r"a\.b", "c")])),
            )
            .yaml();
        let expected = r#"name: "p"
data_dir: "/tmp/a: b"
offsets: { flush_interval: "1s" }
restart: { max_retries: 0 }
source:
  type: "postgres"
  database.password: "x # not a comment"
  database.port: 5433
transforms:
  - type: "filter"
    name: "f"
    drop: true
    fields: ["a", "b.c"]
sinks:
  - type: "file"
    name: "out"
    path: "out.jsonl"
    retry: { "max_retries": 5, "max_backoff": "2s", "groups": [{ "n": 1 }] }
    transforms:
      - type: "columns"
        rename: { "a\\.b": "c" }
"#;
        assert_eq!(yaml, expected);
    }
}
