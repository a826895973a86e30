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
    ("io.debezium.transforms.Filter", "filter"),
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
        return Ok((name.unwrap_or(&stem).to_owned(), props_of(object)));
    }
    let props = properties(&text);
    let name = props.get("name").cloned().unwrap_or(stem);
    Ok((name, props))
}

/// A JSON object's members as Kafka Connect's string properties (numbers and booleans as
/// their text; `null` left out).
pub(crate) fn props_of(
    object: &serde_json::Map<String, serde_json::Value>,
) -> BTreeMap<String, String> {
    let mut props = BTreeMap::new();
    for (k, v) in object {
        let value = match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => continue,
            other => other.to_string(),
        };
        props.insert(k.clone(), value);
    }
    props
}

/// A Java `.properties` text's entries, as `java.util.Properties.load` reads them: `#`/`!`
/// comments, the key up to the first unescaped `=`, `:` or blank, backslash escapes (`\\`,
/// `\=`, `\:`, `\ `, `\t`, `\n`, `\uXXXX`), lines continued by an odd number of trailing
/// backslashes.
pub(crate) fn properties(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut logical = String::new();
    for line in text.lines() {
        let line = line.trim_start();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        let trailing = line.len() - line.trim_end_matches('\\').len();
        if trailing % 2 == 1 {
            logical.push_str(&line[..line.len() - 1]);
            continue;
        }
        logical.push_str(line);
        let entry = std::mem::take(&mut logical);
        let (key, value) = split_entry(&entry);
        out.insert(unescape(key), unescape(value));
    }
    out
}

/// The key and the value of a logical line (the separator and the blanks around it dropped).
fn split_entry(entry: &str) -> (&str, &str) {
    let bytes = entry.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' | b' ' | b'\t' | b'\x0c' => break,
            _ => i += 1,
        }
    }
    let key = &entry[..i.min(entry.len())];
    let mut rest = entry
        .get(i..)
        .unwrap_or("")
        .trim_start_matches([' ', '\t', '\x0c']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\x0c']);
    }
    (key, rest)
}

/// Java's escapes of a properties key or value.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(ch);
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// The pipeline file of the connector at `path`, or the one line that says what cannot be
/// carried over.
pub(crate) fn pipeline(path: &Path, bootstrap: &str) -> Result<String, String> {
    let (name, props) = read(path)?;
    let worker = Worker {
        bootstrap: bootstrap.to_owned(),
        ..Worker::default()
    };
    let header = format!("Imported from {}", path.display());
    yaml(&name, props, &worker, (&header, None))
}

/// What a Kafka Connect worker gives every connector: the brokers, the producer's settings
/// (`producer.*`) and the converters' defaults (a connector's own override them).
#[derive(Clone, Default)]
pub(crate) struct Worker {
    /// `bootstrap.servers`.
    pub(crate) bootstrap: String,
    /// `producer.*`, without the prefix: the Kafka sink's `producer` settings.
    pub(crate) producer: BTreeMap<String, String>,
    /// `key.converter*` and `value.converter*`.
    pub(crate) converters: BTreeMap<String, String>,
}

/// Whether Kafka Connect's worker setting `key` is a converter's.
pub(crate) fn is_converter(key: &str) -> bool {
    key.starts_with("key.converter") || key.starts_with("value.converter")
}

