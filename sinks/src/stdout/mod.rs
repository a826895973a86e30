//! `stdout`: events as JSON on standard output.

mod config;

use async_trait::async_trait;
use sluice_engine::codec::{JsonEncoder, JsonOptions};
use sluice_engine::{BuildContext, ComponentError, Delivery, Sink, SinkBatch};

pub use config::StdoutSinkConfig;

use crate::writer::{Stdout, WriterThread};

/// The running stdout sink.
pub struct StdoutSink {
    encoder: JsonEncoder,
    pretty: bool,
    headers: bool,
    writer: WriterThread,
    line: Vec<u8>,
}

impl StdoutSink {
    /// A sink writing to this process's standard output.
    pub fn new(config: &StdoutSinkConfig, ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        Ok(StdoutSink {
            encoder: JsonEncoder::new(JsonOptions {
                schemas_enable: config.schemas_enable,
            }),
            pretty: config.pretty,
            headers: config.headers,
            writer: WriterThread::spawn(format!("sink `{}` (stdout)", ctx.component), Stdout)?,
            line: Vec::new(),
        })
    }
}

#[async_trait]
impl Sink for StdoutSink {
    async fn write(&mut self, batch: &SinkBatch<'_>) -> Result<Delivery, ComponentError> {
        let mut out = self.writer.take_buffer();
        for event in batch.iter() {
            if self.pretty {
                self.line.clear();
                self.encoder
                    .encode_line(event, self.headers, &mut self.line);
                match serde_json::from_slice::<serde_json::Value>(&self.line) {
                    Ok(value) => {
                        let _ = serde_json::to_writer_pretty(&mut out, &value);
                        out.push(b'\n');
                    }
                    Err(_) => out.extend_from_slice(&self.line),
                }
            } else {
                self.encoder.encode_line(event, self.headers, &mut out);
            }
        }
        self.writer.submit(out, true, false).await
    }
}
