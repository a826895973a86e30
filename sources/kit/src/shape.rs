//! The shape of a captured table's events under the options every source shares:
//! `column.include.list` / `column.exclude.list` (which columns the value holds),
//! `column.mask.*` / `column.truncate.*` (the mappers of text columns, with the schema
//! parameter Debezium adds) and `message.key.columns` (the event key). A source describes its
//! columns once; the kit decides what of them its events carry.

use std::sync::Arc;

use sluice_engine::Schema;

use crate::config::SourceCommon;
use crate::failure::KeyValue;
use crate::mapping::ColumnMapper;

/// A column as the source describes it.
#[derive(Debug, Clone)]
pub struct ColumnSpec {
    /// Its name.
    pub name: String,
    /// Its value schema (a primary key column's is not optional).
    pub schema: Arc<Schema>,
    /// Its place in the table's primary key (`None`: not part of it).
    pub primary_key: Option<usize>,
    /// Whether it holds text (the mappers apply to text columns only, as Debezium's).
    pub text: bool,
    /// Its declared length in characters, where it has one (a hash is cut to it).
    pub length: Option<usize>,
}

/// What a table's events carry.
#[derive(Debug, Clone)]
pub struct Shape {
    /// The captured columns, by their index among the described ones, in order.
    pub kept: Vec<usize>,
    /// Each captured column's mapper (by its index in `kept`).
    pub mappers: Vec<Option<ColumnMapper>>,
    /// The value schema's row struct.
    pub row: Arc<Schema>,
    /// The primary key's columns in its order, by index in `kept`.
    pub key: Vec<usize>,
    /// The event key's columns (`message.key.columns`, else the primary key), by index in
    /// `kept`.
    pub event_key: Vec<usize>,
    /// The event key's schema (`None`: a table without key has null keys).
    pub key_schema: Option<Arc<Schema>>,
}

impl Shape {
    /// The event key of `row` (the before image of a delete, else the after image) under
    /// `schema` (the envelope's key schema; `None`: a table without key, a null key).
    pub fn key_record(
        &self,
        schema: Option<&Arc<Schema>>,
        row: Option<&sluice_engine::Struct>,
    ) -> Option<sluice_engine::Record> {
        let schema = schema?;
        let values = self
            .event_key
            .iter()
            .map(|&i| row.map_or(sluice_engine::Value::Null, |r| r.values()[i].clone()))
            .collect();
        sluice_engine::Struct::from_values(schema.clone(), values).map(|s| sluice_engine::Record {
            schema: schema.clone(),
            value: sluice_engine::Value::Struct(s),
        })
    }

    /// The event key of a row as a warning about it writes it (`{ID: 2, NAME: "x"}`, the
    /// kit's [`key_text`](crate::failure::key_text)): `text(i)` gives the text of column `i`
    /// (an index among the described columns); one that cannot be read shows as `?`.
    pub fn key_text(&self, text: impl Fn(usize) -> Option<String>) -> String {
        let fields = self.row.fields();
        crate::failure::key_text((self.event_key.iter()).map(|&j| {
            let field = &fields[j];
            let value = text(self.kept[j]).map(|t| KeyValue::under(&field.schema, t));
            (&*field.name, value)
        }))
    }

    /// Column `j` (of `kept`)'s value through its mapper.
    pub fn map(&self, j: usize, value: sluice_engine::Value) -> sluice_engine::Value {
        match self.mappers.get(j).and_then(Option::as_ref) {
            Some(mapper) => mapper.apply(&value).unwrap_or(value),
            None => value,
        }
    }
}

