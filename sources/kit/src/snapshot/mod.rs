//! The snapshotter (Debezium's `Snapshotter` SPI): from `snapshot.mode`, its
//! `configuration_based` flags and what the stored offsets say, whether a start snapshots the
//! data (and the schema, for sources that keep a schema history) and whether it streams after.

use serde::Deserialize;

mod start;
pub use start::{pin, Start};

/// Debezium's `source.snapshot` of a snapshot row: `last` for the last table's last row,
/// `first` for the first table's first one, `first_in_data_collection` and
/// `last_in_data_collection` for the others' first and last, else `true`.
pub fn marker((first_table, last_table): (bool, bool), first: bool, last: bool) -> &'static str {
    // The very last row is `last` even when it is also the first (a one-row snapshot).
    match (first_table && first, last_table && last, first, last) {
        (_, true, ..) => "last",
        (true, ..) => "first",
        (.., true, _) => "first_in_data_collection",
        (.., true) => "last_in_data_collection",
        _ => "true",
    }
}

/// `snapshot.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotMode {
    /// Snapshot when no completed snapshot is stored, then stream (default).
    #[default]
    Initial,
    /// Snapshot when no completed snapshot is stored, then stop.
    InitialOnly,
    /// Only stream (the schema is still captured by sources that keep a history).
    NoData,
    /// Same as `no_data` (Debezium's legacy name).
    Never,
    /// Snapshot on every start, then stream.
    Always,
    /// Snapshot when no completed snapshot is stored or the stored position can no longer be
    /// read from the log, then stream.
    WhenNeeded,
    /// Rebuild the schema history from the current schema, then stream (sources with a
    /// schema history only).
    Recovery,
    /// What the `snapshot.mode.configuration.based.*` flags say.
    ConfigurationBased,
}

impl SnapshotMode {
    /// The name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            SnapshotMode::Initial => "initial",
            SnapshotMode::InitialOnly => "initial_only",
            SnapshotMode::NoData => "no_data",
            SnapshotMode::Never => "never",
            SnapshotMode::Always => "always",
            SnapshotMode::WhenNeeded => "when_needed",
            SnapshotMode::Recovery => "recovery",
            SnapshotMode::ConfigurationBased => "configuration_based",
        }
    }
}

/// The `snapshot.mode.configuration.based.*` flags (all false by default, as Debezium's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConfigurationBased {
    /// `snapshot.mode.configuration.based.snapshot.data`.
    pub snapshot_data: bool,
    /// `snapshot.mode.configuration.based.snapshot.schema`.
    pub snapshot_schema: bool,
    /// `snapshot.mode.configuration.based.start.stream`.
    pub start_stream: bool,
    /// `snapshot.mode.configuration.based.snapshot.on.schema.error`.
    pub on_schema_error: bool,
    /// `snapshot.mode.configuration.based.snapshot.on.data.error`.
    pub on_data_error: bool,
}

/// What the stored offsets say at a start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stored {
    /// An offset is stored.
    pub offset: bool,
    /// It records a completed snapshot (absent or false: a snapshot was in progress).
    pub snapshot_completed: bool,
    /// Its position can still be read from the database's log (a PostgreSQL slot that
    /// exists, a binlog file not yet purged); true when nothing is stored.
    pub position_available: bool,
    /// The schema history holds the tables' structure (true when nothing is stored, and for
    /// sources that keep no history).
    pub history_available: bool,
}

/// What a start does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Read the tables' rows.
    pub data: bool,
    /// Capture the tables' schemas (into the schema history, for sources that keep one).
    pub schema: bool,
    /// Stream the log after the snapshot (or from the stored position).
    pub stream: bool,
}

/// Why a source cannot start as its `snapshot.mode` says, with what is stored: each message says
/// what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// `recovery` asked of a source without a schema history.
    #[error("`snapshot.mode: recovery` rebuilds a schema history, which the {connector} source does not keep: use `initial`, `when_needed` or `no_data`")]
    RecoveryWithoutHistory { connector: String },
    /// A first start that streams without the tables' structure, which a history-keeping
    /// source reads each row by.
    #[error("`snapshot.mode: configuration_based` streams without capturing the tables' structure on a first start, but this source reads each row's structure from its schema history, which is empty: set `snapshot.mode.configuration.based.snapshot.schema: true`")]
    StreamWithoutStructure,
    /// An offset is stored, its schema history is gone, and the mode does not rebuild it.
    #[error("the schema history is missing while an offset is stored, so the tables' structure at that position is unknown; snapshot.mode `{mode}` does not rebuild it: set `snapshot.mode: recovery` to rebuild it from the current schemas (only safe if no schema changed since the last stop), or remove the offsets to start over")]
    HistoryMissing { mode: &'static str },
    /// The stored position can no longer be read (`because`), and the mode does not take a
    /// new snapshot.
    #[error("{because}, so the committed position cannot be resumed with snapshot.mode `{mode}`: set `snapshot.mode: when_needed` to take a new snapshot, or remove the offsets")]
    PositionLost { because: String, mode: &'static str },
}

impl sluice_engine::Classify for PlanError {
    /// Retrying cannot help: the configuration or the stored state must change.
    fn class(&self) -> sluice_engine::ErrorClass {
        sluice_engine::ErrorClass::Fatal
    }
}

/// Decides every start of a source from its `snapshot.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Snapshotter {
    mode: SnapshotMode,
    flags: ConfigurationBased,
    /// The source keeps a schema history.
    history: bool,
}

