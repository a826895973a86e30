//! COPY's text format.

/// Undoes COPY's text-format escapes (`\\`, `\t`, `\n`, `\r`, `\b`, `\f`, `\v`, octal,
/// `\x` hex); borrows when there is nothing to undo.
pub(crate) fn unescape_copy(field: &str) -> std::borrow::Cow<'_, str> {
    if !field.contains('\\') {
        return std::borrow::Cow::Borrowed(field);
    }
    let b = field.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 == b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = b[i + 1];
        i += 2;
        match c {
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(11),
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                let mut n = 1;
                while n < 3 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                    v = v * 8 + u32::from(b[i] - b'0');
                    i += 1;
                    n += 1;
                }
                out.push(v as u8);
            }
            b'x' => {
                let mut v = 0u32;
                let mut n = 0;
                while n < 2 && i < b.len() && b[i].is_ascii_hexdigit() {
                    v = v * 16 + (b[i] as char).to_digit(16).unwrap_or(0);
                    i += 1;
                    n += 1;
                }
                out.push(v as u8);
            }
            other => out.push(other),
        }
    }
    std::borrow::Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

/// Calls `f` with the cells of each whole line of COPY text in `buf`, in order; returns the
/// bytes consumed (a partial last line is left). Fields without escapes are borrowed from
/// `buf` (no allocation per row); a line with escapes is unescaped into owned fields.
pub(crate) fn for_each_line<'b>(
    buf: &'b [u8],
    what: &str,
    mut f: impl FnMut(
        &[crate::postgres::records::table::Cell<'_>],
    ) -> Result<(), crate::postgres::error::PgError>,
) -> Result<usize, crate::postgres::error::PgError> {
    use crate::postgres::error::PgError;
    use crate::postgres::records::table::Cell;
    let mut consumed = 0;
    let mut cells: Vec<Cell<'b>> = Vec::new();
    let mut unescaped: Vec<(bool, std::borrow::Cow<'b, str>)> = Vec::new();
    while let Some(nl) = memchr::memchr(b'\n', &buf[consumed..]) {
        let line: &'b str = std::str::from_utf8(&buf[consumed..consumed + nl])
            .map_err(|e| PgError::Decode(format!("{what}: row is not UTF-8: {e}")))?;
        consumed += nl + 1;
        cells.clear();
        // One pass over the line's tabs and backslashes: a backslash is either a NULL field
        // (`\N`) or an escape, which sends the line to the unescaping path below.
        let bytes = line.as_bytes();
        let cell = |from: usize, to: usize| match &line[from..to] {
            "\\N" => Cell::Null,
            field => Cell::Text(field),
        };
        let mut escaped = false;
        let mut field_start = 0;
        for at in memchr::memchr2_iter(b'\t', b'\\', bytes) {
            if bytes[at] == b'\t' {
                cells.push(cell(field_start, at));
                field_start = at + 1;
            } else if !(at == field_start
                && bytes.get(at + 1) == Some(&b'N')
                && matches!(bytes.get(at + 2), None | Some(b'\t')))
            {
                escaped = true;
                break;
            }
        }
        if !escaped {
            cells.push(cell(field_start, bytes.len()));
            f(&cells)?;
            continue;
        }
        unescaped.clear();
        unescaped.extend(line.split('\t').map(|f| (f == "\\N", unescape_copy(f))));
        let owned: Vec<Cell<'_>> = unescaped
            .iter()
            .map(|(null, f)| if *null { Cell::Null } else { Cell::Text(f) })
            .collect();
        f(&owned)?;
    }
    Ok(consumed)
}

/// The text of fields `wanted` of the last whole line of COPY text in `buf` (`None`: NULL).
pub(crate) fn last_line_fields(buf: &[u8], wanted: &[usize]) -> Option<Vec<Option<String>>> {
    let end = buf.iter().rposition(|b| *b == b'\n')?;
    let start = buf[..end]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let line = std::str::from_utf8(&buf[start..end]).ok()?;
    let fields: Vec<&str> = line.split('\t').collect();
    Some(
        wanted
            .iter()
            .map(|&i| match fields.get(i) {
                Some(&"\\N") | None => None,
                Some(f) => Some(unescape_copy(f).into_owned()),
            })
            .collect(),
    )
}

/// Runs `COPY (<select>) TO STDOUT` and returns its text, whole.
pub(crate) async fn copy_all(
    client: &tokio_postgres::Client,
    select: &str,
    what: &str,
    max_bytes: usize,
) -> Result<(Vec<u8>, bool), crate::postgres::error::PgError> {
    use crate::postgres::error::PgError;
    let stream = client
        .copy_out(&format!("COPY ({select}) TO STDOUT"))
        .await
        .map_err(|e| PgError::query(what.to_owned(), e))?;
    futures_util::pin_mut!(stream);
    let mut out: Vec<u8> = Vec::new();
    while let Some(chunk) = futures_util::StreamExt::next(&mut stream).await {
        out.extend_from_slice(&chunk.map_err(|e| PgError::query(what.to_owned(), e))?);
        if out.len() >= max_bytes && out.ends_with(b"\n") {
            // The rest of the result is discarded by the connection as it arrives.
            return Ok((out, true));
        }
    }
    Ok((out, false))
}

#[cfg(test)]
mod tests {
    use super::unescape_copy;
    use proptest::prelude::*;

    /// COPY's text escaping, as the server writes it.
    fn escape(s: &str) -> String {
        let mut out = String::new();
        for c in s.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\u{b}' => out.push_str("\\v"),
                c => out.push(c),
            }
        }
        out
    }

    #[test]
    fn the_last_line_gives_the_last_key() {
        let buf = b"1\tx\n22\t\\N\n333\ta\\tb\n";
        assert_eq!(
            super::last_line_fields(buf, &[0, 1]),
            Some(vec![Some("333".to_owned()), Some("a\tb".to_owned())])
        );
        assert_eq!(
            super::last_line_fields(b"7\t\\N\n", &[1, 0]),
            Some(vec![None, Some("7".to_owned())])
        );
        assert_eq!(super::last_line_fields(b"", &[0]), None);
        let mut seen = Vec::new();
        let used = super::for_each_line(b"1\ta\n2\tb\n3\tc", "t", |cells| {
            seen.push(cells.len());
            Ok(())
        })
        .unwrap();
        assert_eq!((seen, used), (vec![2, 2], 8));
        let mut texts = Vec::new();
        super::for_each_line(b"a\\tb\t\\N\tc\n", "t", |cells| {
            texts.push(format!("{cells:?}"));
            Ok(())
        })
        .unwrap();
        assert_eq!(texts, vec![r#"[Text("a\tb"), Null, Text("c")]"#.to_owned()]);
    }

    #[test]
    fn escapes_are_undone() {
        assert_eq!(unescape_copy("plain"), "plain");
        assert_eq!(unescape_copy("a\\tb\\\\c\\nd"), "a\tb\\c\nd");
        assert_eq!(unescape_copy("\\101\\x42"), "AB");
    }

    proptest! {
        #[test]
        fn escaping_round_trips(s in ".*") {
            prop_assert_eq!(unescape_copy(&escape(&s)).into_owned(), s);
        }

        #[test]
        fn lines_split_into_their_fields(
            rows in prop::collection::vec(
                prop::collection::vec(
                    prop::option::weighted(0.8, prop_oneof![
                        3 => "[a-zN]{0,6}",
                        1 => "[\\\\N\t\n a]{0,4}",
                        1 => ".{0,8}",
                    ]),
                    1..6,
                ),
                0..5,
            )
        ) {
            let mut text = String::new();
            for row in &rows {
                let fields: Vec<String> = row
                    .iter()
                    .map(|f| f.as_deref().map_or_else(|| "\\N".to_owned(), escape))
                    .collect();
                text.push_str(&fields.join("\t"));
                text.push('\n');
            }
            let mut seen: Vec<Vec<Option<String>>> = Vec::new();
            let used = super::for_each_line(text.as_bytes(), "t", |cells| {
                seen.push(cells.iter().map(|c| match c {
                    crate::postgres::records::table::Cell::Text(t) => Some((*t).to_owned()),
                    _ => None,
                }).collect());
                Ok(())
            }).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(used, text.len());
            prop_assert_eq!(seen, rows);
        }
    }
}
