//! The initial snapshot, read inside the replication slot's exported snapshot so that it meets
//! the stream with no gap and no duplicate.

use std::sync::Arc;

use sluice_engine::{Batch, ChangeEvent, Op, SourceContext};
use tokio_postgres::Client;

use super::catalog::quote_ident;
use super::error::PgError;
use super::offset::PgOffset;
use super::table::{Cell, SourceInfo, TableSchema};

/// What the snapshot needs to know.
pub struct SnapshotPlan<'a> {
    /// Tables, in order.
    pub tables: &'a [Arc<TableSchema>],
    /// Exported snapshot name.
    pub snapshot_name: &'a str,
    /// The slot's consistent point.
    pub consistent_point: u64,
    /// `topic.prefix`.
    pub prefix: Arc<str>,
    /// Database name.
    pub db: Arc<str>,
    /// Custom SELECTs by `schema.table` (`snapshot.select.statement.overrides`); they must return
    /// the table's columns in table order.
    pub overrides: &'a std::collections::BTreeMap<String, String>,
}

/// Emits every row of every table as `op: r`, with Debezium's `snapshot` markers (`first`,
/// `first_in_data_collection`, `true`, `last_in_data_collection`, `last`). Returns the number of
/// rows. Positions say the snapshot is incomplete, except the last one.
pub async fn run(
    client: &Client,
    plan: &SnapshotPlan<'_>,
    ctx: &mut SourceContext,
) -> Result<u64, PgError> {
    let q = |e| PgError::query("snapshot", e);
    client
        .batch_execute(&format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '{}'",
            plan.snapshot_name.replace('\'', "''")
        ))
        .await
        .map_err(q)?;
    let started_micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0);
    let tx_id = client
        .query_one(
            "SELECT txid_snapshot_xmin(txid_current_snapshot())::bigint",
            &[],
        )
        .await
        .map_err(q)?
        .get::<_, i64>(0);
    let incomplete = PgOffset {
        lsn: plan.consistent_point,
        tx: None,
        snapshot_completed: false,
    }
    .position();
    let sequence: Arc<str> = format!("[null,\"{}\"]", plan.consistent_point).into();
    let max_batch = ctx.limits().max_batch_size;
    let mut batch: Vec<ChangeEvent> = Vec::with_capacity(max_batch);
    // One event is held back so that the last one can be marked `last`.
    let mut pending: Option<(usize, ChangeEvent)> = None;
    let mut rows = 0u64;
    let markers: [Arc<str>; 3] = ["first", "first_in_data_collection", "true"].map(Arc::from);
    for (t, table) in plan.tables.iter().enumerate() {
        let columns = table
            .column_names()
            .map(quote_ident)
            .collect::<Vec<_>>()
            .join(", ");
        let what = || format!("snapshot of {}.{}", table.schema_name, table.table);
        // COPY streams the rows (TCP backpressure holds the server while the queues are full).
        let select = match plan
            .overrides
            .get(&format!("{}.{}", table.schema_name, table.table))
        {
            Some(custom) => custom.trim().trim_end_matches(';').to_owned(),
            None => format!(
                "SELECT {columns} FROM {}.{}",
                quote_ident(&table.schema_name),
                quote_ident(&table.table)
            ),
        };
        let stream = client
            .copy_out(&format!("COPY ({select}) TO STDOUT"))
            .await
            .map_err(|e| PgError::query(what(), e))?;
        futures_util::pin_mut!(stream);
        let mut first_in_table = true;
        let mut carry: Vec<u8> = Vec::new();
        while let Some(chunk) = futures_util::StreamExt::next(&mut stream).await {
            let chunk = chunk.map_err(|e| PgError::query(what(), e))?;
            carry.extend_from_slice(&chunk);
            let mut consumed = 0;
            while let Some(nl) = carry[consumed..].iter().position(|b| *b == b'\n') {
                let line = std::str::from_utf8(&carry[consumed..consumed + nl])
                    .map_err(|e| PgError::Decode(format!("{}: row is not UTF-8: {e}", what())))?;
                consumed += nl + 1;
                let mut fields: Vec<std::borrow::Cow<'_, str>> = Vec::with_capacity(table.width());
                let mut nulls = Vec::with_capacity(table.width());
                for field in line.split('\t') {
                    nulls.push(field == "\\N");
                    fields.push(unescape_copy(field));
                }
                let cells: Vec<Cell<'_>> = fields
                    .iter()
                    .zip(&nulls)
                    .map(|(f, null)| if *null { Cell::Null } else { Cell::Text(f) })
                    .collect();
                let marker = match (rows, first_in_table) {
                    (0, _) => &markers[0],
                    (_, true) => &markers[1],
                    _ => &markers[2],
                };
                first_in_table = false;
                let info = SourceInfo {
                    name: &plan.prefix,
                    db: &plan.db,
                    ts_micros: started_micros,
                    snapshot: marker,
                    sequence: Some(sequence.clone()),
                    tx_id: Some(tx_id),
                    lsn: Some(plan.consistent_point as i64),
                };
                let key = table.key(&cells).map_err(PgError::Decode)?;
                let after = table.row(&cells).map_err(PgError::Decode)?;
                let event =
                    table.event(Op::Read, key, None, Some(after), &info, incomplete.clone());
                rows += 1;
                if let Some((pt, mut previous)) = pending.replace((t, event)) {
                    if pt != t && **marker == *"first_in_data_collection" {
                        set_marker(&mut previous, "last_in_data_collection");
                    }
                    batch.push(previous);
                }
                if batch.len() >= max_batch
                    && ctx
                        .emit(Batch::new(std::mem::take(&mut batch)))
                        .await
                        .is_err()
                {
                    return Ok(rows);
                }
            }
            carry.drain(..consumed);
        }
    }
    client.batch_execute("COMMIT").await.map_err(q)?;
    let done = PgOffset {
        lsn: plan.consistent_point,
        tx: None,
        snapshot_completed: true,
    }
    .position();
    if let Some((_, mut last)) = pending.take() {
        set_marker(&mut last, "last");
        last.position = done.clone();
        batch.push(last);
    }
    let _ = ctx
        .emit(Batch {
            events: batch,
            position: Some(done),
        })
        .await;
    Ok(rows)
}

