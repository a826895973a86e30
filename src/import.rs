//! `sluice import CONNECTOR.json|.properties`: a Debezium connector's Kafka Connect
//! configuration as the equivalent pipeline file. Sluice's sources take Debezium's property
//! names, so the connector's properties carry over as they are; Kafka Connect's own settings
//! become the pipeline's: `connector.class` picks the source, the converters the Kafka sink's
//! format, `transforms.*` Sluice's transforms of the same names. What has no equivalent is
//! refused, naming the property.

use std::collections::BTreeMap;
use std::path::Path;

/// Debezium's connector classes and the sources that read the same databases.
const CONNECTORS: &[(&str, &str)] = &[
    (
        "io.debezium.connector.postgresql.PostgresConnector",
        "postgres",
    ),
    ("io.debezium.connector.mysql.MySqlConnector", "mysql"),
    ("io.debezium.connector.mariadb.MariaDbConnector", "mariadb"),
    (
        "io.debezium.connector.sqlserver.SqlServerConnector",
        "sqlserver",
    ),
    ("io.debezium.connector.db2.Db2Connector", "db2"),
];

/// Kafka Connect's SMT classes and Sluice's transforms that take the same properties.
const TRANSFORMS: &[(&str, &str)] = &[
    ("io.debezium.transforms.ExtractNewRecordState", "unwrap"),
    ("org.apache.kafka.connect.transforms.RegexRouter", "route"),
    ("io.debezium.transforms.ByLogicalTableRouter", "reroute"),
    ("io.debezium.transforms.outbox.EventRouter", "outbox"),
];

/// Kafka Connect's settings a pipeline has no use for (the worker runs tasks; Sluice runs one
/// pipeline): left out.
const IGNORED: &[&str] = &[
    "name",
    "tasks.max",
    "errors.log.enable",
    "errors.log.include.messages",
];

/// The connector's name and properties, from Kafka Connect's REST JSON (`{"name", "config"}`),
/// a flat JSON object, or a `.properties` file.
fn read(path: &Path) -> Result<(String, BTreeMap<String, String>), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("imported")
        .to_owned();
    if text.trim_start().starts_with('{') {
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not JSON ({e})", path.display()))?;
        let (name, config) = match json.get("config") {
            Some(config) => (json.get("name").and_then(|n| n.as_str()), config),
            None => (json.get("name").and_then(|n| n.as_str()), &json),
        };
        let object = config
            .as_object()
            .ok_or_else(|| format!("{}: `config` is not an object", path.display()))?;
        let mut props = BTreeMap::new();
        for (k, v) in object {
            let value = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => continue,
                other => other.to_string(),
            };
            props.insert(k.clone(), value);
        }
        return Ok((name.unwrap_or(&stem).to_owned(), props));
    }
    let props = properties(&text);
    let name = props.get("name").cloned().unwrap_or(stem);
    Ok((name, props))
}

/// A Java `.properties` text's entries (`key=value` or `key: value`, `#`/`!` comments,
/// lines continued with a trailing backslash).
fn properties(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut pending = String::new();
    for line in text.lines() {
        let line = line.trim_start();
        if pending.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        if let Some(cont) = line.strip_suffix('\\') {
            pending.push_str(cont);
            continue;
        }
        pending.push_str(line);
        let entry = std::mem::take(&mut pending);
        let at = entry.find(['=', ':']).unwrap_or(entry.len());
        let (k, v) = entry.split_at(at);
        let v = v.get(1..).unwrap_or("");
        out.insert(k.trim().to_owned(), v.trim().to_owned());
    }
    out
}

