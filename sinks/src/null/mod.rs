//! `null`: encode and discard.

mod config;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use sluice_engine::codec::{JsonEncoder, JsonOptions};
use sluice_engine::{delivered, ComponentError, Delivery, Sink, SinkBatch};

pub use config::NullSinkConfig;

/// The running null sink.
pub struct NullSink {
    encoder: JsonEncoder,
    buffer: Vec<u8>,
    bytes: Arc<AtomicU64>,
}

impl NullSink {
    /// A sink that counts encoded bytes into `bytes`.
    pub fn new(config: &NullSinkConfig, bytes: Arc<AtomicU64>) -> Self {
        NullSink {
            encoder: JsonEncoder::new(JsonOptions {
                schemas_enable: config.schemas_enable,
            }),
            buffer: Vec::with_capacity(1 << 16),
            bytes,
        }
    }
}

#[async_trait]
impl Sink for NullSink {
    async fn write(&mut self, batch: &SinkBatch<'_>) -> Result<Delivery, ComponentError> {
        let mut total = 0u64;
        for event in batch.iter() {
            self.buffer.clear();
            self.encoder.encode_line(event, false, &mut self.buffer);
            total += self.buffer.len() as u64;
        }
        self.bytes.fetch_add(total, Ordering::Relaxed);
        Ok(delivered())
    }
}
