//! Live views of the events each sink is handed, after its transforms (`sluice tap`, as
//! `vector tap`): the admin endpoint registers a listener, and each sink stage offers its
//! batches to the listeners that want them. Nobody listening costs a sink stage one atomic load
//! per batch; a listener has a bounded buffer and misses what does not fit (counted, and said
//! at the end), so a slow tap never slows the pipeline.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use sluice_engine::codec::json::{JsonEncoder, JsonOptions};
use sluice_engine::event::ChangeEvent;

/// Lines a listener may hold before it misses events.
const BUFFER: usize = 1024;

/// The listeners of one pipeline, shared by its sink stages and its admin endpoint.
#[derive(Clone, Default)]
pub struct Taps {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// How many listeners there are (read without the lock).
    active: AtomicUsize,
    listeners: Mutex<Vec<Listener>>,
}

/// What one listener wants, and where its lines go.
struct Listener {
    id: u64,
    sink: Option<String>,
    topic: Option<regex::Regex>,
    lines: mpsc::Sender<Vec<u8>>,
    missed: Arc<AtomicU64>,
}

/// A registered listener: its lines, and how many it missed; dropping it unregisters it.
pub struct Tap {
    pub lines: mpsc::Receiver<Vec<u8>>,
    pub missed: Arc<AtomicU64>,
    id: u64,
    taps: Taps,
}

impl Drop for Tap {
    fn drop(&mut self) {
        if let Ok(mut listeners) = self.taps.inner.listeners.lock() {
            listeners.retain(|l| l.id != self.id);
            self.taps
                .inner
                .active
                .store(listeners.len(), Ordering::Release);
        }
    }
}

impl Taps {
    /// A listener of the events of `sink` (all sinks when `None`) whose topic matches `topic`
    /// (anchored; all when `None`). `Err`: the pattern is not a regex.
    pub fn listen(&self, sink: Option<String>, topic: Option<&str>) -> Result<Tap, String> {
        let topic = topic
            .map(|t| regex::Regex::new(&format!("^(?:{t})$")))
            .transpose()
            .map_err(|e| format!("`topic` is not a regular expression: {e}"))?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(BUFFER);
        let missed = Arc::new(AtomicU64::new(0));
        let mut listeners =
            (self.inner.listeners.lock()).map_err(|_| "the tap registry is unusable".to_owned())?;
        listeners.push(Listener {
            id,
            sink,
            topic,
            lines: tx,
            missed: Arc::clone(&missed),
        });
        self.inner.active.store(listeners.len(), Ordering::Release);
        Ok(Tap {
            lines: rx,
            missed,
            id,
            taps: self.clone(),
        })
    }

    /// How many listeners there are.
    pub fn listening(&self) -> usize {
        self.inner.active.load(Ordering::Acquire)
    }

    /// Offers the events `sink` is about to write to the listeners that want them, never
    /// waiting: a listener whose buffer is full misses them.
    pub fn offer(&self, sink: &str, parts: &[Arc<Vec<ChangeEvent>>]) {
        if self.inner.active.load(Ordering::Acquire) == 0 {
            return;
        }
        let Ok(listeners) = self.inner.listeners.lock() else {
            return;
        };
        let encoder = JsonEncoder::new(JsonOptions {
            schemas_enable: false,
        });
        for l in listeners.iter() {
            if l.sink.as_deref().is_some_and(|s| s != sink) {
                continue;
            }
            for event in parts.iter().flat_map(|p| p.iter()) {
                if l.topic.as_ref().is_some_and(|t| !t.is_match(&event.topic)) {
                    continue;
                }
                // A full buffer: missed without the cost of encoding it.
                if l.lines.capacity() == 0 {
                    l.missed.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                // The file sink's line `{"topic":..,"key":..,"value":..}`, the sink's name first.
                let mut encoded = Vec::with_capacity(256);
                encoder.encode_line(event, true, &mut encoded);
                let mut line = Vec::with_capacity(encoded.len() + sink.len() + 12);
                line.extend_from_slice(b"{\"sink\":");
                sluice_engine::codec::json::write_string(sink, &mut line);
                line.push(b',');
                line.extend_from_slice(encoded.get(1..).unwrap_or_default());
                if l.lines.try_send(line).is_err() {
                    l.missed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::event::{Record, Schema, SchemaType, Value};

    fn event(topic: &str, n: i32) -> ChangeEvent {
        let schema = Schema::primitive(SchemaType::Int32, false);
        ChangeEvent {
            topic: topic.into(),
            key: None,
            value: Some(Record {
                schema,
                value: Value::Int32(n),
            }),
            headers: Vec::new(),
            position: crate::Position::Offset(n as u64),
        }
    }

    #[test]
    fn listeners_get_their_sinks_topics_and_miss_what_does_not_fit() {
        let taps = Taps::default();
        let parts = vec![Arc::new(vec![event("a.x", 1), event("b.y", 2)])];
        taps.offer("file", &parts);
        let mut all = taps.listen(None, None).unwrap();
        let mut only_b = taps.listen(Some("kafka".into()), Some("b\\..*")).unwrap();
        taps.offer("file", &parts);
        taps.offer("kafka", &parts);
        let line = String::from_utf8(all.lines.try_recv().unwrap()).unwrap();
        assert_eq!(
            line,
            "{\"sink\":\"file\",\"topic\":\"a.x\",\"key\":null,\"value\":1}\n"
        );
        assert_eq!(std::iter::from_fn(|| all.lines.try_recv().ok()).count(), 3);
        let line = String::from_utf8(only_b.lines.try_recv().unwrap()).unwrap();
        assert!(
            line.starts_with("{\"sink\":\"kafka\",\"topic\":\"b.y\""),
            "{line}"
        );
        assert!(only_b.lines.try_recv().is_err());
        // A full buffer: the rest is missed, the offer does not wait.
        let many = vec![Arc::new(
            (0..BUFFER as i32 + 5).map(|n| event("a.x", n)).collect(),
        )];
        taps.offer("file", &many);
        assert_eq!(all.missed.load(Ordering::Relaxed), 5);
        drop(all);
        drop(only_b);
        assert_eq!(taps.inner.active.load(Ordering::Relaxed), 0);
        assert!(taps.listen(None, Some("(")).is_err());
    }
}
