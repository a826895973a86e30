//! The order every database source runs in, kept here rather than remembered by each source:
//! the pipeline's counters handed to the shared options, the database reached, the pipeline
//! told (ready from here on, and the connector's name for Debezium's metrics), then the capture
//! (the snapshot mode's plan over what is stored; the snapshot it asks for, or the resume from
//! the stored position; then the stream). A source supplies each step ([`DatabaseSource`]);
//! [`drive`] runs them in order and decides between them. A snapshot announces its tables and
//! says when it completed through one value ([`SnapshotRun`]).

use async_trait::async_trait;
use sluice_engine::{ComponentError, SourceContext};

use crate::config::SourceCommon;
use crate::snapshot::{Plan, Stored};

/// A database source as the kit drives it: each step a method, called in order by [`drive`].
#[async_trait]
pub trait DatabaseSource: Send {
    /// What reaching the database gives the next step: its connection, what was checked.
    type Reached: Send;
    /// What the steps after it share: connections, the captured tables, the schema history,
    /// the committed position read.
    type Prepared: Send;
    /// Where the stream starts (the snapshot's position, or the stored one).
    type From: Send;
    /// The source's error.
    type Error: Into<ComponentError> + Send;

    /// The connector's name in the events' `source` block (`postgresql`, `mysql`, ...).
    fn connector(&self) -> &'static str;

    /// The options every database source shares.
    fn common_mut(&mut self) -> &mut SourceCommon;

    /// Connects and checks the database is set up for capture.
    async fn reach(&mut self, ctx: &mut SourceContext) -> Result<Self::Reached, Self::Error>;

    /// Reads the committed position and what the database still holds of it: what the
    /// snapshot mode decides by ([`Prepared`]).
    async fn prepare(
        &mut self,
        reached: Self::Reached,
        ctx: &mut SourceContext,
    ) -> Result<Prepared<Self::Prepared>, Self::Error>;

    /// The snapshot `plan` asks for (`plan.data`), announced with its tables and completed
    /// through a [`SnapshotRun`]; where the stream goes on from it (`None`: the pipeline
    /// stopped).
    async fn snapshot(
        &mut self,
        state: &mut Self::Prepared,
        plan: &Plan,
        ctx: &mut SourceContext,
    ) -> Result<Option<Self::From>, Self::Error>;

    /// No data snapshot: where the stream starts (the stored position, else the current one),
    /// after the tables' structure is captured when `plan.schema` asks (`None`: the pipeline
    /// stopped).
    async fn resume(
        &mut self,
        state: &mut Self::Prepared,
        plan: &Plan,
        ctx: &mut SourceContext,
    ) -> Result<Option<Self::From>, Self::Error>;

    /// The stream from `from`, until the pipeline stops (at once when it is stopping already).
    async fn stream(
        &mut self,
        state: Self::Prepared,
        from: Self::From,
        ctx: &mut SourceContext,
    ) -> Result<(), Self::Error>;
}

/// What [`DatabaseSource::prepare`] found: the state the next steps share, and what is stored
/// for the snapshot mode to decide by.
#[derive(Debug)]
pub struct Prepared<P> {
    /// The state the snapshot, the resume and the stream share.
    pub state: P,
    /// What is stored and whether the database still holds it.
    pub stored: Stored,
    /// What is gone when the stored position cannot be read any more (`replication slot `x`
    /// no longer exists`), for the error that says so.
    pub lost: String,
}

/// Runs `source`: counters, reach, announce, then the snapshot mode's plan over what is
/// stored, the snapshot it asks for (or the resume), and the stream when the plan streams.
pub async fn drive<S: DatabaseSource>(
    source: &mut S,
    ctx: &mut SourceContext,
) -> Result<(), ComponentError> {
    source.common_mut().count_into(ctx);
    let reached = source.reach(ctx).await.map_err(Into::into)?;
    let connector = source.connector();
    announce(ctx, connector, &source.common_mut().topic_prefix);
    capture(source, reached, ctx).await
}

