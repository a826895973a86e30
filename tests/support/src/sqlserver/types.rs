//! SQL Server column types as the emulator stores them (SQLite values) and sends them (TDS
//! TYPE_INFO and row values).

use rusqlite::types::Value;

use super::tds::COLLATION;

/// A column's SQL Server type.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlType {
    Bit,
    Int(u8),
    Float(u8),
    Decimal {
        precision: u8,
        scale: u8,
    },
    Money(u8),
    /// `char`/`varchar`/`text` (windows-1252); `None` length: `max`.
    VarChar(Option<u16>),
    /// `nchar`/`nvarchar`/`ntext`/`xml`; length in characters, `None`: `max`.
    NVarChar(Option<u16>),
    /// `binary`/`varbinary`/`image`/`rowversion`.
    VarBinary(Option<u16>),
    Guid,
    Date,
    Time(u8),
    DateTime2(u8),
    DateTimeOffset(u8),
    DateTime,
    SmallDateTime,
}

impl SqlType {
    /// The type a declared type name stands for (`decimal(10,2)`, `nvarchar(max)`, …); the
    /// emulator's own `_text` suffix (kept by SQLite as text affinity) is ignored.
    pub fn parse(declared: &str) -> Option<SqlType> {
        let d = declared.trim().to_ascii_lowercase().replace("_text", "");
        let (name, args) = match d.find('(') {
            Some(i) => (
                d[..i].trim().to_string(),
                d[i + 1..].trim_end_matches(')').to_string(),
            ),
            None => (d.clone(), String::new()),
        };
        let nums: Vec<i64> = args
            .split(',')
            .filter_map(|a| a.trim().parse().ok())
            .collect();
        let len = |default: u16| match nums.first() {
            Some(n) if *n < 0 => None,
            Some(n) => Some(u16::try_from(*n).unwrap_or(8000)),
            None if args.trim() == "max" => None,
            None => Some(default),
        };
        let scale = |default: u8| {
            nums.first()
                .map_or(default, |n| u8::try_from(*n).unwrap_or(7))
        };
        Some(match name.as_str() {
            "bit" => SqlType::Bit,
            "tinyint" => SqlType::Int(1),
            "smallint" => SqlType::Int(2),
            "int" | "integer" => SqlType::Int(4),
            "bigint" => SqlType::Int(8),
            "real" => SqlType::Float(4),
            "float" => SqlType::Float(8),
            "decimal" | "numeric" => SqlType::Decimal {
                precision: nums.first().map_or(18, |p| u8::try_from(*p).unwrap_or(38)),
                scale: nums.get(1).map_or(0, |s| u8::try_from(*s).unwrap_or(0)),
            },
            "money" => SqlType::Money(8),
            "smallmoney" => SqlType::Money(4),
            "char" | "varchar" => SqlType::VarChar(len(1)),
            "text" => SqlType::VarChar(None),
            "nchar" | "nvarchar" => SqlType::NVarChar(len(1)),
            "ntext" | "xml" | "sysname" => {
                SqlType::NVarChar(if name == "sysname" { Some(128) } else { None })
            }
            "binary" | "varbinary" => SqlType::VarBinary(len(1)),
            "image" => SqlType::VarBinary(None),
            "rowversion" | "timestamp" => SqlType::VarBinary(Some(8)),
            "uniqueidentifier" => SqlType::Guid,
            "date" => SqlType::Date,
            "time" => SqlType::Time(scale(7)),
            "datetime2" => SqlType::DateTime2(scale(7)),
            "datetimeoffset" => SqlType::DateTimeOffset(scale(7)),
            "datetime" => SqlType::DateTime,
            "smalldatetime" => SqlType::SmallDateTime,
            _ => return None,
        })
    }

    /// The type of an expression column, from the first value it has.
    pub fn of_value(value: Option<&Value>) -> SqlType {
        match value {
            Some(Value::Integer(_)) => SqlType::Int(8),
            Some(Value::Real(_)) => SqlType::Float(8),
            Some(Value::Blob(_)) => SqlType::VarBinary(Some(8000)),
            _ => SqlType::NVarChar(Some(4000)),
        }
    }

