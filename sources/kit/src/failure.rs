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

/// A refused row's key as the warnings write it (`{ID: 2, NAME: "x"}`), from its columns'
/// names and texts; a value that cannot be read shows as `?`.
pub fn key_text<'a>(columns: impl IntoIterator<Item = (&'a str, Option<String>)>) -> String {
    let pairs: Vec<String> = (columns.into_iter())
        .map(|(name, text)| format!("{name}: {}", text.as_deref().unwrap_or("?")))
        .collect();
    format!("{{{}}}", pairs.join(", "))
}

/// A change that cannot be represented, as its source knows it.
#[derive(Debug, Clone, Copy)]
pub struct Refusal<'a> {
    /// Its table (`schema.table`, `db.table`).
    pub table: &'a str,
    /// Why.
    pub error: &'a RowError,
    /// Where the change is in the source's log (`binlog.000003:1234, row 0`), when the source
    /// says.
    pub at: Option<&'a str>,
    /// The source's advice, if any.
    pub fix: Option<&'a str>,
}

impl<'a> Refusal<'a> {
    /// A change of `table` refused for `error`, without a place or advice.
    pub fn of(table: &'a str, error: &'a RowError) -> Self {
        Refusal {
            table,
            error,
            at: None,
            fix: None,
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
    /// A change that cannot be represented (`refusal`): `Err` under `fail`, the line that
    /// names the table, the column and why, where the change is, then the source's advice and
    /// the mode to change; under `warn` one warning with the table, the column, the reason,
    /// the change's `key` and where it is, and `Ok` to go on without it; under `skip` `Ok`
    /// silently.
    pub fn refuse(&self, refusal: Refusal<'_>, key: impl FnOnce() -> String) -> Result<(), String> {
        let Refusal {
            table,
            error,
            at,
            fix,
        } = refusal;
        match self.mode {
            FailureMode::Fail => {
                let fix = fix.map(|f| format!("{f}; ")).unwrap_or_default();
                let at = at.map(|at| format!(" (at {at})")).unwrap_or_default();
                let what = match error {
                    RowError::Column { .. } => format!("table `{table}` {error}{at}"),
                    _ => format!("table `{table}`: {error}{at}"),
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
                    at,
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
    fn a_key_is_written_with_its_column_names() {
        let key = key_text([("ID", Some("2".to_owned())), ("NAME", None)]);
        assert_eq!(key, "{ID: 2, NAME: ?}");
    }

    #[test]
    fn a_refused_value_names_its_table_column_and_the_fix_then_follows_the_mode() {
        let mut handling = FailureHandling::default();
        let refused = RowError::column("n", "`abc` is no integer");
        let refusal = Refusal {
            fix: Some("fix the value"),
            ..Refusal::of("main.t", &refused)
        };
        let e = handling.refuse(refusal, String::new).unwrap_err();
        assert_eq!(
            e,
            "table `main.t` column `n`: `abc` is no integer; fix the value; set `event.processing.failure.handling.mode: warn` (or `skip`) to skip such changes"
        );
        let at = Refusal {
            at: Some("binlog.000003:1234, row 0"),
            ..Refusal::of("db.t", &refused)
        };
        let e = handling.refuse(at, String::new).unwrap_err();
        assert!(
            e.starts_with(
                "table `db.t` column `n`: `abc` is no integer (at binlog.000003:1234, row 0); set"
            ),
            "{e}"
        );
        let shape = Refusal::of("main.t", &RowError::Shape);
        let e = handling.refuse(shape, String::new).unwrap_err();
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
                handling.refuse(Refusal::of("main.t", &refused), || "[1]".into()),
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