/// The pipeline file of connector `name` with `props` on `worker`, headed by the comment
/// `header` and keeping its offsets under `data_dir` (the default when `None`), or the one
/// line that says what cannot be carried over.
pub(crate) fn yaml(
    name: &str,
    mut props: BTreeMap<String, String>,
    worker: &Worker,
    (header, data_dir): (&str, Option<&Path>),
) -> Result<String, String> {
    for (k, v) in &worker.converters {
        props.entry(k.clone()).or_insert_with(|| v.clone());
    }
    let class = props
        .remove("connector.class")
        .ok_or("`connector.class` is missing: it says which database the connector reads")?;
    let source = source_of(&class)?;
    let sink = sink(&mut props, &worker.bootstrap)?;
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
        "# {header} (Debezium's {class}) by Sluice.\nname: {}\n",
        quoted(name)
    );
    if let Some(dir) = data_dir {
        out.push_str(&format!(
            "data_dir: {}\n",
            quoted(&dir.display().to_string())
        ));
    }
    out.push_str(&format!("source:\n  type: {source}\n"));
    for (k, v) in props.iter().filter(|(k, _)| !IGNORED.contains(&k.as_str())) {
        out.push_str(&format!("  {}: {}\n", quoted(k), value(k, v)?));
    }
    if !transforms.is_empty() {
        out.push_str("transforms:\n");
        for (kind, settings) in transforms {
            out.push_str(&format!("  - type: {kind}\n"));
            for (k, v) in settings {
                out.push_str(&format!("    {}: {}\n", quoted(&k), value(&k, &v)?));
            }
        }
    }
    out.push_str("sinks:\n  - type: kafka\n");
    for (k, v) in sink {
        out.push_str(&format!("    {}: {}\n", quoted(&k), value(&k, &v)?));
    }
    if !worker.producer.is_empty() {
        out.push_str("    producer:\n");
        for (k, v) in &worker.producer {
            out.push_str(&format!(
                "      {}: {}\n",
                quoted(k),
                value(&format!("producer.{k}"), v)?
            ));
        }
    }
    Ok(out)
}

/// The Sluice source of Debezium's connector `class` (full or simple name).
pub(crate) fn source_of(class: &str) -> Result<&'static str, String> {
    CONNECTORS
        .iter()
        .find(|(c, _)| *c == class || c.rsplit('.').next() == Some(class))
        .map(|(_, s)| *s)
        .ok_or_else(|| {
            format!("`connector.class` {class} has no Sluice source: the sources are postgres, mysql, mariadb, sqlserver, db2")
        })
}

/// Debezium's connector classes Sluice runs, with the source of each.
pub(crate) fn connectors() -> &'static [(&'static str, &'static str)] {
    CONNECTORS
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
    if let (Some(k), Some(v)) = (&key, &value) {
        if k != v {
            return Err(format!("`key.converter` {k} and `value.converter` {v} differ: the Kafka sink writes keys and values in one format"));
        }
    }
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
            let value = props.remove("value.converter.schema.registry.url");
            let key = props.remove("key.converter.schema.registry.url");
            if let (Some(v), Some(k)) = (&value, &key) {
                if v != k {
                    return Err("`key.converter.schema.registry.url` and `value.converter.schema.registry.url` differ: the Kafka sink has one registry".into());
                }
            }
            let url = value.or(key).ok_or(
                "`value.converter.schema.registry.url` is missing: the Avro converter needs the registry",
            )?;
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
                format!("`{prefix}type` {class} has no Sluice transform: ExtractNewRecordState, RegexRouter, ByLogicalTableRouter, EventRouter and Filter do (write others as Sluice transforms by hand)")
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
        if kind == "filter" {
            settings = filter_settings(&prefix, settings)?;
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

/// Debezium's Filter SMT settings as the `filter` transform's: `condition` (a JSR 223
/// expression such as `value.op == 'u' && value.after.id > 2`, taken when Sluice's predicate
/// language reads it: paths, comparisons, `&&`, `||`, `!`), `null.handling.mode`; `language`
/// checked and dropped. `topic.regex` (records of other topics pass unfiltered) is refused.
fn filter_settings(
    prefix: &str,
    settings: Vec<(String, String)>,
) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (name, value) in settings {
        match name.as_str() {
            "language" => {
                if !matches!(value.as_str(), "jsr223.groovy" | "jsr223.graal.js") {
                    return Err(format!("`{prefix}language` {value}: the Filter SMT's languages are jsr223.groovy and jsr223.graal.js"));
                }
            }
            "condition" => {
                if value.contains("=~") || value.contains("!~") {
                    return Err(format!("`{prefix}condition` {value:?}: Groovy's `=~` finds a match anywhere in the text, Sluice's filter matches the whole value: write the filter in the pipeline with `=~ '.*<regex>.*'`"));
                }
                sluice_transforms::filter::parse(&value).map_err(|e| {
                    format!("`{prefix}condition` {value:?}: Sluice's filter does not read it ({e}); write it with paths (value.after.x, value.op, topic), comparisons, &&, || and !")
                })?;
                out.push((name, value));
            }
            "null.handling.mode" => out.push((name, value)),
            "topic.regex" => {
                return Err(format!("`{prefix}topic.regex`: Sluice's filter applies to every record; add `topic =~ '<regex>'` to the condition the other way round (`!(topic =~ '<regex>') || (...)`)"));
            }
            _ => return Err(format!("`{prefix}{name}` is not a Filter SMT property")),
        }
    }
    if !out.iter().any(|(n, _)| n == "condition") {
        return Err(format!("`{prefix}condition` is missing"));
    }
    Ok(out)
}

