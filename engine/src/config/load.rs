//! Reading a pipeline file: YAML with `${VAR}` interpolation, then typed and validated.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::node::{from_node, ConfigError, Loc, Node, NodeDeserializer, NodeKind};
use super::{
    Backoff, ByteSize, ComponentSpec, DurationSpec, Limits, OffsetsConfig, PipelineConfig,
    SinkEntry,
};

/// A pipeline file that cannot be used, with where and why.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{path}: cannot read the pipeline file: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML, or a `${VAR}` cannot be resolved.
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Line (1-based).
        line: u64,
        /// Column (1-based).
        column: u64,
        /// What is wrong.
        message: String,
    },
    /// The YAML is valid but does not describe a usable pipeline.
    #[error("{path}:{error}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, located.
        error: ConfigError,
    },
}

/// A pipeline is one YAML file: these keys, one `source` block (tagged by `type`), the
/// `transforms` applied to every event in order, and the `sinks` (at least one, each with its
/// own bounded queue).
///
/// `${VAR}` is replaced by the environment variable `VAR` (an error if unset),
/// `${VAR:-default}` falls back to `default`; `$${` is a literal `${`; Debezium's template
/// placeholders `${routedByValue}`, `${topic}`, `${source.db}`, `${source.schema}` and
/// `${source.table}` are kept as written unless the environment sets them. Unknown keys are
/// errors everywhere, located at file:line:column. Durations are `500ms`, `30s`, `5m`, `1h`
/// (a bare number is milliseconds); sizes `64MiB`, `512KB` (bare: bytes).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    /// The pipeline's name; it keys the committed offsets.
    name: String,
    /// Offsets and other state (default `.sluice/<name>`). With the `file` offset store a
    /// running pipeline holds it (`<data_dir>/lock`, let go when it ends, also on kill -9): a
    /// second pipeline started on it is refused with one line naming the holder.
    #[serde(default)]
    data_dir: Option<PathBuf>,
    /// Events a queue holds at most; more than `max_batch_size`.
    #[serde(default = "super::default_max_queue_size", alias = "max.queue.size")]
    max_queue_size: usize,
    /// Bytes a queue holds at most, by an estimate of the events' memory: the source's queue
    /// and each sink's hold at most this each; batches are cut at a quarter of it (sources,
    /// incremental snapshot chunks, what a sink takes at once), so that memory follows this
    /// setting whatever the row size (a single larger event travels alone).
    #[serde(
        default = "super::default_max_queue_size_bytes",
        alias = "max.queue.size.in.bytes"
    )]
    max_queue_size_bytes: ByteSize,
    /// Events per batch at most.
    #[serde(default = "super::default_max_batch_size", alias = "max.batch.size")]
    max_batch_size: usize,
    /// How long an idle stage waits before looking again.
    #[serde(default = "super::default_poll_interval", alias = "poll.interval.ms")]
    poll_interval: DurationSpec,
    /// How long a graceful stop may take.
    #[serde(default = "super::default_shutdown_timeout")]
    shutdown_timeout: DurationSpec,
    /// Restarts after consecutive retryable failures (reset by progress), with exponential
    /// backoff.
    #[serde(default)]
    restart: Option<Backoff>,
    /// The admin endpoint (off when absent): status, metrics, signals, the Kafka Connect API.
    #[serde(default)]
    admin: Option<super::admin::AdminConfig>,
}

/// Placeholders of Debezium's templates, kept literal when no environment variable sets them.
const TEMPLATE_NAMES: &[&str] = &["routedByValue", "topic"];

/// `${source.<field>}` (Debezium's table name templates) escaped as `$${source.<field>}`: a
/// name with a dot is no environment variable, and the YAML reader refuses it.
fn escape_source_templates(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("${source.") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(i) = rest.find("${source.") {
        out.push_str(&rest[..i]);
        if !out.ends_with('$') {
            out.push('$');
        }
        out.push_str("${source.");
        rest = &rest[i + "${source.".len()..];
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// Undoes [`escape_source_templates`] where the YAML reader did not (quoted scalars, which
/// it does not interpolate).
fn unescape_source_templates(node: &mut Node) {
    match &mut node.kind {
        NodeKind::Str(text) if text.contains("$${source.") => {
            *text = text.replace("$${source.", "${source.");
        }
        NodeKind::Seq(items) => items.iter_mut().for_each(unescape_source_templates),
        NodeKind::Map(entries) => {
            for (_, value) in entries {
                unescape_source_templates(value);
            }
        }
        _ => {}
    }
}

const COMPONENT_KEYS: &[&str] = &["source", "transforms", "sinks", "offsets"];
const SINK_COMMON_KEYS: &[&str] = &["type", "name", "transforms", "retry"];

/// Reads and validates a pipeline file; `${VAR}` and `${VAR:-default}` come from the environment.
pub fn load_pipeline<S, T, K>(path: &Path) -> Result<PipelineConfig<S, T, K>, LoadError>
where
    S: ComponentSpec,
    T: ComponentSpec,
    K: ComponentSpec,
{
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_owned(),
        source,
    })?;
    let env: HashMap<String, String> = std::env::vars().collect();
    parse_pipeline(path, &text, env)
}

