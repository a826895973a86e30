//! The closed sets of sources, transforms and sinks compiled into this binary: one line each.
//! A component's configuration type says how it is read and built
//! (`sluice_engine::registry::Component`).

use std::sync::Arc;

use sluice_engine::config::{OffsetStoreKind, OffsetsConfig};
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
    }
}

/// The offset store a pipeline's `offsets:` names when a component provides it (`kafka`);
/// `None`: the engine's own (`file`, `memory`).
pub(crate) fn offset_store(
    offsets: &OffsetsConfig,
) -> Result<Option<Arc<dyn OffsetStore>>, String> {
    match offsets.store {
        #[cfg(feature = "kafka")]
        OffsetStoreKind::Kafka => {
            let store = sluice_sinks::kafka::offsets::KafkaOffsetStore::open(offsets)
                .map_err(|e| e.to_string())?;
            Ok(Some(Arc::new(store)))
        }
        #[cfg(not(feature = "kafka"))]
        OffsetStoreKind::Kafka => Err(
            "`offsets.store: kafka` needs the `kafka` component, which this build leaves out (build with `--features kafka`)".into(),
        ),
        OffsetStoreKind::File | OffsetStoreKind::Memory => Ok(None),
    }
}

/// A pipeline of this binary's components.
pub(crate) type Pipeline =
    sluice_engine::config::PipelineConfig<SourceSpec, TransformSpec, SinkSpec>;
