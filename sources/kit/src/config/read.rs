//! Reading a database source's block: its own keys, the shared ones, the schema history's and
//! the keys whose names carry a value, each checked where it is in the file.

use serde::Deserialize;
use sluice_engine::config::{fields_of, ConfigError, Node, NodeDeserializer};

use super::columns::{self, ColumnRules, KeyColumns, COLUMN_PREFIXES};
use super::{legacy, Connection, DatabaseSource, SourceCommon, OVERRIDE_PREFIX};
use crate::history::config::{CONSUMER_PREFIX, PRODUCER_PREFIX};
use crate::history::HistoryConfig;
use crate::signal::SIGNAL_CONSUMER_PREFIX;

/// The keys of the schema history part (`schema.history.internal.*`, legacy
/// `database.history.*`), as skip entries.
const HISTORY_KEYS: [&str; 4] = [
    "schema.history.internal",
    "schema.history.internal.",
    "database.history",
    "database.history.",
];

impl SourceCommon {
    /// Adds the per-table SELECTs (`snapshot.select.statement.overrides.<table>: SELECT ...`),
    /// checking that they match the tables listed in `snapshot.select.statement.overrides`.
    fn with_overrides(&mut self, statements: Vec<(String, String)>) -> Result<(), String> {
        let listed: Vec<String> = self
            .snapshot_overrides_tables
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect();
        for (table, sql) in statements {
            if !listed.contains(&table) {
                return Err(format!(
                    "`{OVERRIDE_PREFIX}{table}` is set, but `{table}` is not listed in `snapshot.select.statement.overrides`"
                ));
            }
            self.snapshot_overrides.insert(table, sql);
        }
        if let Some(missing) = listed
            .iter()
            .find(|t| !self.snapshot_overrides.contains_key(*t))
        {
            return Err(format!(
                "`snapshot.select.statement.overrides` lists `{missing}` but `{OVERRIDE_PREFIX}{missing}` is not set"
            ));
        }
        Ok(())
    }

    /// Reads the keys whose names carry a value (`column.mask.with.8.chars`,
    /// `signal.consumer.<property>`, `snapshot.select.statement.overrides.<table>`) and parses
    /// `message.key.columns`.
    fn read_dynamic(&mut self, node: &Node) -> Result<(), ConfigError> {
        let mut columns = Vec::new();
        let mut statements = Vec::new();
        for (key, value) in node.entries().unwrap_or_default() {
            let name = key.as_text().unwrap_or_default();
            let text = |expected: &str| {
                value
                    .as_text()
                    .ok_or_else(|| ConfigError::at(value.loc, expected).with_path(name.clone()))
            };
            if COLUMN_PREFIXES.iter().any(|p| name.starts_with(p)) {
                let selectors = text(
                    "expected column selectors (regexes on schema.table.column, comma-separated)",
                )?;
                columns::check_column_property(&name, &selectors)
                    .map_err(|m| ConfigError::at(key.loc, m).with_path(name.clone()))?;
                columns.push((name.clone(), selectors));
            } else if let Some(property) = name.strip_prefix(SIGNAL_CONSUMER_PREFIX) {
                let value = text("expected a consumer property value")?;
                self.signal_consumer.0.insert(property.to_owned(), value);
            } else if let Some(property) = name.strip_prefix(PRODUCER_PREFIX) {
                let value = text("expected a producer property value")?;
                self.history.producer.0.insert(property.to_owned(), value);
            } else if let Some(property) = name.strip_prefix(CONSUMER_PREFIX) {
                let value = text("expected a consumer property value")?;
                self.history.consumer.0.insert(property.to_owned(), value);
            } else if let Some(table) = name.strip_prefix(OVERRIDE_PREFIX) {
                statements.push((table.to_owned(), text("expected a SELECT statement")?));
            }
        }
        let at_block = |m: String| ConfigError::at(node.loc, m);
        self.with_overrides(statements).map_err(at_block)?;
        self.column_rules = ColumnRules::parse(&columns).map_err(at_block)?;
        if let Some(text) = &self.message_key_columns {
            self.key_columns = KeyColumns::parse(text).map_err(at_block)?;
        }
        Ok(())
    }
}

/// Reads a database source's block: its own keys, the shared ones and the schema history's,
/// the keys whose names carry values, then checks all; errors are located in the file. The
/// body of a database source's
/// [`Component::from_node`](sluice_engine::registry::Component::from_node).
pub fn read<C: DatabaseSource>(node: &Node, skip: &[&str]) -> Result<C, ConfigError> {
    let keys: Vec<String> = node
        .entries()
        .unwrap_or_default()
        .iter()
        .filter_map(|(k, _)| k.as_text())
        .collect();
    for warning in legacy::warnings(keys.iter().map(String::as_str)) {
        tracing::warn!("{warning}");
    }
    let mut dynamic: Vec<&str> = skip.to_vec();
    dynamic.extend([OVERRIDE_PREFIX, SIGNAL_CONSUMER_PREFIX]);
    dynamic.extend(COLUMN_PREFIXES);
    let own = fields_of::<C>();
    let shared = fields_of::<SourceCommon>();
    let connection: &[&str] = match C::CONNECTS {
        true => fields_of::<Connection>(),
        false => &[],
    };
    let mut not_own = dynamic.clone();
    not_own.extend(shared);
    not_own.extend(connection);
    not_own.extend(HISTORY_KEYS);
    let mut all: Vec<&str> = (own.iter().chain(shared).chain(connection))
        .copied()
        .collect();
    if C::SUPPORTS.keeps_history() {
        all.extend(fields_of::<HistoryConfig>());
    }
    let among = |e: ConfigError| e.among_fields(&all);
    let mut config = C::deserialize(NodeDeserializer::skipping(node, &not_own)).map_err(among)?;
    if C::CONNECTS {
        let mut not_connection = dynamic.clone();
        not_connection.extend(own);
        not_connection.extend(shared);
        not_connection.extend(HISTORY_KEYS);
        let part = NodeDeserializer::skipping(node, &not_connection);
        let part = Connection::deserialize(part).map_err(among)?;
        part.check().map_err(|m| ConfigError::at(node.loc, m))?;
        config.set_connection(part);
    }
    let mut not_shared = dynamic.clone();
    not_shared.extend(own);
    not_shared.extend(connection);
    not_shared.extend(HISTORY_KEYS);
    let mut common =
        SourceCommon::deserialize(NodeDeserializer::skipping(node, &not_shared)).map_err(among)?;
    C::SUPPORTS.check(C::KIND, node)?;
    if C::SUPPORTS.keeps_history() {
        let mut not_history = dynamic;
        not_history.extend(own);
        not_history.extend(shared);
        not_history.extend(connection);
        not_history.extend([PRODUCER_PREFIX, CONSUMER_PREFIX]);
        common.history = HistoryConfig::deserialize(NodeDeserializer::skipping(node, &not_history))
            .map_err(among)?;
    }
    common.read_dynamic(node)?;
    common.owner = super::Owner {
        kind: C::KIND,
        keeps_history: C::SUPPORTS.keeps_history(),
    };
    common
        .validate(C::KIND, &C::SUPPORTS)
        .map_err(|m| ConfigError::at(node.loc, m))?;
    config.set_common(common);
    config.check().map_err(|m| ConfigError::at(node.loc, m))?;
    Ok(config)
}