    /// TYPE_INFO.
    pub fn type_info(&self, out: &mut Vec<u8>) {
        match self {
            SqlType::Bit => out.extend_from_slice(&[0x68, 1]),
            SqlType::Int(n) => out.extend_from_slice(&[0x26, *n]),
            SqlType::Float(n) => out.extend_from_slice(&[0x6D, *n]),
            SqlType::Decimal { precision, scale } => {
                out.extend_from_slice(&[0x6A, decimal_len(*precision), *precision, *scale])
            }
            SqlType::Money(n) => out.extend_from_slice(&[0x6E, *n]),
            SqlType::VarChar(n) => {
                out.push(0xA7);
                out.extend_from_slice(&n.unwrap_or(0xFFFF).to_le_bytes());
                out.extend_from_slice(&COLLATION);
            }
            SqlType::NVarChar(n) => {
                out.push(0xE7);
                out.extend_from_slice(&n.map_or(0xFFFF, |n| n.saturating_mul(2)).to_le_bytes());
                out.extend_from_slice(&COLLATION);
            }
            SqlType::VarBinary(n) => {
                out.push(0xA5);
                out.extend_from_slice(&n.unwrap_or(0xFFFF).to_le_bytes());
            }
            SqlType::Guid => out.extend_from_slice(&[0x24, 16]),
            SqlType::Date => out.push(0x28),
            SqlType::Time(s) => out.extend_from_slice(&[0x29, *s]),
            SqlType::DateTime2(s) => out.extend_from_slice(&[0x2A, *s]),
            SqlType::DateTimeOffset(s) => out.extend_from_slice(&[0x2B, *s]),
            SqlType::DateTime => out.extend_from_slice(&[0x6F, 8]),
            SqlType::SmallDateTime => out.extend_from_slice(&[0x6F, 4]),
        }
    }

    fn is_plp(&self) -> bool {
        matches!(
            self,
            SqlType::VarChar(None) | SqlType::NVarChar(None) | SqlType::VarBinary(None)
        )
    }