/// Parses pipeline text, interpolating `${VAR}` from `vars`. `path` names the file in errors.
pub fn parse_pipeline<S, T, K>(
    path: &Path,
    text: &str,
    mut vars: HashMap<String, String>,
) -> Result<PipelineConfig<S, T, K>, LoadError>
where
    S: ComponentSpec,
    T: ComponentSpec,
    K: ComponentSpec,
{
    // Debezium's own templates (`outbox.event.${routedByValue}`, `${topic}`,
    // `${source.table}`) stay as written unless the environment sets them.
    for name in TEMPLATE_NAMES {
        vars.entry((*name).to_owned())
            .or_insert_with(|| format!("${{{name}}}"));
    }
    let options = serde_saphyr::Options::default().with_properties(vars);
    let text = escape_source_templates(text);
    let mut root: Node = serde_saphyr::from_str_with_options(&text, options).map_err(|e| {
        let loc = e.location();
        let message = e.without_snippet().to_string();
        let message = message.lines().next().unwrap_or("invalid YAML").to_owned();
        LoadError::Syntax {
            path: path.to_owned(),
            line: loc.map_or(0, |l| l.line()),
            column: loc.map_or(0, |l| l.column()),
            message: explain(strip_location_suffix(&message)),
        }
    })?;
    // A quoted scalar is not interpolated: its escaped `$${source.…}` is undone here.
    unescape_source_templates(&mut root);
    build(&root).map_err(|error| LoadError::Invalid {
        path: path.to_owned(),
        error,
    })
}

/// Where the committed positions are kept: the engine's keys of the `offsets` block (a store a
/// component provides reads its own beside these: `kafka`'s `offsets.bootstrap.servers`,
/// `offsets.topic`, `offsets.replication.factor`, `offsets.properties`).
#[derive(Deserialize)]
struct OffsetsKeys {
    /// `file` (`<data_dir>/offsets.json`, replaced atomically), `memory` (nothing survives a
    /// restart: tests, benchmarks), or a store a component provides: `kafka`, a compacted topic
    /// (Kafka Connect's `offset.storage.topic`), one record per pipeline name, so that the
    /// pipeline continues on another machine or without its data directory.
    #[serde(alias = "type", default = "file_store")]
    store: String,
    /// How often acknowledged positions are committed (and always at stop).
    #[serde(default = "super::default_flush_interval")]
    flush_interval: DurationSpec,
}

/// Reads the engine's keys of the `offsets` block; a store the engine keeps itself has no
/// others, a provided store's are read by its component (the block is kept in `node`).
fn offsets_config(node: &Node) -> Result<OffsetsConfig, ConfigError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // read for its errors: the keys a store of the engine's accepts
    struct EngineStore {
        #[serde(alias = "type", default)]
        store: Option<String>,
        #[serde(default)]
        flush_interval: Option<DurationSpec>,
    }
    let keys = OffsetsKeys::deserialize(NodeDeserializer::new(node))?;
    let config = OffsetsConfig {
        store: keys.store,
        flush_interval: keys.flush_interval,
        node: Some(node.clone()),
    };
    if config.is_engine_store() {
        EngineStore::deserialize(NodeDeserializer::new(node))?;
    }
    Ok(config)
}

fn file_store() -> String {
    "file".to_owned()
}

/// Adds the fix to messages about unset variables.
fn explain(message: String) -> String {
    match message.strip_prefix("missing property ") {
        Some(var) => format!(
            "environment variable {var} is not set: set it, or write ${{{}:-default}}",
            var.trim_matches('`')
        ),
        None => message,
    }
}

