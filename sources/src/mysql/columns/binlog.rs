//! Column values from binlog row images, as mysql_common decodes them: integers as sent
//! (without signedness metadata an unsigned value arrives negative), `BIT` as big-endian
//! bytes, `ENUM` as its 1-based index, `SET` as a little-endian bit mask, `YEAR` as text,
//! `TIME` as a signed duration, `BINARY(n)` without its trailing zero bytes.

use mysql_async::binlog::value::BinlogValue;
use mysql_async::Value as V;
use sluice_engine::Value;
use sluice_kit::values::binary_value;
use sluice_kit::values::decimal::unscaled_bytes;
use sluice_kit::values::integer::of_width;
use sluice_kit::values::temporal::{days_from_civil, format_zoned_timestamp, timestamp_value};

use super::{Charset, Column, Kind, Modes};

impl Column {
    /// The value of the column in a binlog row image (`None`: SQL NULL); `Err` says why it
    /// does not fit.
    pub(in crate::mysql) fn binlog_value(
        &self,
        v: Option<&BinlogValue<'_>>,
        modes: Modes,
    ) -> Result<Value, String> {
        let Some(v) = v else {
            return Ok(Value::Null);
        };
        let BinlogValue::Value(v) = v else {
            return Err(format!("a JSON value where {:?} was expected", self.kind));
        };
        if *v == V::NULL {
            return Ok(Value::Null);
        }
        let bad = || format!("the binlog value {v:?} does not fit its type");
        let int = || match v {
            V::Int(i) => Some(i128::from(*i)),
            V::UInt(u) => Some(i128::from(*u)),
            _ => None,
        };
        let bytes = || match v {
            V::Bytes(b) => Some(b.as_slice()),
            _ => None,
        };
        Ok(match &self.kind {
            Kind::Excluded => Value::Null,
            // The column's bits, whatever the reader did with the sign: MEDIUMINT arrives
            // zero-extended, an unsigned value without signedness metadata as a negative one.
            Kind::Int { bits, unsigned, .. } => {
                self.int(of_width(int().ok_or_else(bad)?, *bits, *unsigned))?
            }
            Kind::UnsignedDecimal => {
                let i = int().ok_or_else(bad)?;
                let u = if i < 0 { i + (1i128 << 64) } else { i };
                Value::Bytes(unscaled_bytes(&u.to_string(), 0).ok_or_else(bad)?)
            }
            Kind::Float32 => match v {
                V::Float(f) => Value::Float32(*f),
                _ => return Err(bad()),
            },
            Kind::Float64 => match v {
                V::Double(f) => Value::Float64(*f),
                V::Float(f) => Value::Float64(f64::from(*f)),
                _ => return Err(bad()),
            },
            Kind::Text(charset @ (Charset::Latin1 | Charset::Other(_))) => {
                let bytes = bytes().ok_or_else(bad)?;
                Value::from(charset.decode(bytes).ok_or_else(|| {
                    format!("the binlog's bytes {bytes:02x?} are not text of its character set")
                })?)
            }
            Kind::Decimal(_)
            | Kind::Text(Charset::Utf8)
            | Kind::Bool
            | Kind::Bits(_)
            | Kind::Geometry
            | Kind::Point => return self.value(Some(bytes().ok_or_else(bad)?), modes),
            Kind::Binary(pad) => {
                let mut b = bytes().ok_or_else(bad)?.to_vec();
                if let Some(n) = *pad {
                    if b.len() < n {
                        b.resize(n, 0);
                    }
                }
                binary_value(b, modes.binary)
            }
            Kind::Special(special) => {
                Value::from(special.text(bytes().ok_or_else(bad)?).ok_or_else(bad)?)
            }
            Kind::Year => {
                let text = std::str::from_utf8(bytes().ok_or_else(bad)?).map_err(|_| bad())?;
                let year: i32 = text.parse().map_err(|_| bad())?;
                // mysql_common adds 1900 to the stored byte: 1900 is the zero year 0000.
                Value::Int32(if year == 1900 { 0 } else { year })
            }
            Kind::Enum(values) => {
                let i = int()
                    .and_then(|i| usize::try_from(i).ok())
                    .ok_or_else(bad)?;
                // Index 0 is the empty string MySQL stores for an invalid value.
                match i {
                    0 => Value::from(""),
                    _ => Value::from(values.get(i - 1).ok_or_else(bad)?.as_str()),
                }
            }
            Kind::Set(values) => set_value(values, bytes().ok_or_else(bad)?).ok_or_else(bad)?,
            Kind::Date | Kind::DateTime(_) | Kind::Time(_) | Kind::Timestamp(_) => {
                return self.binlog_temporal(v, modes)
            }
        })
    }

