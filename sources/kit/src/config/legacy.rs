//! Debezium 1.x's property names, which the seed documents use: still read (serde aliases
//! on the shared options), with a deprecation warning naming the current name.

/// The property names of Debezium 1.x that the seeds use, with their current names: still
/// read, with a deprecation warning (`database.history.*` is `schema.history.internal.*`).
pub const LEGACY_NAMES: [(&str, &str); 9] = [
    ("database.server.name", "topic.prefix"),
    ("table.whitelist", "table.include.list"),
    ("table.blacklist", "table.exclude.list"),
    ("schema.whitelist", "schema.include.list"),
    ("schema.blacklist", "schema.exclude.list"),
    ("column.whitelist", "column.include.list"),
    ("column.blacklist", "column.exclude.list"),
    ("heartbeat.topics.prefix", "topic.heartbeat.prefix"),
    ("database.history", "schema.history.internal"),
];

/// The deprecation warnings of the legacy names among `keys` (a `database.history.*` key
/// names its `schema.history.internal.*` one).
pub(super) fn warnings<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    keys.into_iter()
        .filter_map(|key| {
            LEGACY_NAMES.iter().find_map(|(old, new)| {
                let modern = if key == *old {
                    (*new).to_owned()
                } else if *old == "database.history" {
                    format!(
                        "{new}{}",
                        key.strip_prefix("database.history.")
                            .map(|r| format!(".{r}"))?
                    )
                } else {
                    return None;
                };
                Some(format!(
                    "`{key}` is deprecated (Debezium 1.x's name): use `{modern}`"
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn legacy_names_are_named_with_their_current_ones() {
        let w = super::warnings([
            "database.server.name",
            "table.whitelist",
            "database.history.kafka.topic",
            "topic.prefix",
        ]);
        assert_eq!(
            w,
            [
                "`database.server.name` is deprecated (Debezium 1.x's name): use `topic.prefix`",
                "`table.whitelist` is deprecated (Debezium 1.x's name): use `table.include.list`",
                "`database.history.kafka.topic` is deprecated (Debezium 1.x's name): use `schema.history.internal.kafka.topic`",
            ]
        );
    }
}
