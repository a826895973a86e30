//! The property half of the boundary scenario: values drawn across each type's whole range
//! (proptest's strategies: integers of every magnitude, every class of float, dates from the
//! first to the last day a type holds, fractions of every width, any Unicode text, any bytes)
//! instead of the limits alone, then read by the snapshot and the stream and compared with the
//! database's own client ([`super::boundary::run_columns`]). The draw is seeded: the seed is
//! printed, and `SLUICE_TEST_SEED=<seed>` draws the same values again; `SLUICE_TEST_VALUES`
//! sets how many values a column takes (default 48, and NULL).

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use super::{text, Backend};

/// Runs the boundary scenario on `backend`'s generated columns.
pub fn run(backend: &dyn Backend) {
    let mut draw = Draw::from_env();
    let columns = backend.generated_columns(&mut draw);
    assert!(
        !columns.is_empty(),
        "{}: no generated columns",
        backend.name()
    );
    eprintln!(
        "{}: {} columns of {} values (seed {})",
        backend.name(),
        columns.len(),
        draw.values,
        draw.seed
    );
    super::boundary::run_columns(backend, &columns, "generated");
}

/// Draws values as SQL literals.
pub struct Draw {
    runner: TestRunner,
    /// The seed the values are drawn from.
    pub seed: u64,
    /// Values per column (NULL apart).
    pub values: usize,
}

impl Draw {
    /// A draw seeded from `SLUICE_TEST_SEED`, else from the clock (printed either way).
    pub fn from_env() -> Draw {
        let seed = std::env::var("SLUICE_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
                now.map_or(0, |d| d.as_nanos() as u64)
            });
        let values = super::rounds("SLUICE_TEST_VALUES", 48);
        eprintln!("generated values: SLUICE_TEST_SEED={seed} SLUICE_TEST_VALUES={values}");
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
        Draw {
            runner: TestRunner::new_with_rng(Config::default(), rng),
            seed,
            values,
        }
    }

    /// One value of `strategy`.
    pub fn one<T: std::fmt::Debug>(&mut self, strategy: impl Strategy<Value = T>) -> T {
        strategy
            .new_tree(&mut self.runner)
            .expect("a value of the strategy")
            .current()
    }

    /// A column's literals: `values` drawn from `strategy`, then NULL.
    pub fn column(&mut self, strategy: impl Strategy<Value = String>) -> Vec<String> {
        let mut out: Vec<String> = (0..self.values)
            .map(|_| {
                let tree = strategy.new_tree(&mut self.runner);
                tree.expect("a value of the strategy").current()
            })
            .collect();
        out.push("NULL".to_owned());
        out
    }
}

/// One column of integers for each `(name, SQL type, min, max)`, drawn across its range.
pub fn integers(draw: &mut Draw, widths: &[(&str, &str, i128, i128)]) -> Vec<super::Column> {
    widths
        .iter()
        .map(|(name, sql_type, min, max)| {
            let values = draw.column(integer(*min, *max).prop_map(|n| n.to_string()));
            super::Column::drawn(name, sql_type, values)
        })
        .collect()
}

/// Any UUID as a quoted literal (hex digits upper-case when `upper`).
pub fn uuid(upper: bool) -> impl Strategy<Value = String> {
    any::<u128>().prop_map(move |u| {
        let h = if upper {
            format!("{u:032X}")
        } else {
            format!("{u:032x}")
        };
        format!(
            "'{}-{}-{}-{}-{}'",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..]
        )
    })
}

/// Integers in `min..=max`, as likely small (within ±1000 of zero, clamped) as of any size.
pub fn integer(min: i128, max: i128) -> impl Strategy<Value = i128> {
    let small = (min.max(-1000))..=(max.min(1000));
    prop_oneof![min..=max, small]
}

/// A decimal of `precision` digits, `scale` of them after the point, any sign; its digits
/// as many as the type holds or fewer.
pub fn decimal(precision: usize, scale: usize) -> impl Strategy<Value = String> {
    let whole = precision - scale;
    (
        any::<bool>(),
        proptest::string::string_regex(&format!("[0-9]{{1,{}}}", whole.max(1))).unwrap(),
        proptest::string::string_regex(&format!("[0-9]{{{scale}}}")).unwrap(),
    )
        .prop_map(move |(negative, int, fraction)| {
            let int = if whole == 0 { "0".to_owned() } else { int };
            let sign = if negative { "-" } else { "" };
            if scale == 0 {
                format!("{sign}{int}")
            } else {
                format!("{sign}{int}.{fraction}")
            }
        })
}

