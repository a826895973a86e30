//! Integers as log readers receive them: a column of `bits` bits in two's complement, which a
//! client library may hand over zero-extended (MySQL's 24-bit `MEDIUMINT` arrives as
//! 0..16777215 whatever its sign), sign-extended, or as an unsigned value read as signed.
//! [`of_width`] gives the column's value in every case, so no source has to remember the sign
//! extension of each width.

/// The value of a `bits`-wide integer column (`unsigned` or not) whose `raw` value carries the
/// column's bits in its low `bits` bits; higher bits are ignored, whatever the reader put
/// there. `bits` is 1 to 64.
pub fn of_width(raw: i128, bits: u32, unsigned: bool) -> i128 {
    let bits = bits.clamp(1, 64);
    let mask = (1i128 << bits) - 1;
    let low = raw & mask;
    if !unsigned && low >> (bits - 1) & 1 == 1 {
        low - (1i128 << bits)
    } else {
        low
    }
}

#[cfg(test)]
mod tests {
    use super::of_width;
    use proptest::prelude::*;

    #[test]
    fn a_mediumint_read_zero_extended_is_sign_extended() {
        assert_eq!(of_width(16_777_215, 24, false), -1);
        assert_eq!(of_width(8_388_608, 24, false), -8_388_608);
        assert_eq!(of_width(8_388_607, 24, false), 8_388_607);
        assert_eq!(of_width(16_777_215, 24, true), 16_777_215);
        assert_eq!(of_width(-1, 24, true), 16_777_215);
        assert_eq!(of_width(-1, 64, true), i128::from(u64::MAX));
        assert_eq!(
            of_width(i128::from(i64::MIN), 64, false),
            i128::from(i64::MIN)
        );
    }

    /// The width's range, as a (min, max) pair.
    fn range(bits: u32, unsigned: bool) -> (i128, i128) {
        if unsigned {
            (0, (1i128 << bits) - 1)
        } else {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        }
    }

    proptest! {
        /// Every value of every width comes back whether the reader zero-extended it,
        /// sign-extended it, or read an unsigned value as signed.
        #[test]
        fn every_value_of_every_width_comes_back(bits in 1u32..=64, unsigned: bool, seed: u64) {
            let (min, max) = range(bits, unsigned);
            let span = u128::try_from(max - min).unwrap_or(0) + 1;
            let value = min + i128::try_from(u128::from(seed) % span).unwrap_or(0);
            let low = value & ((1i128 << bits) - 1);
            let sign_extended = if low >> (bits - 1) & 1 == 1 { low - (1i128 << bits) } else { low };
            prop_assert_eq!(of_width(low, bits, unsigned), value);
            prop_assert_eq!(of_width(sign_extended, bits, unsigned), value);
            prop_assert_eq!(of_width(value, bits, unsigned), value);
        }
    }
}