/// The pipeline file of the connector at `path`, or the one line that says what cannot be
/// carried over.
pub(crate) fn pipeline(path: &Path, bootstrap: &str) -> Result<String, String> {
    let (name, mut props) = read(path)?;
    let class = props
        .remove("connector.class")
        .ok_or("`connector.class` is missing: it says which database the connector reads")?;
    let source = CONNECTORS
        .iter()
        .find(|(c, _)| *c == class || c.rsplit('.').next() == Some(class.as_str()))
        .map(|(_, s)| *s)
        .ok_or_else(|| {
            format!("`connector.class` {class} has no Sluice source: the sources are postgres, mysql, mariadb, sqlserver, db2")
        })?;
    let sink = sink(&mut props, bootstrap)?;
    let transforms = transforms(&mut props)?;
    for key in props.keys() {
        let connect = [
            "errors.",
            "predicates",
            "topic.creation.",
            "config.action.reload",
            "header.converter",
        ];
        if connect.iter().any(|p| key.starts_with(p)) && !IGNORED.contains(&key.as_str()) {
            return Err(format!("`{key}`: Kafka Connect's setting has no equivalent in a pipeline; remove it (or write the pipeline's own setting by hand)"));
        }
    }
    let mut out = format!(
        "# Imported from {} (Debezium's {class}) by `sluice import`.\nname: {}\nsource:\n  type: {source}\n",
        path.display(),
        quoted(&name)
    );
    for (k, v) in props.iter().filter(|(k, _)| !IGNORED.contains(&k.as_str())) {
        out.push_str(&format!("  {}: {}\n", quoted(k), quoted(&provided(k, v)?)));
    }
    if !transforms.is_empty() {
        out.push_str("transforms:\n");
        for (kind, settings) in transforms {
            out.push_str(&format!("  - type: {kind}\n"));
            for (k, v) in settings {
                out.push_str(&format!("    {}: {}\n", quoted(&k), quoted(&v)));
            }
        }
    }
    out.push_str("sinks:\n  - type: kafka\n");
    for (k, v) in sink {
        out.push_str(&format!("    {}: {}\n", quoted(&k), quoted(&v)));
    }
    Ok(out)
}

/// The Kafka sink's settings: the brokers, and the format the converters say (taken out of
/// `props`).
fn sink(
    props: &mut BTreeMap<String, String>,
    bootstrap: &str,
) -> Result<Vec<(String, String)>, String> {
    let mut out = vec![("bootstrap.servers".to_owned(), bootstrap.to_owned())];
    let key = props.remove("key.converter");
    let value = props.remove("value.converter");
    let converter = value.as_deref().or(key.as_deref());
    match converter {
        None | Some("org.apache.kafka.connect.json.JsonConverter") => {
            let value = props.remove("value.converter.schemas.enable");
            let key = props.remove("key.converter.schemas.enable");
            if let (Some(v), Some(k)) = (&value, &key) {
                if !v.eq_ignore_ascii_case(k) {
                    return Err("`key.converter.schemas.enable` and `value.converter.schemas.enable` differ: the Kafka sink's `schemas.enable` is one for both".into());
                }
            }
            if let Some(s) = value.or(key) {
                out.push(("schemas.enable".into(), s));
            }
        }
        Some("io.confluent.connect.avro.AvroConverter" | "io.apicurio.registry.utils.converter.AvroConverter") => {
            out.push(("format".into(), "avro".into()));
            let url = props
                .remove("value.converter.schema.registry.url")
                .or_else(|| props.remove("key.converter.schema.registry.url"))
                .ok_or("`value.converter.schema.registry.url` is missing: the Avro converter needs the registry")?;
            out.push(("schema.registry.url".into(), url));
        }
        Some("io.debezium.converters.CloudEventsConverter") => {
            out.push(("format".into(), "cloudevents".into()));
        }
        Some(other) => {
            return Err(format!("`value.converter` {other} has no Sluice format: JsonConverter, AvroConverter and CloudEventsConverter do"))
        }
    }
    let rest: Vec<String> = (props.keys())
        .filter(|k| k.starts_with("key.converter.") || k.starts_with("value.converter."))
        .cloned()
        .collect();
    if let Some(k) = rest.first() {
        return Err(format!(
            "`{k}`: the converter's setting has no equivalent in the Kafka sink; remove it"
        ));
    }
    Ok(out)
}

