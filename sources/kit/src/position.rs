//! Typed positions: a source's position is a struct that serialises itself; the kit puts a
//! running incremental snapshot's progress beside it (`{<the source's fields>, "incremental":
//! {...}}`), so a restart resumes both the log and the snapshot.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sluice_engine::Position;

/// A source's position `P` with the incremental snapshot's progress `G`, if one runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resume<P, G> {
    /// Where the log resumes.
    #[serde(flatten)]
    pub at: P,
    /// The running incremental snapshot.
    #[serde(default = "none", skip_serializing_if = "Option::is_none")]
    pub incremental: Option<G>,
}

fn none<G>() -> Option<G> {
    None
}

impl<P: Serialize, G: Serialize> Resume<P, G> {
    /// The engine position.
    pub fn position(&self) -> Position {
        Position::Opaque(serde_json::to_string(self).unwrap_or_default().into())
    }
}

impl<P: DeserializeOwned, G: DeserializeOwned> Resume<P, G> {
    /// Reads a committed position of the source named `source`; the error says how to start
    /// over.
    pub fn parse(position: &Position, source: &str) -> Result<Self, PositionError> {
        parse_as(position, source)
    }
}

/// A committed position its source cannot read (another source's, or a number): the offsets
/// belong to another pipeline. Retrying cannot help.
#[derive(Debug, thiserror::Error)]
#[error("the committed position `{text}` is not a {kind} position ({why}); remove the offsets file or rename the pipeline")]
pub struct PositionError {
    /// The position as stored.
    pub text: String,
    /// The source that cannot read it (`postgres`, `mysql`, ...).
    pub kind: String,
    why: String,
    #[source]
    cause: Option<serde_json::Error>,
}

impl PositionError {
    /// A position `text` of `source` read, that does not render back to JSON (`cause`).
    pub fn unwritable(text: &str, source: &str, cause: serde_json::Error) -> Self {
        PositionError {
            text: text.to_owned(),
            kind: source.to_owned(),
            why: format!("it does not render back: {cause}"),
            cause: Some(cause),
        }
    }
}

impl sluice_engine::Classify for PositionError {
    fn class(&self) -> sluice_engine::ErrorClass {
        sluice_engine::ErrorClass::Fatal
    }
}

/// Reads `position` as the JSON document `T` of the source named `source`.
pub fn parse_as<T: DeserializeOwned>(
    position: &Position,
    source: &str,
) -> Result<T, PositionError> {
    let (text, cause) = match position {
        Position::Opaque(text) => match serde_json::from_str(text) {
            Ok(read) => return Ok(read),
            Err(e) => (text.to_string(), Some(e)),
        },
        Position::Offset(n) => (n.to_string(), None),
    };
    Err(PositionError {
        text,
        kind: source.to_owned(),
        why: cause
            .as_ref()
            .map_or_else(|| "a bare number".to_owned(), ToString::to_string),
        cause,
    })
}

/// What the committed position `text` of the source named `source` says, as its reader
/// `Resume<P, G>` understands it, rendered back to JSON: equal to `text`'s JSON when the
/// reader keeps everything in it (what `docs/positions.md`'s test checks of every source).
pub fn reread<P, G>(text: &str, source: &str) -> Result<serde_json::Value, PositionError>
where
    P: Serialize + DeserializeOwned,
    G: Serialize + DeserializeOwned,
{
    let resume = Resume::<P, G>::parse(&Position::Opaque(text.into()), source)?;
    serde_json::to_value(&resume).map_err(|e| PositionError::unwritable(text, source, e))
}

/// `at` with a progress already rendered as JSON (a source renders it once per chunk, not once
/// per event).
pub fn with_progress<P: Serialize>(at: &P, progress: &RawValue) -> Position {
    Resume {
        at,
        incremental: Some(progress),
    }
    .position()
}

/// Renders a progress for [`with_progress`].
pub fn render<G: Serialize>(progress: &G) -> Option<Box<RawValue>> {
    serde_json::value::to_raw_value(progress).ok()
}

/// The progress in a committed position, if one was running (and it reads as `G`).
pub fn progress_of<G: DeserializeOwned>(position: &Position) -> Option<G> {
    let Position::Opaque(text) = position else {
        return None;
    };
    #[derive(Deserialize)]
    struct Only<G> {
        incremental: Option<G>,
    }
    serde_json::from_str::<Only<G>>(text).ok()?.incremental
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct At {
        lsn: u64,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Progress {
        tables: Vec<String>,
    }

    proptest::proptest! {
        #[test]
        fn positions_round_trip_with_and_without_progress(lsn: u64, tables in proptest::collection::vec("[a-z.\"\\\\]{0,8}", 0..3), running: bool) {
            let progress = running.then(|| Progress { tables: tables.clone() });
            let resume = Resume { at: At { lsn }, incremental: progress.clone() };
            let position = resume.position();
            proptest::prop_assert_eq!(Resume::<At, Progress>::parse(&position, "test").ok(), Some(resume.clone()));
            proptest::prop_assert_eq!(progress_of::<Progress>(&position), progress.clone());
            if let Some(p) = &progress {
                let raw = render(p).unwrap_or_else(|| panic!("renders"));
                proptest::prop_assert_eq!(with_progress(&At { lsn }, &raw), position);
            }
        }
    }

    #[test]
    fn a_foreign_position_says_how_to_start_over() {
        let e = Resume::<At, Progress>::parse(&Position::Offset(3), "postgres")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not a postgres position") && e.contains("remove the offsets"),
            "{e}"
        );
    }
}
