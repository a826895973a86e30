//! Row images of a rows event, decoded value by value: mysql_common's `BinlogRow` builds a
//! named, owned column description for every column of every row (a third of the stream's
//! time in the benchmark); the values are all the source needs.

use mysql_async::binlog::events::{OptionalMetaExtractor, RowsEventData, TableMapEvent};
use mysql_async::binlog::value::BinlogValue;
use mysql_async::consts::ColumnType;
use mysql_common::io::ParseBuf;

/// One row image: each column's value (`None`: not in the image).
pub(super) type Image = Vec<Option<BinlogValue<'static>>>;

/// A row change's before and after images.
pub(super) type Images = (Option<Image>, Option<Image>);

/// How each column of a table map decodes: its type, metadata and signedness.
struct Layout<'a> {
    columns: Vec<(ColumnType, &'a [u8], bool)>,
}

impl<'a> Layout<'a> {
    fn of(tme: &'a TableMapEvent<'a>) -> Result<Self, String> {
        let meta =
            OptionalMetaExtractor::new(tme.iter_optional_meta()).map_err(|e| e.to_string())?;
        let mut signedness = meta.iter_signedness();
        let mut columns = Vec::new();
        for i in 0..usize::try_from(tme.columns_count()).unwrap_or(0) {
            let kind = match tme.get_column_type(i) {
                Ok(Some(kind)) => kind,
                Ok(None) => return Err(format!("the table map gives no type for column {i}")),
                Err(e) => return Err(e.to_string()),
            };
            let unsigned = kind
                .is_numeric_type()
                .then(|| signedness.next())
                .flatten()
                .unwrap_or_default();
            columns.push((kind, tme.get_column_metadata(i).unwrap_or(&[]), unsigned));
        }
        Ok(Layout { columns })
    }

    /// One image of the columns `present`.
    fn image<'b>(&self, present: &[bool], buf: &mut ParseBuf<'b>) -> std::io::Result<Image>
    where
        'a: 'b,
    {
        let count = present.iter().filter(|p| **p).count();
        // One bit per column of the image, least significant first: set for a NULL.
        let nulls: &[u8] = buf.parse(count.div_ceil(8))?;
        let mut values = Vec::with_capacity(self.columns.len());
        let mut at = 0;
        for (i, &(kind, meta, unsigned)) in self.columns.iter().enumerate() {
            if !present.get(i).copied().unwrap_or(false) {
                values.push(None);
                continue;
            }
            let null = nulls.get(at / 8).is_none_or(|b| b >> (at % 8) & 1 == 1);
            at += 1;
            values.push(Some(if null {
                BinlogValue::Value(mysql_async::Value::NULL)
            } else if kind == ColumnType::MYSQL_TYPE_TIME2 && matches!(meta.first(), Some(1 | 2)) {
                BinlogValue::Value(time2_hundredths(buf.parse(4)?))
            } else {
                buf.parse::<BinlogValue<'b>>((kind, meta, unsigned, false))?
                    .into_owned()
            }));
        }
        Ok(values)
    }
}

/// A `TIME(1)` or `TIME(2)` of the binlog (`TIME2` with one byte of hundredths), as MySQL's
/// `my_time_packed_from_binary` reads it: a negative time with a fraction keeps its fraction
/// in reverse order (mysql_common computes that borrow in unsigned arithmetic, which wraps).
fn time2_hundredths(bytes: &[u8]) -> mysql_async::Value {
    let [a, b, c, hundredths] = [0, 1, 2, 3].map(|i| bytes.get(i).copied().unwrap_or(0));
    let mut int_part = (i64::from(a) << 16 | i64::from(b) << 8 | i64::from(c)) - 0x80_0000;
    let mut fraction = i64::from(hundredths);
    if int_part < 0 && fraction != 0 {
        int_part += 1;
        fraction -= 0x100;
    }
    let packed = (int_part << 24) + fraction * 10_000;
    let (negative, packed) = (packed < 0, packed.unsigned_abs());
    let hms = packed >> 24;
    let hours = (hms >> 12) % (1 << 10);
    // Each part is below its modulus: the conversions cannot fail.
    let part = |v: u64| u8::try_from(v).unwrap_or(u8::MAX);
    mysql_async::Value::Time(
        negative,
        u32::try_from(hours / 24).unwrap_or(0),
        part(hours % 24),
        part((hms >> 6) % (1 << 6)),
        part(hms % (1 << 6)),
        u32::try_from(packed % (1 << 24)).unwrap_or(0),
    )
}

