//! `datagen`: a deterministic synthetic source for tests and benchmarks without a database.
//!
//! Every table has the shape of Debezium's reference `customers` table. Step `n` of the
//! generator is a pure function of the seed and the steps before it, so the position after a
//! step is simply the step count: on restart the generator replays the committed steps without
//! emitting them and continues from there.

mod config;
mod generator;

use async_trait::async_trait;
use sluice_engine::{Batch, BuildContext, ComponentError, Position, Source, SourceContext};

pub use config::{DatagenConfig, OpMix};
pub use generator::Generator;

/// The running datagen source.
#[derive(Debug)]
pub struct DatagenSource {
    config: DatagenConfig,
}

impl DatagenSource {
    /// A source for `config`.
    pub fn new(config: DatagenConfig, _ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        config.validate().map_err(ComponentError::fatal)?;
        Ok(DatagenSource { config })
    }
}

#[async_trait]
impl Source for DatagenSource {
    async fn run(&mut self, ctx: &mut SourceContext) -> Result<(), ComponentError> {
        // Nothing to reach: ready at once.
        ctx.connected();
        let start = match ctx.resume_from() {
            None => 0,
            Some(Position::Offset(n)) => *n,
            Some(other) => {
                return Err(ComponentError::fatal(format!(
                    "the committed position `{other}` is not a datagen position; remove the offsets file or rename the pipeline"
                )))
            }
        };
        let mut generator = Generator::new(&self.config);
        generator.skip_to(start);
        let max_batch = ctx.limits().max_batch_size;
        let rate = self.config.rate;
        let batch_size = if rate == 0 {
            max_batch
        } else {
            (rate as usize / 10).clamp(1, max_batch)
        };
        let started = tokio::time::Instant::now();
        let mut emitted_here = 0u64;
        loop {
            if ctx.is_stopping() {
                return Ok(());
            }
            let remaining = self
                .config
                .max_events
                .map(|max| max.saturating_sub(generator.step()));
            if remaining == Some(0) {
                return Ok(());
            }
            let steps = remaining.map_or(batch_size, |r| (r as usize).min(batch_size));
            let mut events = Vec::with_capacity(steps + steps / 8);
            for _ in 0..steps {
                generator.next_step(&mut events);
            }
            emitted_here += steps as u64;
            let batch = Batch {
                events,
                position: Some(Position::Offset(generator.step())),
            };
            if ctx.emit(batch).await.is_err() {
                return Ok(());
            }
            if rate > 0 {
                let due =
                    started + std::time::Duration::from_secs_f64(emitted_here as f64 / rate as f64);
                tokio::select! {
                    _ = tokio::time::sleep_until(due) => {}
                    _ = ctx.stopping() => return Ok(()),
                }
            } else {
                // Let other tasks of this arbiter run between batches.
                tokio::task::yield_now().await;
            }
        }
    }
}
