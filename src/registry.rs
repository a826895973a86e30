//! The closed sets of sources, transforms and sinks compiled into this binary.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use serde::Deserialize;
use sluice_engine::config::{ComponentSpec, ConfigError, Node, NodeDeserializer};
use sluice_engine::{
    BuildContext, BuildSink, BuildSource, BuildTransform, ComponentError, Sink, Source, Transform,
};
use sluice_sinks::file::{FileSink, FileSinkConfig};
use sluice_sinks::kafka::{KafkaSink, KafkaSinkConfig};
use sluice_sinks::null::{NullSink, NullSinkConfig};
use sluice_sinks::stdout::{StdoutSink, StdoutSinkConfig};
use sluice_sources::datagen::{DatagenConfig, DatagenSource};
use sluice_sources::kafka_signal::SIGNAL_CONSUMER_PREFIX;
use sluice_sources::postgres::{
    check_column_property, PostgresConfig, PostgresSource, COLUMN_PREFIXES, OVERRIDE_PREFIX,
};
use sluice_sources::sqlite::{SqliteConfig, SqliteSource};
use sluice_transforms::columns::{Columns, ColumnsConfig};
use sluice_transforms::filter::{Filter, FilterConfig};
use sluice_transforms::hash::HashConfig;
use sluice_transforms::key::{Key, KeyConfig};
use sluice_transforms::mask::MaskConfig;
use sluice_transforms::reroute::{Reroute, RerouteConfig};
use sluice_transforms::route::{Route, RouteConfig};
use sluice_transforms::skip::{Skip, SkipConfig};
use sluice_transforms::truncate::TruncateConfig;
use sluice_transforms::unwrap::{Unwrap, UnwrapConfig};

fn body<'de, T: Deserialize<'de>>(node: &Node, skip: &[&str]) -> Result<T, ConfigError> {
    T::deserialize(NodeDeserializer::skipping(node, skip))
}

/// `source:` kinds.
#[derive(Debug, Clone)]
pub enum SourceSpec {
    /// Synthetic changes.
    Datagen(DatagenConfig),
    /// PostgreSQL logical replication (pgoutput).
    Postgres(Box<PostgresConfig>),
    /// SQLite tables in capture mode.
    Sqlite(SqliteConfig),
}

impl ComponentSpec for SourceSpec {
    const ROLE: &'static str = "source";
    const KINDS: &'static [&'static str] = &["datagen", "postgres", "sqlite"];
    fn from_node(kind: &str, node: &Node, skip: &[&str]) -> Result<Option<Self>, ConfigError> {
        Ok(Some(match kind {
            "datagen" => {
                let config: DatagenConfig = body(node, skip)?;
                config
                    .validate()
                    .map_err(|m| ConfigError::at(node.loc, m))?;
                SourceSpec::Datagen(config)
            }
            "sqlite" => SourceSpec::Sqlite(checked(node, skip, SqliteConfig::validate)?),
            "postgres" => {
                let mut keys: Vec<&str> = skip.to_vec();
                keys.push(OVERRIDE_PREFIX);
                keys.push(SIGNAL_CONSUMER_PREFIX);
                keys.extend(COLUMN_PREFIXES);
                let config: PostgresConfig = body(node, &keys)?;
                let mut statements = Vec::new();
                let mut columns = Vec::new();
                let mut consumer = Vec::new();
                for (key, value) in node.entries().unwrap_or_default() {
                    let name = key.as_text().unwrap_or_default();
                    if COLUMN_PREFIXES.iter().any(|p| name.starts_with(p)) {
                        let selectors = value.as_text().ok_or_else(|| {
                            ConfigError::at(value.loc, "expected column selectors (regexes on schema.table.column, comma-separated)")
                                .with_path(name.clone())
                        })?;
                        check_column_property(&name, &selectors)
                            .map_err(|m| ConfigError::at(key.loc, m).with_path(name.clone()))?;
                        columns.push((name.clone(), selectors));
                        continue;
                    }
                    if let Some(property) = name.strip_prefix(SIGNAL_CONSUMER_PREFIX) {
                        let text = value.as_text().ok_or_else(|| {
                            ConfigError::at(value.loc, "expected a consumer property value")
                                .with_path(name.clone())
                        })?;
                        consumer.push((property.to_owned(), text));
                        continue;
                    }
                    if let Some(table) = name.strip_prefix(OVERRIDE_PREFIX) {
                        let sql = value.as_text().ok_or_else(|| {
                            ConfigError::at(value.loc, "expected a SELECT statement")
                                .with_path(name.clone())
                        })?;
                        statements.push((table.to_owned(), sql));
                    }
                }
                let config = config
                    .with_signal_consumer(consumer)
                    .with_overrides(statements)
                    .and_then(|c| c.with_columns(&columns))
                    .map_err(|m| ConfigError::at(node.loc, m))?;
                config
                    .validate()
                    .map_err(|m| ConfigError::at(node.loc, m))?;
                SourceSpec::Postgres(Box::new(config))
            }
            _ => return Ok(None),
        }))
    }
}

