//! A column definition of a DDL statement as Debezium's MySQL DDL parser describes it: the
//! `java.sql.Types` code of each type name (`MySqlAntlrDdlParser.initDataTypes`), the type
//! name as written (upper case, `UNSIGNED` / `ZEROFILL` appended), length and scale from the
//! type's arguments (with Debezium's defaults: `DECIMAL` is (10,0), `BIT` is 1), the
//! character set of character types (the column's, else the table's), and the options
//! (`NOT NULL`, `AUTO_INCREMENT`, `DEFAULT`, `COMMENT`, generated columns).

use sluice_kit::history::ColumnDef;
use sqlparser::ast::{ColumnDef as SqlColumn, ColumnOption, DataType, EnumMember, Expr};

/// `java.sql.Types` codes.
mod jdbc {
    pub(super) const BIT: i32 = -7;
    pub(super) const TINYINT_AS_SMALLINT: i32 = 5;
    pub(super) const INTEGER: i32 = 4;
    pub(super) const BIGINT: i32 = -5;
    pub(super) const FLOAT: i32 = 6;
    pub(super) const REAL: i32 = 7;
    pub(super) const DOUBLE: i32 = 8;
    pub(super) const NUMERIC: i32 = 2;
    pub(super) const DECIMAL: i32 = 3;
    pub(super) const CHAR: i32 = 1;
    pub(super) const VARCHAR: i32 = 12;
    pub(super) const NCHAR: i32 = -15;
    pub(super) const NVARCHAR: i32 = -9;
    pub(super) const DATE: i32 = 91;
    pub(super) const TIME: i32 = 92;
    pub(super) const TIMESTAMP: i32 = 93;
    pub(super) const TIMESTAMP_WITH_TIMEZONE: i32 = 2014;
    pub(super) const BINARY: i32 = -2;
    pub(super) const VARBINARY: i32 = -3;
    pub(super) const BLOB: i32 = 2004;
    pub(super) const BOOLEAN: i32 = 16;
    pub(super) const OTHER: i32 = 1111;
}

/// What a type name means: its JDBC type, whether it holds characters, and the (length,
/// scale) it has when written without arguments.
struct Kind {
    jdbc: i32,
    character: bool,
    default_size: (Option<i32>, Option<i32>),
}

fn kind(name: &str) -> Option<Kind> {
    // The `BINARY` attribute of a character type (`CHAR BINARY`): the type's kind.
    if let Some(base) = name.strip_suffix(" BINARY") {
        return kind(base).filter(|k| k.character);
    }
    let k = |jdbc, character| Kind {
        jdbc,
        character,
        default_size: (None, None),
    };
    Some(match name {
        "TINYINT" | "INT1" | "SMALLINT" | "INT2" => k(jdbc::TINYINT_AS_SMALLINT, false),
        "MEDIUMINT" | "INT3" | "MIDDLEINT" | "INT" | "INTEGER" | "INT4" | "YEAR" => {
            k(jdbc::INTEGER, false)
        }
        "BIGINT" | "INT8" | "SERIAL" => k(jdbc::BIGINT, false),
        "REAL" => k(jdbc::REAL, false),
        "DOUBLE" | "DOUBLE PRECISION" | "FLOAT8" => k(jdbc::DOUBLE, false),
        "FLOAT" | "FLOAT4" => k(jdbc::FLOAT, false),
        "DECIMAL" | "DEC" | "FIXED" | "NUMERIC" => Kind {
            jdbc: if name == "NUMERIC" {
                jdbc::NUMERIC
            } else {
                jdbc::DECIMAL
            },
            character: false,
            default_size: (Some(10), Some(0)),
        },
        "BIT" => Kind {
            jdbc: jdbc::BIT,
            character: false,
            default_size: (Some(1), None),
        },
        "BOOL" | "BOOLEAN" => k(jdbc::BOOLEAN, false),
        "DATE" => k(jdbc::DATE, false),
        "TIME" => k(jdbc::TIME, false),
        "DATETIME" => k(jdbc::TIMESTAMP, false),
        "TIMESTAMP" => k(jdbc::TIMESTAMP_WITH_TIMEZONE, false),
        "CHAR" | "CHARACTER" | "ENUM" | "SET" => k(jdbc::CHAR, true),
        "VARCHAR" | "CHARACTER VARYING" | "CHAR VARYING" | "TINYTEXT" | "TEXT" | "MEDIUMTEXT"
        | "LONGTEXT" | "LONG" | "LONG VARCHAR" => k(jdbc::VARCHAR, true),
        "NCHAR" | "NATIONAL CHAR" | "NATIONAL CHARACTER" => k(jdbc::NCHAR, true),
        "NVARCHAR"
        | "NCHAR VARYING"
        | "NCHAR VARCHAR"
        | "NATIONAL VARCHAR"
        | "NATIONAL CHAR VARYING"
        | "NATIONAL CHARACTER VARYING" => k(jdbc::NVARCHAR, true),
        "BINARY" => k(jdbc::BINARY, false),
        "VARBINARY" => k(jdbc::VARBINARY, false),
        "TINYBLOB" | "BLOB" | "MEDIUMBLOB" | "LONGBLOB" | "LONG VARBINARY" => k(jdbc::BLOB, false),
        "JSON" | "GEOMETRY" | "POINT" | "LINESTRING" | "POLYGON" | "MULTIPOINT"
        | "MULTILINESTRING" | "MULTIPOLYGON" | "GEOMETRYCOLLECTION" | "GEOMCOLLECTION" | "UUID"
        | "INET4" | "INET6" => k(jdbc::OTHER, false),
        _ => return None,
    })
}