impl Snapshotter {
    /// A snapshotter for a source; `history`: the source keeps a schema history (`recovery`
    /// is only meaningful then).
    pub fn new(
        mode: SnapshotMode,
        flags: ConfigurationBased,
        source: &str,
        history: bool,
    ) -> Result<Self, PlanError> {
        if mode == SnapshotMode::Recovery && !history {
            return Err(PlanError::RecoveryWithoutHistory {
                connector: source.to_owned(),
            });
        }
        Ok(Snapshotter {
            mode,
            flags,
            history,
        })
    }

    /// The mode.
    pub fn mode(&self) -> SnapshotMode {
        self.mode
    }

    /// Whether a missing schema history is rebuilt from the current schemas (Debezium's
    /// `shouldSnapshotOnSchemaError`: `recovery`, and `configuration_based` with its flag).
    fn snapshots_on_schema_error(&self) -> bool {
        match self.mode {
            SnapshotMode::Recovery => true,
            SnapshotMode::ConfigurationBased => self.flags.on_schema_error,
            _ => false,
        }
    }

    /// What a start with `stored` offsets does, or the reason it cannot start; `lost` says
    /// what is gone when the stored position is no longer available (`replication slot `x`
    /// no longer exists`).
    pub fn plan(&self, stored: Stored, lost_because: &str) -> Result<Plan, PlanError> {
        let unfinished = !stored.offset || !stored.snapshot_completed;
        let lost = stored.offset && !stored.position_available;
        let (data, schema, stream, on_data_error) = match self.mode {
            SnapshotMode::Initial => (unfinished, unfinished, true, false),
            SnapshotMode::InitialOnly => (unfinished, unfinished, false, false),
            SnapshotMode::NoData | SnapshotMode::Never => (false, !stored.offset, true, false),
            SnapshotMode::Always => (true, true, true, false),
            SnapshotMode::WhenNeeded => (unfinished, unfinished, true, true),
            SnapshotMode::Recovery => (false, true, true, false),
            SnapshotMode::ConfigurationBased => {
                let f = self.flags;
                (
                    f.snapshot_data,
                    f.snapshot_schema,
                    f.start_stream,
                    f.on_data_error,
                )
            }
        };
        if self.history && !stored.offset && stream && !data && !schema {
            return Err(PlanError::StreamWithoutStructure);
        }
        let schema_lost = stored.offset && !stored.history_available && !schema;
        let schema = schema || schema_lost;
        if schema_lost && !self.snapshots_on_schema_error() {
            return Err(PlanError::HistoryMissing {
                mode: self.mode.name(),
            });
        }
        if lost && !data && stream {
            if !on_data_error {
                return Err(PlanError::PositionLost {
                    because: lost_because.to_owned(),
                    mode: self.mode.name(),
                });
            }
            return Ok(Plan {
                data: true,
                schema: true,
                stream,
            });
        }
        Ok(Plan {
            data,
            schema,
            stream,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(mode: SnapshotMode, stored: Stored) -> Result<Plan, String> {
        Snapshotter::new(mode, ConfigurationBased::default(), "test", true)
            .and_then(|s| s.plan(stored, "gone"))
            .map_err(|e| e.to_string())
    }

    const FRESH: Stored = Stored {
        offset: false,
        snapshot_completed: false,
        position_available: true,
        history_available: true,
    };
    const DONE: Stored = Stored {
        offset: true,
        snapshot_completed: true,
        position_available: true,
        history_available: true,
    };
    const HALF: Stored = Stored {
        offset: true,
        snapshot_completed: false,
        position_available: true,
        history_available: true,
    };
    const LOST: Stored = Stored {
        offset: true,
        snapshot_completed: true,
        position_available: false,
        history_available: true,
    };

    #[test]
    fn every_mode_decides_as_debezium() {
        use SnapshotMode as M;
        let data = |m, s| plan(m, s).map(|p| (p.data, p.stream));
        assert_eq!(data(M::Initial, FRESH), Ok((true, true)));
        assert_eq!(data(M::Initial, HALF), Ok((true, true)));
        assert_eq!(data(M::Initial, DONE), Ok((false, true)));
        assert_eq!(data(M::InitialOnly, FRESH), Ok((true, false)));
        assert_eq!(data(M::InitialOnly, DONE), Ok((false, false)));
        assert_eq!(data(M::NoData, FRESH), Ok((false, true)));
        assert_eq!(data(M::Never, DONE), Ok((false, true)));
        assert_eq!(data(M::Always, DONE), Ok((true, true)));
        assert_eq!(data(M::WhenNeeded, DONE), Ok((false, true)));
        assert_eq!(data(M::WhenNeeded, LOST), Ok((true, true)));
        assert_eq!(data(M::Always, LOST), Ok((true, true)));
        assert!(plan(M::Initial, LOST).unwrap_err().contains("when_needed"));
        assert!(plan(M::NoData, LOST).is_err());
        assert_eq!(
            plan(M::Recovery, DONE),
            Ok(Plan {
                data: false,
                schema: true,
                stream: true
            })
        );
        assert!(Snapshotter::new(
            M::Recovery,
            ConfigurationBased::default(),
            "postgres",
            false
        )
        .unwrap_err()
        .to_string()
        .contains("postgres source does not keep"));
    }

    #[test]
    fn a_missing_history_is_rebuilt_only_where_debezium_rebuilds_it() {
        use SnapshotMode as M;
        let gone = Stored {
            history_available: false,
            ..DONE
        };
        let schema = |m, s| plan(m, s).map(|p| (p.data, p.schema, p.stream));
        assert_eq!(schema(M::Recovery, gone), Ok((false, true, true)));
        assert_eq!(
            schema(M::Always, gone),
            Ok((true, true, true)),
            "snapshots it anyway"
        );
        for mode in [M::Initial, M::WhenNeeded, M::NoData] {
            let error = plan(mode, gone).unwrap_err();
            assert!(
                error.contains("schema history is missing") && error.contains("recovery"),
                "{error}"
            );
        }
        let half = Stored {
            history_available: false,
            ..HALF
        };
        assert_eq!(
            schema(M::Initial, half),
            Ok((true, true, true)),
            "the snapshot is taken again"
        );
        let flags = ConfigurationBased {
            start_stream: true,
            on_schema_error: true,
            ..ConfigurationBased::default()
        };
        let s = Snapshotter::new(M::ConfigurationBased, flags, "test", true).unwrap_or_default();
        assert_eq!(
            s.plan(gone, "gone").map(|p| (p.data, p.schema)),
            Ok((false, true))
        );
        let s = Snapshotter::new(
            M::ConfigurationBased,
            ConfigurationBased {
                start_stream: true,
                ..ConfigurationBased::default()
            },
            "test",
            true,
        )
        .unwrap_or_default();
        assert!(s.plan(gone, "gone").is_err());
        // A first start that streams needs the structure a history-keeping source reads from.
        let error = s.plan(FRESH, "gone").unwrap_err();
        assert_eq!(error, PlanError::StreamWithoutStructure);
        assert!(
            error.to_string().contains("snapshot.schema: true"),
            "{error}"
        );
    }

    #[test]
    fn configuration_based_follows_its_flags() {
        let flags = ConfigurationBased {
            snapshot_data: true,
            start_stream: false,
            ..ConfigurationBased::default()
        };
        let s = Snapshotter::new(SnapshotMode::ConfigurationBased, flags, "test", false);
        let s = s.unwrap_or_default();
        assert_eq!(
            s.plan(DONE, "gone").map(|p| (p.data, p.stream)),
            Ok((true, false))
        );
        let streaming = ConfigurationBased {
            start_stream: true,
            ..ConfigurationBased::default()
        };
        let s = Snapshotter::new(SnapshotMode::ConfigurationBased, streaming, "test", false)
            .unwrap_or_default();
        assert_eq!(
            s.plan(FRESH, "gone").map(|p| (p.data, p.stream)),
            Ok((false, true))
        );
        assert!(s.plan(LOST, "gone").is_err());
        let healing = ConfigurationBased {
            on_data_error: true,
            ..streaming
        };
        let s = Snapshotter::new(SnapshotMode::ConfigurationBased, healing, "test", false)
            .unwrap_or_default();
        assert_eq!(s.plan(LOST, "gone").map(|p| p.data), Ok(true));
    }
}
