//! Entry points for the fuzz targets (`fuzz/`): the decoders that read what a server or a user
//! sends. Each must return (an error is fine) for any input, never panic or hang. Not API.

use crate::postgres::config::{
    BinaryMode, DecimalMode, HstoreMode, IntervalMode, TimePrecisionMode,
};
use crate::postgres::records::table::Cell;
use crate::postgres::values::types::{parse_value, schema_of, Modes, PgKind, ReadPath, TypeInfo};

/// The types whose text a field is read as, picked by the input's first byte.
const TYPES: &[&str] = &[
    "bool",
    "int2",
    "int4",
    "int8",
    "oid",
    "float4",
    "float8",
    "numeric",
    "money",
    "text",
    "bytea",
    "date",
    "time",
    "timetz",
    "timestamp",
    "timestamptz",
    "interval",
    "uuid",
    "json",
    "jsonb",
    "xml",
    "inet",
    "cidr",
    "macaddr",
    "bit",
    "varbit",
    "point",
    "hstore",
    "ltree",
    "tsvector",
    "int4range",
    "citext",
    "char",
    "bpchar",
    "varchar",
    "line",
    "unknown_type",
];

/// Decodes one pgoutput message.
pub fn pgoutput(data: &[u8]) {
    let _ = crate::postgres::wire::pgoutput::decode(data);
}

/// Reads `data` (after a first byte that picks the type, the modes and whether fields are
/// arrays) as COPY text: every line split into fields, each field unescaped and read as a
/// value of the picked type, through both read paths.
pub fn copy_text(data: &[u8]) {
    let Some((&pick, text)) = data.split_first() else {
        return;
    };
    let name = TYPES[usize::from(pick) % TYPES.len()];
    let typmod = i32::from(pick >> 4) - 2;
    let base = TypeInfo {
        name: name.to_owned(),
        typmod,
        enum_labels: None,
        element: None,
    };
    let info = if pick & 0x40 != 0 {
        TypeInfo {
            name: format!("_{name}"),
            typmod,
            enum_labels: None,
            element: Some(Box::new(base)),
        }
    } else {
        base
    };
    let kind = PgKind::of(&info);
    let modes = Modes {
        time: [
            TimePrecisionMode::Adaptive,
            TimePrecisionMode::AdaptiveTimeMicroseconds,
            TimePrecisionMode::Connect,
        ][usize::from(pick) % 3],
        decimal: [
            DecimalMode::Precise,
            DecimalMode::Double,
            DecimalMode::String,
        ][usize::from(pick >> 2) % 3],
        binary: BinaryMode::Bytes,
        interval: [IntervalMode::Numeric, IntervalMode::String][usize::from(pick >> 7)],
        money_digits: 2,
        hstore: [HstoreMode::Json, HstoreMode::Map][usize::from(pick >> 1) % 2],
    };
    let schema = schema_of(&kind, modes, true, None);
    let _ = crate::postgres::wire::copy::for_each_line(text, "fuzz", |cells| {
        for cell in cells {
            if let Cell::Text(field) = cell {
                for path in [ReadPath::Snapshot, ReadPath::Stream] {
                    let _ = parse_value(&kind, modes, path, &schema, field);
                }
            }
        }
        Ok(())
    });
    if let Ok(text) = std::str::from_utf8(text) {
        let _ = crate::postgres::wire::copy::unescape_copy(text);
    }
}

/// Parses one signal as the table, file, Kafka and HTTP channels give it (a JSON line), and
/// interprets it.
pub fn signal(line: &str) {
    if let Ok(signal) = sluice_kit::signal::from_json_line(line) {
        let _ = sluice_kit::signal::interpret(&signal);
    }
}

#[cfg(test)]
mod tests {
    /// Inputs the fuzz targets crashed on, each fixed where it crashed.
    #[test]
    fn the_crashes_found_by_fuzzing_are_fixed() {
        // copy_text: a year of 1235200 in a `timestamptz` overflowed the microseconds (a panic
        // with overflow checks, a wrong instant without).
        super::copy_text(b"\x0f20iny\tfinity\t12\x00y\t1235200-01-02 1_-3nfinity0-0:9\n");
        // copy_text: an interval of 3665516852034113080 weeks overflowed its days.
        super::copy_text(b"\x101 8\tP03665516852034113080W\x00~Y\x02\n1");
        // copy_text: a `bytea` hex text with a multi-byte character was sliced inside it.
        super::copy_text(b"\x0a\x0a\x0a\x0a048\x0a\x5c\x5cx0]1\x5c\x00\x00\x00\x09\x0a048\x0a\x5c\x5cx\x5cxA0x1\x5c\x09\x0an9-i");
        super::copy_text("\n\\\\xé0\n".as_bytes());
    }

    #[test]
    fn out_of_range_dates_and_times_are_refused_not_wrapped() {
        use sluice_kit::values::temporal::{
            parse_date, parse_time, parse_timestamp, parse_timestamptz,
        };
        assert_eq!(parse_timestamptz("1235200-01-02 10:00:00+00"), None);
        assert_eq!(parse_timestamp("9223372036854775807-01-01 00:00:00"), None);
        assert_eq!(parse_date("2020-13-01"), None);
        assert_eq!(parse_date("2020-01-00"), None);
        assert_eq!(parse_time("99999999999999:00:00"), None);
        assert_eq!(parse_timestamptz("2020-01-01 00:00:00+99999999999"), None);
        // The largest timestamp the server writes is past what microseconds since 1970 hold in
        // 64 bits (year 294247): refused as microseconds (an error for the failure mode), not
        // wrapped around; its parts (and so milliseconds, and the zoned text) hold it.
        assert_eq!(parse_timestamp("294276-12-31 23:59:59.999999"), None);
        let last =
            sluice_kit::values::temporal::parse_timestamp_parts("294276-12-31 23:59:59.999999")
                .unwrap();
        assert_eq!(last.millis(), Some(9_224_318_015_999_999));
        assert_eq!(
            &*sluice_kit::values::temporal::format_zoned_timestamp_parts(last, 6),
            "+294276-12-31T23:59:59.999999Z"
        );
        assert!(parse_timestamp("294246-12-31 23:59:59.999999").is_some());
        assert!(parse_date("5874897-12-31").is_some());
        assert!(parse_time("24:00:00").is_some());
    }
}