impl SourceCommon {
    /// The shape of table `table` (`schema.table` as the filters name it) whose columns are
    /// `columns`. `Err` says which option leaves out a key column or names an unknown one.
    pub fn shape(&self, table: &str, columns: &[ColumnSpec]) -> Result<Shape, String> {
        let mut kept = Vec::new();
        let mut mappers = Vec::new();
        let mut row = Schema::struct_builder();
        for (i, c) in columns.iter().enumerate() {
            let full = format!("{table}.{}", c.name);
            if !self.selects_column(&full) {
                if c.primary_key.is_some() {
                    return Err(format!(
                        "`column.include.list` / `column.exclude.list` leave out `{full}`, a primary key column: key columns stay in the value; change the lists"
                    ));
                }
                continue;
            }
            // A key column stays as it is (it is the key). Values of text columns only, as
            // Debezium; a mask or hash rule marks a column of another type all the same.
            let rule = (c.primary_key.is_none())
                .then(|| self.column_rules.mapper(&full, c.length))
                .flatten()
                .filter(|m| c.text || m.marks_every_type());
            let schema = match &rule {
                Some(m) => {
                    let (name, value) = m.parameter();
                    c.schema.to_builder().parameter(name, value).build()
                }
                None => c.schema.clone(),
            };
            let mapper = rule.filter(|_| c.text);
            row = row.field(c.name.as_str(), schema);
            kept.push(i);
            mappers.push(mapper);
        }
        let index = |name: &str, what: &str| {
            kept.iter()
                .position(|&i| columns[i].name == name)
                .ok_or_else(|| format!("{what} `{name}` of `{table}` is not a captured column"))
        };
        // In the primary key's order.
        let mut key: Vec<(usize, usize)> = kept
            .iter()
            .enumerate()
            .filter_map(|(j, &i)| columns[i].primary_key.map(|place| (place, j)))
            .collect();
        key.sort_unstable();
        let key: Vec<usize> = key.into_iter().map(|(_, j)| j).collect();
        let event_key = match self.key_columns.of(table) {
            Some(names) => names
                .iter()
                .map(|k| index(k, "`message.key.columns` names column"))
                .collect::<Result<Vec<_>, _>>()?,
            None => key.clone(),
        };
        let key_schema = (!event_key.is_empty()).then(|| {
            event_key
                .iter()
                .fold(Schema::struct_builder(), |b, &j| {
                    let c = &columns[kept[j]];
                    b.field(c.name.as_str(), c.schema.clone())
                })
                .build()
        });
        Ok(Shape {
            kept,
            mappers,
            row: row.build(),
            key,
            event_key,
            key_schema,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::{SchemaType, Value};

    fn spec(name: &str, key: Option<usize>, text: bool) -> ColumnSpec {
        ColumnSpec {
            name: name.into(),
            schema: Schema::primitive(
                if text {
                    SchemaType::String
                } else {
                    SchemaType::Int32
                },
                key.is_none(),
            ),
            primary_key: key,
            text,
            length: Some(10),
        }
    }

    fn common(yaml: &[(&str, &str)]) -> SourceCommon {
        let mut c = SourceCommon::default();
        for (k, v) in yaml {
            match *k {
                "column.exclude.list" => {
                    c.column_exclude = sluice_engine::config::RegexList(vec![
                        sluice_engine::config::AnchoredRegex::new(v)
                            .unwrap_or_else(|e| panic!("{e}")),
                    ])
                }
                "message.key.columns" => {
                    c.key_columns = crate::config::columns::KeyColumns::parse(v)
                        .unwrap_or_else(|e| panic!("{e}"))
                }
                key => {
                    c.column_rules =
                        crate::config::columns::ColumnRules::parse(&[(key.into(), (*v).into())])
                            .unwrap_or_else(|e| panic!("{e}"))
                }
            }
        }
        c
    }

    #[test]
    fn columns_are_left_out_masked_and_keyed_as_the_options_say() {
        let cols = [
            spec("id", Some(0), false),
            spec("name", None, true),
            spec("secret", None, true),
        ];
        let c = common(&[
            ("column.exclude.list", "db.t.secret"),
            ("column.mask.with.3.chars", "db.t.name"),
            ("message.key.columns", "db.t:name"),
        ]);
        let shape = c.shape("db.t", &cols).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(shape.kept, vec![0, 1]);
        assert_eq!(shape.key, vec![0]);
        assert_eq!(shape.event_key, vec![1]);
        assert_eq!(shape.map(1, Value::from("alice")), Value::from("***"));
        assert_eq!(shape.map(0, Value::Int32(1)), Value::Int32(1));
        let fields: Vec<&str> = shape.row.fields().iter().map(|f| f.name.as_ref()).collect();
        assert_eq!(fields, ["id", "name"]);
        // A key column cannot be left out; an unknown key column is named.
        let c = common(&[("column.exclude.list", "db.t.id")]);
        assert!(c.shape("db.t", &cols).unwrap_err().contains("primary key"));
        let c = common(&[("message.key.columns", "db.t:nope")]);
        assert!(c.shape("db.t", &cols).unwrap_err().contains("`nope`"));
        // No key at all: null keys.
        let cols = [spec("a", None, false)];
        let c = common(&[]);
        assert!(c
            .shape("db.t", &cols)
            .unwrap_or_else(|e| panic!("{e}"))
            .key_schema
            .is_none());
        // A key in its own order, not the columns'.
        let cols = [spec("a", Some(1), false), spec("b", Some(0), false)];
        let shape = common(&[])
            .shape("db.t", &cols)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(shape.key, vec![1, 0]);
        let cols = [spec("a", None, false)];
        let c = common(&[]);
        assert!(c
            .shape("db.t", &cols)
            .unwrap_or_else(|e| panic!("{e}"))
            .key_schema
            .is_none());
    }
}
