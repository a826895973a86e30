//! Informix's packed `DECIMAL` and `MONEY` (`decimal.h`, as `stdecimal` stores a `dec_t`): a
//! sign-and-exponent byte, then base-100 digits, one per byte, most significant first.
//!
//! - The value is `0.d₁d₂…dₙ × 100^e` in base 100.
//! - The first byte of a positive value is `0x80 | (e + 64)`: the high bit says positive, the
//!   exponent is excess-64. Zero is `0x80` and zero digits.
//! - A negative value stores the complement of its positive form: the first byte inverted
//!   (`!(0x80 | (e + 64))`) and the digits in base-100 complement (the last non-zero digit
//!   `d` as `100 − d`, those before it as `99 − d`, trailing zeros as zeros).
//! - A NULL value's first two bytes are `00 00` (as the CDC API's decoders and the SQLI
//!   drivers read it: a first byte `0x00` alone is also a negative value of exponent 63).
//!
//! `decimal.h`'s examples: 1 → `C1 01`, −1 → `3E 63`, 0.1 → `C0 0A`.

/// Why packed bytes are no `DECIMAL`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecimalError {
    /// No bytes at all.
    #[error("a DECIMAL of no bytes")]
    Empty,
    /// A digit byte above 99 (`at`: its place among the bytes).
    #[error("byte {at} of a DECIMAL is {byte:#04x}, not a base-100 digit")]
    Digit { at: usize, byte: u8 },
    /// A text that is no decimal number (writing one).
    #[error("`{0}` is no decimal number")]
    Text(String),
    /// More significant digits than the bytes hold, or an exponent out of range (writing one).
    #[error("`{text}` does not fit a DECIMAL of {bytes} bytes")]
    TooLarge { text: String, bytes: usize },
}

/// The first two bytes of a NULL.
const NULL: u8 = 0x00;
/// The excess of the exponent.
const EXCESS: i32 = 64;

/// The number `bytes` hold, written out (`-12.5`, `0.001`, `0`); `None` for NULL.
pub fn decode(bytes: &[u8]) -> Result<Option<String>, DecimalError> {
    let (&head, digits) = bytes.split_first().ok_or(DecimalError::Empty)?;
    if head == NULL && digits.first().is_none_or(|&d| d == NULL) {
        return Ok(None);
    }
    let negative = head & 0x80 == 0;
    let head = if negative { !head } else { head };
    let exponent = i32::from(head & 0x7f) - EXCESS;
    let mut pairs = Vec::with_capacity(digits.len());
    for (i, &byte) in digits.iter().enumerate() {
        if byte > 99 {
            return Err(DecimalError::Digit { at: i + 1, byte });
        }
        pairs.push(byte);
    }
    if negative {
        complement(&mut pairs);
    }
    Ok(Some(written_out(negative, exponent, &pairs)))
}

/// Base-100 complement in place: trailing zeros stay, the last non-zero digit `d` becomes
/// `100 − d`, every digit before it `99 − d`. Its own inverse.
fn complement(pairs: &mut [u8]) {
    let Some(last) = pairs.iter().rposition(|&d| d != 0) else {
        return;
    };
    for d in &mut pairs[..last] {
        *d = 99 - *d;
    }
    pairs[last] = 100 - pairs[last];
}

