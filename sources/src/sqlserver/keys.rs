//! How SQL Server's key values go back into a query, for incremental snapshots' chunks: each
//! key value is kept as text and written back as a literal SQL Server converts to the
//! column's type. Chunks go by a key of any type but floating point, and not by the types
//! SQL Server does not order by.

use sluice_kit::change_tables::snapshots::{hex_literal, integer_literal, number_literal};

use super::types::Kind;

/// How a chunk key column's values go back into a query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Lit {
    Integer,
    Number,
    /// Quoted: character columns, `uniqueidentifier`s, dates and times.
    Text,
    /// `0x…`.
    Hex,
}

/// How the values of a key column of `kind` (declared `declared`) go back into a query.
pub(crate) fn key_literal(kind: &Kind, declared: &str) -> Result<Lit, String> {
    let declared = declared.to_ascii_lowercase();
    if ["text", "ntext", "xml", "image"].contains(&declared.as_str()) {
        return Err(format!(
            "is of type {declared}, which SQL Server does not order by"
        ));
    }
    Ok(match kind {
        Kind::Boolean | Kind::Int16 | Kind::Int32 | Kind::Int64 => Lit::Integer,
        Kind::Decimal(..) | Kind::Money(_) => Lit::Number,
        Kind::String | Kind::Date | Kind::Time(_) | Kind::Timestamp(_) | Kind::Zoned(_) => {
            Lit::Text
        }
        Kind::Bytes => Lit::Hex,
        Kind::Float32 | Kind::Float64 => {
            return Err("is a floating-point column: its values cannot be written back exactly to read chunks by".into())
        }
    })
}

/// A key value written back into a query.
pub(crate) fn literal(value: &str, lit: Lit) -> Option<String> {
    match lit {
        // An N'…' literal would convert a varchar column to Unicode in the comparison (other
        // rules than its ORDER BY under a SQL_* collation, no index seek): plain text where
        // the value is ASCII, which compares the same against char and nchar columns.
        Lit::Text => {
            let n = if value.is_ascii() { "" } else { "N" };
            Some(format!("{n}'{}'", value.replace('\'', "''")))
        }
        Lit::Integer => integer_literal(value),
        Lit::Number => number_literal(value),
        Lit::Hex => hex_literal(value, "0x"),
    }
}
