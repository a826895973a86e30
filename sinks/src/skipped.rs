//! An event a sink cannot write (an encoder refuses it, the service refuses it for good), under
//! `event.processing.failure.handling.mode`: `fail` stops the pipeline with the reason and the
//! fix, `warn` logs it and skips the event, `skip` skips it.

use sluice_engine::{ComponentError, FailureMode};

/// Handles one such event; `at` names where it was going (`topic `x``, empty for none).
pub(crate) fn skip_or_fail(
    mode: FailureMode,
    sink: &str,
    at: &str,
    reason: impl std::fmt::Display,
) -> Result<(), ComponentError> {
    let at_reason = match at.is_empty() {
        true => reason.to_string(),
        false => format!("{at}: {reason}"),
    };
    match mode {
        FailureMode::Fail => Err(ComponentError::fatal(format!(
            "sink `{sink}`: {at_reason}; set `event.processing.failure.handling.mode: warn` to skip such events"
        ))),
        FailureMode::Warn => {
            tracing::warn!(sink, reason = %at_reason, "Skipped an event (event.processing.failure.handling.mode: warn).");
            Ok(())
        }
        FailureMode::Skip => Ok(()),
    }
}
