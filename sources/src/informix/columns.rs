//! A captured table's columns as its TABSCHEMA record writes them (`id integer, name char(10),
//! price decimal(8,2), note varchar(200)`), and a row record's bytes cut and read by them.
//!
//! The payload holds the fixed-length columns first, in the table's order, then the
//! variable-length ones, whose sizes the record's header gives. A NULL is a sentinel inside
//! the column (no null bitmap):
//! - SMALLINT: 2 bytes, NULL `0x8000`;
//! - INTEGER, SERIAL, DATE (days since 1899-12-31): 4 bytes, NULL `0x80000000`;
//! - CHAR, NCHAR: fixed width, blank-padded, NULL when the first byte is `0x00`;
//! - DECIMAL, MONEY: packed ([`super::decimal`]), `(p + (s & 1) + 3) / 2` bytes;
//! - BOOLEAN: a null flag byte (1: NULL) and the value byte;
//! - VARCHAR, NVARCHAR: a one-byte length, then the text; LVARCHAR: a three-byte length.
//!
//! Types whose encoding this reader has not been checked on (BIGINT, INT8, SERIAL8, FLOAT,
//! SMALLFLOAT, DATETIME, INTERVAL, ...) are named by their column and refused when read, never
//! guessed.

use super::decimal;

/// A column's type, as far as its bytes go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    SmallInt,
    /// INTEGER and SERIAL.
    Integer,
    Date,
    /// CHAR and NCHAR of `width` bytes.
    Char {
        width: usize,
    },
    /// DECIMAL and MONEY (`scale`: `None` for a floating DECIMAL(p)).
    Decimal {
        precision: u32,
        scale: Option<u32>,
    },
    Boolean,
    /// VARCHAR and NVARCHAR: a one-byte length first.
    VarChar,
    /// LVARCHAR: a three-byte length first.
    LVarChar,
    /// A type this reader does not decode yet (its declaration, lower case).
    Other(String),
}

impl Kind {
    /// The bytes a fixed-length column takes (`None`: variable-length).
    pub fn fixed_size(&self) -> Option<usize> {
        Some(match self {
            Kind::SmallInt | Kind::Boolean => 2,
            Kind::Integer | Kind::Date => 4,
            Kind::Char { width } => *width,
            Kind::Decimal { precision, scale } => {
                let odd = scale.map_or(0, |s| s & 1);
                ((precision + odd + 3) / 2) as usize
            }
            Kind::VarChar | Kind::LVarChar | Kind::Other(_) => return None,
        })
    }
}

/// A column of a TABSCHEMA record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub kind: Kind,
}

/// Why a TABSCHEMA text or a row cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ColumnError {
    /// A column declaration that is not `name type`.
    #[error("TABSCHEMA column `{0}` is not `name type`")]
    Declaration(String),
    /// A type's size or precision is not a number.
    #[error("TABSCHEMA column `{column}`: `{declared}` has no size this reader understands")]
    Size { column: String, declared: String },
    /// A type whose bytes this reader does not decode (yet).
    #[error("column `{column}`: Informix type `{declared}` is not read yet")]
    Unsupported { column: String, declared: String },
    /// The row's bytes do not match the columns.
    #[error("a row of {has} fixed-length bytes, where the columns take {needs}")]
    Fixed { needs: usize, has: usize },
    /// The variable-length columns do not match.
    #[error("a row with {has} variable-length columns, where the table has {needs}")]
    Variable { needs: usize, has: usize },
    /// A value that is not what its type allows.
    #[error("column `{column}`: {reason}")]
    Value { column: String, reason: String },
}

/// The columns a TABSCHEMA record lists.
pub fn parse_columns(text: &str) -> Result<Vec<Column>, ColumnError> {
    split_top_level(text)
        .into_iter()
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(parse_column)
        .collect()
}

/// `text` cut at the commas outside parentheses (`decimal(8,2)` stays whole).
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_column(declaration: &str) -> Result<Column, ColumnError> {
    let (name, declared) = declaration
        .split_once(char::is_whitespace)
        .ok_or_else(|| ColumnError::Declaration(declaration.to_owned()))?;
    let declared = declared.trim().to_ascii_lowercase();
    let (base, args) = match declared.split_once('(') {
        Some((base, rest)) => (base.trim(), rest.trim_end_matches(')').trim()),
        None => (declared.as_str(), ""),
    };
    // `not null` and other constraints after the type.
    let base = base.split_whitespace().next().unwrap_or(base);
    let size = |text: &str| {
        text.trim().parse::<u32>().map_err(|_| ColumnError::Size {
            column: name.to_owned(),
            declared: declared.clone(),
        })
    };
    let numbers: Vec<&str> = args.split(',').filter(|a| !a.trim().is_empty()).collect();
    let kind = match base {
        "smallint" => Kind::SmallInt,
        "integer" | "int" | "serial" => Kind::Integer,
        "date" => Kind::Date,
        "boolean" => Kind::Boolean,
        "char" | "character" | "nchar" => Kind::Char {
            width: numbers.first().map(|n| size(n)).transpose()?.unwrap_or(1) as usize,
        },
        "decimal" | "dec" | "numeric" | "money" => {
            let precision = numbers.first().map(|n| size(n)).transpose()?.unwrap_or(16);
            let scale = match (base, numbers.get(1)) {
                (_, Some(s)) => Some(size(s)?),
                // MONEY(p) has scale 2; DECIMAL(p) floats.
                ("money", None) => Some(2),
                _ => None,
            };
            Kind::Decimal { precision, scale }
        }
        "varchar" | "nvarchar" => Kind::VarChar,
        "lvarchar" => Kind::LVarChar,
        _ => Kind::Other(declared.clone()),
    };
    Ok(Column {
        name: name.to_owned(),
        kind,
    })
}

