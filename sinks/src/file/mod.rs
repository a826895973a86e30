//! `file`: JSON lines appended to a file, made durable before they are acknowledged.

mod config;

use async_trait::async_trait;
use sluice_engine::codec::{JsonEncoder, JsonOptions};
use sluice_engine::{BuildContext, ComponentError, Sink, SinkBatch};

pub use config::FileSinkConfig;

use crate::writer::{ClassifiedIo, WriterThread};

/// The running file sink.
pub struct FileSink {
    encoder: JsonEncoder,
    headers: bool,
    fsync: bool,
    writer: WriterThread,
    buffer: Vec<u8>,
}

impl FileSink {
    /// Opens (creating or appending to) the file.
    pub fn open(config: &FileSinkConfig, ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        let path = &config.path;
        let what = format!("sink `{}` ({})", ctx.component, path.display());
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                ComponentError::from_classified(format!("{what}: cannot create the directory"), ClassifiedIo(e))
            })?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| ComponentError::from_classified(format!("{what}: cannot open the file"), ClassifiedIo(e)))?;
        Ok(FileSink {
            encoder: JsonEncoder::new(JsonOptions {
                schemas_enable: config.schemas_enable,
            }),
            headers: config.headers,
            fsync: config.fsync,
            writer: WriterThread::spawn(what, file)?,
            buffer: Vec::with_capacity(1 << 20),
        })
    }
}

#[async_trait]
impl Sink for FileSink {
    async fn write(&mut self, batch: &SinkBatch<'_>) -> Result<(), ComponentError> {
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.clear();
        for event in batch.iter() {
            self.encoder.encode_line(event, self.headers, &mut buffer);
        }
        self.buffer = self.writer.write(buffer, self.fsync).await?;
        Ok(())
    }
}
