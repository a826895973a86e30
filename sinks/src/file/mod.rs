//! `file`: JSON lines appended to a file, made durable before they are acknowledged.

mod config;

use async_trait::async_trait;
use sluice_engine::codec::json::write_string;
use sluice_engine::codec::{JsonEncoder, JsonOptions};
use sluice_engine::{
    BuildContext, ChangeEvent, ComponentError, Delivery, FailureMode, Sink, SinkBatch,
};

pub use config::{FileFormat, FileSinkConfig};

use crate::format::cloudevents::CloudEventsEncoder;
use crate::skipped::skip_or_fail;

use crate::writer::{ClassifiedIo, WriterThread};

/// Bytes encoded before they are handed to the writer thread: below the writer's 1 MiB buffers,
/// so that the record that crosses the mark does not double a buffer (measured: 64 → 58 MB
/// peak RSS for a snapshot with schemas).
const CHUNK_BYTES: usize = 896 << 10;

/// The running file sink.
pub struct FileSink {
    name: String,
    encoder: JsonEncoder,
    /// `format: cloudevents`: the values' encoder, and what becomes of the values it refuses.
    cloudevents: Option<(CloudEventsEncoder, FailureMode)>,
    headers: bool,
    fsync: bool,
    writer: WriterThread,
}

impl FileSink {
    /// Opens (creating or appending to) the file.
    pub fn open(config: &FileSinkConfig, ctx: &BuildContext<'_>) -> Result<Self, ComponentError> {
        let path = &config.path;
        let what = format!("sink `{}` ({})", ctx.component, path.display());
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                ComponentError::from_classified(
                    format!("{what}: cannot create the directory"),
                    ClassifiedIo(e),
                )
            })?;
        }
        let io = |action: &str, e| {
            ComponentError::from_classified(format!("{what}: cannot {action}"), ClassifiedIo(e))
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| io("open the file", e))?;
        drop_torn_tail(path).map_err(|e| io("repair the last line", e))?;
        let cloudevents = (config.format == FileFormat::Cloudevents).then(|| {
            (
                CloudEventsEncoder::new(config.schemas_enable, config.extension_attributes),
                config.failure_mode,
            )
        });
        Ok(FileSink {
            name: ctx.component.to_owned(),
            encoder: JsonEncoder::new(JsonOptions {
                schemas_enable: config.schemas_enable,
            }),
            cloudevents,
            headers: config.headers,
            fsync: config.fsync,
            writer: WriterThread::spawn(what, file)?,
        })
    }
}

/// A crash in the middle of a write can leave a partial last line. Its events were never
/// acknowledged, so they are written again; cut the fragment so the file stays valid JSON lines.
fn drop_torn_tail(path: &std::path::Path) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    let mut keep = len;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let start = keep.saturating_sub(chunk.len() as u64);
        let n = (keep - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut chunk[..n])?;
        if let Some(i) = chunk[..n].iter().rposition(|b| *b == b'\n') {
            keep = start + i as u64 + 1;
            break;
        }
        if start == 0 {
            keep = 0;
            break;
        }
        keep = start;
    }
    if keep < len {
        tracing::warn!(path = %path.display(), bytes = len - keep, "Dropping a partial last line left by a crash; its events are delivered again.");
        file.set_len(keep)?;
        file.sync_all()?;
    }
    Ok(())
}

impl FileSink {
    /// Appends the event's line; with CloudEvents, a value that is not a change event is
    /// handled by the failure mode.
    fn line(&mut self, event: &ChangeEvent, out: &mut Vec<u8>) -> Result<(), ComponentError> {
        let Some((cloudevents, mode)) = &mut self.cloudevents else {
            self.encoder.encode_line(event, self.headers, out);
            return Ok(());
        };
        let mut value = Vec::new();
        if let Err(reason) = cloudevents.encode_value(event, &mut value) {
            return skip_or_fail(*mode, &self.name, "", &reason);
        }
        out.extend_from_slice(b"{\"topic\":");
        write_string(&event.topic, out);
        out.extend_from_slice(b",\"key\":");
        self.encoder.encode_record(event.key.as_ref(), out);
        out.extend_from_slice(b",\"value\":");
        match event.value.is_some() {
            true => out.extend_from_slice(&value),
            false => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b"}\n");
        Ok(())
    }
}

#[async_trait]
impl Sink for FileSink {
    async fn write(&mut self, batch: &SinkBatch<'_>) -> Result<Delivery, ComponentError> {
        // Encoded bytes go to the writer thread in chunks, so a batch of large records never
        // sits in memory whole; only the batch's last chunk is synced, once.
        let mut deliveries = Vec::new();
        let mut buffer = self.writer.take_buffer();
        for event in batch.iter() {
            self.line(event, &mut buffer)?;
            if buffer.len() >= CHUNK_BYTES {
                let first = deliveries.is_empty();
                deliveries.push(self.writer.submit(buffer, first, false).await?);
                buffer = self.writer.take_buffer();
            }
        }
        let first = deliveries.is_empty();
        deliveries.push(self.writer.submit(buffer, first, self.fsync).await?);
        Ok(Box::pin(async move {
            for delivery in deliveries {
                delivery.await?;
            }
            Ok(())
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::drop_torn_tail;

    #[test]
    fn a_torn_last_line_is_cut_and_whole_lines_are_kept() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f.jsonl");
        for (content, expected) in [
            ("{\"a\":1}\n{\"b\"", "{\"a\":1}\n"),
            ("{\"a\":1}\n", "{\"a\":1}\n"),
            ("{\"partial", ""),
            ("", ""),
        ] {
            std::fs::write(&path, content)?;
            drop_torn_tail(&path)?;
            assert_eq!(std::fs::read_to_string(&path)?, expected);
        }
        Ok(())
    }
}