    /// A row value of this type.
    pub fn encode(&self, out: &mut Vec<u8>, value: &Value) -> Result<(), String> {
        if matches!(value, Value::Null) {
            match self {
                _ if self.is_plp() => out.extend_from_slice(&u64::MAX.to_le_bytes()),
                SqlType::VarChar(_) | SqlType::NVarChar(_) | SqlType::VarBinary(_) => {
                    out.extend_from_slice(&0xFFFFu16.to_le_bytes())
                }
                _ => out.push(0),
            }
            return Ok(());
        }
        match self {
            SqlType::Bit => out.extend_from_slice(&[1, u8::from(integer(value)? != 0)]),
            SqlType::Int(n) => {
                let v = integer(value)?;
                let fits = match n {
                    1 => (0..=255).contains(&v),
                    2 => i16::try_from(v).is_ok(),
                    4 => i32::try_from(v).is_ok(),
                    _ => true,
                };
                if !fits {
                    return Err(format!("{v} is out of range"));
                }
                out.push(*n);
                out.extend_from_slice(&v.to_le_bytes()[..usize::from(*n)]);
            }
            SqlType::Float(4) => {
                out.push(4);
                out.extend_from_slice(&(real(value)? as f32).to_le_bytes());
            }
            SqlType::Float(_) => {
                out.push(8);
                out.extend_from_slice(&real(value)?.to_le_bytes());
            }
            SqlType::Decimal { precision, scale } => {
                let v = scaled(&text(value), *scale)?;
                if v.unsigned_abs() >= 10u128.pow(u32::from(*precision)) {
                    return Err(format!(
                        "{} does not fit decimal({precision},{scale})",
                        text(value)
                    ));
                }
                let len = decimal_len(*precision);
                out.push(len);
                out.push(u8::from(v >= 0));
                out.extend_from_slice(&v.unsigned_abs().to_le_bytes()[..usize::from(len - 1)]);
            }
            SqlType::Money(n) => {
                let v = scaled(&text(value), 4)?;
                let v = i64::try_from(v).map_err(|_| "money out of range".to_string())?;
                out.push(*n);
                if *n == 4 {
                    let small =
                        i32::try_from(v).map_err(|_| "smallmoney out of range".to_string())?;
                    out.extend_from_slice(&small.to_le_bytes());
                } else {
                    out.extend_from_slice(&((v >> 32) as i32).to_le_bytes());
                    out.extend_from_slice(&(v as u32).to_le_bytes());
                }
            }
            SqlType::VarChar(n) => {
                let s = text(value);
                let bytes = match s.is_ascii() {
                    true => s.into_bytes(),
                    false => s
                        .chars()
                        .map(|c| {
                            u8::try_from(u32::from(c))
                                .map_err(|_| format!("{c:?} is not in windows-1252"))
                        })
                        .collect::<Result<Vec<u8>, String>>()?,
                };
                sized(out, &bytes, *n, self.is_plp())?;
            }
            SqlType::NVarChar(n) => {
                let s = text(value);
                let bytes = super::tds::utf16(&s);
                sized(out, &bytes, n.map(|n| n.saturating_mul(2)), self.is_plp())?;
            }
            SqlType::VarBinary(n) => {
                let bytes = match value {
                    Value::Blob(b) => b.clone(),
                    other => text(other).into_bytes(),
                };
                sized(out, &bytes, *n, self.is_plp())?;
            }
            SqlType::Guid => {
                let hex: String = text(value).chars().filter(|c| *c != '-').collect();
                let mut b = decode_hex(&hex)
                    .filter(|b| b.len() == 16)
                    .ok_or("not a uniqueidentifier")?;
                b[0..4].reverse();
                b[4..6].reverse();
                b[6..8].reverse();
                out.push(16);
                out.extend_from_slice(&b);
            }
            SqlType::Date => {
                let (days, _, _) = parse_datetime(&text(value), 0)?;
                out.push(3);
                out.extend_from_slice(&days.to_le_bytes()[..3]);
            }
            SqlType::Time(s) => {
                let (_, ticks, _) = parse_datetime(&format!("0001-01-01 {}", text(value)), *s)?;
                out.push(time_len(*s));
                out.extend_from_slice(&ticks.to_le_bytes()[..usize::from(time_len(*s))]);
            }
            SqlType::DateTime2(s) => {
                let (days, ticks, _) = parse_datetime(&text(value), *s)?;
                out.push(time_len(*s) + 3);
                out.extend_from_slice(&ticks.to_le_bytes()[..usize::from(time_len(*s))]);
                out.extend_from_slice(&days.to_le_bytes()[..3]);
            }
            SqlType::DateTimeOffset(s) => {
                let (days, ticks, offset) = parse_datetime(&text(value), *s)?;
                // Sent in UTC, with the offset beside it.
                let per_day = 86_400 * 10u64.pow(u32::from(*s));
                let shift = i64::from(offset) * 60 * 10i64.pow(u32::from(*s));
                let total =
                    i128::from(days) * i128::from(per_day) + i128::from(ticks) - i128::from(shift);
                let days = u32::try_from(total.div_euclid(i128::from(per_day)))
                    .map_err(|_| "date out of range")?;
                let ticks = u64::try_from(total.rem_euclid(i128::from(per_day))).unwrap_or(0);
                out.push(time_len(*s) + 5);
                out.extend_from_slice(&ticks.to_le_bytes()[..usize::from(time_len(*s))]);
                out.extend_from_slice(&days.to_le_bytes()[..3]);
                out.extend_from_slice(&offset.to_le_bytes());
            }
            SqlType::DateTime | SqlType::SmallDateTime => {
                let (days, ticks, _) = parse_datetime(&text(value), 7)?;
                let days = i64::from(days) - 693_595; // since 1900-01-01
                if *self == SqlType::SmallDateTime {
                    out.push(4);
                    out.extend_from_slice(&(days as u16).to_le_bytes());
                    out.extend_from_slice(&((ticks / 600_000_000) as u16).to_le_bytes());
                } else {
                    out.push(8);
                    out.extend_from_slice(&(days as i32).to_le_bytes());
                    // 1/300 s, rounded as SQL Server stores it.
                    let three_hundredths = (ticks * 3 + 50_000) / 100_000;
                    out.extend_from_slice(&(three_hundredths as u32).to_le_bytes());
                }
            }
        }
        Ok(())
    }
}

fn decimal_len(precision: u8) -> u8 {
    match precision {
        0..=9 => 5,
        10..=19 => 9,
        20..=28 => 13,
        _ => 17,
    }
}

fn time_len(scale: u8) -> u8 {
    match scale {
        0..=2 => 3,
        3..=4 => 4,
        _ => 5,
    }
}