/// saphyr appends " at line L column C" to some messages; the location is printed in front.
fn strip_location_suffix(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

fn build<S, T, K>(root: &Node) -> Result<PipelineConfig<S, T, K>, ConfigError>
where
    S: ComponentSpec,
    T: ComponentSpec,
    K: ComponentSpec,
{
    if root.entries().is_none() {
        return Err(ConfigError::at(
            root.loc,
            "a pipeline file must be a mapping with `name`, `source` and `sinks`",
        ));
    }
    let settings = Settings::deserialize(NodeDeserializer::skipping(root, COMPONENT_KEYS))?;
    if settings.name.trim().is_empty() {
        return Err(located_key(
            root,
            "name",
            "the pipeline name must not be empty",
        ));
    }
    let source_node = root.get("source").ok_or_else(|| {
        ConfigError::at(
            root.loc,
            "missing `source`: add a `source:` block with a `type`",
        )
    })?;
    let source = component::<S>(source_node, &["type"]).map_err(|e| e.with_path("source"))?;
    let transforms = match root.get("transforms") {
        Some(node) => component_list::<T>(node).map_err(|e| e.with_path("transforms"))?,
        None => Vec::new(),
    };
    let sinks_node = root.get("sinks").ok_or_else(|| {
        ConfigError::at(
            root.loc,
            "missing `sinks`: add a list with at least one sink",
        )
    })?;
    let sinks = sinks::<K, T>(sinks_node).map_err(|e| e.with_path("sinks"))?;

    let limits = Limits {
        max_queue_size: settings.max_queue_size,
        max_queue_size_bytes: settings.max_queue_size_bytes.0,
        max_batch_size: settings.max_batch_size,
        poll_interval: settings.poll_interval,
    };
    if limits.max_batch_size == 0 {
        return Err(located_key(root, "max_batch_size", "must be at least 1"));
    }
    if limits.max_queue_size <= limits.max_batch_size {
        return Err(located_key(
            root,
            "max_queue_size",
            format!(
                "must be larger than max_batch_size ({} <= {}): raise max_queue_size or lower max_batch_size",
                limits.max_queue_size, limits.max_batch_size
            ),
        ));
    }
    if limits.max_queue_size_bytes == 0 {
        return Err(located_key(
            root,
            "max_queue_size_bytes",
            "must be larger than 0",
        ));
    }
    let offsets = match root.get("offsets") {
        Some(node) => offsets_config(node).map_err(|e| e.with_path("offsets"))?,
        None => OffsetsConfig::default(),
    };
    if let Some(admin) = &settings.admin {
        admin.check().map_err(|e| located_key(root, "admin", e))?;
    }
    let name = settings.name;
    let data_dir = settings
        .data_dir
        .unwrap_or_else(|| PathBuf::from(".sluice").join(&name));
    Ok(PipelineConfig {
        name,
        data_dir,
        source,
        transforms,
        sinks,
        limits,
        offsets,
        shutdown_timeout: settings.shutdown_timeout,
        restart: settings.restart.unwrap_or_default(),
        admin: settings.admin,
    })
}

fn located_key(map: &Node, key: &str, message: impl Into<String>) -> ConfigError {
    let loc = map.get(key).map_or(map.loc, |n| n.loc);
    ConfigError::at(loc, message).with_path(key)
}

fn component<C: ComponentSpec>(node: &Node, skip: &[&str]) -> Result<C, ConfigError> {
    let (kind, kind_node) = node.tag("type", C::ROLE)?;
    match C::from_node(kind, node, skip)? {
        Some(c) => Ok(c),
        None => Err(unknown_kind::<C>(kind, kind_node.loc)),
    }
}

fn unknown_kind<C: ComponentSpec>(kind: &str, loc: Loc) -> ConfigError {
    if let Some((_, feature)) = C::NOT_BUILT.iter().find(|(k, _)| *k == kind) {
        return ConfigError::at(
            loc,
            format!(
                "the {} type `{kind}` is not in this build of sluice: build it with `cargo build --release --features {feature}`",
                C::ROLE
            ),
        )
        .with_path("type");
    }
    let hint = did_you_mean(kind, C::KINDS)
        .map(|s| format!(" (did you mean `{s}`?)"))
        .unwrap_or_default();
    ConfigError::at(
        loc,
        format!(
            "unknown {} type `{kind}`{hint}; expected one of: {}",
            C::ROLE,
            C::KINDS.join(", ")
        ),
    )
    .with_path("type")
}

fn component_list<C: ComponentSpec>(node: &Node) -> Result<Vec<C>, ConfigError> {
    match &node.kind {
        NodeKind::Null => Ok(Vec::new()),
        NodeKind::Seq(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                component::<C>(item, &["type"]).map_err(|e| e.with_path(format!("[{i}]")))
            })
            .collect(),
        _ => Err(ConfigError::at(
            node.loc,
            format!("expected a list of {}s", C::ROLE),
        )),
    }
}