/// Any finite double, of every class (normal, subnormal, zero of either sign), as the
/// shortest text that reads back to it.
pub fn double() -> impl Strategy<Value = String> {
    use proptest::num::f64;
    (f64::POSITIVE | f64::NEGATIVE | f64::NORMAL | f64::SUBNORMAL | f64::ZERO)
        .prop_map(|v| format!("{v:e}"))
}

/// Any finite float (32 bits), as [`double`].
pub fn float() -> impl Strategy<Value = String> {
    use proptest::num::f32;
    (f32::POSITIVE | f32::NEGATIVE | f32::NORMAL | f32::SUBNORMAL | f32::ZERO)
        .prop_map(|v| format!("{v:e}"))
}

/// Any float (32 bits) of every class, NaN and the infinities included, as PostgreSQL reads
/// them (a quoted text).
pub fn float_any() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => float().prop_map(|v| format!("'{v}'")),
        1 => prop_oneof![Just("'NaN'"), Just("'Infinity'"), Just("'-Infinity'")]
            .prop_map(str::to_owned),
    ]
}

/// Any double of every class, NaN and the infinities included, quoted as [`float_any`].
pub fn double_any() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => double().prop_map(|v| format!("'{v}'")),
        1 => prop_oneof![Just("'NaN'"), Just("'Infinity'"), Just("'-Infinity'")]
            .prop_map(str::to_owned),
    ]
}

/// Microseconds in `first..=last`, truncated to `digits` fraction digits.
pub fn micros(first: i64, last: i64, digits: usize) -> impl Strategy<Value = i64> {
    let unit = 10i64.pow(u32::try_from(6 - digits.min(6)).unwrap_or(0));
    (first..=last).prop_map(move |m| m - m.rem_euclid(unit))
}

/// The day count since 1970-01-01 of a proleptic Gregorian date (year 0 is 1 BC).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Microseconds since the epoch of the first instant of a day.
pub fn day_micros(days: i64) -> i64 {
    days * 86_400_000_000
}

/// Text of up to `max` characters, any Unicode scalar but control characters and those in
/// `except`, as a literal (`'` doubled).
pub fn text(max: usize, except: &'static [char]) -> impl Strategy<Value = String> {
    let char = any::<char>().prop_filter("a printable character", move |c| {
        !c.is_control() && !except.contains(c)
    });
    proptest::collection::vec(char, 0..=max).prop_map(|chars| {
        let s: String = chars.into_iter().collect();
        format!("'{}'", s.replace('\'', "''"))
    })
}

/// Up to `max` bytes (exactly `max` when `fixed`), as upper-case hex.
pub fn bytes(max: usize, fixed: bool) -> impl Strategy<Value = String> {
    let len = if fixed { max..=max } else { 0..=max };
    proptest::collection::vec(any::<u8>(), len).prop_map(|b| text::hex(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_count_as_the_client_prints_them() {
        for days in [-2_440_588 - 365, -719_528, -1, 0, 19_782, 2_932_896] {
            let (y, m, d) = text::civil(days);
            assert_eq!(days_from_civil(y, i64::from(m), i64::from(d)), days);
        }
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
    }

    #[test]
    fn drawn_literals_keep_to_their_type() {
        let mut draw = Draw::from_env();
        for _ in 0..200 {
            let d = draw.one(decimal(10, 4));
            let digits = d.trim_start_matches('-').replace('.', "");
            assert!(
                digits.len() <= 10 && d.split('.').nth(1).unwrap().len() == 4,
                "{d}"
            );
            let v: f64 = draw.one(double()).parse().unwrap();
            assert!(v.is_finite());
            let m = draw.one(micros(-5_000_000, 5_000_000, 2));
            assert_eq!(m % 10_000, 0);
            let t = draw.one(text(5, &['\\']));
            assert!(
                !t.contains('\\') && t.starts_with('\'') && t.ends_with('\''),
                "{t}"
            );
            let i = draw.one(integer(-8_388_608, 8_388_607));
            assert!((-8_388_608..=8_388_607).contains(&i));
        }
    }
}