    /// A `DATE`, `TIME`, `DATETIME` or `TIMESTAMP` of a binlog row image.
    fn binlog_temporal(&self, v: &V, modes: Modes) -> Result<Value, String> {
        let bad = || format!("the binlog value {v:?} does not fit its type");
        match &self.kind {
            Kind::Date | Kind::DateTime(_)
                if matches!(v, V::Date(_, 0, ..) | V::Date(_, _, 0, ..)) =>
            {
                self.zero_date()
            }
            // TIMESTAMP 0 is the zero date (the type starts at 1970-01-01 00:00:01 UTC).
            Kind::Timestamp(_) if matches!(v, V::Bytes(b) if b.as_slice() == b"0") => {
                self.zero_date()
            }
            Kind::Date => match v {
                V::Date(y, m, d, ..) => Ok(Value::Int32(
                    i32::try_from(days_from_civil(i64::from(*y), u32::from(*m), u32::from(*d)))
                        .map_err(|_| bad())?,
                )),
                _ => Err(bad()),
            },
            Kind::Time(_) => match v {
                V::Time(negative, days, h, m, s, us) => {
                    let seconds = (i64::from(*days) * 24 + i64::from(*h)) * 3600
                        + i64::from(*m) * 60
                        + i64::from(*s);
                    let micros = seconds * 1_000_000 + i64::from(*us);
                    self.time(if *negative { -micros } else { micros }, modes)
                }
                _ => Err(bad()),
            },
            Kind::DateTime(fsp) => match v {
                V::Date(y, mo, d, h, mi, s, us) => {
                    let days = days_from_civil(i64::from(*y), u32::from(*mo), u32::from(*d));
                    let micros = days * 86_400_000_000
                        + (i64::from(*h) * 3600 + i64::from(*mi) * 60 + i64::from(*s)) * 1_000_000
                        + i64::from(*us);
                    Ok(timestamp_value(micros, *fsp, modes.time))
                }
                _ => Err(bad()),
            },
            // `seconds[.micros]` since the epoch.
            Kind::Timestamp(fsp) => {
                let V::Bytes(bytes) = v else {
                    return Err(bad());
                };
                let text = std::str::from_utf8(bytes).map_err(|_| bad())?;
                let (s, us) = text.split_once('.').unwrap_or((text, "0"));
                let s: i64 = s.parse().map_err(|_| bad())?;
                let us: i64 = format!("{us:0<6}").parse().map_err(|_| bad())?;
                Ok(Value::String(format_zoned_timestamp(
                    s * 1_000_000 + us,
                    *fsp,
                )))
            }
            _ => Err(bad()),
        }
    }
}

/// A `SET`'s value of its bit mask (`values` in definition order); `None` when the mask has
/// a bit past them.
fn set_value(values: &[String], mask: &[u8]) -> Option<Value> {
    let chosen: Vec<&str> = values
        .iter()
        .enumerate()
        .filter(|(i, _)| mask.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0))
        .map(|(_, s)| s.as_str())
        .collect();
    let known = values.len();
    let stray = (known..mask.len() * 8).any(|i| mask[i / 8] & (1 << (i % 8)) != 0);
    (!stray).then(|| Value::from(chosen.join(",")))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{described, MODES};
    use super::super::Described;
    use super::*;

    fn col(d: Described) -> Column {
        Column::new(&d, false, MODES).unwrap_or_else(|e| panic!("{e}"))
    }

    fn of(c: &Column, v: V) -> Result<Value, String> {
        c.binlog_value(Some(&BinlogValue::Value(v)), MODES)
    }

    #[test]
    fn binlog_values_follow_the_column_type() {
        let tiu = col(described("tinyint", "tinyint(3) unsigned"));
        assert_eq!(of(&tiu, V::Int(-1)), Ok(Value::Int16(255)));
        assert_eq!(of(&tiu, V::UInt(255)), Ok(Value::Int16(255)));
        let biu = col(described("bigint", "bigint(20) unsigned"));
        assert!(of(&biu, V::Int(-1)).unwrap_err().contains("precise"));
        let precise = Modes {
            bigint: super::super::BigintUnsignedMode::Precise,
            ..MODES
        };
        let biu = Column::new(&described("bigint", "bigint(20) unsigned"), false, precise)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            biu.binlog_value(Some(&BinlogValue::Value(V::Int(-1))), precise),
            Ok(Value::Bytes(vec![
                0, 255, 255, 255, 255, 255, 255, 255, 255
            ]))
        );
        let e = col(described("enum", "enum('s','m')"));
        assert_eq!(of(&e, V::Int(2)), Ok(Value::from("m")));
        assert_eq!(of(&e, V::Int(0)), Ok(Value::from("")));
        assert!(of(&e, V::Int(3)).is_err());
        let s = col(described("set", "set('a','b','c')"));
        assert_eq!(of(&s, V::Bytes(vec![0b101])), Ok(Value::from("a,c")));
        assert_eq!(of(&s, V::Bytes(vec![0])), Ok(Value::from("")));
        assert!(of(&s, V::Bytes(vec![0b1000])).is_err());
        let bn = col(Described {
            length: Some(4),
            ..described("binary", "binary(4)")
        });
        assert_eq!(
            of(&bn, V::Bytes(vec![1])),
            Ok(Value::Bytes(vec![1, 0, 0, 0]))
        );
        let t = col(described("time", "time(6)"));
        assert_eq!(
            of(&t, V::Time(true, 1, 2, 0, 0, 500_000)),
            Ok(Value::Int64(-(26 * 3600 * 1_000_000 + 500_000)))
        );
        let y = col(described("year", "year(4)"));
        assert_eq!(of(&y, V::Bytes(b"1900".to_vec())), Ok(Value::Int32(0)));
        assert_eq!(of(&y, V::Bytes(b"2155".to_vec())), Ok(Value::Int32(2155)));
        let dt = col(described("date", "date"));
        assert_eq!(of(&dt, V::Date(0, 0, 0, 0, 0, 0, 0)), Ok(Value::Null));
        let ts = col(described("timestamp", "timestamp"));
        assert_eq!(of(&ts, V::Bytes(b"0".to_vec())), Ok(Value::Null));
        let f = col(described("float", "float"));
        assert_eq!(of(&f, V::Float(1.5)), Ok(Value::Float32(1.5)));
    }
}