/// The steps after the announcement: prepare, plan, snapshot or resume, stream.
async fn capture<S: DatabaseSource>(
    source: &mut S,
    reached: S::Reached,
    ctx: &mut SourceContext,
) -> Result<(), ComponentError> {
    let Prepared {
        mut state,
        stored,
        lost,
    } = source.prepare(reached, ctx).await.map_err(Into::into)?;
    let plan = (source.common_mut().plan(stored, &lost))
        .map_err(|e| ComponentError::from_classified(e.to_string(), e))?;
    let Some(plan) = plan else {
        return Ok(());
    };
    let from = if plan.data {
        source.snapshot(&mut state, &plan, ctx).await
    } else {
        source.resume(&mut state, &plan, ctx).await
    };
    let Some(from) = from.map_err(Into::into)? else {
        return Ok(());
    };
    if !plan.stream {
        return Ok(());
    }
    // A stop asked meanwhile is the stream's to see: it ends at once, after what it must do
    // on the way out (a replication connection shut down, a slot dropped when asked).
    source.stream(state, from, ctx).await.map_err(Into::into)
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sluice_engine::ack::AckTracker;
    use sluice_engine::component::{Lifecycle, Outlet, SourceReports, SourceWiring};
    use sluice_engine::queue::BoundedQueue;
    use sluice_engine::Position;

    use super::*;
    use crate::snapshot::SnapshotMode;

    /// A source that says which steps ran, with what it is told to find stored.
    struct Steps {
        common: SourceCommon,
        stored: Stored,
        /// `snapshot` finds the pipeline stopped.
        stops_in_snapshot: bool,
        ran: Vec<&'static str>,
    }

    #[async_trait]
    impl DatabaseSource for Steps {
        type Reached = ();
        type Prepared = ();
        type From = &'static str;
        type Error = ComponentError;

        fn connector(&self) -> &'static str {
            "test"
        }

        fn common_mut(&mut self) -> &mut SourceCommon {
            &mut self.common
        }

        async fn reach(&mut self, _: &mut SourceContext) -> Result<(), ComponentError> {
            self.ran.push("reach");
            Ok(())
        }

        async fn prepare(
            &mut self,
            (): (),
            _: &mut SourceContext,
        ) -> Result<Prepared<()>, ComponentError> {
            self.ran.push("prepare");
            Ok(Prepared {
                state: (),
                stored: self.stored,
                lost: "the log was purged".into(),
            })
        }

        async fn snapshot(
            &mut self,
            (): &mut (),
            _: &Plan,
            _: &mut SourceContext,
        ) -> Result<Option<&'static str>, ComponentError> {
            self.ran.push("snapshot");
            Ok((!self.stops_in_snapshot).then_some("snapshot's position"))
        }

        async fn resume(
            &mut self,
            (): &mut (),
            plan: &Plan,
            _: &mut SourceContext,
        ) -> Result<Option<&'static str>, ComponentError> {
            self.ran.push(if plan.schema {
                "resume with schema"
            } else {
                "resume"
            });
            Ok(Some("stored position"))
        }

        async fn stream(
            &mut self,
            (): (),
            from: &'static str,
            _: &mut SourceContext,
        ) -> Result<(), ComponentError> {
            self.ran.push(match from {
                "snapshot's position" => "stream from the snapshot",
                _ => "stream from the stored position",
            });
            Ok(())
        }
    }

    fn context() -> SourceContext {
        let (shutdown_tx, _) = tokio::sync::watch::channel(false);
        let (_, committed) = tokio::sync::watch::channel(None::<Position>);
        SourceContext::new(SourceWiring {
            pipeline: "p".into(),
            data_dir: std::env::temp_dir(),
            resume_from: None,
            outlet: Outlet {
                queue: BoundedQueue::new("source", 10, 1 << 20),
                acker: Arc::new(AckTracker::new(None)),
                sinks: 1,
                limits: Default::default(),
                stop_after: None,
                emitted: Default::default(),
                last_event_ms: Default::default(),
            },
            lifecycle: Lifecycle {
                connected: Default::default(),
                shutdown_tx: Arc::new(shutdown_tx),
                committed,
                commit_soon: Default::default(),
            },
            signals: None,
            reports: SourceReports {
                snapshot_plan: Default::default(),
                source_counters: Default::default(),
            },
        })
    }

    /// The steps `drive` runs for a source under `mode` that finds `stored`.
    fn steps(mode: SnapshotMode, stored: Stored, stops_in_snapshot: bool) -> Vec<&'static str> {
        let mut source = Steps {
            common: SourceCommon {
                snapshot_mode: mode,
                ..SourceCommon::default()
            },
            stored,
            stops_in_snapshot,
            ran: Vec::new(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let mut ctx = context();
        runtime
            .block_on(drive(&mut source, &mut ctx))
            .unwrap_or_else(|e| panic!("{e}"));
        source.ran
    }

    #[test]
    fn the_driver_runs_the_steps_the_snapshot_mode_asks_for_in_order() {
        let fresh = Stored::default();
        let done = Stored {
            offset: true,
            snapshot_completed: true,
            position_available: true,
            history_available: true,
        };
        let first = ["reach", "prepare", "snapshot", "stream from the snapshot"];
        assert_eq!(steps(SnapshotMode::Initial, fresh, false), first);
        let again = [
            "reach",
            "prepare",
            "resume",
            "stream from the stored position",
        ];
        assert_eq!(steps(SnapshotMode::Initial, done, false), again);
        assert_eq!(steps(SnapshotMode::Always, done, false), first);
        // `initial_only` does not stream; after its snapshot, nothing is left to do.
        let only = ["reach", "prepare", "snapshot"];
        assert_eq!(steps(SnapshotMode::InitialOnly, fresh, false), only);
        assert_eq!(
            steps(SnapshotMode::InitialOnly, done, false),
            ["reach", "prepare"]
        );
        // `no_data` on a first start: the structure only, then the stream.
        let schema = [
            "reach",
            "prepare",
            "resume with schema",
            "stream from the stored position",
        ];
        assert_eq!(steps(SnapshotMode::NoData, fresh, false), schema);
        // A snapshot the pipeline's stop cuts short is not followed by the stream.
        assert_eq!(
            steps(SnapshotMode::Initial, fresh, true),
            ["reach", "prepare", "snapshot"]
        );
        // `when_needed` takes a new snapshot when the stored position is gone.
        let purged = Stored {
            position_available: false,
            ..done
        };
        assert_eq!(steps(SnapshotMode::WhenNeeded, purged, false), first);
    }

    #[test]
    fn a_start_the_snapshot_mode_refuses_stops_before_any_capture_step() {
        let purged = Stored {
            offset: true,
            snapshot_completed: true,
            position_available: false,
            history_available: true,
        };
        let mut source = Steps {
            common: SourceCommon::default(),
            stored: purged,
            stops_in_snapshot: false,
            ran: Vec::new(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let mut ctx = context();
        let e = runtime.block_on(drive(&mut source, &mut ctx)).unwrap_err();
        assert!(e.to_string().starts_with("the log was purged"), "{e}");
        assert_eq!(source.ran, ["reach", "prepare"]);
    }
}
