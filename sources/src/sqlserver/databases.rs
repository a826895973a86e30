//! The `sqlserver` source over the databases of `database.names`, as Debezium's SQL Server
//! task reads its source partitions (`SqlServerChangeEventSourceCoordinator`): each database
//! is a partition with its own position, connection and incremental snapshot; their snapshots
//! run one after another in the order listed, then one poll of each in turn, waiting
//! `poll.interval.ms` only when none had anything new. The pipeline's committed position holds
//! every database's (the engine's partitions), so that each resumes after what was delivered
//! of it, and a database added to the list is snapshotted as its snapshot mode says.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sluice_engine::{BuildContext, ComponentError, Source, SourceContext};
use sluice_kit::signal::Channels;

use sluice_kit::change_tables::source::Dialect;

use super::connection::Conn;
use super::error::SqlServerError;
use super::{SqlServerConfig, SqlServerDialect, SqlServerSource};

type Streaming = sluice_kit::change_tables::source::Streaming<SqlServerDialect>;
type StreamFrom = sluice_kit::change_tables::source::StreamFrom<SqlServerDialect>;

/// The `sqlserver` source.
pub struct SqlServer {
    databases: Vec<SqlServerSource>,
    data_dir: std::path::PathBuf,
}

impl SqlServer {
    pub(crate) fn new(
        config: SqlServerConfig,
        ctx: &BuildContext<'_>,
    ) -> Result<Self, ComponentError> {
        let databases = (config.database_names().into_iter())
            .map(|name| {
                let mut one = config.clone();
                one.database = name;
                SqlServerSource::new(SqlServerDialect::new(one), crate::VERSION)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SqlServer {
            databases,
            data_dir: ctx.data_dir.to_path_buf(),
        })
    }

    /// The first database listed (`database.names` lists one at least).
    fn first(&self) -> Result<&SqlServerSource, SqlServerError> {
        (self.databases.first())
            .ok_or_else(|| SqlServerError::Setup("`database.names` lists no database".into()))
    }

    /// Connects to every database and checks its CDC setup; the schema history opened once
    /// for all of them.
    async fn connect(&mut self) -> Result<Vec<Conn>, SqlServerError> {
        let mut history: Option<Arc<_>> = None;
        let mut conns = Vec::with_capacity(self.databases.len());
        for d in &mut self.databases {
            history = Some(d.open_history(&self.data_dir, history).await?);
            let mut conn = d.dialect.connect().await?;
            d.dialect.check_setup(&mut conn).await?;
            conns.push(conn);
        }
        Ok(conns)
    }

    /// Every database's snapshot mode carried out, one after another; the streams to run
    /// (database index, connection, where it goes on from).
    async fn start(
        &self,
        conns: Vec<Conn>,
        ctx: &mut SourceContext,
    ) -> Result<Vec<(usize, Conn, StreamFrom)>, SqlServerError> {
        let mut started = Vec::new();
        for (i, (d, mut conn)) in self.databases.iter().zip(conns).enumerate() {
            ctx.select_partition(i);
            let span = tracing::info_span!("database", name = %d.dialect.config.database);
            let from = tracing::Instrument::instrument(d.start(&mut conn, ctx), span).await?;
            if let Some(from) = from {
                started.push((i, conn, from));
            }
            if ctx.is_stopping() {
                return Err(SqlServerError::Stopped);
            }
        }
        Ok(started)
    }

    /// Several databases' streams, one poll of each in turn; the `file`, `http` and `kafka`
    /// signal channels read once and each signal handed to the databases it names.
    async fn stream_all(
        &self,
        started: Vec<(usize, Conn, StreamFrom)>,
        ctx: &mut SourceContext,
    ) -> Result<(), SqlServerError> {
        let first = &self.first()?.dialect.config;
        let mut channels = Channels::open(&first.common, ctx).await?;
        let mut streams: Vec<(usize, Conn, Streaming)> = Vec::with_capacity(started.len());
        for (i, mut conn, from) in started {
            ctx.select_partition(i);
            let s = self.databases[i]
                .open_stream(&mut conn, from, false, ctx)
                .await?;
            streams.push((i, conn, s));
        }
        let poll = Duration::from_millis(first.poll_interval_ms);
        loop {
            if ctx.is_stopping() {
                return Ok(());
            }
            let received = channels.take();
            let routes = self.routes(&received, &streams);
            let mut any = false;
            for (k, (i, conn, s)) in streams.iter_mut().enumerate() {
                // The database's signals just before its poll, whose positions carry them.
                let names = s.captured();
                for (signal, targets) in &routes {
                    if targets.contains(&k) {
                        s.incremental().act(signal, &names);
                    }
                }
                ctx.select_partition(*i);
                any |= self.databases[*i].iterate(conn, s, ctx).await?;
            }
            // Marked read (the `kafka` channel's offset) once every database it is for has
            // polled with it.
            received.iter().for_each(|r| channels.handled(r));
            if !any {
                tokio::select! {
                    _ = tokio::time::sleep(poll) => {}
                    _ = ctx.stopping() => return Ok(()),
                }
            }
        }
    }

    /// The channels' signals, each with the streams (indices) that carry it out
    /// ([`sluice_kit::signal::route`]).
    fn routes(
        &self,
        received: &[sluice_kit::signal::Received],
        streams: &[(usize, Conn, Streaming)],
    ) -> Vec<(sluice_kit::signal::Signal, Vec<usize>)> {
        if received.is_empty() {
            return Vec::new();
        }
        let captured: Vec<Vec<String>> = streams.iter().map(|(_, _, s)| s.captured()).collect();
        let partitions: Vec<(&str, &[String])> = (streams.iter().zip(&captured))
            .map(|((i, _, _), names)| {
                (
                    self.databases[*i].dialect.config.database.as_str(),
                    names.as_slice(),
                )
            })
            .collect();
        (received.iter())
            .filter_map(|r| r.signal())
            .map(|signal| {
                let targets = sluice_kit::signal::route(&signal, &partitions);
                (signal, targets)
            })
            .collect()
    }
}

#[async_trait]
impl Source for SqlServer {
    async fn run(&mut self, ctx: &mut SourceContext) -> Result<(), ComponentError> {
        for d in &mut self.databases {
            d.count_into(ctx);
        }
        let names: Vec<String> = (self.databases.iter())
            .map(|d| d.dialect.config.database.clone())
            .collect();
        let first = &self.first()?.dialect.config;
        let prefix = first.common.topic_prefix.clone();
        let span = tracing::info_span!("sqlserver", host = %first.connection.host(), port = first.port(), databases = %names.join(","));
        let _guard = span.enter();
        ctx.partition_by(&names)
            .map_err(|e| ComponentError::fatal(format!("sqlserver: {e}")))?;
        let conns = self.connect().await?;
        sluice_kit::lifecycle::announce(ctx, "sqlserver", &prefix);
        let done = async {
            let mut started = self.start(conns, ctx).await?;
            if started.is_empty() || ctx.is_stopping() {
                return Ok(());
            }
            if self.databases.len() == 1 {
                // One database reads its channels itself.
                let (i, mut conn, from) = started.remove(0);
                ctx.select_partition(i);
                return self.databases[i].stream(&mut conn, from, ctx).await;
            }
            self.stream_all(started, ctx).await
        };
        match done.await {
            Err(SqlServerError::Stopped) => Ok(()),
            done => Ok(done?),
        }
    }
}