/// `0.d₁d₂… × 100^exponent` in decimal digits, without leading or trailing zeros.
fn written_out(negative: bool, exponent: i32, pairs: &[u8]) -> String {
    let mut digits = String::with_capacity(pairs.len() * 2);
    for d in pairs {
        digits.push(char::from(b'0' + d / 10));
        digits.push(char::from(b'0' + d % 10));
    }
    // The decimal point sits after `2 × exponent` of these digits.
    let point = 2 * i64::from(exponent);
    let (whole, fraction) = if point <= 0 {
        let zeros = "0".repeat(usize::try_from(-point).unwrap_or(0));
        (String::new(), format!("{zeros}{digits}"))
    } else {
        let point = usize::try_from(point).unwrap_or(usize::MAX);
        if point >= digits.len() {
            let zeros = "0".repeat(point - digits.len());
            (format!("{digits}{zeros}"), String::new())
        } else {
            (digits[..point].to_owned(), digits[point..].to_owned())
        }
    };
    let whole = whole.trim_start_matches('0');
    let fraction = fraction.trim_end_matches('0');
    let mut out = String::with_capacity(whole.len() + fraction.len() + 3);
    if whole.is_empty() && fraction.is_empty() {
        return "0".to_owned();
    }
    if negative {
        out.push('-');
    }
    out.push_str(if whole.is_empty() { "0" } else { whole });
    if !fraction.is_empty() {
        out.push('.');
        out.push_str(fraction);
    }
    out
}