/// A Sluice transform's type and settings.
type Transform = (&'static str, Vec<(String, String)>);

/// The `transforms` chain as Sluice's transforms with their properties (taken out of `props`).
fn transforms(props: &mut BTreeMap<String, String>) -> Result<Vec<Transform>, String> {
    let Some(list) = props.remove("transforms") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for alias in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let prefix = format!("transforms.{alias}.");
        let class = props
            .remove(&format!("{prefix}type"))
            .ok_or_else(|| format!("`{prefix}type` is missing"))?;
        let kind = TRANSFORMS
            .iter()
            .find(|(c, _)| *c == class)
            .map(|(_, k)| *k)
            .ok_or_else(|| {
                format!("`{prefix}type` {class} has no Sluice transform: ExtractNewRecordState, RegexRouter, ByLogicalTableRouter and EventRouter do (write others as Sluice transforms by hand)")
            })?;
        let keys: Vec<String> = (props.keys())
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect();
        let mut settings = Vec::new();
        for key in keys {
            let value = props.remove(&key).unwrap_or_default();
            let name = key[prefix.len()..].to_owned();
            if name == "predicate" || name == "negate" {
                return Err(format!(
                    "`{key}`: predicates have no equivalent; use a `filter` transform"
                ));
            }
            settings.push((name, value));
        }
        out.push((kind, settings));
    }
    let stray: Vec<String> = (props.keys())
        .filter(|k| k.starts_with("transforms."))
        .cloned()
        .collect();
    if let Some(k) = stray.first() {
        return Err(format!("`{k}`: its transform is not in `transforms`"));
    }
    Ok(out)
}

/// `value` with Kafka Connect's `${env:VAR}` as the pipeline's `${VAR}`; other config
/// providers (`${file:...}`, `${vault:...}`) are refused, naming the property.
fn provided(key: &str, value: &str) -> Result<String, String> {
    let value = value.replace("${env:", "${");
    match value.find("${").map(|i| &value[i..]) {
        Some(rest) if rest.contains(':') && rest.find(':') < rest.find('}') => Err(format!(
            "`{key}` reads a Kafka Connect config provider ({}): put the value in an environment variable (`${{VAR}}`), or use the source's `.file` setting where it has one",
            rest.split('}').next().unwrap_or(rest)
        )),
        _ => Ok(value),
    }
}

/// A YAML double-quoted scalar of `s` (JSON's string escapes are YAML's).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_read_as_java_reads_them() {
        let p = properties("# c\n! c\na=1\nb : two words\nc=x\\\n  y\nd\n");
        assert_eq!(p["a"], "1");
        assert_eq!(p["b"], "two words");
        assert_eq!(p["c"], "xy");
        assert_eq!(p["d"], "");
    }

    #[test]
    fn what_cannot_be_carried_over_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let write = |text: &str| {
            let path = dir.path().join("c.properties");
            std::fs::write(&path, text).unwrap();
            pipeline(&path, "b:9092")
        };
        let e =
            write("connector.class=io.debezium.connector.oracle.OracleConnector\n").unwrap_err();
        assert!(e.contains("has no Sluice source"), "{e}");
        let e = write("connector.class=PostgresConnector\ntransforms=f\ntransforms.f.type=io.debezium.transforms.Filter\n").unwrap_err();
        assert!(
            e.contains("`transforms.f.type` io.debezium.transforms.Filter has no Sluice transform"),
            "{e}"
        );
        let e = write("connector.class=PostgresConnector\nvalue.converter=com.example.X\n")
            .unwrap_err();
        assert!(e.contains("`value.converter` com.example.X"), "{e}");
        let e = write("connector.class=PostgresConnector\npredicates=p\n").unwrap_err();
        assert!(e.contains("`predicates`"), "{e}");
        let e = write(
            "connector.class=PostgresConnector\ndatabase.password=${file:/s.properties:pw}\n",
        )
        .unwrap_err();
        assert!(
            e.contains("`database.password` reads a Kafka Connect config provider"),
            "{e}"
        );
        let env =
            write("connector.class=PostgresConnector\ndatabase.password=${env:PGPASS}\n").unwrap();
        assert!(
            env.contains("\"database.password\": \"${PGPASS}\""),
            "{env}"
        );
        let ok = write("connector.class=PostgresConnector\nname=inv\ntopic.prefix=x\n").unwrap();
        assert!(
            ok.contains("name: \"inv\"\nsource:\n  type: postgres\n  \"topic.prefix\": \"x\"\n"),
            "{ok}"
        );
    }
}
