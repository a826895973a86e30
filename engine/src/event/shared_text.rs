//! [`shared_text`]: a short text every event carries (a position, Debezium's `sequence`)
//! written in a reused buffer and shared with one allocation.

use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    /// The buffer [`shared_text`] writes in: its capacity kept from one text to the next.
    static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The text `write` writes, shared: one allocation (the `Arc`'s) where a `String` turned into
/// an `Arc<str>` takes two. `write` gets an empty buffer (a fresh one if it calls this again).
pub fn shared_text(write: impl FnOnce(&mut String)) -> Arc<str> {
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut text) => {
            text.clear();
            write(&mut text);
            Arc::from(text.as_str())
        }
        Err(_) => {
            let mut text = String::new();
            write(&mut text);
            text.into()
        }
    })
}

/// Appends `n` in decimal (no formatting machinery).
#[inline]
pub fn push_u64(text: &mut String, n: u64) {
    text.push_str(itoa::Buffer::new().format(n));
}

#[cfg(test)]
mod tests {
    use super::{push_u64, shared_text};

    #[test]
    fn texts_are_written_whole_even_one_inside_another() {
        let t = shared_text(|t| {
            t.push_str("[\"");
            push_u64(t, u64::MAX);
            t.push_str("\"]");
        });
        assert_eq!(&*t, "[\"18446744073709551615\"]");
        let outer = shared_text(|t| {
            t.push('a');
            let inner = shared_text(|t| t.push('b'));
            t.push_str(&inner);
        });
        assert_eq!(&*outer, "ab");
        assert_eq!(&*shared_text(|_| {}), "");
    }
}
