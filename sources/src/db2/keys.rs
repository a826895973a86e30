//! How Db2's key values go back into a query, for incremental snapshots' chunks: numbers,
//! character columns, dates and times, each value kept as the driver's text and written back
//! as a literal (a table keyed otherwise is refused with a notification).

use sluice_kit::change_tables::snapshots::{integer_literal, number_literal};

use super::connection::literal as text_literal;
use super::types::Kind;

/// How a chunk key column's values go back into a query.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lit {
    /// Quoted: character columns, dates and times.
    Text,
    Integer,
    /// `DECIMAL`: digits and a point (an exponent would make it a `DOUBLE` constant).
    Decimal,
    /// `DECFLOAT`: written `DECFLOAT('…')`, exact whatever its exponent.
    DecFloat,
}

/// How the values of a key column of `kind` (declared `declared`) go back into a query.
pub(crate) fn key_literal(kind: &Kind, declared: &str) -> Result<Lit, String> {
    let declared = declared.to_ascii_uppercase();
    if ["CLOB", "DBCLOB", "LONG"]
        .iter()
        .any(|t| declared.starts_with(t))
    {
        return Err(format!(
            "is of type {declared}, which Db2 does not order by"
        ));
    }
    Ok(match kind {
        Kind::SmallInt | Kind::Integer | Kind::BigInt => Lit::Integer,
        Kind::Decimal { .. } => Lit::Decimal,
        Kind::DecFloat => Lit::DecFloat,
        Kind::Text | Kind::Date | Kind::Time | Kind::Timestamp { .. } => Lit::Text,
        other => return Err(format!("is of a kind ({other:?}) chunks are not read by (numbers, character columns, dates and times are)")),
    })
}

/// A key value written back into a query.
pub(crate) fn literal(value: &str, lit: Lit) -> Option<String> {
    match lit {
        Lit::Text => Some(text_literal(value)),
        Lit::Integer => integer_literal(value),
        Lit::Decimal => number_literal(value.trim()).filter(|n| !n.contains(['E', 'e'])),
        Lit::DecFloat => number_literal(value.trim()).map(|n| format!("DECFLOAT('{n}')")),
    }
}