fn sized(out: &mut Vec<u8>, bytes: &[u8], max: Option<u16>, plp: bool) -> Result<(), String> {
    if plp {
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        for chunk in bytes.chunks(4000) {
            out.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
            out.extend_from_slice(chunk);
        }
        out.extend_from_slice(&0u32.to_le_bytes());
        return Ok(());
    }
    let max = usize::from(max.unwrap_or(8000));
    if bytes.len() > max {
        return Err(format!("{} bytes for a column of {max}", bytes.len()));
    }
    out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

fn integer(value: &Value) -> Result<i64, String> {
    match value {
        Value::Integer(i) => Ok(*i),
        Value::Real(r) if r.fract() == 0.0 => Ok(*r as i64),
        Value::Text(t) => t
            .trim()
            .parse()
            .map_err(|_| format!("{t:?} is not an integer")),
        other => Err(format!("{other:?} is not an integer")),
    }
}

fn real(value: &Value) -> Result<f64, String> {
    match value {
        Value::Integer(i) => Ok(*i as f64),
        Value::Real(r) => Ok(*r),
        Value::Text(t) => t
            .trim()
            .parse()
            .map_err(|_| format!("{t:?} is not a number")),
        other => Err(format!("{other:?} is not a number")),
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => r.to_string(),
        Value::Text(t) => t.clone(),
        Value::Blob(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Null => String::new(),
    }
}

/// A decimal string as an integer of `scale` decimal places (more places are an error, as a
/// value SQL Server would have rounded on insert is not what the tests mean to send).
fn scaled(s: &str, scale: u8) -> Result<i128, String> {
    let s = s.trim();
    let (neg, digits) = s.strip_prefix('-').map_or((false, s), |d| (true, d));
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let frac = frac.trim_end_matches('0');
    if frac.len() > usize::from(scale)
        || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())
    {
        return Err(format!("{s:?} is not a decimal of scale {scale}"));
    }
    let padded = format!("{int}{frac:0<width$}", width = usize::from(scale));
    let v: i128 = padded
        .parse()
        .map_err(|_| format!("{s:?} is out of range"))?;
    Ok(if neg { -v } else { v })
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

/// `YYYY-MM-DD[ T]HH:MM:SS[.fffffff][ ]±HH:MM`: days since 0001-01-01, the time of day in units
/// of 10^-scale s (more digits are rounded half up), the offset in minutes.
fn parse_datetime(s: &str, scale: u8) -> Result<(u32, u64, i16), String> {
    let bad = || format!("{s:?} is not a date/time");
    let s = s.trim();
    let (date, rest) = s.split_at(s.find([' ', 'T']).unwrap_or(s.len()));
    let mut parts = date.split('-');
    let y: i64 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let m: i64 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let d: i64 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let rest = rest.trim_start_matches([' ', 'T']);
    let (time, offset) = match rest.rfind(['+', '-']) {
        Some(i) if rest[i..].contains(':') && i > 0 => (rest[..i].trim(), Some(&rest[i..])),
        _ => (rest.trim(), None),
    };
    let mut ticks = 0u64;
    if !time.is_empty() {
        let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
        let mut t = hms.split(':').map(|p| p.parse::<u64>());
        let (h, mi, se) = match (t.next(), t.next(), t.next()) {
            (Some(Ok(h)), Some(Ok(m)), Some(Ok(s))) => (h, m, s),
            (Some(Ok(h)), Some(Ok(m)), None) => (h, m, 0),
            _ => return Err(bad()),
        };
        let unit = 10u64.pow(u32::from(scale));
        let digits: String = format!("{frac:0<9}").chars().take(9).collect();
        let nanos: u64 = digits.parse().map_err(|_| bad())?;
        let step = 1_000_000_000 / unit;
        let part = (nanos + step / 2) / step;
        ticks = (h * 3600 + mi * 60 + se) * unit + part;
    }
    let offset = match offset {
        Some(o) => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let (h, m) = o[1..].split_once(':').ok_or_else(bad)?;
            let h: i16 = h.parse().map_err(|_| bad())?;
            let m: i16 = m.parse().map_err(|_| bad())?;
            sign * (h * 60 + m)
        }
        None => 0,
    };
    // Days from civil (proleptic Gregorian), shifted to 0001-01-01 = 0.
    let yy = if m <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468 + 719_162;
    Ok((u32::try_from(days).map_err(|_| bad())?, ticks, offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_count_days_from_year_one() {
        assert_eq!(parse_datetime("0001-01-01", 0).unwrap().0, 0);
        assert_eq!(parse_datetime("1900-01-01", 0).unwrap().0, 693_595);
        let (d, t, o) = parse_datetime("2024-03-04 05:06:07.1234567 +02:00", 7).unwrap();
        assert_eq!(d, 738_948);
        assert_eq!(t, (5 * 3600 + 6 * 60 + 7) * 10_000_000 + 1_234_567);
        assert_eq!(o, 120);
        assert_eq!(parse_datetime("2024-03-04T00:00:00.5", 0).unwrap().1, 1);
    }

    #[test]
    fn decimals_scale_exactly() {
        assert_eq!(scaled("12.5", 2).unwrap(), 1250);
        assert_eq!(scaled("-0.01", 2).unwrap(), -1);
        assert!(scaled("1.234", 2).is_err());
    }
}
