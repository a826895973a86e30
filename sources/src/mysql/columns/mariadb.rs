//! MariaDB's own column types (10.7+): `UUID`, `INET4`, `INET6`. Their binlog row images
//! carry the value's 16 or 4 bytes (as a fixed `BINARY`, trailing zero bytes left out);
//! result sets carry the server's text, which is what the events hold: `UUID` as Debezium's
//! MariaDB connector gives it (`io.debezium.data.Uuid`, the bytes as `8-4-4-4-12` hex),
//! `INET4` / `INET6` as the server prints them (Debezium cannot capture these types at all:
//! its grammar stops on them).

use std::fmt::Write;

/// The kind of a MariaDB type, by its `DATA_TYPE` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::mysql) enum Special {
    Uuid,
    Inet4,
    Inet6,
}

impl Special {
    /// The kind `data_type` names (`information_schema`'s lower-case name).
    pub(in crate::mysql) fn of(data_type: &str) -> Option<Special> {
        match data_type {
            "uuid" => Some(Special::Uuid),
            "inet4" => Some(Special::Inet4),
            "inet6" => Some(Special::Inet6),
            _ => None,
        }
    }

    /// The column's schema: `UUID` as Debezium's MariaDB connector (`io.debezium.data.Uuid`),
    /// the addresses as strings.
    pub(in crate::mysql) fn schema(self, optional: bool) -> std::sync::Arc<sluice_engine::Schema> {
        use sluice_engine::SchemaType;
        match self {
            Special::Uuid => {
                sluice_kit::values::named(SchemaType::String, "io.debezium.data.Uuid", optional)
                    .version(1)
                    .build()
            }
            Special::Inet4 | Special::Inet6 => sluice_engine::Schema::builder(SchemaType::String)
                .optional_if(optional)
                .build(),
        }
    }

    /// The value's width in bytes.
    fn width(self) -> usize {
        match self {
            Special::Inet4 => 4,
            Special::Uuid | Special::Inet6 => 16,
        }
    }

    /// The server's text of the binlog's bytes (`None`: too many bytes).
    pub(in crate::mysql) fn text(self, bytes: &[u8]) -> Option<String> {
        if bytes.len() > self.width() {
            return None;
        }
        let mut b = bytes.to_vec();
        b.resize(self.width(), 0);
        Some(match self {
            Special::Uuid => uuid(&b),
            Special::Inet4 => format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3]),
            Special::Inet6 => inet6(&b),
        })
    }
}

fn uuid(b: &[u8]) -> String {
    let mut out = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// An IPv6 address as MariaDB prints it (`Inet6::to_string`, checked against the server): the
/// longest run of zero groups, even of one (the first of equal runs), as `::`, groups in
/// lower-case hex without leading zeros, and an IPv4-compatible (`::a.b.c.d`, but not `::`
/// or `::1`) or IPv4-mapped (`::ffff:a.b.c.d`) address with its last 32 bits dotted.
fn inet6(b: &[u8]) -> String {
    let words: Vec<u16> = b
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]))
        .collect();
    // The longest run of zero words (at least two).
    let (mut best, mut run) = ((0usize, 0usize), None::<usize>);
    for (i, w) in words.iter().enumerate() {
        if *w == 0 {
            let start = *run.get_or_insert(i);
            if i + 1 - start > best.1 {
                best = (start, i + 1 - start);
            }
        } else {
            run = None;
        }
    }
    let mut out = String::with_capacity(40);
    let mut i = 0;
    while i < 8 {
        if best.1 > 0 && i == best.0 {
            out.push_str("::");
            i += best.1;
            continue;
        }
        let dotted = i == 6 && best.0 == 0 && (best.1 == 6 || (best.1 == 5 && words[5] == 0xffff));
        if dotted {
            if !out.ends_with(':') {
                out.push(':');
            }
            let _ = write!(out, "{}.{}.{}.{}", b[12], b[13], b[14], b[15]);
            break;
        }
        if !out.is_empty() && !out.ends_with(':') {
            out.push(':');
        }
        let _ = write!(out, "{:x}", words[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn six(text: &str) -> String {
        let addr: std::net::Ipv6Addr = text.parse().unwrap();
        inet6(&addr.octets())
    }

    /// Each pair as MariaDB 10.11 prints `CAST(given AS INET6)`.
    #[test]
    fn addresses_print_as_the_server_prints_them() {
        for (given, printed) in [
            ("::", "::"),
            ("::1", "::1"),
            ("::ffff:1.2.3.4", "::ffff:1.2.3.4"),
            ("::1.2.3.4", "::1.2.3.4"),
            ("2001:db8::1", "2001:db8::1"),
            ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),
            ("1:0:0:2:0:0:0:3", "1:0:0:2::3"),
            ("fe80::", "fe80::"),
            ("1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"),
            ("1:0:2:3:4:5:6:7", "1::2:3:4:5:6:7"),
            ("::0.0.1.0", "::100"),
            ("::ffff:0:0", "::ffff:0.0.0.0"),
            ("0:0:0:0:0:1:0:0", "::1:0:0"),
            ("::2", "::2"),
            ("1:2:3:4:5:6:7:0", "1:2:3:4:5:6:7::"),
            ("0:1:2:3:4:5:6:7", "::1:2:3:4:5:6:7"),
            ("1:0:1:0:1:0:1:0", "1::1:0:1:0:1:0"),
            ("::ffff:1:2", "::ffff:0.1.0.2"),
        ] {
            assert_eq!(six(given), printed, "{given}");
        }
        // Trailing zero bytes the binlog leaves out.
        assert_eq!(
            Special::Inet6.text(&[0xfe, 0x80]).as_deref(),
            Some("fe80::")
        );
        assert_eq!(Special::Inet4.text(&[10, 0]).as_deref(), Some("10.0.0.0"));
        assert_eq!(Special::Inet4.text(&[1, 2, 3, 4, 5]), None);
    }

    #[test]
    fn uuids_are_their_bytes_in_order() {
        let b: Vec<u8> = (0u8..16).map(|i| i * 17).collect();
        assert_eq!(
            Special::Uuid.text(&b).as_deref(),
            Some("00112233-4455-6677-8899-aabbccddeeff")
        );
    }

    proptest::proptest! {
        /// Every address prints as text that reads back as the same address.
        #[test]
        fn every_address_prints_as_itself(bytes: [u8; 16]) {
            let text = inet6(&bytes);
            let back: std::net::Ipv6Addr = text.parse().unwrap();
            proptest::prop_assert_eq!(back.octets(), bytes, "{}", text);
        }
    }
}