/// The rows of `rows` (as mapped by `tme`): each row's before and after image, or `None`
/// when the event is one this decoder leaves to mysql_common (MySQL's partial JSON updates).
pub(super) fn rows(
    rows: &RowsEventData<'_>,
    tme: &TableMapEvent<'_>,
) -> Option<Result<Vec<Images>, String>> {
    if matches!(rows, RowsEventData::PartialUpdateRowsEvent(_)) {
        return None;
    }
    let layout = match Layout::of(tme) {
        Ok(layout) => layout,
        Err(e) => return Some(Err(e)),
    };
    let before_columns: Option<Vec<bool>> = rows
        .columns_before_image()
        .map(|b| b.iter().by_vals().collect());
    let after_columns: Option<Vec<bool>> = rows
        .columns_after_image()
        .map(|b| b.iter().by_vals().collect());
    let mut buf = ParseBuf(rows.rows_data());
    let mut out = Vec::new();
    while !buf.is_empty() {
        let before = match &before_columns {
            Some(present) => match layout.image(present, &mut buf) {
                Ok(image) => Some(image),
                Err(e) => return Some(Err(e.to_string())),
            },
            None => None,
        };
        let after = match &after_columns {
            Some(present) => match layout.image(present, &mut buf) {
                Ok(image) => Some(image),
                Err(e) => return Some(Err(e.to_string())),
            },
            None => None,
        };
        out.push((before, after));
    }
    Some(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// INT and VARCHAR(255) columns, alternating.
    fn layout(n: usize) -> Layout<'static> {
        const VARCHAR: &[u8] = &[255, 0];
        let columns = (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    (ColumnType::MYSQL_TYPE_LONG, &[][..], false)
                } else {
                    (ColumnType::MYSQL_TYPE_VARCHAR, VARCHAR, false)
                }
            })
            .collect();
        Layout { columns }
    }

    /// A row image as the server writes it: the null bitmap, then each non-null value.
    fn encode(values: &[Option<(i32, String)>]) -> Vec<u8> {
        let mut bytes = vec![0u8; values.len().div_ceil(8)];
        let mut data = Vec::new();
        for (i, v) in values.iter().enumerate() {
            match v {
                None => bytes[i / 8] |= 1 << (i % 8),
                Some((n, _)) if i % 2 == 0 => data.extend_from_slice(&n.to_le_bytes()),
                Some((_, s)) => {
                    data.push(u8::try_from(s.len()).unwrap_or(u8::MAX));
                    data.extend_from_slice(s.as_bytes());
                }
            }
        }
        bytes.extend(data);
        bytes
    }

    proptest! {
        #[test]
        fn images_decode_to_the_values_written(values in prop::collection::vec(prop::option::of((any::<i32>(), "[a-z]{0,40}")), 1..12)) {
            let layout = layout(values.len());
            let bytes = encode(&values);
            let mut buf = ParseBuf(&bytes);
            let present = vec![true; values.len()];
            let image = layout.image(&present, &mut buf).unwrap();
            prop_assert!(buf.is_empty());
            for (i, (v, got)) in values.iter().zip(&image).enumerate() {
                let expected = match v {
                    None => mysql_async::Value::NULL,
                    Some((n, _)) if i % 2 == 0 => mysql_async::Value::Int(i64::from(*n)),
                    Some((_, s)) => mysql_async::Value::Bytes(s.clone().into_bytes()),
                };
                prop_assert_eq!(got, &Some(BinlogValue::Value(expected)));
            }
        }

        #[test]
        fn any_bytes_decode_or_fail_without_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..64), n in 1usize..10) {
            let layout = layout(n);
            let mut buf = ParseBuf(&bytes);
            let present = vec![true; n];
            let _ = layout.image(&present, &mut buf);
        }
    }

    #[test]
    fn time2_hundredths_read_negative_fractions_as_mysql_does() {
        // TIME(2) '-00:00:01.25' and '-838:59:59.00', '12:34:56.50': MySQL's encoding
        // (`my_time_packed_to_binary`): the packed value's integer part shifted (floored), its
        // remainder (truncated) in hundredths as one wrapped byte.
        let encode = |negative: bool, h: i64, m: i64, s: i64, hundredths: i64| {
            let int_part = (h << 12) | (m << 6) | s;
            let packed = (int_part << 24) + hundredths * 10_000;
            let packed = if negative { -packed } else { packed };
            let stored = u32::try_from((packed >> 24) + 0x80_0000).unwrap();
            let fraction = ((packed % (1 << 24)) / 10_000) as i8 as u8;
            let b = stored.to_be_bytes();
            [b[1], b[2], b[3], fraction]
        };
        use mysql_async::Value::Time;
        assert_eq!(
            time2_hundredths(&encode(true, 0, 0, 1, 25)),
            Time(true, 0, 0, 0, 1, 250_000)
        );
        assert_eq!(
            time2_hundredths(&encode(true, 838, 59, 59, 0)),
            Time(true, 34, 22, 59, 59, 0)
        );
        assert_eq!(
            time2_hundredths(&encode(false, 12, 34, 56, 50)),
            Time(false, 0, 12, 34, 56, 500_000)
        );
        assert_eq!(
            time2_hundredths(&encode(true, 0, 0, 0, 1)),
            Time(true, 0, 0, 0, 0, 10_000)
        );
    }

    #[test]
    fn a_column_left_out_of_the_image_is_none() {
        let layout = layout(3);
        // Columns 0 and 2 (both INT), neither null.
        let bytes = [0u8, 7, 0, 0, 0, 9, 0, 0, 0];
        let mut buf = ParseBuf(&bytes);
        let image = layout.image(&[true, false, true], &mut buf).unwrap();
        assert_eq!(
            image,
            vec![
                Some(BinlogValue::Value(mysql_async::Value::Int(7))),
                None,
                Some(BinlogValue::Value(mysql_async::Value::Int(9))),
            ]
        );
    }
}