/// `text` (`-12.5`, `0.001`) packed into `size` bytes, as the server stores it (the emulator's
/// writer; `None` writes NULL). Digits beyond the bytes are an error, never rounded.
pub fn encode(text: Option<&str>, size: usize) -> Result<Vec<u8>, DecimalError> {
    if size == 0 {
        return Err(DecimalError::Empty);
    }
    let mut out = vec![0u8; size];
    let Some(text) = text else {
        return Ok(out);
    };
    let bad = || DecimalError::Text(text.to_owned());
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !all_digits(whole) || !all_digits(fraction) {
        return Err(bad());
    }
    // Pad each side to whole base-100 digits: the whole part on the left, the fraction on the
    // right.
    let whole = whole.trim_start_matches('0');
    let mut digits = String::new();
    if whole.len() % 2 == 1 {
        digits.push('0');
    }
    digits.push_str(whole);
    let whole_pairs = digits.len() / 2;
    digits.push_str(fraction);
    if fraction.len() % 2 == 1 {
        digits.push('0');
    }
    let pairs: Vec<u8> = (digits.as_bytes().chunks(2))
        .map(|p| (p[0] - b'0') * 10 + (p[1] - b'0'))
        .collect();
    // Leading zero pairs move the exponent; trailing ones are dropped.
    let lead = pairs.iter().position(|&d| d != 0);
    let Some(lead) = lead else {
        out[0] = 0x80;
        return Ok(out);
    };
    let end = pairs.iter().rposition(|&d| d != 0).map_or(lead, |e| e + 1);
    let mut significant = pairs[lead..end].to_vec();
    let exponent =
        i32::try_from(whole_pairs).unwrap_or(i32::MAX) - i32::try_from(lead).unwrap_or(i32::MAX);
    let too_large = || DecimalError::TooLarge {
        text: text.to_owned(),
        bytes: size,
    };
    if significant.len() > size - 1 || !(-EXCESS..EXCESS).contains(&exponent) {
        return Err(too_large());
    }
    significant.resize(size - 1, 0);
    if negative {
        complement(&mut significant);
    }
    let head = 0x80 | u8::try_from(exponent + EXCESS).map_err(|_| too_large())?;
    out[0] = if negative { !head } else { head };
    out[1..].copy_from_slice(&significant);
    if out[0] == NULL && out[1] == NULL {
        // Would read as NULL.
        return Err(too_large());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decimal_h_examples_read_and_write() {
        for (text, bytes) in [
            ("1", vec![0xc1, 0x01]),
            ("-1", vec![0x3e, 0x63]),
            ("0.1", vec![0xc0, 0x0a]),
        ] {
            assert_eq!(decode(&bytes), Ok(Some(text.to_owned())), "{text}");
            assert_eq!(encode(Some(text), 2), Ok(bytes), "{text}");
        }
        assert_eq!(decode(&[0x00, 0x00, 0x00]), Ok(None));
        // A first byte 0x00 with a digit after it is a negative of exponent 63, not NULL.
        let huge = decode(&[0x00, 0x62])
            .unwrap_or_default()
            .unwrap_or_default();
        assert!(huge.starts_with("-2") && huge.len() == 126, "{huge}");
        // The one value whose bytes would read as NULL is refused when written.
        // (−0.9901 × 100^63: the digits 99 01 complemented are 00 99, after a first byte 00.)
        let text = format!("-9901{}", "0".repeat(122));
        assert!(matches!(
            encode(Some(&text), 3),
            Err(DecimalError::TooLarge { .. })
        ));
        assert_eq!(encode(None, 3), Ok(vec![0, 0, 0]));
        assert_eq!(decode(&[0x80, 0x00]), Ok(Some("0".to_owned())));
        assert_eq!(encode(Some("-0.00"), 2), Ok(vec![0x80, 0x00]));
    }

    #[test]
    fn values_are_written_out_exactly() {
        // 12345.678 = 0.01 23 45 67 80 × 100^3.
        let bytes = encode(Some("12345.678"), 6).unwrap_or_default();
        assert_eq!(bytes, [0xc3, 1, 23, 45, 67, 80]);
        assert_eq!(decode(&bytes), Ok(Some("12345.678".to_owned())));
        let negative = encode(Some("-12345.678"), 6).unwrap_or_default();
        assert_eq!(negative, [0x3c, 98, 76, 54, 32, 20]);
        assert_eq!(decode(&negative), Ok(Some("-12345.678".to_owned())));
        // 0.00012 = 0.01 20 × 100^-1.
        assert_eq!(decode(&[0xbf, 1, 20, 0]), Ok(Some("0.00012".to_owned())));
        // 1200 = 0.12 × 100^2.
        assert_eq!(decode(&[0xc2, 12, 0]), Ok(Some("1200".to_owned())));
    }

    #[test]
    fn what_is_no_decimal_is_refused() {
        assert_eq!(decode(&[]), Err(DecimalError::Empty));
        assert_eq!(
            decode(&[0xc1, 100]),
            Err(DecimalError::Digit { at: 1, byte: 100 })
        );
        assert!(matches!(encode(Some("1e5"), 4), Err(DecimalError::Text(_))));
        assert!(matches!(encode(Some("."), 4), Err(DecimalError::Text(_))));
        // Three base-100 digits do not fit two bytes: refused, not rounded.
        assert!(matches!(
            encode(Some("1.0001"), 2),
            Err(DecimalError::TooLarge { .. })
        ));
    }

    /// A decimal text of at most `digits` significant base-100 digits, without redundant
    /// zeros, as `decode` writes one.
    fn canonical() -> impl Strategy<Value = String> {
        (any::<bool>(), 0u32..20, 0u32..20, any::<u64>()).prop_map(|(negative, whole, frac, n)| {
            let digits = format!("{:020}", n % 10u64.pow(whole.min(19)).max(1));
            let whole_part = digits[20 - whole.min(19) as usize..].trim_start_matches('0');
            let frac_part = format!(
                "{:0width$}",
                n % 10u64.pow(frac.min(19)),
                width = frac as usize
            );
            let frac_part = frac_part.trim_end_matches('0');
            let mut text = String::new();
            if negative {
                text.push('-');
            }
            text.push_str(if whole_part.is_empty() {
                "0"
            } else {
                whole_part
            });
            if !frac_part.is_empty() {
                text.push('.');
                text.push_str(frac_part);
            }
            if text == "-0" {
                "0".to_owned()
            } else {
                text
            }
        })
    }

    proptest! {
        #[test]
        fn a_decimal_written_then_read_is_the_same_text(text in canonical()) {
            let bytes = encode(Some(&text), 22).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(decode(&bytes), Ok(Some(text)));
        }

        #[test]
        fn any_bytes_read_as_a_decimal_or_a_reason_and_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
            if let Ok(Some(text)) = decode(&bytes) {
                // What was read writes back to bytes that read the same.
                let again = encode(Some(&text), bytes.len()).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(decode(&again), Ok(Some(text)));
            }
        }
    }
}
