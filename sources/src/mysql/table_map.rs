//! A table's columns as a TABLE_MAP event describes them when the server writes
//! `binlog_row_metadata=FULL` (names, signedness, character sets, ENUM and SET values, the
//! primary key, beside the types and nullability every TABLE_MAP carries): the schema in force
//! at that point of the binlog, so rows decode right across schema changes and restarts without
//! replaying DDL. Without the full metadata (no column names) there is nothing to read here.

use std::collections::HashMap;

use mysql_async::binlog::events::{OptionalMetaExtractor, OptionalMetadataField, TableMapEvent};
use mysql_async::consts::{ColumnType, GeometryType};

use super::columns::Described;

/// Character set names and their longest character in bytes, by collation id
/// (`information_schema.COLLATIONS`, `CHARACTER_SETS`).
pub(super) type Charsets = HashMap<u16, (String, u32)>;

/// `'a','b'` with quotes doubled, as `COLUMN_TYPE` lists ENUM and SET values.
fn listed(values: &[String]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|v| format!("'{}'", v.replace('\'', "''")))
        .collect();
    quoted.join(",")
}

/// A table's columns and its primary key's column indexes (in key order).
pub(super) type Columns = (Vec<Described>, Vec<usize>);

/// A spatial column's type as `information_schema` names it.
fn geometry_name(t: GeometryType) -> &'static str {
    match t {
        GeometryType::GEOM_GEOMETRY => "geometry",
        GeometryType::GEOM_POINT => "point",
        GeometryType::GEOM_LINESTRING => "linestring",
        GeometryType::GEOM_POLYGON => "polygon",
        GeometryType::GEOM_MULTIPOINT => "multipoint",
        GeometryType::GEOM_MULTILINESTRING => "multilinestring",
        GeometryType::GEOM_MULTIPOLYGON => "multipolygon",
        GeometryType::GEOM_GEOMETRYCOLLECTION => "geometrycollection",
    }
}

