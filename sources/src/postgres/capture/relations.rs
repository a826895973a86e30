//! Relation messages: a captured table's schema read from the catalog (once the transaction
//! that may have altered it is visible), with the stream's column list as the authority.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_kit::history::ChangeKind;

use crate::postgres::capture::stream::Streamer;
use crate::postgres::error::PgError;
use crate::postgres::records::table::{source_schema, TableSchema};
use crate::postgres::server::catalog::table_def;

impl Streamer<'_> {
    /// Waits until transaction `xid` (32 bits, as the log gives it) is visible to a new
    /// snapshot of the catalog connection, for at most 1 s.
    async fn await_visible(&self, xid: u32) -> Result<(), PgError> {
        // The full 64-bit id: the one nearest the current snapshot's xmax with these low 32
        // bits (the transaction is recent). Ids from xmax on are not visible.
        const VISIBLE: &str = "WITH s AS (SELECT txid_current_snapshot() AS snap), \
             c AS (SELECT snap, txid_snapshot_xmax(snap) AS xmax FROM s), \
             f AS (SELECT snap, xmax, ((xmax >> 32) << 32) + $1 AS full_id FROM c) \
             SELECT txid_visible_in_snapshot(CASE \
                 WHEN full_id > xmax + 2147483648 THEN full_id - 4294967296 \
                 WHEN full_id + 2147483648 < xmax THEN full_id + 4294967296 \
                 ELSE full_id END, snap) FROM f";
        for _ in 0..50 {
            let visible: bool = self
                .client
                .query_one(VISIBLE, &[&i64::from(xid)])
                .await
                .map_err(|e| PgError::query("checking that a transaction is visible", e))?
                .get(0);
            if visible {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        tracing::debug!(
            xid,
            "A decoded transaction is still not visible after 1 s; reading the catalog anyway."
        );
        Ok(())
    }

    pub(crate) async fn on_relation(
        &mut self,
        xid: u32,
        oid: u32,
        namespace: String,
        name: String,
        columns: Vec<crate::postgres::wire::pgoutput::RelationColumn>,
    ) -> Result<Option<ChangeKind>, PgError> {
        if !self.config.captures_table(&namespace, &name) {
            self.tables.insert(oid, None);
            return Ok(None);
        }
        // The transaction being decoded may have altered the table: the walsender decodes it
        // as soon as its commit record is written, a moment before other sessions see it, so
        // the catalog is read once it is visible (waiting up to 1 s).
        self.await_visible(xid).await?;
        let mut def = table_def(self.client, oid, namespace, name, &mut self.types).await?;
        // The stream's column list is authoritative (it is what the tuples carry).
        let by_name: HashMap<String, crate::postgres::server::catalog::ColumnDef> =
            def.columns.drain(..).map(|c| (c.name.clone(), c)).collect();
        for c in columns {
            let column = match by_name.get(&c.name) {
                Some(known) => known.clone(),
                None => crate::postgres::server::catalog::ColumnDef {
                    name: c.name.clone(),
                    kind: self
                        .types
                        .resolve(self.client, c.type_oid, c.typmod)
                        .await?,
                    not_null: false,
                    default_expr: None,
                    type_oid: c.type_oid,
                    typmod: c.typmod,
                    type_name: String::new(),
                },
            };
            def.columns.push(column);
        }
        let schema = TableSchema::new(&def, self.config, source_schema());
        if !schema.has_key() {
            tracing::warn!(table = %format!("{}.{}", def.schema, def.name), "Table has no primary key; its events have a null key.");
        }
        let change = match self.tables.get(&oid) {
            Some(Some(known)) if known.signature == schema.signature => None,
            Some(Some(_)) => Some(ChangeKind::Alter),
            _ => Some(ChangeKind::Create),
        };
        self.tables.insert(oid, Some(Arc::new(schema)));
        Ok(change)
    }
}
