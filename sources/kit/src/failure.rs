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

/// A key column's value as a warning writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyValue {
    /// Text, written quoted as JSON writes a string (`"x"`).
    Text(String),
    /// A number, a boolean or another value, written as it is (`2`, `true`, `null`).
    Bare(String),
}

impl KeyValue {
    /// `text`, the value of a column whose event schema is `schema`: quoted when the schema
    /// is a string's.
    pub fn under(schema: &sluice_engine::Schema, text: String) -> Self {
        match schema.kind() {
            sluice_engine::SchemaType::String => KeyValue::Text(text),
            _ => KeyValue::Bare(text),
        }
    }
}

/// A refused row's key as every source's warnings write it (`{ID: 2, NAME: "x"}`), from its
/// columns' names and values; a value that cannot be read shows as `?`, a row without key
/// columns as `{}`.
pub fn key_text<'a>(columns: impl IntoIterator<Item = (&'a str, Option<KeyValue>)>) -> String {
    let mut out = String::from("{");
    for (i, (name, value)) in columns.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(name);
        out.push_str(": ");
        match value {
            Some(KeyValue::Text(text)) => {
                out.push_str(&serde_json::Value::String(text).to_string())
            }
            Some(KeyValue::Bare(text)) => out.push_str(&text),
            None => out.push('?'),
        }
    }
    out.push('}');
    out
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

/// A change stopped under `fail`: its table, why, where it is and the source's advice. It
/// reads as one line that ends with the mode to change; retrying cannot help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Its table (`schema.table`, `db.table`).
    pub table: String,
    /// Why.
    pub error: RowError,
    /// Where the change is in the source's log.
    pub at: Option<String>,
    /// The source's advice.
    pub fix: Option<String>,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Refused {
            table,
            error,
            at,
            fix,
        } = self;
        match error {
            RowError::Column { column, reason } => {
                write!(f, "table `{table}` column `{column}`: {reason}")?
            }
            _ => write!(f, "table `{table}`: {error}")?,
        }
        if let Some(at) = at {
            write!(f, " (at {at})")?;
        }
        if let Some(fix) = fix {
            write!(f, "; {fix}")?;
        }
        f.write_str(
            "; set `event.processing.failure.handling.mode: warn` (or `skip`) to skip such changes",
        )
    }
}

impl std::error::Error for Refused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl sluice_engine::Classify for Refused {
    fn class(&self) -> sluice_engine::ErrorClass {
        sluice_engine::ErrorClass::Fatal
    }
}

impl FailureHandling {
    /// A change that cannot be represented (`refusal`): under `fail` the [`Refused`] error
    /// that stops the pipeline; under `warn` one warning with the table, the column, the
    /// reason, the change's `key` (written by [`key_text`]) and where it is, and `Ok` to go on
    /// without it; under `skip` `Ok` silently.
    pub fn refuse(
        &self,
        refusal: Refusal<'_>,
        key: impl FnOnce() -> String,
    ) -> Result<(), Refused> {
        let Refusal {
            table,
            error,
            at,
            fix,
        } = refusal;
        match self.mode {
            FailureMode::Fail => {
                return Err(Refused {
                    table: table.to_owned(),
                    error: error.clone(),
                    at: at.map(str::to_owned),
                    fix: fix.map(str::to_owned),
                });
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
    fn a_key_is_written_with_its_column_names_and_text_quoted() {
        let key = key_text([
            ("ID", Some(KeyValue::Bare("2".to_owned()))),
            ("NAME", Some(KeyValue::Text("a \"b\"".to_owned()))),
            ("CODE", None),
        ]);
        assert_eq!(key, r#"{ID: 2, NAME: "a \"b\"", CODE: ?}"#);
        assert_eq!(key_text([]), "{}");
        let text = sluice_engine::Schema::builder(sluice_engine::SchemaType::String).build();
        let number = sluice_engine::Schema::builder(sluice_engine::SchemaType::Int32).build();
        assert_eq!(
            KeyValue::under(&text, "7".into()),
            KeyValue::Text("7".into())
        );
        assert_eq!(
            KeyValue::under(&number, "7".into()),
            KeyValue::Bare("7".into())
        );
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
            sluice_engine::Classify::class(&e),
            sluice_engine::ErrorClass::Fatal
        );
        assert_eq!(e.error, refused, "the row's error is kept");
        assert_eq!(
            e.to_string(),
            "table `main.t` column `n`: `abc` is no integer; fix the value; set `event.processing.failure.handling.mode: warn` (or `skip`) to skip such changes"
        );
        let at = Refusal {
            at: Some("binlog.000003:1234, row 0"),
            ..Refusal::of("db.t", &refused)
        };
        let e = handling.refuse(at, String::new).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "table `db.t` column `n`: `abc` is no integer (at binlog.000003:1234, row 0); set"
            ),
            "{e}"
        );
        let shape = Refusal::of("main.t", &RowError::Shape);
        let e = handling.refuse(shape, String::new).unwrap_err().to_string();
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