/// The columns of `tme`; `Ok(None)` when the event carries no column names
/// (`binlog_row_metadata` is not FULL). `Err` says what cannot be read.
pub(super) fn describe(
    tme: &TableMapEvent<'_>,
    charsets: &Charsets,
) -> Result<Option<Columns>, String> {
    let bad = |e: std::io::Error| format!("the TABLE_MAP event's metadata cannot be read: {e}");
    let meta = OptionalMetaExtractor::new(tme.iter_optional_meta()).map_err(bad)?;
    let names: Vec<String> = meta
        .iter_column_name()
        .map(|n| n.map(|n| n.name().into_owned()))
        .collect::<Result<_, _>>()
        .map_err(bad)?;
    let count = usize::try_from(tme.columns_count()).unwrap_or(usize::MAX);
    if names.len() != count {
        return Ok(None);
    }
    let mut lists = Lists::of(tme)?;
    let mut signedness = meta.iter_signedness();
    let mut text_charsets = meta.iter_charset();
    let mut list_charsets = meta.iter_enum_and_set_charset();
    let nulls = tme.null_bitmask();
    let mut out = Vec::with_capacity(count);
    for (i, name) in names.into_iter().enumerate() {
        let t = tme
            .get_column_type(i)
            .map_err(|e| unknown_type(&name, &e))?
            .ok_or_else(|| format!("column `{name}` has no type in the TABLE_MAP event"))?;
        let m = tme.get_column_metadata(i).unwrap_or(&[]);
        let unsigned = t.is_numeric_type() && signedness.next().unwrap_or(false);
        // The server lists a spatial column's character set too (its base is the BLOB).
        let character = t.is_character_type() || t == ColumnType::MYSQL_TYPE_GEOMETRY;
        let charset = if character {
            Some(text_charsets.next().transpose().map_err(bad)?.unwrap_or(0))
        } else if t.is_enum_or_set_type() {
            Some(list_charsets.next().transpose().map_err(bad)?.unwrap_or(0))
        } else {
            None
        };
        let (charset_name, max_len) = match charset.map(|id| (id, charsets.get(&id))) {
            Some((_, Some((name, max)))) => (Some(name.clone()), (*max).max(1)),
            Some((id, None)) => {
                return Err(format!(
                    "column `{name}` has collation id {id}, which the server's information_schema does not list"
                ))
            }
            None => (None, 1),
        };
        let binary = charset_name.as_deref() == Some("binary");
        let mut d = Described {
            name,
            nullable: nulls.get(i).is_some_and(|b| *b),
            charset: charset_name.clone().filter(|_| !binary),
            ..Described::default()
        };
        let data_type = data_type(t, m, (binary, max_len), &mut d, &mut lists);
        d.data_type = data_type.to_owned();
        if d.column_type.is_empty() {
            d.column_type = if unsigned {
                format!("{data_type} unsigned")
            } else {
                data_type.to_owned()
            };
        }
        out.push(d);
    }
    let key = meta
        .iter_primary_key()
        .map(|k| k.map(|k| usize::try_from(k).unwrap_or(usize::MAX)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    Ok(Some((out, key)))
}

/// A column type the binlog parser does not know: MariaDB's `COMPRESSED` columns (types 140
/// and 141) have no decoder there, so no row of their table can be read.
fn unknown_type(name: &str, e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    if text.ends_with(" 140") || text.ends_with(" 141") {
        return format!(
            "column `{name}` is a MariaDB COMPRESSED column, whose binlog rows the binlog parser (mysql_common) cannot read; remove the attribute (ALTER TABLE ... MODIFY {name} <its type>) or leave the table out (table.exclude.list)"
        );
    }
    format!("column `{name}`: {text}")
}

/// The ENUM and SET values and the spatial types a TABLE_MAP lists, each in column order.
struct Lists {
    enums: std::vec::IntoIter<Vec<String>>,
    sets: std::vec::IntoIter<Vec<String>>,
    geometries: std::vec::IntoIter<&'static str>,
}

impl Lists {
    fn of(tme: &TableMapEvent<'_>) -> Result<Lists, String> {
        let bad = |e: std::io::Error| format!("the TABLE_MAP event's metadata cannot be read: {e}");
        let strings = |values: Result<Vec<String>, std::io::Error>| values.map_err(bad);
        let mut enums = Vec::new();
        let mut sets = Vec::new();
        let mut geometries = Vec::new();
        for field in tme.iter_optional_meta() {
            match field.map_err(bad)? {
                OptionalMetadataField::EnumStrValue(v) => {
                    for values in v.iter_values() {
                        enums.push(strings(values.map(|v| {
                            v.values().iter().map(|s| s.value().into_owned()).collect()
                        }))?);
                    }
                }
                OptionalMetadataField::SetStrValue(v) => {
                    for values in v.iter_values() {
                        sets.push(strings(values.map(|v| {
                            v.values().iter().map(|s| s.value().into_owned()).collect()
                        }))?);
                    }
                }
                OptionalMetadataField::GeometryType(v) => {
                    for t in v.iter_geometry_types() {
                        geometries.push(geometry_name(t.map_err(bad)?));
                    }
                }
                _ => {}
            }
        }
        Ok(Lists {
            enums: enums.into_iter(),
            sets: sets.into_iter(),
            geometries: geometries.into_iter(),
        })
    }
}

/// `information_schema`'s `DATA_TYPE` of a column of binlog type `t` with metadata `m`
/// (`binary`: its character set is `binary`; `max_len`: bytes per character), filling in what
/// the metadata says of its precision, scale, length and values.
fn data_type(
    t: ColumnType,
    m: &[u8],
    (binary, max_len): (bool, u32),
    d: &mut Described,
    lists: &mut Lists,
) -> &'static str {
    let byte = |k: usize| u32::from(m.get(k).copied().unwrap_or(0));
    match t {
        ColumnType::MYSQL_TYPE_TINY => "tinyint",
        ColumnType::MYSQL_TYPE_SHORT => "smallint",
        ColumnType::MYSQL_TYPE_INT24 => "mediumint",
        ColumnType::MYSQL_TYPE_LONG => "int",
        ColumnType::MYSQL_TYPE_LONGLONG => "bigint",
        ColumnType::MYSQL_TYPE_FLOAT => "float",
        ColumnType::MYSQL_TYPE_DOUBLE => "double",
        ColumnType::MYSQL_TYPE_NEWDECIMAL => {
            d.precision = Some(byte(0));
            d.scale = Some(byte(1));
            "decimal"
        }
        ColumnType::MYSQL_TYPE_DATE | ColumnType::MYSQL_TYPE_NEWDATE => "date",
        ColumnType::MYSQL_TYPE_TIME | ColumnType::MYSQL_TYPE_TIME2 => {
            d.fsp = Some(if t == ColumnType::MYSQL_TYPE_TIME2 {
                byte(0)
            } else {
                0
            });
            "time"
        }
        ColumnType::MYSQL_TYPE_DATETIME | ColumnType::MYSQL_TYPE_DATETIME2 => {
            d.fsp = Some(if t == ColumnType::MYSQL_TYPE_DATETIME2 {
                byte(0)
            } else {
                0
            });
            "datetime"
        }
        ColumnType::MYSQL_TYPE_TIMESTAMP | ColumnType::MYSQL_TYPE_TIMESTAMP2 => {
            d.fsp = Some(if t == ColumnType::MYSQL_TYPE_TIMESTAMP2 {
                byte(0)
            } else {
                0
            });
            "timestamp"
        }
        ColumnType::MYSQL_TYPE_YEAR => "year",
        ColumnType::MYSQL_TYPE_BIT => {
            d.precision = Some(byte(1) * 8 + byte(0));
            "bit"
        }
        ColumnType::MYSQL_TYPE_VARCHAR | ColumnType::MYSQL_TYPE_VAR_STRING => {
            // The metadata gives bytes; the length is in characters.
            d.length = Some(u64::from((byte(0) | (byte(1) << 8)) / max_len));
            if binary {
                "varbinary"
            } else {
                "varchar"
            }
        }
        ColumnType::MYSQL_TYPE_STRING => {
            // A long CHAR's length spills into the type byte (as mysql_common reads it).
            let (b0, b1) = (byte(0), byte(1));
            let length = if b0 & 0x30 != 0x30 {
                b1 | (((b0 & 0x30) ^ 0x30) << 4)
            } else {
                b1
            };
            d.length = Some(u64::from(length / max_len));
            if binary {
                "binary"
            } else {
                "char"
            }
        }
        ColumnType::MYSQL_TYPE_ENUM => {
            let values: Vec<String> = lists.enums.next().unwrap_or_default();
            d.column_type = format!("enum({})", listed(&values));
            "enum"
        }
        ColumnType::MYSQL_TYPE_SET => {
            let values: Vec<String> = lists.sets.next().unwrap_or_default();
            d.column_type = format!("set({})", listed(&values));
            "set"
        }
        ColumnType::MYSQL_TYPE_BLOB => match (binary, byte(0)) {
            (true, 1) => "tinyblob",
            (true, 2) => "blob",
            (true, 3) => "mediumblob",
            (true, _) => "longblob",
            (false, 1) => "tinytext",
            (false, 2) => "text",
            (false, 3) => "mediumtext",
            (false, _) => "longtext",
        },
        ColumnType::MYSQL_TYPE_JSON => "json",
        ColumnType::MYSQL_TYPE_GEOMETRY => lists.geometries.next().unwrap_or("geometry"),
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn listed_values_double_their_quotes() {
        let values = ["a".to_owned(), "it's".to_owned()];
        assert_eq!(super::listed(&values), "'a','it''s'");
        // Read back as the snapshot's COLUMN_TYPE is.
        let d = super::Described {
            name: "e".into(),
            data_type: "enum".into(),
            column_type: format!("enum({})", super::listed(&values)),
            nullable: true,
            ..super::Described::default()
        };
        let modes = crate::mysql::columns::tests_modes();
        let c =
            crate::mysql::columns::Column::new(&d, false, modes).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.schema.parameter("allowed"), Some("a,it's"));
    }
}
