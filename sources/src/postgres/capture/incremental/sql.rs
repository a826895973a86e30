//! The SQL the chunk reader runs: the chunk query inside a repeatable-read snapshot, the
//! table's maximum key, key column types, the server's WAL position, and the transactions in
//! progress of a snapshot.

use std::collections::HashMap;

use tokio_postgres::Client;

use crate::postgres::capture::incremental::FILTER_TIMEOUT_MS;
use crate::postgres::error::PgError;
use crate::postgres::server::catalog::quote_ident;
use crate::postgres::wire::copy::copy_all;

/// A SQL string literal.
pub(crate) fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Runs the chunk query in a repeatable-read transaction whose snapshot is read first: the
/// COPY text, and the transactions in progress for that snapshot (low 32 bits of their ids,
/// as the log stream gives them).
pub(crate) async fn copy_in_snapshot(
    client: &Client,
    select: &str,
    what: &str,
    max_bytes: usize,
) -> Result<(Vec<u8>, bool, Vec<u32>), PgError> {
    let started = client
        .simple_query(
            &format!("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL statement_timeout = {FILTER_TIMEOUT_MS}; SELECT txid_current_snapshot()::text"),
        )
        .await
        .map_err(|e| PgError::query("starting a chunk query", e))?;
    let snapshot = started.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
        _ => None,
    });
    let xip = snapshot.as_deref().map(in_progress).unwrap_or_default();
    let raw = copy_all(client, select, what, max_bytes).await;
    let end = if raw.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = client.batch_execute(end).await;
    let (raw, cut) = raw?;
    ended.map_err(|e| PgError::query("ending a chunk query", e))?;
    Ok((raw, cut, xip))
}

/// The in-progress transaction ids of a snapshot's text (`xmin:xmax:xip,...`), low 32 bits.
pub(crate) fn in_progress(snapshot: &str) -> Vec<u32> {
    snapshot
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .split(',')
        .filter_map(|x| x.trim().parse::<u64>().ok())
        .map(|x| (x & 0xffff_ffff) as u32)
        .collect()
}

/// The table's last key (text per key column) under the snapshot's condition; `None`: no row.
pub(crate) async fn max_key(
    client: &Client,
    qualified: &str,
    keys: &[usize],
    names: &[String],
    condition: &Option<String>,
    name: &str,
) -> Result<Option<Vec<Option<String>>>, PgError> {
    // Ordered by the table's columns (`t.`), not by the text output columns of the same
    // names: "9995" > "19998" as text.
    let select = format!(
        "SELECT {} FROM {qualified} t{} ORDER BY {} LIMIT 1",
        keys.iter()
            .map(|&i| format!("t.{}::text", quote_ident(&names[i])))
            .collect::<Vec<_>>()
            .join(", "),
        condition
            .as_ref()
            .map(|c| format!(" WHERE {c}"))
            .unwrap_or_default(),
        keys.iter()
            .map(|&i| format!("t.{} DESC", quote_ident(&names[i])))
            .collect::<Vec<_>>()
            .join(", "),
    );
    // Read-only, with a timeout: the condition is the signal's.
    client
        .batch_execute(&format!(
            "BEGIN READ ONLY; SET LOCAL statement_timeout = {FILTER_TIMEOUT_MS}"
        ))
        .await
        .map_err(|e| PgError::query("starting the last-key query", e))?;
    let row = client.query_opt(&select, &[]).await;
    let end = if row.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = client.batch_execute(end).await;
    let row = row.map_err(|e| PgError::query(format!("reading the last key of {name}"), e))?;
    ended.map_err(|e| PgError::query("ending the last-key query", e))?;
    Ok(row.map(|r| {
        (0..keys.len())
            .map(|i| r.get::<_, Option<String>>(i))
            .collect()
    }))
}

/// The server's WAL position: the insert position, or the replayed one on a standby.
pub(crate) async fn current_lsn(client: &Client) -> Result<u64, PgError> {
    let row = client
        .query_one(
            "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text",
            &[],
        )
        .await
        .map_err(|e| PgError::query("reading the WAL position (read-only incremental snapshot)", e))?;
    let text: String = row.get(0);
    crate::postgres::offset::parse_lsn(&text)
        .ok_or_else(|| PgError::Decode(format!("the server gave `{text}` as its WAL position")))
}

/// SQL type names of the key columns, for typed literals.
pub(crate) async fn key_types(
    client: &Client,
    oid: u32,
    keys: &[usize],
    names: &[String],
) -> Result<Vec<String>, PgError> {
    let wanted: Vec<String> = keys.iter().map(|&i| names[i].clone()).collect();
    let rows = client
        .query(
            "SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = $1 AND attname = ANY($2)",
            &[&oid, &wanted],
        )
        .await
        .map_err(|e| PgError::query("reading key column types", e))?;
    let by_name: HashMap<String, String> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    Ok(wanted
        .iter()
        .map(|n| by_name.get(n).cloned().unwrap_or_else(|| "text".into()))
        .collect())
}
