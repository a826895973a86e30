//! The schema history of a change-table source (Debezium's `schema.history.internal.*`): each
//! captured table's structure as the snapshot found it (`CREATE`), and each change while
//! streaming (a table entering capture mode, `CREATE`; a new capture instance or an altered
//! table, `ALTER`), recorded with the position it happened at, in Debezium's record format.
//! These sources do not need it to read rows (a change table carries each row's columns): it is
//! kept for the tools that read Debezium's history, and `snapshot.mode: recovery` writes it
//! again from the current structures; a missing history does not stop a restart.

use serde_json::Value as Json;
use sluice_engine::Position;

use crate::config::SourceCommon;
use crate::history::{
    ChangeKind, HistoryError, HistoryRecord, SchemaHistory, TableChange, TableDef,
};

/// A source's schema history, written from `&self` methods.
pub struct TableHistory {
    store: tokio::sync::Mutex<SchemaHistory>,
    /// Debezium's partition (`{"server": <topic.prefix>}`).
    partition: Json,
}

/// One table's structure to record: `(database, schema)` where it is, `(id, def, kind)` what.
pub struct Recorded<'a> {
    pub database: &'a str,
    pub schema: &'a str,
    pub id: &'a str,
    pub def: &'a TableDef,
    pub kind: ChangeKind,
}

impl TableHistory {
    /// Opens the store `common` configures (`file_name` in `data_dir` by default).
    pub async fn open(
        common: &SourceCommon,
        data_dir: &std::path::Path,
        file_name: &str,
    ) -> Result<Self, HistoryError> {
        let store = SchemaHistory::open(&common.history, data_dir, file_name).await?;
        Ok(TableHistory {
            store: tokio::sync::Mutex::new(store),
            partition: serde_json::json!({"server": common.topic_prefix}),
        })
    }

    /// Records `table` at `position` (the source's offset), made at `ts_ms`.
    pub async fn record(
        &self,
        table: Recorded<'_>,
        position: &Position,
        ts_ms: i64,
    ) -> Result<(), HistoryError> {
        let position = match position {
            Position::Opaque(text) => serde_json::from_str(text).unwrap_or(Json::Null),
            Position::Offset(n) => Json::from(*n),
        };
        let record = HistoryRecord {
            source: self.partition.clone(),
            position,
            ts_ms,
            database_name: Some(table.database.to_owned()),
            schema_name: Some(table.schema.to_owned()),
            ddl: String::new(),
            table_changes: vec![TableChange {
                kind: table.kind,
                id: table.id.to_owned(),
                previous_id: None,
                table: Some(table.def.clone()),
                comment: None,
            }],
        };
        let mut store = self.store.lock().await;
        store.record(record, |_| true, |_| true).await?;
        Ok(())
    }

    /// Records the structures `tables` (`(schema, id, def)`) of `database` as `kind` at
    /// `position`, made now.
    pub async fn record_all(
        &self,
        database: &str,
        tables: &[(&str, &str, &TableDef)],
        kind: ChangeKind,
        position: &Position,
    ) -> Result<(), HistoryError> {
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        for &(schema, id, def) in tables {
            let recorded = Recorded {
                database,
                schema,
                id,
                def,
                kind,
            };
            self.record(recorded, position, ts).await?;
        }
        Ok(())
    }

    /// Every record stored, oldest first.
    pub async fn records(&self) -> Result<Vec<HistoryRecord>, HistoryError> {
        self.store.lock().await.records()
    }

    /// The tables as the history last recorded them (empty without a history).
    pub async fn tables(&self) -> Result<crate::history::Tables, HistoryError> {
        let mut tables = crate::history::Tables::default();
        for record in self.records().await? {
            tables.apply(&record);
        }
        Ok(tables)
    }
}
