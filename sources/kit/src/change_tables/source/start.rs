//! The snapshot mode carried out from the stored position: a snapshot, the schema only
//! (`no_data`, `recovery`), or nothing; where the stream goes on from.

use sluice_engine::SourceContext;

use super::{At, ChangeTableSource, Dialect, ErrorOf, OffsetOf, StreamFrom};
use crate::change_tables::ChangeLsn;
use crate::history::ChangeKind;
use crate::position::Resume;
use crate::snapshot::{Start, Stored};

impl<D: Dialect> ChangeTableSource<D> {
    /// Carries out the snapshot mode from the stored position (the selected partition's);
    /// where the stream goes on from (`None`: the mode does not stream).
    pub async fn start(
        &self,
        conn: &mut D::Conn,
        ctx: &mut SourceContext,
    ) -> Result<Option<StreamFrom<D>>, ErrorOf<D>> {
        let resume: Option<Resume<OffsetOf<D>, super::Progress>> = ctx
            .resume_from()
            .map(|p| Resume::parse(p, D::NAME))
            .transpose()?;
        let lost = match &resume {
            Some(r) => self.dialect.lost(conn, r.at.commit_lsn).await?,
            None => None,
        };
        let stored = Stored {
            offset: resume.is_some(),
            snapshot_completed: resume.as_ref().is_some_and(|r| r.at.snapshot_completed),
            position_available: lost.is_none(),
            history_available: true,
        };
        let common = self.dialect.common();
        let plan = common.plan(stored, lost.as_deref().unwrap_or(""));
        let Some(plan) = plan? else {
            return Ok(None);
        };
        // A snapshot cut off earlier whose position the change tables still hold: a new
        // snapshot goes out at it and the stream resumes there (the kit's `snapshot::Start`).
        let cut_off = Start::cut_off(&plan, stored, resume.as_ref().map(|r| r.at.clone()));
        // A new snapshot (`when_needed` after a cleanup): the stored position is not resumed.
        let resume = if plan.data { None } else { resume };
        let progress = resume.as_ref().and_then(|r| r.incremental.clone());
        let from = if plan.data {
            self.snapshot(conn, cut_off, ctx).await?
        } else {
            match resume {
                Some(r) => {
                    // `recovery`: the schema history written again from the current tables.
                    if plan.schema {
                        self.rebuild_history(conn, &r.at).await?;
                    }
                    r.at
                }
                None => self.start_without_data(conn, plan.schema, ctx).await?,
            }
        };
        Ok(plan.stream.then_some((from, progress)))
    }

    /// A start without a data snapshot (`no_data`, `never`): the stream starts at the newest
    /// LSN, committed at once so that a restart goes on from there; with `schema`, the
    /// tables' schema change events and history.
    async fn start_without_data(
        &self,
        conn: &mut D::Conn,
        schema: bool,
        ctx: &mut SourceContext,
    ) -> Result<OffsetOf<D>, ErrorOf<D>> {
        let max = self.dialect.max_lsn(conn).await?.unwrap_or_default();
        let at = OffsetOf::<D>::at(max, true);
        let events = if schema {
            let upto = (!max.is_zero()).then_some(max);
            let tables = self.dialect.tables(conn, self.source_schema(), upto, false);
            // The signaling table, when the configuration does not select it, is only streamed.
            let tables: Vec<_> = (tables.await?.into_iter()).filter(|t| t.captured).collect();
            let all: Vec<_> = tables.iter().collect();
            self.remember(&all, ChangeKind::Create, &at.position())
                .await?;
            let source = At::now("true", max);
            (tables.iter())
                .filter_map(|t| self.schema_change(t, ChangeKind::Create, &source, &at.position()))
                .collect()
        } else {
            Vec::new()
        };
        self.dialect
            .end_read(conn, "ending the schema snapshot")
            .await?;
        Self::emit(ctx, events, at.position()).await?;
        Ok(at)
    }

    /// `snapshot.mode: recovery`: the schema history written again from the current tables,
    /// at the stored position.
    async fn rebuild_history(
        &self,
        conn: &mut D::Conn,
        at: &OffsetOf<D>,
    ) -> Result<(), ErrorOf<D>> {
        let tables = self.dialect.tables(conn, self.source_schema(), None, false);
        let tables = tables.await?;
        let captured: Vec<_> = tables.iter().filter(|t| t.captured).collect();
        tracing::info!(
            tables = captured.len(),
            "Recovery: the schema history is written again from the current tables."
        );
        self.remember(&captured, ChangeKind::Create, &at.position())
            .await?;
        self.dialect.end_read(conn, "ending the recovery").await
    }
}