/// A column's value as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    /// Days since 1970-01-01.
    Date(i32),
    Text(String),
    /// A decimal number written out (`-12.50` as `-12.5`).
    Decimal(String),
    Boolean(bool),
}

/// Days from 1899-12-31 (Informix's day 0) to 1970-01-01.
const EPOCH_DAYS: i32 = 25_568;

/// The values of a row record's `fixed` and `variable` parts, by `columns` (fixed-length
/// columns first, as the record holds them; each list in the table's order).
pub fn read_row(
    columns: &[Column],
    fixed: &[u8],
    variable: &[&[u8]],
) -> Result<Vec<Cell>, ColumnError> {
    let needs: usize = (columns.iter()).filter_map(|c| c.kind.fixed_size()).sum();
    if needs != fixed.len() {
        return Err(ColumnError::Fixed {
            needs,
            has: fixed.len(),
        });
    }
    let variable_count = columns
        .iter()
        .filter(|c| c.kind.fixed_size().is_none())
        .count();
    if variable_count != variable.len() {
        return Err(ColumnError::Variable {
            needs: variable_count,
            has: variable.len(),
        });
    }
    let (mut at, mut next_variable) = (0, variable.iter());
    let mut cells = Vec::with_capacity(columns.len());
    for column in columns {
        let bytes = match column.kind.fixed_size() {
            Some(size) => {
                let bytes = &fixed[at..at + size];
                at += size;
                bytes
            }
            None => next_variable.next().copied().unwrap_or_default(),
        };
        cells.push(read_cell(column, bytes)?);
    }
    Ok(cells)
}

