//! Debezium's event values turned back into the text a database client prints, written here
//! without Sluice's code (the check must not share what it checks): Connect decimals, days,
//! microseconds, bytes.

use base64::Engine as _;
use serde_json::Value as Json;

/// Whether two images' values of one field agree. Debezium's own MySQL connector writes a
/// `ZonedTimestamp` with the column's width from the binlog and trimmed from a snapshot
/// (`…01.000Z` against `…01Z`): the same instant, compared as such.
pub fn same(a: &Json, b: &Json, schema: &Json) -> bool {
    if a == b {
        return true;
    }
    match (schema["name"].as_str(), a.as_str(), b.as_str()) {
        (Some("io.debezium.time.ZonedTimestamp"), Some(a), Some(b)) => {
            trim_fraction(a) == trim_fraction(b)
        }
        _ => false,
    }
}

/// An ISO timestamp's fraction without its trailing zeros (none on a whole second).
pub fn trim_fraction(text: &str) -> String {
    let Some(body) = text.strip_suffix('Z') else {
        return text.to_owned();
    };
    match body.rsplit_once('.') {
        Some((whole, fraction)) => {
            let fraction = fraction.trim_end_matches('0');
            if fraction.is_empty() {
                format!("{whole}Z")
            } else {
                format!("{whole}.{fraction}Z")
            }
        }
        None => text.to_owned(),
    }
}

/// The fraction digits a type like `time(3)` names (`None`: none named).
pub fn precision(sql_type: &str) -> Option<usize> {
    sql_type
        .split_once('(')
        .and_then(|(_, r)| r.split(')').next())
        .and_then(|d| d.parse().ok())
}

/// An integer value.
pub fn int(value: &Json) -> Result<i64, String> {
    value
        .as_i64()
        .ok_or_else(|| format!("{value} is not an integer"))
}

/// A string value.
pub fn string(value: &Json) -> Result<&str, String> {
    value
        .as_str()
        .ok_or_else(|| format!("{value} is not a string"))
}