/// `value` with Kafka Connect's `${env:VAR}` as the pipeline's `${VAR}`; other config
/// providers (`${file:...}`, `${vault:...}`) are refused, naming the property.
fn provided(key: &str, value: &str) -> Result<String, String> {
    let value = value.replace("${env:", "${");
    for rest in value.split("${").skip(1) {
        let inside = rest.split('}').next().unwrap_or(rest);
        if inside.contains(':') && !inside.contains(":-") {
            return Err(format!(
                "`{key}` reads a Kafka Connect config provider (${{{inside}}}): put the value in an environment variable (`${{VAR}}`), or use the source's `.file` setting where it has one"
            ));
        }
    }
    Ok(value)
}

/// Property `key`'s `value` as a YAML scalar: double-quoted, but plain when it reads a
/// `${VAR}` (the pipeline file expands references in plain scalars only); a reference in a value
/// that cannot be written plain is refused, naming the property.
fn value(key: &str, value: &str) -> Result<String, String> {
    let value = provided(key, value)?;
    if !value.contains("${") {
        return Ok(quoted(&value));
    }
    let leading = value.starts_with([
        '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@',
        '`', ' ', '\t',
    ]);
    let plain = !leading
        && !value.ends_with([' ', '\t'])
        && !value.contains(": ")
        && !value.contains(" #")
        && !value.ends_with(':')
        && !value.chars().any(char::is_control);
    if plain {
        Ok(value)
    } else {
        Err(format!("`{key}` reads `${{...}}` in a value a pipeline file cannot hold unquoted: put the whole value in the environment variable"))
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
        let p = properties(
            "# c\n! c\na=1\nb : two words \nc=x\\\n  y\nd\ne f\ntable.include.list=public\\\\.orders\nk\\:ey=v\\=w\nu=\\u00e9\nslash=ends\\\\\nnext=1\n",
        );
        assert_eq!(p["a"], "1");
        assert_eq!(p["b"], "two words ");
        assert_eq!(p["c"], "xy");
        assert_eq!(p["d"], "");
        assert_eq!(p["e"], "f");
        assert_eq!(p["table.include.list"], "public\\.orders");
        assert_eq!(p["k:ey"], "v=w");
        assert_eq!(p["u"], "é");
        assert_eq!(p["slash"], "ends\\");
        assert_eq!(p["next"], "1");
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
        let e = write("connector.class=PostgresConnector\ntransforms=f\ntransforms.f.type=io.debezium.transforms.ContentBasedRouter\n").unwrap_err();
        assert!(
            e.contains("`transforms.f.type` io.debezium.transforms.ContentBasedRouter has no Sluice transform"),
            "{e}"
        );
        let filter = "connector.class=PostgresConnector\ntransforms=f\ntransforms.f.type=io.debezium.transforms.Filter\ntransforms.f.language=jsr223.groovy\n";
        let e = write(&format!(
            "{filter}transforms.f.condition=value.op.equals('u')\n"
        ))
        .unwrap_err();
        assert!(e.contains("`transforms.f.condition`"), "{e}");
        let e = write(&format!(
            "{filter}transforms.f.condition=value.after.email =~ '@corp'\n"
        ))
        .unwrap_err();
        assert!(e.contains("matches the whole value"), "{e}");
        let e = write(&format!(
            "{filter}transforms.f.condition=value.op == 'u'\ntransforms.f.topic.regex=a.*\n"
        ))
        .unwrap_err();
        assert!(e.contains("`transforms.f.topic.regex`"), "{e}");
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
        let e =
            write("connector.class=PostgresConnector\ndatabase.password=${env:A}${file:/x:y}\n")
                .unwrap_err();
        assert!(e.contains("config provider (${file:/x:y})"), "{e}");
        let e = write("connector.class=PostgresConnector\nkey.converter=org.apache.kafka.connect.storage.StringConverter\nvalue.converter=org.apache.kafka.connect.json.JsonConverter\n").unwrap_err();
        assert!(e.contains("differ"), "{e}");
        let avro = write("connector.class=PostgresConnector\nkey.converter=io.confluent.connect.avro.AvroConverter\nvalue.converter=io.confluent.connect.avro.AvroConverter\nkey.converter.schema.registry.url=http://r:8081\nvalue.converter.schema.registry.url=http://r:8081\n").unwrap();
        assert!(
            avro.contains("\"format\": \"avro\"") && avro.contains("http://r:8081"),
            "{avro}"
        );
        let env =
            write("connector.class=PostgresConnector\ndatabase.password=${env:PGPASS}\n").unwrap();
        assert!(env.contains("\"database.password\": ${PGPASS}\n"), "{env}");
        let ok = write("connector.class=PostgresConnector\nname=inv\ntopic.prefix=x\n").unwrap();
        assert!(
            ok.contains("name: \"inv\"\nsource:\n  type: postgres\n  \"topic.prefix\": \"x\"\n"),
            "{ok}"
        );
    }

    /// A `${VAR}` is written where the pipeline file expands it: the loaded pipeline has the
    /// variable's value.
    #[test]
    fn references_are_expanded_when_the_pipeline_loads() {
        let props: BTreeMap<String, String> = [
            ("connector.class", "PostgresConnector"),
            ("database.dbname", "inventory"),
            ("database.password", "${env:SLUICE_IMPORT_TEST_PW}"),
            ("topic.prefix", "${SLUICE_IMPORT_TEST_PREFIX:-fallback}"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let worker = Worker {
            bootstrap: "${SLUICE_IMPORT_TEST_BROKERS:-localhost:9092}".into(),
            ..Worker::default()
        };
        let yaml = yaml("inv", props, &worker, ("Test", None)).unwrap();
        let vars = [("SLUICE_IMPORT_TEST_PW".to_owned(), "s3cret".to_owned())].into();
        let loaded = sluice_engine::config::parse_pipeline::<
            crate::registry::SourceSpec,
            crate::registry::TransformSpec,
            crate::registry::SinkSpec,
        >(Path::new("t.yaml"), &yaml, vars)
        .unwrap();
        let text = format!("{:?} {:?}", loaded.source, loaded.sinks);
        assert!(text.contains("fallback"), "{text}");
        assert!(
            text.contains("localhost:9092") && !text.contains("SLUICE_IMPORT_TEST_BROKERS"),
            "{text}"
        );
        assert!(!text.contains("SLUICE_IMPORT_TEST_PW"), "{yaml}");
        let e = value("k", "a: ${X}").unwrap_err();
        assert!(e.contains("`k`"), "{e}");
    }
}
