//! Errors of the `http` sink, each with its retry class and its cause kept. What the sink tries
//! again by itself (a receiver away or answering 5xx/429, within `retries`) is no error: these
//! are what stops the start or the pipeline. No message holds a header value (they may be
//! credentials) or the URL's credentials.

use sluice_engine::{Classify, ComponentError, ErrorClass};

/// What stops the `http` sink.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpSinkError {
    /// A header of `headers` is not a valid header name.
    #[error("sink `{sink}`: header `{header}` is not a valid header name")]
    HeaderName {
        sink: String,
        header: String,
        #[source]
        source: reqwest::header::InvalidHeaderName,
    },
    /// A header's value is not a valid header value (the value is not shown).
    #[error("sink `{sink}`: the value of header `{header}` is not a valid header value")]
    HeaderValue { sink: String, header: String },
    /// `method` is not an HTTP method.
    #[error("sink `{sink}`: `method: {method}` is not an HTTP method")]
    Method {
        sink: String,
        method: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The HTTP client could not be set up (its TLS, say).
    #[error("sink `{sink}`: cannot set up the HTTP client")]
    Client {
        sink: String,
        #[source]
        source: reqwest::Error,
    },
    /// The receiver kept answering that it could not take a request now, `retries` times: the
    /// pipeline sends the batch again.
    #[error("sink `{sink}`: {url} answered {said} {times} times")]
    Unavailable {
        sink: String,
        url: String,
        said: String,
        times: u32,
    },
    /// The receiver refused a request (4xx) and the failure handling mode is `fail`.
    #[error("sink `{sink}`: {url} refused a request of {events} event(s): {said}; set `event.processing.failure.handling.mode: warn` to skip refused events")]
    Refused {
        sink: String,
        url: String,
        events: usize,
        said: String,
    },
}

impl Classify for HttpSinkError {
    fn class(&self) -> ErrorClass {
        match self {
            HttpSinkError::Unavailable { .. } => ErrorClass::Retryable,
            _ => ErrorClass::Fatal,
        }
    }
}

impl From<HttpSinkError> for ComponentError {
    fn from(e: HttpSinkError) -> Self {
        ComponentError::from_classified(e.to_string(), e)
    }
}
