//! One chunk's bookkeeping, the same in every source: the progress after it and the chunk as
//! the [`super::Tracker`] is told of it ([`super::Emitted`]), and keys as notifications show
//! them.

use super::{Emitted, Progress};

/// How one key column's value shows in notifications (`maximum_key`,
/// `last_processed_key`).
pub trait KeyText {
    /// The value as text.
    fn key_text(&self) -> String;
}

/// MySQL: the server's text (hex for a binary column).
impl KeyText for String {
    fn key_text(&self) -> String {
        self.clone()
    }
}

/// PostgreSQL: the value's text form, `null` for NULL.
impl KeyText for Option<String> {
    fn key_text(&self) -> String {
        self.clone().unwrap_or_else(|| "null".to_owned())
    }
}

/// SQLite: JSON, strings without their quotes.
impl KeyText for serde_json::Value {
    fn key_text(&self) -> String {
        match self {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// A key as notifications show it: the value, or `[a, b]` for a composite key.
pub fn key_text<K: KeyText>(key: &[K]) -> String {
    match key {
        [one] => one.key_text(),
        many => format!(
            "[{}]",
            many.iter()
                .map(KeyText::key_text)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// What a chunk query of the current table returned, as the bookkeeping needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkEnd<K> {
    /// Rows the query returned (rows the failure handling mode left out count too).
    pub read: usize,
    /// The last row's key (`None`: no row).
    pub last_key: Option<Vec<K>>,
    /// The table's maximum key when its scan started (the chunks' upper bound).
    pub max_key: Vec<K>,
    /// Whether the table's scan is over with this chunk.
    pub last_of_table: bool,
}

impl<K: PartialEq> ChunkEnd<K> {
    /// A chunk read with a row limit of `limit`: the table's scan is over when the chunk has
    /// fewer rows, or reached the maximum key.
    pub fn of(read: usize, limit: usize, last_key: Option<Vec<K>>, max_key: Vec<K>) -> Self {
        let last_of_table = read < limit || last_key.as_ref() == Some(&max_key);
        ChunkEnd {
            read,
            last_key,
            max_key,
            last_of_table,
        }
    }
}

impl<K: Clone + KeyText> Progress<K> {
    /// The chunk `end` of the current table read from here: the progress after it (the next
    /// chunk's start, or the next table's) with the chunk as the tracker is told of it.
    pub fn after_chunk(&self, end: ChunkEnd<K>) -> Emitted<K> {
        let mut next = self.clone();
        next.chunks += 1;
        let table = self.current().unwrap_or_default().to_owned();
        let last_key = end.last_key.as_deref().map(key_text).unwrap_or_default();
        let max_key = key_text(&end.max_key);
        if end.last_of_table {
            next.table_done();
        } else {
            next.last_key = end.last_key;
            next.max_key = Some(end.max_key);
        }
        Emitted {
            next,
            table,
            read: end.read as u64,
            last_of_table: end.last_of_table,
            last_key,
            max_key,
            empty_after: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn keys_show_as_the_sources_wrote_them() {
        assert_eq!(key_text(&["5".to_owned()]), "5");
        assert_eq!(key_text(&["a".to_owned(), "2".to_owned()]), "[a, 2]");
        assert_eq!(key_text(&[Some("4".to_owned()), None]), "[4, null]");
        assert_eq!(
            key_text(&[serde_json::json!("x"), serde_json::json!(2)]),
            "[x, 2]"
        );
        assert_eq!(key_text::<String>(&[]), "[]");
    }

    #[test]
    fn a_chunk_moves_the_progress_or_ends_the_table() {
        let p: Progress<String> =
            Progress::new("s", vec!["a".into(), "b".into()], BTreeMap::new(), None);
        let full = p.after_chunk(ChunkEnd::of(3, 3, Some(vec!["3".into()]), vec!["9".into()]));
        assert!(!full.last_of_table);
        assert_eq!((full.table.as_str(), full.read), ("a", 3));
        assert_eq!(full.next.last_key, Some(vec!["3".to_owned()]));
        assert_eq!(full.next.max_key, Some(vec!["9".to_owned()]));
        assert_eq!((full.last_key.as_str(), full.max_key.as_str()), ("3", "9"));
        assert_eq!(full.next.chunks, 1);

        let at_max =
            full.next
                .after_chunk(ChunkEnd::of(3, 3, Some(vec!["9".into()]), vec!["9".into()]));
        assert!(at_max.last_of_table, "the maximum key ends the table");
        assert_eq!(at_max.next.current(), Some("b"));
        assert_eq!((at_max.next.last_key, at_max.next.chunks), (None, 2));

        let short = p.after_chunk(ChunkEnd::of(0, 3, None, vec!["9".into()]));
        assert!(short.last_of_table);
        assert_eq!(short.last_key, "");
    }
}
