//! The order every database source runs in, kept here rather than remembered by each source:
//! the pipeline's counters handed to the shared options, the database reached, the pipeline
//! told (ready from here on, and the connector's name for Debezium's metrics), then the capture
//! (the snapshot mode's snapshot, then the stream). A source says how it reaches its database
//! and how it captures ([`DatabaseSource`]); [`drive`] does the rest. A snapshot announces its
//! tables and says when it completed through one value ([`SnapshotRun`]).

use async_trait::async_trait;
use sluice_engine::{ComponentError, SourceContext};

use crate::config::SourceCommon;

/// A database source as the kit drives it.
#[async_trait]
pub trait DatabaseSource: Send {
    /// What reaching the database gives the capture: its connection, what was checked.
    type Reached: Send;
    /// The source's error.
    type Error: Into<ComponentError> + Send;

    /// The connector's name in the events' `source` block (`postgresql`, `mysql`, ...).
    fn connector(&self) -> &'static str;

    /// The options every database source shares.
    fn common_mut(&mut self) -> &mut SourceCommon;

    /// Connects and checks the database is set up for capture.
    async fn reach(&mut self, ctx: &mut SourceContext) -> Result<Self::Reached, Self::Error>;

    /// The snapshot the snapshot mode asks for, then the stream, until the pipeline stops.
    async fn capture(
        &mut self,
        reached: Self::Reached,
        ctx: &mut SourceContext,
    ) -> Result<(), Self::Error>;
}

/// Runs `source`: counters, reach, announce, capture.
pub async fn drive<S: DatabaseSource>(
    source: &mut S,
    ctx: &mut SourceContext,
) -> Result<(), ComponentError> {
    source.common_mut().count_into(ctx);
    let reached = source.reach(ctx).await.map_err(Into::into)?;
    let connector = source.connector();
    announce(ctx, connector, &source.common_mut().topic_prefix);
    source.capture(reached, ctx).await.map_err(Into::into)
}

/// The database is reached: the pipeline is ready, and its metrics carry `connector` and the
/// logical name `topic_prefix` (what [`drive`] does; a source reading several databases, SQL
/// Server's, once they all are).
pub fn announce(ctx: &SourceContext, connector: &str, topic_prefix: &str) {
    ctx.connected();
    ctx.identify(connector, topic_prefix);
}

/// A snapshot under way: announced with its tables (the status and Debezium's table counts
/// follow them); [`Self::completed`] once its last batch is out.
#[must_use = "a snapshot says when it completed"]
#[derive(Debug)]
pub struct SnapshotRun(());

impl SnapshotRun {
    /// A snapshot starts reading `tables` (their names and the rows the database estimates
    /// each holds).
    pub fn announce(ctx: &SourceContext, tables: Vec<(String, Option<u64>)>) -> Self {
        ctx.snapshot_tables(tables);
        SnapshotRun(())
    }

    /// The snapshot's last batch has been emitted.
    pub fn completed(self, ctx: &SourceContext) {
        ctx.snapshot_completed();
    }
}