/// A type as written: its name words, arguments and trailing words (`INT(10) UNSIGNED`).
#[derive(Debug, PartialEq)]
struct Written {
    name: String,
    args: Vec<String>,
    tail: Vec<String>,
}

fn written(text: &str) -> Written {
    let (head, rest) = match text.find('(') {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => (text, ""),
    };
    let (args, tail) = match rest.rfind(')') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => ("", rest),
    };
    // A type of several words the syntax rewrite made is a quoted name (`` `LONG VARCHAR` ``).
    let words = |s: &str| -> Vec<String> {
        s.replace('`', " ")
            .split_whitespace()
            .map(str::to_uppercase)
            .collect()
    };
    let (mut name, mut tail) = (words(head), words(tail));
    // `INT UNSIGNED` without arguments: the trailing words are in the head.
    while name
        .last()
        .is_some_and(|w| matches!(w.as_str(), "UNSIGNED" | "SIGNED" | "ZEROFILL"))
    {
        if let Some(w) = name.pop() {
            tail.insert(0, w);
        }
    }
    Written {
        name: name.join(" "),
        args: args
            .split(',')
            .map(|a| a.trim().to_owned())
            .filter(|a| !a.is_empty())
            .collect(),
        tail,
    }
}

/// A column's type as written, with an `ENUM`'s or a `SET`'s values (quoted).
fn written_type(data_type: &DataType) -> (Written, Vec<String>) {
    let bare = |name: &str| Written {
        name: name.into(),
        args: Vec::new(),
        tail: Vec::new(),
    };
    match data_type {
        DataType::Enum(members, _) => (
            bare("ENUM"),
            members
                .iter()
                .map(|m| match m {
                    EnumMember::Name(n) | EnumMember::NamedValue(n, _) => quoted(n),
                })
                .collect(),
        ),
        DataType::Set(values) => (bare("SET"), values.iter().map(|v| quoted(v)).collect()),
        other => (written(&other.to_string()), Vec::new()),
    }
}