impl BuildSource for SourceSpec {
    fn build(&self, ctx: &BuildContext<'_>) -> Result<Box<dyn Source>, ComponentError> {
        match self {
            SourceSpec::Datagen(c) => Ok(Box::new(DatagenSource::new(c.clone(), ctx)?)),
            SourceSpec::Postgres(c) => Ok(Box::new(PostgresSource::new((**c).clone(), ctx)?)),
            SourceSpec::Sqlite(c) => Ok(Box::new(SqliteSource::new(c.clone(), ctx)?)),
        }
    }
}

/// `transforms:` kinds.
#[derive(Debug, Clone)]
pub enum TransformSpec {
    /// RegexRouter.
    Route(RouteConfig),
    /// ByLogicalTableRouter.
    Reroute(RerouteConfig),
    /// `column.mask.with.N.chars`.
    Mask(MaskConfig),
    /// `column.mask.hash.<ALG>.with.salt.<salt>`.
    Hash(HashConfig),
    /// `column.truncate.to.N.chars`.
    Truncate(TruncateConfig),
    /// ExtractNewRecordState.
    Unwrap(UnwrapConfig),
    /// Keep events by operation, table and predicate.
    Filter(FilterConfig),
    /// `message.key.columns`.
    Key(KeyConfig),
    /// Include, exclude, rename columns.
    Columns(ColumnsConfig),
    /// `skipped.operations`.
    Skip(SkipConfig),
}

/// Reads a component body and runs its own checks, reported at the component.
fn checked<'de, T: Deserialize<'de>>(
    node: &Node,
    skip: &[&str],
    check: impl FnOnce(&T) -> Result<(), String>,
) -> Result<T, ConfigError> {
    let config: T = body(node, skip)?;
    check(&config).map_err(|m| ConfigError::at(node.loc, m))?;
    Ok(config)
}

/// A filter whose condition parses; a syntax error points at the condition in the file.
fn filter_spec(node: &Node, skip: &[&str]) -> Result<FilterConfig, ConfigError> {
    let config = checked(node, skip, FilterConfig::validate)?;
    if let Some(condition) = &config.condition {
        if let Err(e) = sluice_transforms::filter::parse(condition) {
            let at = node.get("condition").map_or(node.loc, |n| n.loc);
            return Err(ConfigError::at(at, format!("condition {e}")).with_path("condition"));
        }
    }
    Ok(config)
}

fn key_columns(c: &KeyConfig) -> Result<(), String> {
    sluice_transforms::key::parse(&c.columns).map(|_| ())
}

