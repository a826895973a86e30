//! A change that cannot be represented, under `event.processing.failure.handling.mode`: the one
//! switch every source goes through. `fail` stops the pipeline with one line (the table, the
//! column, why, the source's fix and the mode to change); `warn` logs one warning with the
//! change's key and goes on without it; `skip` goes on silently. Both `warn` and `skip` count
//! the change as erroneous (Debezium's `NumberOfErroneousEvents`).

use std::sync::Arc;

use sluice_engine::component::SourceCounters;
use sluice_engine::FailureMode;

/// Why a row cannot be made into its event's row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    /// A column's value cannot be represented (`reason`: the source's why).
    #[error("column `{column}`: {reason}")]
    Column { column: String, reason: String },
    /// The row as a whole cannot be read (a partial binlog image, say).
    #[error("{reason}")]
    Row { reason: String },
    /// The values do not fit the row's schema (a bug).
    #[error("a row does not fit its schema")]
    Shape,
}

impl RowError {
    /// A column's value that cannot be represented.
    pub fn column(column: impl Into<String>, reason: impl Into<String>) -> Self {
        RowError::Column {
            column: column.into(),
            reason: reason.into(),
        }
    }
}

/// The failure handling mode of a running source and where it counts what it leaves out.
#[derive(Debug, Clone, Default)]
pub struct FailureHandling {
    pub mode: FailureMode,
    pub counters: Arc<SourceCounters>,
}

impl FailureHandling {
    /// A change of `table` that cannot be represented (`error`): `Err` under `fail`, the line
    /// that names the table, the column and why, then `fix` (the source's advice, if any) and
    /// the mode to change; under `warn` one warning with the table, the column, the reason and
    /// the change's `key`, and `Ok` to go on without it; under `skip` `Ok` silently.
    pub fn refuse(
        &self,
        table: &str,
        error: &RowError,
        key: impl FnOnce() -> String,
        fix: Option<&str>,
    ) -> Result<(), String> {
        match self.mode {
            FailureMode::Fail => {
                let fix = fix.map(|f| format!("{f}; ")).unwrap_or_default();
                let what = match error {
                    RowError::Column { .. } => format!("table `{table}` {error}"),
                    _ => format!("table `{table}`: {error}"),
                };
                return Err(format!(
                    "{what}; {fix}set `event.processing.failure.handling.mode: warn` (or `skip`) to skip such changes"
                ));
            }
            FailureMode::Warn => {
                let (column, reason) = match error {
                    RowError::Column { column, reason } => (column.as_str(), reason.clone()),
                    other => ("", other.to_string()),
                };
                tracing::warn!(
                    table,
                    column,
                    reason,
                    key = %key(),
                    "Skipped a change that cannot be represented (event.processing.failure.handling.mode: warn)."
                )
            }
            FailureMode::Skip => {}
        }
        self.counters.erroneous(1);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_value_names_its_table_column_and_the_fix_then_follows_the_mode() {
        let mut handling = FailureHandling::default();
        let refused = RowError::column("n", "`abc` is no integer");
        let e =
            (handling.refuse("main.t", &refused, String::new, Some("fix the value"))).unwrap_err();
        assert_eq!(
            e,
            "table `main.t` column `n`: `abc` is no integer; fix the value; set `event.processing.failure.handling.mode: warn` (or `skip`) to skip such changes"
        );
        let e = (handling.refuse("main.t", &RowError::Shape, String::new, None)).unwrap_err();
        assert!(
            e.starts_with("table `main.t`: a row does not fit its schema; set `event"),
            "{e}"
        );
        assert_eq!(handling.counters.counts().1, 0, "a failure is not counted");
        for (i, mode) in [FailureMode::Warn, FailureMode::Skip]
            .into_iter()
            .enumerate()
        {
            handling.mode = mode;
            assert_eq!(
                handling.refuse("main.t", &refused, || "[1]".into(), None),
                Ok(())
            );
            assert_eq!(
                handling.counters.counts().1,
                i as u64 + 1,
                "counted as erroneous"
            );
        }
    }
}