/// The column `c` at `position` (from 1) of a table whose character set is `table_charset`;
/// `Err` names a type Debezium's parser does not know.
pub(crate) fn describe(
    c: &SqlColumn,
    position: i32,
    table_charset: Option<&str>,
) -> Result<ColumnDef, String> {
    let (w, enum_values) = written_type(&c.data_type);
    let Some(kind) = kind(&w.name) else {
        return Err(format!(
            "the type `{}` of column `{}`",
            c.data_type, c.name.value
        ));
    };
    let number = |i: usize| w.args.get(i).and_then(|a| a.parse::<i32>().ok());
    let (mut length, mut scale) = (number(0), number(1));
    if w.name == "ENUM" {
        length = Some(1);
    } else if w.name == "SET" {
        length = Some((enum_values.len() as i32 * 2 - 1).max(0));
    }
    if length.is_none() {
        length = kind.default_size.0;
    }
    if scale.is_none() {
        scale = kind.default_size.1;
    }
    let serial = w.name == "SERIAL";
    let mut type_name = if serial {
        "BIGINT UNSIGNED".to_owned()
    } else {
        w.name.clone()
    };
    for word in &w.tail {
        if matches!(word.as_str(), "UNSIGNED" | "ZEROFILL") {
            type_name.push(' ');
            type_name.push_str(word);
        }
    }
    let mut column = ColumnDef {
        name: c.name.value.clone(),
        jdbc_type: kind.jdbc,
        native_type: None,
        type_expression: Some(type_name.clone()),
        type_name,
        charset_name: None,
        length,
        scale,
        position,
        optional: !serial,
        auto_incremented: serial,
        generated: serial,
        comment: None,
        has_default_value: false,
        default_value_expression: None,
        enum_values,
    };
    let mut charset = None;
    let mut collation = None;
    for option in &c.options {
        match &option.option {
            ColumnOption::NotNull => column.optional = false,
            ColumnOption::Null => column.optional = true,
            ColumnOption::Default(e) => {
                column.has_default_value = true;
                column.default_value_expression = default_of(e, &column.type_name);
            }
            // Comments are kept out, as Debezium does without `include.schema.comments`.
            ColumnOption::Comment(_) => {}
            ColumnOption::CharacterSet(name) => charset = Some(name.to_string()),
            ColumnOption::Collation(name) => collation = Some(name.to_string()),
            // `ON UPDATE CURRENT_TIMESTAMP` is "generated" to Debezium, as `AUTO_INCREMENT` is.
            ColumnOption::OnUpdate(_) => {
                column.auto_incremented = true;
                column.generated = true;
            }
            other if other.to_string().eq_ignore_ascii_case("AUTO_INCREMENT") => {
                column.auto_incremented = true;
                column.generated = true;
            }
            _ => {}
        }
    }
    // A nullable column without a default has the implicit `DEFAULT NULL`.
    column.has_default_value |= column.optional;
    if kind.character {
        // The national types are utf8 whatever the table's character set (as Debezium's
        // parser names it).
        let national = matches!(kind.jdbc, jdbc::NCHAR | jdbc::NVARCHAR);
        column.charset_name = charset
            .or_else(|| collation.and_then(|c| c.split('_').next().map(str::to_owned)))
            .or_else(|| national.then(|| "utf8".to_owned()))
            .or_else(|| table_charset.map(str::to_owned));
    }
    Ok(column)
}

/// Makes `c` NOT NULL (a primary key column): an implicit `DEFAULT NULL` goes with it.
pub(crate) fn make_required(c: &mut ColumnDef) {
    if c.optional && c.default_value_expression.is_none() {
        c.has_default_value = false;
    }
    c.optional = false;
}

/// Whether the column's own options make it the primary key (`id INT PRIMARY KEY`).
pub(crate) fn is_primary(c: &SqlColumn) -> bool {
    c.options
        .iter()
        .any(|o| o.option.to_string().eq_ignore_ascii_case("PRIMARY KEY"))
}

/// Whether the column is declared `UNIQUE` (the primary key of a table that has none, to
/// Debezium), or is a `SERIAL`.
pub(crate) fn is_unique(c: &SqlColumn) -> bool {
    c.data_type.to_string().eq_ignore_ascii_case("SERIAL")
        || c.options.iter().any(|o| {
            let text = o.option.to_string().to_ascii_uppercase();
            text == "UNIQUE" || text == "UNIQUE KEY"
        })
}