fn sinks<K: ComponentSpec, T: ComponentSpec>(
    node: &Node,
) -> Result<Vec<SinkEntry<K, T>>, ConfigError> {
    let NodeKind::Seq(items) = &node.kind else {
        return Err(ConfigError::at(
            node.loc,
            "expected a list of sinks (`- name: out\\n  type: stdout`)",
        ));
    };
    if items.is_empty() {
        return Err(ConfigError::at(node.loc, "no sinks: add at least one sink"));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let entry = sink_entry::<K, T>(item, i).map_err(|e| e.with_path(format!("[{i}]")))?;
        if !seen.insert(entry.name.clone()) {
            return Err(located_key(
                item,
                "name",
                format!(
                    "duplicate sink name `{}`: every sink needs its own name",
                    entry.name
                ),
            )
            .with_path(format!("[{i}]")));
        }
        out.push(entry);
    }
    Ok(out)
}

fn sink_entry<K: ComponentSpec, T: ComponentSpec>(
    item: &Node,
    index: usize,
) -> Result<SinkEntry<K, T>, ConfigError> {
    let spec = component::<K>(item, SINK_COMMON_KEYS)?;
    let name = match item.get("name") {
        Some(n) => from_node::<String>(n).map_err(|e| e.with_path("name"))?,
        None => {
            let kind = item.tag("type", "sink").map(|(k, _)| k.to_owned())?;
            if index == 0 {
                kind
            } else {
                format!("{kind}-{index}")
            }
        }
    };
    let transforms = match item.get("transforms") {
        Some(n) => component_list::<T>(n).map_err(|e| e.with_path("transforms"))?,
        None => Vec::new(),
    };
    let retry = match item.get("retry") {
        Some(n) => from_node::<Backoff>(n).map_err(|e| e.with_path("retry"))?,
        None => Backoff::default(),
    };
    Ok(SinkEntry {
        name,
        spec,
        transforms,
        retry,
    })
}

/// The closest candidate within a small edit distance.
pub(super) fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (levenshtein(word, c), *c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod template_tests {
    use super::{escape_source_templates, unescape_source_templates, Node, NodeKind};

    /// `${source.table}` reads the same plain, double- and single-quoted (the reader
    /// interpolates plain scalars only).
    #[test]
    fn a_source_template_reads_the_same_quoted_or_not() {
        let text = "a: ${source.table}_x\nb: \"${source.table}_x\"\nc: '${source.table}_x'\n";
        let text = escape_source_templates(text);
        let options =
            serde_saphyr::Options::default().with_properties(std::collections::HashMap::new());
        let mut root: Node = serde_saphyr::from_str_with_options(&text, options).unwrap();
        unescape_source_templates(&mut root);
        let NodeKind::Map(entries) = &root.kind else {
            panic!("a map: {root:?}");
        };
        assert_eq!(entries.len(), 3);
        for (_, value) in entries {
            assert!(
                matches!(&value.kind, NodeKind::Str(s) if s == "${source.table}_x"),
                "{value:?}"
            );
        }
    }

    #[test]
    fn source_templates_are_kept_literal_and_escapes_stay_single() {
        assert_eq!(
            escape_source_templates("a: ${source.table}_x"),
            "a: $${source.table}_x"
        );
        assert_eq!(
            escape_source_templates("a: $${source.db}"),
            "a: $${source.db}"
        );
        assert_eq!(escape_source_templates("a: ${HOME}"), "a: ${HOME}");
    }
}

#[cfg(test)]
mod kind_tests {
    use super::*;

    /// Sources of a lean build: `postgres` built, `db2` left out.
    struct Lean;

    impl ComponentSpec for Lean {
        const ROLE: &'static str = "source";
        const KINDS: &'static [&'static str] = &["postgres"];
        const NOT_BUILT: &'static [(&'static str, &'static str)] = &[("db2", "db2")];
        fn from_node(_: &str, _: &Node, _: &[&str]) -> Result<Option<Self>, ConfigError> {
            Ok(None)
        }
    }

    #[test]
    fn a_kind_left_out_of_the_build_says_how_to_build_it() {
        let loc = Loc { line: 3, column: 9 };
        let e = unknown_kind::<Lean>("db2", loc);
        assert_eq!(
            e.message,
            "the source type `db2` is not in this build of sluice: build it with `cargo build --release --features db2`"
        );
        let e = unknown_kind::<Lean>("postgress", loc);
        assert!(
            e.message
                .starts_with("unknown source type `postgress` (did you mean `postgres`?)"),
            "{}",
            e.message
        );
    }
}