fn set_marker(event: &mut ChangeEvent, marker: &str) {
    let Some(value) = event.value.as_mut().and_then(|v| v.value.as_struct_mut()) else {
        return;
    };
    if let Some(source) = value.get_mut("source").and_then(|s| s.as_struct_mut()) {
        source.set("snapshot", sluice_engine::Value::from(marker));
    }
}

/// Undoes COPY's text-format escapes (`\\`, `\t`, `\n`, `\r`, `\b`, `\f`, `\v`, octal,
/// `\x` hex); borrows when there is nothing to undo.
fn unescape_copy(field: &str) -> std::borrow::Cow<'_, str> {
    if !field.contains('\\') {
        return std::borrow::Cow::Borrowed(field);
    }
    let b = field.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 == b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = b[i + 1];
        i += 2;
        match c {
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(11),
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                let mut n = 1;
                while n < 3 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                    v = v * 8 + u32::from(b[i] - b'0');
                    i += 1;
                    n += 1;
                }
                out.push(v as u8);
            }
            b'x' => {
                let mut v = 0u32;
                let mut n = 0;
                while n < 2 && i < b.len() && b[i].is_ascii_hexdigit() {
                    v = v * 16 + (b[i] as char).to_digit(16).unwrap_or(0);
                    i += 1;
                    n += 1;
                }
                out.push(v as u8);
            }
            other => out.push(other),
        }
    }
    std::borrow::Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::unescape_copy;
    use proptest::prelude::*;

    /// COPY's text escaping, as the server writes it.
    fn escape(s: &str) -> String {
        let mut out = String::new();
        for c in s.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\u{b}' => out.push_str("\\v"),
                c => out.push(c),
            }
        }
        out
    }

    #[test]
    fn escapes_are_undone() {
        assert_eq!(unescape_copy("plain"), "plain");
        assert_eq!(unescape_copy("a\\tb\\\\c\\nd"), "a\tb\\c\nd");
        assert_eq!(unescape_copy("\\101\\x42"), "AB");
    }

    proptest! {
        #[test]
        fn escaping_round_trips(s in ".*") {
            prop_assert_eq!(unescape_copy(&escape(&s)).into_owned(), s);
        }
    }
}
