//! The proleptic Gregorian calendar of the event model's dates (days since 1970-01-01, Howard
//! Hinnant's algorithms) and the plain text forms of dates and times of day.

/// Days from 1970-01-01 to the civil date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date (year, month, day) of a day number.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `2024-01-02` of a day number.
pub fn date_text(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `03:04:05.123` of nanoseconds into a day, with `digits` fraction digits (at most 9; none
/// and no point for 0).
pub fn clock_text(nanos: i64, digits: u32) -> String {
    let nanos = nanos.rem_euclid(86_400_000_000_000);
    let secs = nanos / 1_000_000_000;
    let mut out = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    let digits = digits.min(9);
    if digits > 0 {
        let frac = nanos % 1_000_000_000 / 10i64.pow(9 - digits);
        out.push_str(&format!(".{frac:0width$}", width = digits as usize));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_texts() {
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-719_528), (0, 1, 1));
        assert_eq!(date_text(19_724), "2024-01-02");
        assert_eq!(clock_text(11_045_123_456_789, 7), "03:04:05.1234567");
        assert_eq!(clock_text(11_045_123_456_789, 0), "03:04:05");
    }
}
