//! Decimal texts to Connect decimals: any number of digits (Debezium's `BigDecimal`), and
//! PostgreSQL's special values `NaN`, `Infinity` and `-Infinity`, which no Connect `Decimal`
//! can hold.

use num_bigint::BigInt;
use sluice_engine::Value;

/// One of the special values a `numeric` (or a float) can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// `NaN`.
    NaN,
    /// `Infinity`.
    Infinity,
    /// `-Infinity`.
    NegativeInfinity,
}

impl Special {
    /// The special value a text names, if it names one (PostgreSQL's output spelling).
    pub fn of(text: &str) -> Option<Special> {
        match text {
            "NaN" => Some(Special::NaN),
            "Infinity" => Some(Special::Infinity),
            "-Infinity" => Some(Special::NegativeInfinity),
            _ => None,
        }
    }

    /// As a double.
    pub fn as_f64(self) -> f64 {
        match self {
            Special::NaN => f64::NAN,
            Special::Infinity => f64::INFINITY,
            Special::NegativeInfinity => f64::NEG_INFINITY,
        }
    }

    /// As Debezium writes it with `decimal.handling.mode: string` (the names of its
    /// `SpecialValueDecimal`).
    pub fn debezium_name(self) -> &'static str {
        match self {
            Special::NaN => "NAN",
            Special::Infinity => "POSITIVE_INFINITY",
            Special::NegativeInfinity => "NEGATIVE_INFINITY",
        }
    }
}

/// Sign, integer digits and fraction digits of a plain decimal text (`-12.5`; no exponent), or
/// `None` when it is not one.
fn parts(text: &str) -> Option<(bool, &str, &str)> {
    let (neg, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let valid = !(int.is_empty() && frac.is_empty())
        && int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit());
    valid.then_some((neg, int, frac))
}

/// Rescales a decimal text (`-12.5`; no exponent) to `scale` fraction digits (cut or padded
/// with zeros) → its unscaled integer; `None` when the text is not a decimal or the unscaled
/// value does not fit an i128 ([`unscaled_bytes`] takes any size).
pub fn unscaled(text: &str, scale: u32) -> Option<i128> {
    let (neg, int, frac) = parts(text)?;
    // Up to 18 digits fit a u64 without overflow checks: most columns' values.
    if int.len() + scale as usize <= 18 {
        let frac = frac.as_bytes();
        let mut v: u64 = 0;
        for &b in int.as_bytes() {
            v = v * 10 + u64::from(b - b'0');
        }
        for i in 0..scale as usize {
            v = v * 10 + frac.get(i).map_or(0, |b| u64::from(b - b'0'));
        }
        let v = i128::from(v);
        return Some(if neg { -v } else { v });
    }
    let mut v: i128 = 0;
    for b in scaled_digits(int, frac, scale) {
        v = v.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
    }
    Some(if neg { -v } else { v })
}

/// The integer digits, then `scale` fraction digits (cut or padded with zeros).
fn scaled_digits<'a>(int: &'a str, frac: &'a str, scale: u32) -> impl Iterator<Item = u8> + 'a {
    let padding = (scale as usize).saturating_sub(frac.len());
    int.bytes()
        .chain(frac.bytes().take(scale as usize))
        .chain(std::iter::repeat_n(b'0', padding))
}

/// A decimal text rescaled to `scale` digits → Connect's `Decimal` bytes (minimal big-endian
/// two's complement of the unscaled value), of any size; `None` when it is not a decimal.
pub fn unscaled_bytes(text: &str, scale: u32) -> Option<Vec<u8>> {
    if let Some(u) = unscaled(text, scale) {
        return Some(Value::decimal_bytes(u));
    }
    let (neg, int, frac) = parts(text)?;
    let digits: Vec<u8> = scaled_digits(int, frac, scale).collect();
    let mut v = BigInt::parse_bytes(&digits, 10)?;
    if neg {
        v = -v;
    }
    Some(v.to_signed_bytes_be())
}

/// The text Debezium writes for a decimal with `decimal.handling.mode: string`: the value at the
/// column's scale (`BigDecimal.toPlainString`), so a short fraction is padded with zeros.
pub fn plain_text(text: &str, scale: Option<u32>) -> String {
    let Some(scale) = scale else {
        return text.to_owned();
    };
    let have = text.split_once('.').map_or(0, |(_, f)| f.len());
    let want = scale as usize;
    if have >= want {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + want - have + 1);
    out.push_str(text);
    if have == 0 {
        out.push('.');
    }
    out.extend(std::iter::repeat_n('0', want - have));
    out
}

/// `$1,234.56`, `-$5.00`, `($5.00)` → the plain decimal text.
pub fn money_text(text: &str) -> String {
    let negative = text.starts_with('-') || text.starts_with('(');
    let digits: String = text
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    if negative {
        format!("-{digits}")
    } else {
        digits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn values_beyond_an_i128_keep_every_digit() {
        // 60 digits: an i128 holds 38.
        let text = "-123456789012345678901234567890123456789012345678901234567890";
        let bytes = unscaled_bytes(text, 0).unwrap();
        assert_eq!(
            BigInt::from_signed_bytes_be(&bytes).to_string(),
            text,
            "no digit lost"
        );
        assert_eq!(unscaled(text, 0), None, "the i128 route refuses, never 0");
        // A negative scale read as Debezium reads it (scale 2046): the value times 10^2046.
        let bytes = unscaled_bytes("12300", 2046).unwrap();
        let v = BigInt::from_signed_bytes_be(&bytes);
        assert_eq!(v, BigInt::from(12300) * BigInt::from(10).pow(2046));
    }

    #[test]
    fn texts_that_are_not_decimals_are_refused() {
        for t in [
            "", "-", ".", "1e3", "NaN", "Infinity", "1.2.3", "--1", "12a",
        ] {
            assert_eq!(unscaled_bytes(t, 2), None, "{t}");
        }
    }

    #[test]
    fn plain_text_pads_to_the_scale() {
        assert_eq!(plain_text("12300", Some(3)), "12300.000");
        assert_eq!(plain_text("1.5", Some(3)), "1.500");
        assert_eq!(plain_text("1.500", Some(3)), "1.500");
        assert_eq!(plain_text("1.5", None), "1.5");
    }

    proptest! {
        #[test]
        fn big_route_matches_the_i128_route(int in "[0-9]{1,30}", frac in "[0-9]{0,12}", scale in 0u32..12, neg: bool) {
            let text = format!("{}{int}{}{frac}", if neg { "-" } else { "" }, if frac.is_empty() { "" } else { "." });
            if let Some(u) = unscaled(&text, scale) {
                let (n, i, f) = parts(&text).unwrap();
                let digits: Vec<u8> = scaled_digits(i, f, scale).collect();
                let mut big = BigInt::parse_bytes(&digits, 10).unwrap();
                if n { big = -big; }
                prop_assert_eq!(big.to_signed_bytes_be(), Value::decimal_bytes(u));
            }
        }

        #[test]
        fn any_digit_count_round_trips(digits in "[1-9][0-9]{0,80}", scale in 0u32..40, neg: bool) {
            let text = format!("{}{digits}", if neg { "-" } else { "" });
            let bytes = unscaled_bytes(&text, scale).unwrap();
            let expected = format!("{text}{}", "0".repeat(scale as usize));
            prop_assert_eq!(BigInt::from_signed_bytes_be(&bytes).to_string(), expected);
        }
    }
}