fn read_cell(column: &Column, bytes: &[u8]) -> Result<Cell, ColumnError> {
    let bad = |reason: String| ColumnError::Value {
        column: column.name.clone(),
        reason,
    };
    let text = |b: &[u8]| {
        String::from_utf8(b.to_vec()).map_err(|_| bad(format!("{b:02x?} is not UTF-8 text")))
    };
    Ok(match &column.kind {
        Kind::SmallInt => match i16::from_be_bytes([bytes[0], bytes[1]]) {
            i16::MIN => Cell::Null,
            n => Cell::Int(i64::from(n)),
        },
        Kind::Integer | Kind::Date => {
            let n = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            match (n, &column.kind) {
                (i32::MIN, _) => Cell::Null,
                (days, Kind::Date) => Cell::Date(days - EPOCH_DAYS),
                (n, _) => Cell::Int(i64::from(n)),
            }
        }
        Kind::Char { .. } if bytes.first() == Some(&0) => Cell::Null,
        Kind::Char { .. } => Cell::Text(text(bytes)?),
        Kind::Decimal { .. } => match decimal::decode(bytes).map_err(|e| bad(e.to_string()))? {
            Some(n) => Cell::Decimal(n),
            None => Cell::Null,
        },
        Kind::Boolean => match (bytes[0], bytes[1]) {
            (1, _) => Cell::Null,
            (0, v @ (0 | 1)) => Cell::Boolean(v == 1),
            (flag, v) => return Err(bad(format!("BOOLEAN bytes {flag:02x} {v:02x}"))),
        },
        Kind::VarChar | Kind::LVarChar => {
            let prefix = if column.kind == Kind::VarChar { 1 } else { 3 };
            let Some((len, rest)) = (bytes.len() >= prefix).then(|| bytes.split_at(prefix)) else {
                return Err(bad(format!("{} bytes, fewer than its length", bytes.len())));
            };
            let len = len.iter().fold(0usize, |n, &b| (n << 8) | usize::from(b));
            if len != rest.len() {
                return Err(bad(format!("a length of {len} over {} bytes", rest.len())));
            }
            Cell::Text(text(rest)?)
        }
        Kind::Other(declared) => {
            return Err(ColumnError::Unsupported {
                column: column.name.clone(),
                declared: declared.clone(),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any bytes of a row's size read as values or a reason: never a panic.
        #[test]
        fn any_row_bytes_read_without_panic(
            fixed in proptest::collection::vec(any::<u8>(), 24),
            short in proptest::collection::vec(any::<u8>(), 0..6),
            long in proptest::collection::vec(any::<u8>(), 0..6),
        ) {
            let columns = parse_columns(
                "a smallint, b integer, c date, d char(3), e decimal(7,3), f boolean, g money(5), h varchar(4), i lvarchar",
            ).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let read = read_row(&columns, &fixed, &[&short, &long]);
            // The sizes fit: what is refused is a value, not the row's shape.
            prop_assert!(
                !matches!(read, Err(ColumnError::Fixed { .. } | ColumnError::Variable { .. })),
                "{read:?}"
            );
        }

        /// Any TABSCHEMA text reads as columns or a reason.
        #[test]
        fn any_column_text_parses_without_panic(text in "[a-z(),0-9 ]{0,60}") {
            let _ = parse_columns(&text);
        }
    }

    #[test]
    fn the_guides_insert_reads_as_2000_and_three_nulls() {
        let columns = parse_columns("c1 integer, c2 char(10), c3 integer, c4 date")
            .unwrap_or_else(|e| panic!("{e}"));
        let fixed = [
            0x00, 0x00, 0x07, 0xd0, 0x00, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
            0x80, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00,
        ];
        let cells = read_row(&columns, &fixed, &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cells, [Cell::Int(2000), Cell::Null, Cell::Null, Cell::Null]);
    }

    #[test]
    fn declarations_give_kinds_and_sizes() {
        let columns = parse_columns(
            "id serial not null, qty smallint, price decimal(8,2), total money(10), f decimal(5), \
             code nchar(3), born date, ok boolean, name varchar(40), note lvarchar(2000), t datetime year to second",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let sizes: Vec<Option<usize>> = columns.iter().map(|c| c.kind.fixed_size()).collect();
        assert_eq!(
            sizes,
            [
                Some(4),
                Some(2),
                Some(5),
                Some(6),
                Some(4),
                Some(3),
                Some(4),
                Some(2),
                None,
                None,
                None
            ]
        );
        assert_eq!(
            columns[10].kind,
            Kind::Other("datetime year to second".into())
        );
        assert!(matches!(
            parse_columns("lonely"),
            Err(ColumnError::Declaration(d)) if d == "lonely"
        ));
        assert!(matches!(
            parse_columns("c char(x)"),
            Err(ColumnError::Size { .. })
        ));
    }

    #[test]
    fn every_kind_reads_its_value_and_its_null() {
        let columns = parse_columns(
            "a smallint, b integer, c date, d char(2), e decimal(5,2), f boolean, g varchar(9), h lvarchar",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let price = decimal::encode(Some("-12.5"), 4).unwrap_or_default();
        let mut fixed = vec![0xff, 0xfe, 0, 0, 0, 1, 0, 0, 0x63, 0xe0];
        fixed.extend_from_slice(b"ab");
        fixed.extend_from_slice(&price);
        fixed.extend_from_slice(&[0, 1]);
        let cells = read_row(&columns, &fixed, &[b"\x02hi", b"\x00\x00\x03abc"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            cells,
            [
                Cell::Int(-2),
                Cell::Int(1),
                // Day 25,568 after 1899-12-31 is 1970-01-01 (day 1 is 1900-01-01).
                Cell::Date(0),
                Cell::Text("ab".into()),
                Cell::Decimal("-12.5".into()),
                Cell::Boolean(true),
                Cell::Text("hi".into()),
                Cell::Text("abc".into()),
            ]
        );
        let mut nulls = vec![0x80, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0, b' '];
        nulls.extend_from_slice(&[0, 0, 0, 0]);
        nulls.extend_from_slice(&[1, 0]);
        let cells = read_row(&columns, &nulls, &[b"\x00", b"\x00\x00\x00"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            &cells[..6],
            [
                Cell::Null,
                Cell::Null,
                Cell::Null,
                Cell::Null,
                Cell::Null,
                Cell::Null
            ]
        );
    }

    #[test]
    fn a_row_that_does_not_fit_or_an_unread_type_is_refused() {
        let columns =
            parse_columns("a integer, t datetime year to day").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            read_row(&columns, &[0, 0, 0, 1], &[b"x"]),
            Err(ColumnError::Unsupported { column, .. }) if column == "t"
        ));
        let ints = parse_columns("a integer").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            read_row(&ints, &[0, 0, 1], &[]),
            Err(ColumnError::Fixed { needs: 4, has: 3 })
        );
        assert_eq!(
            read_row(&ints, &[0, 0, 0, 1], &[b"x"]),
            Err(ColumnError::Variable { needs: 0, has: 1 })
        );
        let text = parse_columns("v varchar(5)").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            read_row(&text, &[], &[b"\x05ab"]),
            Err(ColumnError::Value { .. })
        ));
        let flag = parse_columns("f boolean").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            read_row(&flag, &[0, 7], &[]),
            Err(ColumnError::Value { .. })
        ));
    }
}
