//! Errors shared by components: every error says whether retrying can help.

use std::error::Error as StdError;

/// Whether an operation may succeed if retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Transient (connection lost, broker down, disk full for a while): retry with backoff.
    Retryable,
    /// Definite (bad configuration, rejected data, schema mismatch): retrying cannot help.
    Fatal,
}

/// `event.processing.failure.handling.mode`: what a component does with one event it cannot
/// process (a value it cannot represent, a record a broker rejects).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureMode {
    /// Stop the pipeline (default).
    #[default]
    Fail,
    /// Log what was skipped (where, which key, why) and go on.
    Warn,
    /// Go on silently.
    Skip,
}

/// Implemented by component error types to expose their class.
pub trait Classify {
    /// The class of this error.
    fn class(&self) -> ErrorClass;
}

/// An error raised by a source, transform or sink.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ComponentError {
    class: ErrorClass,
    message: String,
    #[source]
    source: Option<Box<dyn StdError + Send + Sync>>,
}

impl ComponentError {
    /// A transient failure.
    pub fn retryable(message: impl Into<String>) -> Self {
        ComponentError {
            class: ErrorClass::Retryable,
            message: message.into(),
            source: None,
        }
    }

    /// A definite failure.
    pub fn fatal(message: impl Into<String>) -> Self {
        ComponentError {
            class: ErrorClass::Fatal,
            message: message.into(),
            source: None,
        }
    }

    /// Wraps a classified error, keeping it as the source.
    pub fn from_classified<E>(message: impl Into<String>, error: E) -> Self
    where
        E: StdError + Classify + Send + Sync + 'static,
    {
        ComponentError {
            class: error.class(),
            message: message.into(),
            source: Some(Box::new(error)),
        }
    }

    /// Attaches a cause.
    pub fn with_source(mut self, source: impl StdError + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The message followed by its causes, on one line; a cause whose text the line already
    /// holds (a message made from its cause's text) is not repeated.
    pub fn chain(&self) -> String {
        let mut out = self.message.clone();
        let mut cause: Option<&(dyn StdError + 'static)> = self.source().map(|s| s as _);
        while let Some(c) = cause {
            let text = c.to_string();
            if !text.is_empty() && !out.contains(&text) {
                out.push_str(": ");
                out.push_str(&text);
            }
            cause = c.source();
        }
        out
    }
}

impl Classify for ComponentError {
    fn class(&self) -> ErrorClass {
        self.class
    }
}

impl Classify for std::io::Error {
    fn class(&self) -> ErrorClass {
        use std::io::ErrorKind::*;
        match self.kind() {
            NotFound | PermissionDenied | InvalidInput | InvalidData | AlreadyExists
            | Unsupported => ErrorClass::Fatal,
            _ => ErrorClass::Retryable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Outer(#[source] std::io::Error);

    impl Classify for Outer {
        fn class(&self) -> ErrorClass {
            ErrorClass::Retryable
        }
    }

    #[test]
    fn causes_are_kept_and_not_repeated_on_the_line() {
        let io = std::io::Error::other("disk on fire");
        let e = ComponentError::from_classified(format!("sink: {}", Outer(io)), {
            Outer(std::io::Error::other("disk on fire"))
        });
        assert_eq!(e.class(), ErrorClass::Retryable);
        assert_eq!(e.chain(), "sink: outer: disk on fire", "no cause twice");
        let cause = e.source().and_then(|s| s.downcast_ref::<Outer>());
        assert!(cause.is_some(), "the cause is kept as the source");
        let short =
            ComponentError::fatal("cannot start").with_source(std::io::Error::other("denied"));
        assert_eq!(short.chain(), "cannot start: denied");
    }
}
