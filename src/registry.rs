//! The closed sets of sources, transforms and sinks compiled into this binary: one line each.
//! A component's configuration type says how it is read and built
//! (`sluice_engine::registry::Component`).

use std::sync::Arc;

use sluice_engine::config::{ConfigError, OffsetsConfig, ENGINE_OFFSET_STORES};
use sluice_engine::offsets::OffsetStore;

sluice_engine::components! {
    /// `source:` kinds.
    pub enum SourceSpec: "source", BuildSource, Source {
        #[cfg(feature = "datagen")]
        Datagen(sluice_sources::datagen::DatagenConfig),
        #[cfg(feature = "postgres")]
        Postgres(sluice_sources::postgres::PostgresConfig),
        #[cfg(feature = "sqlite")]
        Sqlite(sluice_sources::sqlite::SqliteConfig),
        #[cfg(feature = "mysql")]
        Mysql(sluice_sources::mysql::MysqlConfig),
        #[cfg(feature = "mysql")]
        Mariadb(sluice_sources::mysql::MariadbConfig),
        #[cfg(feature = "sqlserver")]
        Sqlserver(sluice_sources::sqlserver::SqlServerConfig),
        #[cfg(feature = "db2")]
        Db2(sluice_sources::db2::Db2Config),
    }
    not built {
        #[cfg(not(feature = "datagen"))]
        "datagen" => "datagen",
        #[cfg(not(feature = "postgres"))]
        "postgres" => "postgres",
        #[cfg(not(feature = "sqlite"))]
        "sqlite" => "sqlite",
        #[cfg(not(feature = "mysql"))]
        "mysql" => "mysql",
        #[cfg(not(feature = "mysql"))]
        "mariadb" => "mysql",
        #[cfg(not(feature = "sqlserver"))]
        "sqlserver" => "sqlserver",
        #[cfg(not(feature = "db2"))]
        "db2" => "db2",
    }
}

sluice_engine::components! {
    /// `transforms:` kinds.
    pub enum TransformSpec: "transform", BuildTransform, Transform {
        Route(sluice_transforms::route::RouteConfig),
        Reroute(sluice_transforms::reroute::RerouteConfig),
        Mask(sluice_transforms::mask::MaskConfig),
        Hash(sluice_transforms::hash::HashConfig),
        Truncate(sluice_transforms::truncate::TruncateConfig),
        Unwrap(sluice_transforms::unwrap::UnwrapConfig),
        Filter(sluice_transforms::filter::FilterConfig),
        Key(sluice_transforms::key::KeyConfig),
        Columns(sluice_transforms::columns::ColumnsConfig),
        Skip(sluice_transforms::skip::SkipConfig),
        Outbox(sluice_transforms::outbox::OutboxConfig),
    }
}

sluice_engine::components! {
    /// `sinks:` kinds.
    pub enum SinkSpec: "sink", BuildSink, Sink {
        Stdout(sluice_sinks::stdout::StdoutSinkConfig),
        File(sluice_sinks::file::FileSinkConfig),
        Null(sluice_sinks::null::NullSinkConfig),
        #[cfg(feature = "kafka")]
        Kafka(sluice_sinks::kafka::KafkaSinkConfig),
        #[cfg(feature = "http")]
        Http(sluice_sinks::http::HttpSinkConfig),
        #[cfg(feature = "redis")]
        Redis(sluice_sinks::redis::RedisSinkConfig),
        #[cfg(feature = "nats")]
        Nats(sluice_sinks::nats::NatsSinkConfig),
        #[cfg(feature = "rabbitmq")]
        Rabbitmq(sluice_sinks::rabbitmq::RabbitmqSinkConfig),
        #[cfg(feature = "jdbc")]
        Jdbc(sluice_sinks::jdbc::JdbcSinkConfig),
    }
    not built {
        #[cfg(not(feature = "kafka"))]
        "kafka" => "kafka",
        #[cfg(not(feature = "http"))]
        "http" => "http",
        #[cfg(not(feature = "redis"))]
        "redis" => "redis",
        #[cfg(not(feature = "nats"))]
        "nats" => "nats",
        #[cfg(not(feature = "rabbitmq"))]
        "rabbitmq" => "rabbitmq",
        #[cfg(not(feature = "jdbc"))]
        "jdbc" => "jdbc",
    }
}

/// The offset stores components provide, by `offsets.store` name.
const PROVIDED_OFFSET_STORES: &[&str] = &[
    #[cfg(feature = "kafka")]
    "kafka",
];

/// Checks the `offsets` block's keys for the store it names (the engine checked its own).
pub(crate) fn check_offsets(offsets: &OffsetsConfig) -> Result<(), ConfigError> {
    if offsets.is_engine_store() {
        return Ok(());
    }
    match offsets.store.as_str() {
        #[cfg(feature = "kafka")]
        "kafka" => sluice_sinks::kafka::offsets::KafkaOffsetsConfig::read(offsets).map(|_| ()),
        other => {
            let mut known: Vec<&str> = ENGINE_OFFSET_STORES.to_vec();
            known.extend(PROVIDED_OFFSET_STORES);
            let message = format!(
                "unknown offset store `{other}`: this build has {}",
                known.join(", ")
            );
            Err(match &offsets.node {
                Some(node) => ConfigError::at(node.loc, message).with_path("offsets"),
                None => ConfigError {
                    loc: None,
                    path: vec!["offsets".into()],
                    message,
                },
            })
        }
    }
}

/// The offset store a pipeline's `offsets:` names when a component provides it (`kafka`);
/// `None`: the engine's own (`file`, `memory`).
pub(crate) fn offset_store(
    offsets: &OffsetsConfig,
) -> Result<Option<Arc<dyn OffsetStore>>, String> {
    check_offsets(offsets).map_err(|e| e.to_string())?;
    match offsets.store.as_str() {
        #[cfg(feature = "kafka")]
        "kafka" => {
            let config = sluice_sinks::kafka::offsets::KafkaOffsetsConfig::read(offsets)
                .map_err(|e| e.to_string())?;
            let store = sluice_sinks::kafka::offsets::KafkaOffsetStore::open(&config)
                .map_err(|e| e.to_string())?;
            Ok(Some(Arc::new(store)))
        }
        _ => Ok(None),
    }
}

/// A pipeline of this binary's components.
pub(crate) type Pipeline =
    sluice_engine::config::PipelineConfig<SourceSpec, TransformSpec, SinkSpec>;