/// An ENUM or SET value as Debezium lists it: in single quotes, as written.
fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// A default's text as Debezium's parser keeps it: a string literal without its quotes (its
/// doubled quotes kept), a number or boolean as written, the current time functions as
/// `1970-01-01 00:00:00`, a bit or hex literal's digits; `NULL` and a parenthesised
/// expression have none.
/// A column's default as the model keeps it ([`default_text`]), but a hex literal (`0x6162`,
/// `X'6162'`) as the value the server makes of it in a column of type `type_name`: a number in
/// a numeric column, binary digits in a `BIT`, else its bytes as text. (Debezium's parser keeps
/// the digits, some of them cut: a deliberate difference; its snapshot, reading the server's
/// `SHOW CREATE TABLE`, has the same values as these.)
pub(crate) fn default_of(e: &Expr, type_name: &str) -> Option<String> {
    use sqlparser::ast::Value as V;
    match e {
        Expr::Value(v) => match &v.value {
            V::HexStringLiteral(hex) => hex_default(hex, type_name),
            _ => default_text(e),
        },
        _ => default_text(e),
    }
}

/// See [`default_of`]; `None` for digits that are not hex.
fn hex_default(hex: &str, type_name: &str) -> Option<String> {
    let digits = if hex.len() % 2 == 1 {
        format!("0{hex}")
    } else {
        hex.to_owned()
    };
    let bytes = (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(digits.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let number = || {
        bytes
            .iter()
            .try_fold(0u64, |n, b| n.checked_mul(256).map(|n| n + u64::from(*b)))
    };
    let base = type_name.split(' ').next().unwrap_or_default();
    match base {
        "BIT" => Some(format!("{:b}", number()?)),
        "TINYINT" | "SMALLINT" | "MEDIUMINT" | "INT" | "INTEGER" | "BIGINT" | "DECIMAL" | "DEC"
        | "NUMERIC" | "FIXED" | "FLOAT" | "DOUBLE" | "REAL" | "YEAR" | "BOOL" | "BOOLEAN" => {
            Some(number()?.to_string())
        }
        _ => Some(match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => e.into_bytes().iter().map(|&b| char::from(b)).collect(),
        }),
    }
}

pub(crate) fn default_text(e: &Expr) -> Option<String> {
    use sqlparser::ast::Value as V;
    match e {
        Expr::Value(v) => match &v.value {
            V::Null => None,
            V::SingleQuotedString(s) | V::DoubleQuotedString(s) => Some(s.replace('\'', "''")),
            V::HexStringLiteral(s) | V::SingleQuotedByteStringLiteral(s) => Some(s.clone()),
            other => Some(other.to_string()),
        },
        Expr::Nested(_) => None,
        Expr::TypedString(t) => Some(t.to_string().replace(' ', "")),
        other => {
            let text = other.to_string();
            let upper = text.to_ascii_uppercase();
            if ["CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP"]
                .iter()
                .any(|f| upper == *f || upper.starts_with(&format!("{f}(")))
            {
                Some("1970-01-01 00:00:00".to_owned())
            } else {
                Some(text)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_defaults_are_the_values_the_server_makes_of_them() {
        assert_eq!(hex_default("6162", "VARBINARY").as_deref(), Some("ab"));
        assert_eq!(hex_default("10", "INT").as_deref(), Some("16"));
        assert_eq!(hex_default("10", "INT UNSIGNED").as_deref(), Some("16"));
        assert_eq!(hex_default("5", "BIT").as_deref(), Some("101"));
        assert_eq!(hex_default("e9", "VARCHAR").as_deref(), Some("é"));
        assert_eq!(hex_default("zz", "VARCHAR"), None);
        assert_eq!(hex_default("ffffffffffffffffff", "BIGINT"), None);
    }

    #[test]
    fn a_written_type_splits_into_name_arguments_and_attributes() {
        assert_eq!(
            written("INT(10) UNSIGNED ZEROFILL"),
            Written {
                name: "INT".into(),
                args: vec!["10".into()],
                tail: vec!["UNSIGNED".into(), "ZEROFILL".into()],
            }
        );
        assert_eq!(written("DECIMAL(10,2)").args, vec!["10", "2"]);
        assert_eq!(written("double precision").name, "DOUBLE PRECISION");
        assert_eq!(written("FLOAT UNSIGNED").tail, vec!["UNSIGNED"]);
        assert_eq!(written("year(4)").name, "YEAR");
    }
}
