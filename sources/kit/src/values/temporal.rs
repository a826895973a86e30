//! Dates, times, timestamps and intervals: parsing the ISO texts SQL databases print
//! (`YYYY-MM-DD`, `HH:MM:SS[.ffffff]`, optional ` BC` and `+hh[:mm]` offsets, ISO-8601
//! intervals), and the values and schemas Debezium emits for them in each
//! `time.precision.mode`.

use sluice_engine::event::{names, SchemaBuilder};
use sluice_engine::{SchemaType, Value};

use super::{named, IntervalMode, TimePrecisionMode};

pub use sluice_engine::event::calendar::{civil_from_days, days_from_civil};

/// `YYYY-MM-DD` (optionally ` BC`) → days since the epoch.
pub fn parse_date(text: &str) -> Option<i64> {
    let (body, bc) = match text.strip_suffix(" BC") {
        Some(b) => (b, true),
        None => (text, false),
    };
    parse_date_era(body, bc)
}

/// The value of `b`, all ASCII digits (at most 9 of them).
#[inline]
fn fixed_digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |v, &c| {
        c.is_ascii_digit().then(|| v * 10 + u32::from(c - b'0'))
    })
}

/// `YYYY-MM-DD` of the era given (`bc`) → days since the epoch.
fn parse_date_era(body: &str, bc: bool) -> Option<i64> {
    // The common shape, by position; anything else (years past 9999, say) takes the general path.
    if let [y0, y1, y2, y3, b'-', m0, m1, b'-', d0, d1] = *body.as_bytes() {
        let y = i64::from(fixed_digits(&[y0, y1, y2, y3])?);
        let m = fixed_digits(&[m0, m1])?;
        let d = fixed_digits(&[d0, d1])?;
        return civil(if bc { 1 - y } else { y }, m, d);
    }
    let mut parts = body.splitn(3, '-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: u32 = parts.next()?.parse().ok()?;
    let d: u32 = parts.next()?.parse().ok()?;
    if !(0..=MAX_YEAR).contains(&y) {
        return None;
    }
    civil(if bc { 1 - y } else { y }, m, d)
}

/// The largest year PostgreSQL stores (a `date`'s).
const MAX_YEAR: i64 = 5_874_897;

/// Days since the epoch of a date whose fields are in range: anything else is not a date the
/// server writes, and is refused rather than turned into some other day.
fn civil(y: i64, m: u32, d: u32) -> Option<i64> {
    ((1..=12).contains(&m) && (1..=31).contains(&d)).then(|| days_from_civil(y, m, d))
}

/// `HH:MM:SS[.ffffff]` → microseconds of the day.
pub fn parse_time(text: &str) -> Option<i64> {
    if let [h0, h1, b':', m0, m1, b':', s0, s1, ref rest @ ..] = *text.as_bytes() {
        let frac = match rest {
            [] => "",
            [b'.', ..] => &text[9..],
            _ => return None,
        };
        let (h, m, s) = (
            fixed_digits(&[h0, h1])?,
            fixed_digits(&[m0, m1])?,
            fixed_digits(&[s0, s1])?,
        );
        let seconds = (i64::from(h) * 60 + i64::from(m)) * 60 + i64::from(s);
        return Some(seconds * 1_000_000 + parse_fraction_micros(frac)?);
    }
    let mut parts = text.splitn(3, ':');
    let h: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let sec = parts.next()?;
    let (s, frac) = sec.split_once('.').unwrap_or((sec, ""));
    let s: i64 = s.parse().ok()?;
    let micros = parse_fraction_micros(frac)?;
    // A time of day (24:00:00 included), as the server writes it.
    if !(0..=24).contains(&h) || !(0..60).contains(&m) || !(0..=60).contains(&s) {
        return None;
    }
    Some(((h * 60 + m) * 60 + s) * 1_000_000 + micros)
}

fn parse_fraction_micros(frac: &str) -> Option<i64> {
    if frac.is_empty() {
        return Some(0);
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // The first six digits, right-padded with zeros: microseconds.
    let mut micros = 0i64;
    for i in 0..6 {
        let digit = frac.as_bytes().get(i).map_or(0, |b| b - b'0');
        micros = micros * 10 + i64::from(digit);
    }
    Some(micros)
}

/// A UTC offset `+HH[:MM[:SS]]` → seconds east of UTC.
fn parse_offset(text: &str) -> Option<i64> {
    let (sign, rest) = match text.as_bytes().first()? {
        b'+' => (1, &text[1..]),
        b'-' => (-1, &text[1..]),
        _ => return None,
    };
    if let [h0, h1] = *rest.as_bytes() {
        return Some(sign * i64::from(fixed_digits(&[h0, h1])?) * 3600);
    }
    let mut parts = rest.split(':');
    let h: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    let s: i64 = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    if parts.next().is_some()
        || !(0..100).contains(&h)
        || !(0..60).contains(&m)
        || !(0..60).contains(&s)
    {
        return None;
    }
    Some(sign * (h * 3600 + m * 60 + s))
}

/// Splits `time+offset` at the offset sign.
fn split_offset(text: &str) -> Option<(&str, i64)> {
    let i = text.bytes().rposition(|b| b == b'+' || b == b'-')?;
    Some((&text[..i], parse_offset(&text[i..])?))
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff]` → microseconds since the epoch (no zone).
pub fn parse_timestamp(text: &str) -> Option<i64> {
    parse_timestamp_parts(text)?.micros()
}

/// Microseconds in a day.
const DAY_MICROS: i64 = 86_400_000_000;

/// A timestamp as days since the epoch and microseconds of the day: every timestamp a database
/// holds, also those past what microseconds since 1970 hold in 64 bits (PostgreSQL's last
/// years, 294247 to 294276).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampParts {
    /// Days since 1970-01-01.
    pub days: i64,
    /// Microseconds of the day (0 to a day, exclusive).
    pub micros_of_day: i64,
}

impl TimestampParts {
    /// Microseconds since the epoch; `None` past 64 bits.
    pub fn micros(self) -> Option<i64> {
        // In 128 bits first: the day's start may be past 64 bits where the instant is not.
        i64::try_from(
            i128::from(self.days) * i128::from(DAY_MICROS) + i128::from(self.micros_of_day),
        )
        .ok()
    }

    /// Milliseconds since the epoch (floored); `None` past 64 bits.
    pub fn millis(self) -> Option<i64> {
        i64::try_from(
            i128::from(self.days) * 86_400_000 + i128::from(self.micros_of_day.div_euclid(1000)),
        )
        .ok()
    }
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff][ BC]` → its [`TimestampParts`].
pub fn parse_timestamp_parts(text: &str) -> Option<TimestampParts> {
    let (body, bc) = match text.strip_suffix(" BC") {
        Some(b) => (b, true),
        None => (text, false),
    };
    let (date, time) = body.split_once(' ')?;
    let days = parse_date_era(date, bc)?;
    // `24:00:00` (and a leap second's `23:59:60`) is the next day's first instant, as before.
    let micros = parse_time(time)?;
    Some(TimestampParts {
        days: days.checked_add(micros.div_euclid(DAY_MICROS))?,
        micros_of_day: micros.rem_euclid(DAY_MICROS),
    })
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff]+HH[:MM]` → microseconds since the epoch, UTC.
pub fn parse_timestamptz(text: &str) -> Option<i64> {
    parse_timestamptz_parts(text)?.micros()
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff]+HH[:MM][ BC]` → its [`TimestampParts`] in UTC.
pub fn parse_timestamptz_parts(text: &str) -> Option<TimestampParts> {
    let (body, bc) = match text.strip_suffix(" BC") {
        Some(b) => (b, true),
        None => (text, false),
    };
    let (date, time) = body.split_once(' ')?;
    let (time, offset) = split_offset(time)?;
    let days = parse_date_era(date, bc)?;
    let utc = parse_time(time)?.checked_sub(offset.checked_mul(1_000_000)?)?;
    Some(TimestampParts {
        days: days.checked_add(utc.div_euclid(DAY_MICROS))?,
        micros_of_day: utc.rem_euclid(DAY_MICROS),
    })
}

/// `HH:MM:SS[.ffffff]+HH` → (microseconds of the UTC day).
pub fn parse_timetz(text: &str) -> Option<i64> {
    let (time, offset) = split_offset(text)?;
    Some((parse_time(time)? - offset * 1_000_000).rem_euclid(86_400_000_000))
}

/// A short ASCII text built on the stack (dates and times), cut at its capacity.
struct Ascii {
    buf: [u8; 40],
    len: usize,
}

impl Ascii {
    fn new() -> Self {
        Ascii {
            buf: [0; 40],
            len: 0,
        }
    }

    fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

fn push_fraction(out: &mut Ascii, micros: i64, digits: u32) {
    if digits == 0 {
        return;
    }
    out.push(b'.');
    push_digits(out, micros.rem_euclid(1_000_000) as u64, 6, digits.min(6));
}

/// The `keep` leading digits of `value` written with `width` digits, zero-padded
/// (`value` < 10^`width`, `width` ≤ 19): no formatting machinery, no allocation.
fn push_digits(out: &mut Ascii, value: u64, width: u32, keep: u32) {
    let mut buf = [b'0'; 20];
    let mut v = value;
    for i in (0..width as usize).rev() {
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    for &b in &buf[..keep.min(width) as usize] {
        out.push(b);
    }
}

/// Microseconds since the epoch → ISO-8601 UTC with `digits` fraction digits (Debezium's
/// `ZonedTimestamp`), as a shared string allocated once.
pub fn format_zoned_timestamp(micros: i64, digits: u32) -> std::sync::Arc<str> {
    zoned_timestamp(micros, digits).as_str().into()
}

/// Microseconds since the epoch → ISO-8601 UTC with the fraction's trailing zeros left out,
/// and no fraction on a whole second (Java's `ISO_OFFSET_DATE_TIME`: Debezium's
/// `ZonedTimestamp` of a value read without a fraction width, as its MySQL connector's
/// snapshot reads a `TIMESTAMP(n)`).
pub fn format_zoned_timestamp_trimmed(micros: i64) -> std::sync::Arc<str> {
    let text = zoned_timestamp(micros, 6);
    let text = text.as_str();
    let Some((whole, fraction)) = text.strip_suffix('Z').and_then(|t| t.rsplit_once('.')) else {
        return text.into();
    };
    let fraction = fraction.trim_end_matches('0');
    if fraction.is_empty() {
        format!("{whole}Z").into()
    } else {
        format!("{whole}.{fraction}Z").into()
    }
}

/// [`TimestampParts`] (UTC) → ISO-8601 UTC with `digits` fraction digits (Debezium's
/// `ZonedTimestamp`), also past what microseconds since 1970 hold in 64 bits.
pub fn format_zoned_timestamp_parts(parts: TimestampParts, digits: u32) -> std::sync::Arc<str> {
    zoned_timestamp_parts(parts.days, parts.micros_of_day, digits)
        .as_str()
        .into()
}

fn zoned_timestamp(micros: i64, digits: u32) -> Ascii {
    zoned_timestamp_parts(
        micros.div_euclid(DAY_MICROS),
        micros.rem_euclid(DAY_MICROS),
        digits,
    )
}

fn zoned_timestamp_parts(days: i64, of_day: i64, digits: u32) -> Ascii {
    let (y, m, d) = civil_from_days(days);
    let secs = of_day / 1_000_000;
    let mut out = Ascii::new();
    if (0..=9999).contains(&y) {
        push_digits(&mut out, y as u64, 4, 4);
    } else {
        // Java's ISO format: a sign and at least four digits outside 0000..9999.
        out.push(if y < 0 { b'-' } else { b'+' });
        let a = y.unsigned_abs();
        let width = a.checked_ilog10().map_or(1, |l| l + 1).max(4);
        push_digits(&mut out, a, width, width);
    }
    for (sep, v) in [
        (b'-', u64::from(m)),
        (b'-', u64::from(d)),
        (b'T', (secs / 3600) as u64),
        (b':', (secs / 60 % 60) as u64),
        (b':', (secs % 60) as u64),
    ] {
        out.push(sep);
        push_digits(&mut out, v, 2, 2);
    }
    push_fraction(&mut out, of_day, digits);
    out.push(b'Z');
    out
}

/// Microseconds of the day → `HH:MM:SS[.f]Z` (Debezium's `ZonedTime`, Java's
/// `ISO_OFFSET_TIME`: the fraction without trailing zeros, none when zero).
pub fn format_zoned_time(micros: i64) -> String {
    let secs = micros / 1_000_000;
    let mut out = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    let frac = micros.rem_euclid(1_000_000);
    if frac != 0 {
        out.push('.');
        out.push_str(format!("{frac:06}").trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// The parts of an ISO-8601 interval as PostgreSQL prints it (`IntervalStyle=iso_8601`).
#[derive(Debug, Default, PartialEq)]
struct IntervalParts {
    years: i64,
    months: i64,
    days: i64,
    hours: i64,
    minutes: i64,
    /// Seconds as written (may have a fraction and a sign).
    seconds: String,
}

fn interval_parts(text: &str) -> Option<IntervalParts> {
    let body = text.strip_prefix('P')?;
    let (date, time) = body.split_once('T').unwrap_or((body, ""));
    let mut p = IntervalParts::default();
    let mut num = String::new();
    for c in date.chars() {
        match c {
            'Y' => p.years = num.parse().ok()?,
            'M' => p.months = num.parse().ok()?,
            'W' => {
                p.days = p
                    .days
                    .checked_add(num.parse::<i64>().ok()?.checked_mul(7)?)?
            }
            'D' => p.days = p.days.checked_add(num.parse::<i64>().ok()?)?,
            _ => {
                num.push(c);
                continue;
            }
        }
        num.clear();
    }
    for c in time.chars() {
        match c {
            'H' => p.hours = num.parse().ok()?,
            'M' => p.minutes = num.parse().ok()?,
            'S' => {
                num.parse::<f64>().ok()?;
                p.seconds = num.clone();
            }
            _ => {
                num.push(c);
                continue;
            }
        }
        num.clear();
    }
    Some(p)
}

/// An ISO-8601 interval (`P1Y2M3DT4H5M6.5S`, parts may be negative) → Debezium's
/// `MicroDuration` (months are 365.25/12 days).
pub fn parse_interval_micros(text: &str) -> Option<i64> {
    const DAYS_PER_MONTH: f64 = 365.25 / 12.0;
    let p = interval_parts(text)?;
    let seconds: f64 = if p.seconds.is_empty() {
        0.0
    } else {
        p.seconds.parse().ok()?
    };
    let total_days = (p.years as f64 * 12.0 + p.months as f64) * DAYS_PER_MONTH + p.days as f64;
    let total_seconds =
        ((total_days * 24.0 + p.hours as f64) * 60.0 + p.minutes as f64) * 60.0 + seconds;
    Some((total_seconds * 1e6).round() as i64)
}

/// An ISO-8601 interval → Debezium's `io.debezium.time.Interval` string, which names every
/// part: `P0Y0M-1DT-2H0M0S`.
pub fn format_interval_string(text: &str) -> Option<String> {
    let p = interval_parts(text)?;
    let seconds = if p.seconds.contains('.') {
        p.seconds
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned()
    } else if p.seconds.is_empty() {
        "0".to_owned()
    } else {
        p.seconds.clone()
    };
    Some(format!(
        "P{}Y{}M{}DT{}H{}M{}S",
        p.years, p.months, p.days, p.hours, p.minutes, seconds
    ))
}

/// The schema of a `date` column.
pub fn date_schema(mode: TimePrecisionMode, optional: bool) -> SchemaBuilder {
    match mode {
        TimePrecisionMode::Connect => named(
            SchemaType::Int32,
            "org.apache.kafka.connect.data.Date",
            optional,
        ),
        _ => named(SchemaType::Int32, names::DATE, optional),
    }
}

/// The schema of a `time(precision)` column.
pub fn time_schema(precision: u32, mode: TimePrecisionMode, optional: bool) -> SchemaBuilder {
    match mode {
        TimePrecisionMode::Connect => named(
            SchemaType::Int32,
            "org.apache.kafka.connect.data.Time",
            optional,
        ),
        TimePrecisionMode::Adaptive if precision <= 3 => {
            named(SchemaType::Int32, names::TIME, optional)
        }
        TimePrecisionMode::Adaptive if precision > 6 => {
            named(SchemaType::Int64, names::NANO_TIME, optional)
        }
        _ => named(SchemaType::Int64, names::MICRO_TIME, optional),
    }
}

/// A time of day in nanoseconds as [`time_schema`] says (precisions above 6, SQL Server's
/// `time(7)`, are `NanoTime` in the `adaptive` mode; the others are cut to their unit).
pub fn time_value_nanos(nanos: i64, precision: u32, mode: TimePrecisionMode) -> Value {
    match (mode, precision) {
        (TimePrecisionMode::Adaptive, 7..) => Value::Int64(nanos),
        _ => time_value(nanos.div_euclid(1000), precision, mode),
    }
}

/// A time of day in microseconds as [`time_schema`] says.
pub fn time_value(micros: i64, precision: u32, mode: TimePrecisionMode) -> Value {
    match (mode, precision) {
        (TimePrecisionMode::Connect, _) | (TimePrecisionMode::Adaptive, 0..=3) => {
            Value::Int32((micros / 1000) as i32)
        }
        _ => Value::Int64(micros),
    }
}

/// The schema of a `timestamp(precision)` column (without time zone).
pub fn timestamp_schema(precision: u32, mode: TimePrecisionMode, optional: bool) -> SchemaBuilder {
    match mode {
        TimePrecisionMode::Connect => named(
            SchemaType::Int64,
            "org.apache.kafka.connect.data.Timestamp",
            optional,
        ),
        _ if precision <= 3 => named(SchemaType::Int64, names::TIMESTAMP, optional),
        _ if precision > 6 => named(SchemaType::Int64, names::NANO_TIMESTAMP, optional),
        _ => named(SchemaType::Int64, names::MICRO_TIMESTAMP, optional),
    }
}

/// Nanoseconds since the epoch as [`timestamp_schema`] says (precisions above 6, SQL
/// Server's `datetime2(7)`, are `NanoTimestamp`; the others are cut to their unit).
pub fn timestamp_value_nanos(nanos: i64, precision: u32, mode: TimePrecisionMode) -> Value {
    match (mode, precision) {
        (TimePrecisionMode::Connect, _) | (_, 0..=6) => {
            timestamp_value(nanos.div_euclid(1000), precision, mode)
        }
        _ => Value::Int64(nanos),
    }
}

/// A timestamp's [`TimestampParts`] as [`timestamp_schema`] says; `None` when its unit since
/// the epoch does not fit 64 bits (microseconds past year 294247).
pub fn timestamp_value_parts(
    parts: TimestampParts,
    precision: u32,
    mode: TimePrecisionMode,
) -> Option<Value> {
    Some(match (mode, precision) {
        (TimePrecisionMode::Connect, _) | (_, 0..=3) => Value::Int64(parts.millis()?),
        _ => Value::Int64(parts.micros()?),
    })
}

/// A timestamp of `days` since the epoch and `nanos_of_day` as [`timestamp_schema`] says for
/// `precision` (nanoseconds past 6 digits, where the mode keeps them); `None` when its unit
/// since the epoch does not fit 64 bits (nanoseconds outside 1677–2262, say): an error for the
/// failure mode, never a wrapped value.
pub fn timestamp_value_day_nanos(
    days: i64,
    nanos_of_day: i64,
    precision: u32,
    mode: TimePrecisionMode,
) -> Option<Value> {
    if precision > 6 && mode != TimePrecisionMode::Connect {
        // In 128 bits first: the day's start may be past 64 bits where the instant is not.
        let nanos = i128::from(days) * 86_400_000_000_000 + i128::from(nanos_of_day);
        return Some(timestamp_value_nanos(
            i64::try_from(nanos).ok()?,
            precision,
            mode,
        ));
    }
    let parts = TimestampParts {
        days,
        micros_of_day: nanos_of_day.div_euclid(1000),
    };
    timestamp_value_parts(parts, precision, mode)
}

/// Microseconds since the epoch as [`timestamp_schema`] says.
pub fn timestamp_value(micros: i64, precision: u32, mode: TimePrecisionMode) -> Value {
    match (mode, precision) {
        (TimePrecisionMode::Connect, _) | (_, 0..=3) => Value::Int64(micros.div_euclid(1000)),
        _ => Value::Int64(micros),
    }
}

/// The schema of an interval column.
pub fn interval_schema(mode: IntervalMode, optional: bool) -> SchemaBuilder {
    match mode {
        IntervalMode::Numeric => named(
            SchemaType::Int64,
            "io.debezium.time.MicroDuration",
            optional,
        ),
        IntervalMode::String => named(SchemaType::String, "io.debezium.time.Interval", optional),
    }
}

/// An ISO-8601 interval text as [`interval_schema`] says; `None` when it is not one.
pub fn interval_value(text: &str, mode: IntervalMode) -> Option<Value> {
    Some(match mode {
        IntervalMode::Numeric => Value::Int64(parse_interval_micros(text)?),
        IntervalMode::String => Value::from(format_interval_string(text)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn midnight_at_24_is_the_next_days_first_instant() {
        assert_eq!(
            parse_timestamp("2024-01-01 24:00:00"),
            parse_timestamp("2024-01-02 00:00:00")
        );
        let last = parse_timestamp_parts("294276-12-31 23:59:59.999999");
        assert_eq!(last.and_then(TimestampParts::micros), None);
        assert!(last.and_then(TimestampParts::millis).is_some());
    }

    #[test]
    fn trimmed_zoned_timestamps_are_javas_iso_offset_date_time() {
        // Debezium 3.6.3's ZonedTimestamp of a java.sql.Timestamp (its MySQL snapshot).
        let at = |m: i64| format_zoned_timestamp_trimmed(m).to_string();
        assert_eq!(at(1_000_000), "1970-01-01T00:00:01Z");
        assert_eq!(at(1_120_000), "1970-01-01T00:00:01.12Z");
        assert_eq!(at(1_123_000), "1970-01-01T00:00:01.123Z");
        assert_eq!(at(1_000_100), "1970-01-01T00:00:01.0001Z");
        assert_eq!(at(-1), "1969-12-31T23:59:59.999999Z");
        assert_eq!(at(253_402_300_799_000_000), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn dates_and_times() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("1980-05-17"), Some(3789));
        assert_eq!(parse_date("1600-01-01"), Some(-135140));
        assert_eq!(parse_time("10:15:30.5"), Some(36_930_500_000));
        assert_eq!(
            parse_timestamptz("1999-12-31 23:59:59+02")
                .map(|m| format_zoned_timestamp(m, 6).to_string()),
            Some("1999-12-31T21:59:59.000000Z".to_owned())
        );
        assert_eq!(
            parse_timestamptz("1969-07-20 20:17:40.5+00")
                .map(|m| format_zoned_timestamp(m, 6).to_string()),
            Some("1969-07-20T20:17:40.500000Z".to_owned())
        );
        assert_eq!(
            parse_timetz("10:00:00.50+02").map(format_zoned_time),
            Some("08:00:00.5Z".to_owned())
        );
        assert_eq!(parse_interval_micros("P1DT2H"), Some(26 * 3_600_000_000));
        assert_eq!(parse_interval_micros("PT-1.5S"), Some(-1_500_000));
        assert_eq!(
            format_interval_string("P-1DT-2H").as_deref(),
            Some("P0Y0M-1DT-2H0M0S")
        );
        assert_eq!(
            format_interval_string("P1Y2M3DT4H5M6.50S").as_deref(),
            Some("P1Y2M3DT4H5M6.5S")
        );
    }

    /// The formatter as first written, with `format!`: the oracle for the fast one.
    fn zoned_by_format(micros: i64, digits: u32) -> String {
        let days = micros.div_euclid(86_400_000_000);
        let of_day = micros.rem_euclid(86_400_000_000);
        let (y, m, d) = civil_from_days(days);
        let secs = of_day / 1_000_000;
        let (h, mi, s) = (secs / 3600, secs / 60 % 60, secs % 60);
        let mut out = if (0..=9999).contains(&y) {
            format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}")
        } else {
            format!("{y:+05}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}")
        };
        if digits > 0 {
            let frac = format!("{:06}", of_day.rem_euclid(1_000_000));
            out.push('.');
            out.push_str(&frac[..digits.min(6) as usize]);
        }
        out.push('Z');
        out
    }

    proptest! {
        #[test]
        fn zoned_timestamps_format_as_before(micros in -400_000_000_000_000_000i64..400_000_000_000_000_000, digits in 0u32..8) {
            prop_assert_eq!(format_zoned_timestamp(micros, digits).to_string(), zoned_by_format(micros, digits));
        }

        #[test]
        fn timestamps_parse_to_their_parts(
            y in 1i64..12_000, m in 1u32..=12, d in 1u32..=28, bc: bool,
            h in 0i64..24, mi in 0i64..60, sec in 0i64..60,
            frac in proptest::option::of("[0-9]{1,6}"),
            offset_hours in -12i64..=14,
        ) {
            let frac_text = frac.as_deref().map_or(String::new(), |f| format!(".{f}"));
            let micros = frac.as_deref().map_or(0, |f| format!("{f:0<6}").parse::<i64>().unwrap_or(-1));
            let era = if bc { " BC" } else { "" };
            let day = days_from_civil(if bc { 1 - y } else { y }, m, d);
            let of_day = ((h * 60 + mi) * 60 + sec) * 1_000_000 + micros;
            let local = format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{sec:02}{frac_text}");
            prop_assert_eq!(parse_timestamp(&format!("{local}{era}")), Some(day * 86_400_000_000 + of_day));
            prop_assert_eq!(
                parse_timestamptz(&format!("{local}{offset_hours:+03}{era}")),
                Some(day * 86_400_000_000 + of_day - offset_hours * 3_600_000_000)
            );
            prop_assert_eq!(parse_date(&format!("{y:04}-{m:02}-{d:02}{era}")), Some(day));
            prop_assert_eq!(parse_time(&format!("{h:02}:{mi:02}:{sec:02}{frac_text}")), Some(of_day));
        }

        #[test]
        fn civil_round_trips(days in -1_000_000i64..1_000_000) {
            let (y, m, d) = civil_from_days(days);
            prop_assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
