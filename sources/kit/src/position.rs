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
    pub fn parse(position: &Position, source: &str) -> Result<Self, String> {
        let wrong = |text: &str, e: &dyn std::fmt::Display| {
            format!("the committed position `{text}` is not a {source} position ({e}); remove the offsets file or rename the pipeline")
        };
        match position {
            Position::Opaque(text) => serde_json::from_str(text).map_err(|e| wrong(text, &e)),
            Position::Offset(n) => Err(wrong(&n.to_string(), &"a bare number")),
        }
    }
}

/// What the committed position `text` of the source named `source` says, as its reader
/// `Resume<P, G>` understands it, rendered back to JSON: equal to `text`'s JSON when the
/// reader keeps everything in it (what `docs/positions.md`'s test checks of every source).
pub fn reread<P, G>(text: &str, source: &str) -> Result<serde_json::Value, String>
where
    P: Serialize + DeserializeOwned,
    G: Serialize + DeserializeOwned,
{
    let resume = Resume::<P, G>::parse(&Position::Opaque(text.into()), source)?;
    serde_json::to_value(&resume).map_err(|e| e.to_string())
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
            proptest::prop_assert_eq!(Resume::<At, Progress>::parse(&position, "test"), Ok(resume.clone()));
            proptest::prop_assert_eq!(progress_of::<Progress>(&position), progress.clone());
            if let Some(p) = &progress {
                let raw = render(p).unwrap_or_else(|| panic!("renders"));
                proptest::prop_assert_eq!(with_progress(&At { lsn }, &raw), position);
            }
        }
    }

    #[test]
    fn a_foreign_position_says_how_to_start_over() {
        let e = Resume::<At, Progress>::parse(&Position::Offset(3), "postgres").unwrap_err();
        assert!(
            e.contains("not a postgres position") && e.contains("remove the offsets"),
            "{e}"
        );
    }
}
