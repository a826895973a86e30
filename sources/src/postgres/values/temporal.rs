//! PostgreSQL's dates and times (session `DateStyle=ISO`, `TimeZone=UTC`,
//! `IntervalStyle=iso_8601`): the kit's parsers and modes, plus PostgreSQL's `infinity` values
//! as Debezium emits them.

use sluice_engine::Value;

use crate::postgres::values::types::{Modes, PgKind, ReadPath};
use sluice_kit::values::temporal::{
    format_zoned_time, format_zoned_timestamp_parts, interval_value, parse_date, parse_time,
    parse_timestamp_parts, parse_timestamptz_parts, parse_timetz, time_value, timestamp_value,
    timestamp_value_parts,
};

/// pgjdbc's timestamps for `infinity` and `-infinity` (`PGStatement.DATE_POSITIVE_INFINITY`
/// and `DATE_NEGATIVE_INFINITY`), which Debezium emits as microseconds (and divides for
/// milliseconds).
const TIMESTAMP_INFINITY: (i64, i64) = (9_223_372_036_825_200_000, -9_223_372_036_832_400_000);

/// The days Debezium 3.6.3 emits for the dates `infinity` and `-infinity`: read by JDBC
/// (snapshots, and array elements everywhere) and by its pgoutput decoder (streamed columns).
const DATE_INFINITY_SNAPSHOT: (i32, i32) = (-622_191_234, -625_821_272);
const DATE_INFINITY_STREAM: (i32, i32) = (-2_147_472_692, -2_147_472_691);

/// `infinity` → `Some(true)`, `-infinity` → `Some(false)`.
fn infinity(text: &str) -> Option<bool> {
    match text {
        "infinity" => Some(true),
        "-infinity" => Some(false),
        _ => None,
    }
}

/// A date, time, timestamp or interval value as Debezium emits it in `modes`, read through
/// `path`.
pub(crate) fn value(kind: &PgKind, modes: Modes, path: ReadPath, text: &str) -> Option<Value> {
    Some(match kind {
        PgKind::Date => Value::Int32(match infinity(text) {
            Some(positive) => {
                let (pos, neg) = match path {
                    ReadPath::Snapshot => DATE_INFINITY_SNAPSHOT,
                    ReadPath::Stream => DATE_INFINITY_STREAM,
                };
                if positive {
                    pos
                } else {
                    neg
                }
            }
            None => parse_date(text).and_then(|d| i32::try_from(d).ok())?,
        }),
        PgKind::Time(p) => {
            let micros = if text == "24:00:00" {
                86_400_000_000
            } else {
                parse_time(text)?
            };
            time_value(micros, *p, modes.time)
        }
        PgKind::TimeTz(_) => Value::from(format_zoned_time(parse_timetz(text)?)),
        PgKind::Timestamp(p) => match infinity(text) {
            Some(true) => timestamp_value(TIMESTAMP_INFINITY.0, *p, modes.time),
            Some(false) => timestamp_value(TIMESTAMP_INFINITY.1, *p, modes.time),
            // Milliseconds hold the server's last years; microseconds do not (an error).
            None => timestamp_value_parts(parse_timestamp_parts(text)?, *p, modes.time)?,
        },
        // Debezium writes the words.
        PgKind::TimestampTz(_) if infinity(text).is_some() => Value::from(text),
        PgKind::TimestampTz(p) => Value::String(format_zoned_timestamp_parts(
            parse_timestamptz_parts(text)?,
            *p,
        )),
        PgKind::Interval => interval_value(text, modes.interval)?,
        _ => return None,
    })
}