impl ComponentSpec for TransformSpec {
    const ROLE: &'static str = "transform";
    const KINDS: &'static [&'static str] = &[
        "route", "reroute", "mask", "hash", "truncate", "unwrap", "filter", "key", "columns",
        "skip",
    ];
    fn from_node(kind: &str, node: &Node, skip: &[&str]) -> Result<Option<Self>, ConfigError> {
        use TransformSpec as T;
        Ok(Some(match kind {
            "route" => T::Route(body(node, skip)?),
            "reroute" => T::Reroute(checked(node, skip, RerouteConfig::validate)?),
            "mask" => T::Mask(checked(node, skip, MaskConfig::validate)?),
            "hash" => T::Hash(checked(node, skip, HashConfig::validate)?),
            "truncate" => T::Truncate(checked(node, skip, TruncateConfig::validate)?),
            "unwrap" => T::Unwrap(checked(node, skip, UnwrapConfig::validate)?),
            "filter" => T::Filter(filter_spec(node, skip)?),
            "key" => T::Key(checked(node, skip, key_columns)?),
            "columns" => T::Columns(checked(node, skip, ColumnsConfig::validate)?),
            "skip" => T::Skip(checked(node, skip, SkipConfig::validate)?),
            _ => return Ok(None),
        }))
    }
}

impl BuildTransform for TransformSpec {
    fn build(&self, _ctx: &BuildContext<'_>) -> Result<Box<dyn Transform>, ComponentError> {
        let fatal = |e: String| ComponentError::fatal(e);
        Ok(match self {
            TransformSpec::Route(c) => Box::new(Route::new(c.clone())),
            TransformSpec::Reroute(c) => Box::new(Reroute::new(c.clone())),
            TransformSpec::Mask(c) => Box::new(sluice_transforms::mask::build(c)),
            TransformSpec::Hash(c) => Box::new(sluice_transforms::hash::build(c)?),
            TransformSpec::Truncate(c) => Box::new(sluice_transforms::truncate::build(c)),
            TransformSpec::Unwrap(c) => Box::new(Unwrap::new(c.clone())),
            TransformSpec::Filter(c) => Box::new(
                Filter::new(c.clone()).map_err(|e| fatal(format!("filter condition {e}")))?,
            ),
            TransformSpec::Key(c) => Box::new(Key::new(c).map_err(fatal)?),
            TransformSpec::Columns(c) => Box::new(Columns::new(c.clone()).map_err(fatal)?),
            TransformSpec::Skip(c) => Box::new(Skip::new(c)),
        })
    }
}

/// `sinks:` kinds.
#[derive(Debug, Clone)]
pub enum SinkSpec {
    /// JSON lines on standard output.
    Stdout(StdoutSinkConfig),
    /// JSON lines in a file.
    File(FileSinkConfig),
    /// Encode and discard.
    Null(NullSinkConfig),
    /// Records in Kafka topics.
    Kafka(Box<KafkaSinkConfig>),
}

impl ComponentSpec for SinkSpec {
    const ROLE: &'static str = "sink";
    const KINDS: &'static [&'static str] = &["stdout", "file", "null", "kafka"];
    fn from_node(kind: &str, node: &Node, skip: &[&str]) -> Result<Option<Self>, ConfigError> {
        Ok(Some(match kind {
            "stdout" => SinkSpec::Stdout(body(node, skip)?),
            "file" => SinkSpec::File(body(node, skip)?),
            "null" => SinkSpec::Null(body(node, skip)?),
            "kafka" => SinkSpec::Kafka(Box::new(checked(node, skip, KafkaSinkConfig::validate)?)),
            _ => return Ok(None),
        }))
    }
}

impl BuildSink for SinkSpec {
    fn build(&self, ctx: &BuildContext<'_>) -> Result<Box<dyn Sink>, ComponentError> {
        Ok(match self {
            SinkSpec::Stdout(c) => Box::new(StdoutSink::new(c, ctx)?),
            SinkSpec::File(c) => Box::new(FileSink::open(c, ctx)?),
            SinkSpec::Null(c) => Box::new(NullSink::new(c, Arc::new(AtomicU64::new(0)))),
            SinkSpec::Kafka(c) => Box::new(KafkaSink::open(c, ctx)?),
        })
    }
}

/// A pipeline of this binary's components.
pub type Pipeline = sluice_engine::config::PipelineConfig<SourceSpec, TransformSpec, SinkSpec>;
