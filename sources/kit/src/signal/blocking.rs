//! A blocking snapshot asked for by signals: the source pauses its stream, reads the tables
//! whole (with their `additional-conditions` as filters), then streams on. Signals arriving
//! together (in one transaction, one poll) are served by one snapshot.

use std::collections::BTreeMap;

/// A blocking snapshot waiting to run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BlockingRequest {
    /// The signal's id (or the ids, joined, when several arrived together).
    pub id: String,
    /// The source's table names, in order.
    pub tables: Vec<String>,
    /// Row filters by table.
    pub conditions: BTreeMap<String, String>,
}

impl BlockingRequest {
    /// Adds a request to the pending one (signals arriving together are served together).
    pub fn add(
        pending: &mut Option<BlockingRequest>,
        id: &str,
        tables: Vec<String>,
        conditions: BTreeMap<String, String>,
    ) {
        tracing::info!(notification = "STARTED", id, tables = ?tables, "Blocking snapshot requested; it runs once the signal is delivered.");
        match pending {
            Some(p) => {
                p.id = format!("{},{id}", p.id);
                for t in tables {
                    if !p.tables.contains(&t) {
                        p.tables.push(t);
                    }
                }
                p.conditions.extend(conditions);
            }
            None => {
                *pending = Some(BlockingRequest {
                    id: id.to_owned(),
                    tables,
                    conditions,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_arriving_together_are_merged() {
        let mut pending = None;
        BlockingRequest::add(&mut pending, "a", vec!["public.x".into()], BTreeMap::new());
        BlockingRequest::add(
            &mut pending,
            "b",
            vec!["public.x".into(), "public.y".into()],
            BTreeMap::from([("public.y".to_owned(), "id > 3".to_owned())]),
        );
        let p = pending.unwrap_or_else(|| panic!("no request"));
        assert_eq!(p.id, "a,b");
        assert_eq!(p.tables, vec!["public.x", "public.y"]);
        assert_eq!(p.conditions["public.y"], "id > 3");
    }
}