/// The scale a Connect `Decimal` field's schema gives (0 when it gives none).
pub fn scale(schema: &Json) -> u32 {
    schema["parameters"]["scale"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// The bytes of a base64 string value.
pub fn bytes(value: &Json) -> Result<Vec<u8>, String> {
    let text = string(value)?;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("{text:?} is not base64: {e}"))
}

/// Upper-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// A Connect `Decimal` (big-endian two's complement unscaled bytes, in base64) at `scale`, as
/// plain text with exactly `scale` fraction digits.
pub fn decimal(value: &Json, scale: u32) -> Result<String, String> {
    let raw = bytes(value)?;
    let negative = raw.first().is_some_and(|b| b & 0x80 != 0);
    // The magnitude, big-endian: the two's complement negated when negative.
    let mut magnitude = raw.clone();
    if negative {
        for b in &mut magnitude {
            *b = !*b;
        }
        for b in magnitude.iter_mut().rev() {
            let (sum, carry) = b.overflowing_add(1);
            *b = sum;
            if !carry {
                break;
            }
        }
    }
    let mut digits = decimal_digits(&magnitude);
    let scale = usize::try_from(scale).unwrap();
    while digits.len() <= scale {
        digits.insert(0, '0');
    }
    let (whole, fraction) = digits.split_at(digits.len() - scale);
    let sign = if negative && digits.chars().any(|c| c != '0') {
        "-"
    } else {
        ""
    };
    Ok(if scale == 0 {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{fraction}")
    })
}

/// The decimal digits of a big-endian unsigned number (no leading zeros; "0" for zero).
fn decimal_digits(big_endian: &[u8]) -> String {
    let mut number: Vec<u8> = big_endian.to_vec();
    let mut digits = Vec::new();
    while number.iter().any(|b| *b != 0) {
        let mut rest = 0u32;
        for b in &mut number {
            let v = (rest << 8) | u32::from(*b);
            *b = u8::try_from(v / 10).unwrap();
            rest = v % 10;
        }
        digits.push(char::from(b'0' + u8::try_from(rest).unwrap()));
    }
    if digits.is_empty() {
        digits.push('0');
    }
    digits.iter().rev().collect()
}

/// `YYYY-MM-DD` of a day count since 1970-01-01 (proleptic Gregorian).
pub fn date(days: i64) -> String {
    let (y, m, d) = civil(days);
    if y < 0 {
        format!("-{:04}-{m:02}-{d:02}", -y)
    } else {
        format!("{y:04}-{m:02}-{d:02}")
    }
}

/// Year, month and day of a day count since 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap();
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap();
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `HH:MM:SS` and `digits` fraction digits of `micros` (signed; hours may pass 24).
pub fn time(micros: i64, digits: usize) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let m = micros.unsigned_abs();
    let secs = m / 1_000_000;
    let mut out = format!(
        "{sign}{:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    push_fraction(&mut out, m % 1_000_000, digits);
    out
}

/// `YYYY-MM-DD HH:MM:SS` and `digits` fraction digits of `micros` since the epoch.
pub fn timestamp(micros: i64, digits: usize) -> String {
    let days = micros.div_euclid(86_400_000_000);
    let of_day = micros.rem_euclid(86_400_000_000);
    let secs = of_day / 1_000_000;
    let mut out = format!(
        "{} {:02}:{:02}:{:02}",
        date(days),
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    push_fraction(&mut out, u64::try_from(of_day % 1_000_000).unwrap(), digits);
    out
}

fn push_fraction(out: &mut String, micros: u64, digits: usize) {
    if digits > 0 {
        let fraction = format!("{micros:06}");
        out.push('.');
        out.push_str(&fraction[..digits.min(6)]);
        for _ in 6..digits {
            out.push('0');
        }
    }
}

/// Nanoseconds of the day of a `hh:mm:ss[.fffffffff]` text.
pub fn clock_nanos(clock: &str) -> Option<i64> {
    let (hms, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let f: Vec<i64> = hms
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let digits: String = fraction
        .chars()
        .chain(std::iter::repeat('0'))
        .take(9)
        .collect();
    Some(
        (f.first()? * 3600 + f.get(1)? * 60 + f.get(2)?) * 1_000_000_000
            + digits.parse::<i64>().ok()?,
    )
}

/// `yyyy-mm-dd hh:mm:ss[.f]` → (days since the epoch, nanoseconds of the day).
pub fn stamp(printed: &str) -> Option<(i64, i64)> {
    let (date, clock) = printed.trim().split_once(' ')?;
    let mut p = date.split('-');
    let (y, m, d): (i64, i64, i64) = (
        p.next()?.parse().ok()?,
        p.next()?.parse().ok()?,
        p.next()?.parse().ok()?,
    );
    // Days from civil (Howard Hinnant).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some((era * 146_097 + doe - 719_468, clock_nanos(clock)?))
}

/// Whether two numbers printed differently are the same floating-point value, to
/// `relative` (0: exactly, the sign of zero included).
pub fn same_float(printed: &str, value: &Json, relative: f64) -> Result<(), String> {
    let theirs: f64 = printed
        .parse()
        .map_err(|_| format!("{printed:?} is not a number"))?;
    let ours = match value {
        Json::Number(n) => n.as_f64().ok_or("not an f64")?,
        Json::String(s) => s.parse().map_err(|_| format!("{s:?} is not a number"))?,
        other => return Err(format!("{other} is not a number")),
    };
    if theirs.is_nan() && ours.is_nan() {
        return Ok(());
    }
    if theirs == 0.0 && ours == 0.0 {
        return if theirs.is_sign_negative() == ours.is_sign_negative() {
            Ok(())
        } else {
            Err("the sign of zero differs".into())
        };
    }
    let close = (theirs - ours).abs() <= relative * theirs.abs().max(ours.abs());
    if theirs == ours || (relative > 0.0 && close) {
        Ok(())
    } else {
        Err(format!("{theirs:e} against {ours:e}"))
    }
}

/// Whether two decimal texts are the same number (trailing fraction zeros aside).
pub fn same_decimal(theirs: &str, ours: &str) -> Result<(), String> {
    let norm = |t: &str| {
        let t = t.trim().trim_start_matches('+');
        let t = if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.')
        } else {
            t
        };
        let t = t.strip_prefix("-").map_or(t.to_owned(), |d| {
            if d.trim_start_matches(['0', '.']).is_empty() {
                d.to_owned()
            } else {
                format!("-{d}")
            }
        });
        // Leading zeros of the integer part (`.5` and `0.5` alike).
        let t = t.trim_start_matches('0').to_owned();
        if t.is_empty() || t.starts_with('.') {
            format!("0{t}")
        } else {
            t
        }
    };
    if norm(theirs) == norm(ours) {
        Ok(())
    } else {
        Err(format!("read as {ours:?}"))
    }
}

/// Whether a printed number and an event's float32 value are the same `float` (both read and
/// narrowed to 32 bits: a float32's JSON text may be any decimal that narrows to it).
pub fn same_float32(printed: &str, value: &Json) -> Result<(), String> {
    let theirs: f64 = printed
        .parse()
        .map_err(|_| format!("{printed:?} is not a number"))?;
    let ours = match value {
        Json::Number(n) => n.as_f64().ok_or("not an f64")?,
        Json::String(s) => s.parse().map_err(|_| format!("{s:?} is not a number"))?,
        other => return Err(format!("{other} is not a number")),
    };
    let (theirs, ours) = (theirs as f32, ours as f32);
    if theirs.to_bits() == ours.to_bits() || (theirs.is_nan() && ours.is_nan()) {
        Ok(())
    } else {
        Err(format!("{theirs:e} against {ours:e} as float"))
    }
}

/// `Err` when `ours` is not `theirs`.
pub fn equal(theirs: &str, ours: &str) -> Result<(), String> {
    if theirs == ours {
        Ok(())
    } else {
        Err(format!("read as {ours:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_dates_and_times_print_as_the_clients_do() {
        // 12345 at scale 2; -1 at scale 2; 0 at scale 3.
        assert_eq!(decimal(&Json::from("MDk="), 2).unwrap(), "123.45");
        assert_eq!(decimal(&Json::from("/w=="), 2).unwrap(), "-0.01");
        assert_eq!(decimal(&Json::from("AA=="), 3).unwrap(), "0.000");
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(19_782), "2024-02-29");
        assert_eq!(date(-719_528), "0000-01-01");
        assert_eq!(time(-3_020_399_000_000, 0), "-838:59:59");
        assert_eq!(time(45_296_500_000, 3), "12:34:56.500");
        assert_eq!(timestamp(1_000_000, 0), "1970-01-01 00:00:01");
        assert_eq!(
            trim_fraction("1970-01-01T00:00:01.000Z"),
            "1970-01-01T00:00:01Z"
        );
        assert_eq!(
            trim_fraction("1970-01-01T00:00:01.120Z"),
            "1970-01-01T00:00:01.12Z"
        );
    }
}
