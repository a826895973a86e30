//! Decoder of PostgreSQL's `pgoutput` logical replication messages (protocol version 1).
//!
//! Begin and Commit arrive already parsed from the replication client; this decodes the rest:
//! Relation, Type, Insert, Update, Delete, Truncate, Origin. Column values borrow from the
//! message buffer.

use crate::postgres::records::table::Cell;

/// A column of a Relation message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RelationColumn {
    /// Part of the replica identity (key).
    pub key: bool,
    /// Name.
    pub name: String,
    /// Type oid.
    pub type_oid: u32,
    /// Type modifier.
    pub typmod: i32,
}

/// A decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message<'a> {
    /// A table's current definition (sent before its first change and after DDL).
    Relation {
        /// Relation oid.
        oid: u32,
        /// Schema.
        namespace: String,
        /// Table name.
        name: String,
        /// `d`efault, `n`othing, `f`ull, `i`ndex.
        replica_identity: u8,
        /// Columns.
        columns: Vec<RelationColumn>,
    },
    /// A custom type's name.
    Type {
        /// Type oid.
        oid: u32,
        /// Schema.
        namespace: String,
        /// Name.
        name: String,
    },
    /// A new row.
    Insert {
        /// Relation oid.
        oid: u32,
        /// New row.
        new: Vec<Cell<'a>>,
    },
    /// A changed row.
    Update {
        /// Relation oid.
        oid: u32,
        /// Old key (`K`) or old row (`O`), when the replica identity provides it.
        old: Option<(u8, Vec<Cell<'a>>)>,
        /// New row.
        new: Vec<Cell<'a>>,
    },
    /// A deleted row.
    Delete {
        /// Relation oid.
        oid: u32,
        /// Old key (`K`) or old row (`O`).
        old: (u8, Vec<Cell<'a>>),
    },
    /// Truncated tables.
    Truncate {
        /// Option bits (1: cascade, 2: restart identity).
        options: u8,
        /// Relation oids.
        oids: Vec<u32>,
    },
    /// The origin of the transaction's changes.
    Origin {
        /// Origin LSN.
        lsn: u64,
        /// Origin name.
        name: String,
    },
    /// A message kind this decoder skips (Begin/Commit/Message are handled upstream).
    Other(u8),
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

type R<T> = Result<T, String>;

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| {
                format!(
                    "message truncated at byte {} (wanted {n} more of {})",
                    self.pos,
                    self.buf.len()
                )
            })?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn u8(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }
    fn i16(&mut self) -> R<i16> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> R<i32> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u32(&mut self) -> R<u32> {
        Ok(self.i32()? as u32)
    }
    fn u64(&mut self) -> R<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
    fn cstr(&mut self) -> R<String> {
        let rest = &self.buf[self.pos..];
        let end = rest
            .iter()
            .position(|b| *b == 0)
            .ok_or("unterminated string")?;
        let s = std::str::from_utf8(&rest[..end])
            .map_err(|e| e.to_string())?
            .to_owned();
        self.pos += end + 1;
        Ok(s)
    }
    fn tuple(&mut self) -> R<Vec<Cell<'a>>> {
        let n = self.i16()?;
        let n = usize::try_from(n).map_err(|_| format!("negative column count {n}"))?;
        let mut cells = Vec::with_capacity(n);
        for _ in 0..n {
            cells.push(match self.u8()? {
                b'n' => Cell::Null,
                b'u' => Cell::Unchanged,
                b't' => {
                    let len = self.i32()?;
                    let len = usize::try_from(len).map_err(|_| format!("negative length {len}"))?;
                    let bytes = self.take(len)?;
                    Cell::Text(
                        std::str::from_utf8(bytes)
                            .map_err(|e| format!("column value is not UTF-8: {e}"))?,
                    )
                }
                b'b' => {
                    return Err("binary column values are not requested and not supported".into())
                }
                other => return Err(format!("unknown tuple column kind {other:#x}")),
            });
        }
        Ok(cells)
    }
}

/// Decodes one pgoutput message.
pub(crate) fn decode(buf: &[u8]) -> Result<Message<'_>, String> {
    let mut r = Reader { buf, pos: 0 };
    let tag = r.u8()?;
    Ok(match tag {
        b'R' => {
            let oid = r.u32()?;
            let namespace = r.cstr()?;
            let name = r.cstr()?;
            let replica_identity = r.u8()?;
            let n = r.i16()?;
            let mut columns = Vec::with_capacity(n.max(0) as usize);
            for _ in 0..n {
                let flags = r.u8()?;
                columns.push(RelationColumn {
                    key: flags & 1 == 1,
                    name: r.cstr()?,
                    type_oid: r.u32()?,
                    typmod: r.i32()?,
                });
            }
            Message::Relation {
                oid,
                namespace,
                name,
                replica_identity,
                columns,
            }
        }
        b'Y' => Message::Type {
            oid: r.u32()?,
            namespace: r.cstr()?,
            name: r.cstr()?,
        },
        b'I' => {
            let oid = r.u32()?;
            match r.u8()? {
                b'N' => Message::Insert {
                    oid,
                    new: r.tuple()?,
                },
                other => return Err(format!("insert: expected 'N', found {other:#x}")),
            }
        }
        b'U' => {
            let oid = r.u32()?;
            let mut marker = r.u8()?;
            let mut old = None;
            if marker == b'K' || marker == b'O' {
                old = Some((marker, r.tuple()?));
                marker = r.u8()?;
            }
            if marker != b'N' {
                return Err(format!("update: expected 'N', found {marker:#x}"));
            }
            Message::Update {
                oid,
                old,
                new: r.tuple()?,
            }
        }
        b'D' => {
            let oid = r.u32()?;
            let marker = r.u8()?;
            if marker != b'K' && marker != b'O' {
                return Err(format!("delete: expected 'K' or 'O', found {marker:#x}"));
            }
            Message::Delete {
                oid,
                old: (marker, r.tuple()?),
            }
        }
        b'T' => {
            let n = r.i32()?;
            let options = r.u8()?;
            let oids = (0..n.max(0)).map(|_| r.u32()).collect::<R<Vec<_>>>()?;
            Message::Truncate { options, oids }
        }
        b'O' => Message::Origin {
            lsn: r.u64()?,
            name: r.cstr()?,
        },
        other => Message::Other(other),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cstr(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(s.as_bytes());
        out.push(0);
    }

    fn tuple(out: &mut Vec<u8>, cells: &[Cell<'_>]) {
        out.extend_from_slice(&(cells.len() as i16).to_be_bytes());
        for c in cells {
            match c {
                Cell::Null => out.push(b'n'),
                Cell::Unchanged => out.push(b'u'),
                Cell::Text(t) => {
                    out.push(b't');
                    out.extend_from_slice(&(t.len() as i32).to_be_bytes());
                    out.extend_from_slice(t.as_bytes());
                }
            }
        }
    }

    /// Encodes a message the way the server does (the test oracle for the decoder).
    pub(crate) fn encode(m: &Message<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        match m {
            Message::Relation {
                oid,
                namespace,
                name,
                replica_identity,
                columns,
            } => {
                out.push(b'R');
                out.extend_from_slice(&oid.to_be_bytes());
                cstr(&mut out, namespace);
                cstr(&mut out, name);
                out.push(*replica_identity);
                out.extend_from_slice(&(columns.len() as i16).to_be_bytes());
                for c in columns {
                    out.push(u8::from(c.key));
                    cstr(&mut out, &c.name);
                    out.extend_from_slice(&c.type_oid.to_be_bytes());
                    out.extend_from_slice(&c.typmod.to_be_bytes());
                }
            }
            Message::Type {
                oid,
                namespace,
                name,
            } => {
                out.push(b'Y');
                out.extend_from_slice(&oid.to_be_bytes());
                cstr(&mut out, namespace);
                cstr(&mut out, name);
            }
            Message::Insert { oid, new } => {
                out.push(b'I');
                out.extend_from_slice(&oid.to_be_bytes());
                out.push(b'N');
                tuple(&mut out, new);
            }
            Message::Update { oid, old, new } => {
                out.push(b'U');
                out.extend_from_slice(&oid.to_be_bytes());
                if let Some((marker, cells)) = old {
                    out.push(*marker);
                    tuple(&mut out, cells);
                }
                out.push(b'N');
                tuple(&mut out, new);
            }
            Message::Delete { oid, old } => {
                out.push(b'D');
                out.extend_from_slice(&oid.to_be_bytes());
                out.push(old.0);
                tuple(&mut out, &old.1);
            }
            Message::Truncate { options, oids } => {
                out.push(b'T');
                out.extend_from_slice(&(oids.len() as i32).to_be_bytes());
                out.push(*options);
                for o in oids {
                    out.extend_from_slice(&o.to_be_bytes());
                }
            }
            Message::Origin { lsn, name } => {
                out.push(b'O');
                out.extend_from_slice(&lsn.to_be_bytes());
                cstr(&mut out, name);
            }
            Message::Other(tag) => out.push(*tag),
        }
        out
    }

    fn cell_strategy() -> impl Strategy<Value = Option<Option<String>>> {
        prop_oneof![
            Just(None),
            Just(Some(None)),
            any::<String>().prop_map(|s| Some(Some(s)))
        ]
    }

    fn cells(raw: &[Option<Option<String>>]) -> Vec<Cell<'_>> {
        raw.iter()
            .map(|c| match c {
                None => Cell::Unchanged,
                Some(None) => Cell::Null,
                Some(Some(s)) => Cell::Text(s),
            })
            .collect()
    }

    fn name() -> impl Strategy<Value = String> {
        "[a-zA-Z_][a-zA-Z0-9_ ]{0,20}"
    }

    proptest! {
        #[test]
        fn relations_round_trip(oid in any::<u32>(), ns in name(), table in name(), ri in prop::sample::select(vec![b'd', b'n', b'f', b'i']),
                                cols in prop::collection::vec((any::<bool>(), name(), any::<u32>(), any::<i32>()), 0..20)) {
            let m = Message::Relation {
                oid, namespace: ns, name: table, replica_identity: ri,
                columns: cols.into_iter().map(|(key, name, type_oid, typmod)| RelationColumn { key, name, type_oid, typmod }).collect(),
            };
            let bytes = encode(&m);
            prop_assert_eq!(decode(&bytes), Ok(m.clone()));
        }

        #[test]
        fn row_changes_round_trip(oid in any::<u32>(), new in prop::collection::vec(cell_strategy(), 0..12),
                                  old in prop::option::of((prop::sample::select(vec![b'K', b'O']), prop::collection::vec(cell_strategy(), 0..12)))) {
            let insert = Message::Insert { oid, new: cells(&new) };
            let bytes = encode(&insert);
            prop_assert_eq!(decode(&bytes), Ok(insert.clone()));
            let update = Message::Update { oid, old: old.as_ref().map(|(m, c)| (*m, cells(c))), new: cells(&new) };
            let bytes = encode(&update);
            prop_assert_eq!(decode(&bytes), Ok(update.clone()));
            if let Some((marker, c)) = &old {
                let delete = Message::Delete { oid, old: (*marker, cells(c)) };
                let bytes = encode(&delete);
            prop_assert_eq!(decode(&bytes), Ok(delete.clone()));
            }
        }

        #[test]
        fn truncates_round_trip(options in 0u8..4, oids in prop::collection::vec(any::<u32>(), 0..10)) {
            let m = Message::Truncate { options, oids };
            let bytes = encode(&m);
            prop_assert_eq!(decode(&bytes), Ok(m.clone()));
        }

        /// Arbitrary bytes never panic the decoder.
        #[test]
        fn garbage_is_an_error_not_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
        }

        /// Every strict prefix of a valid message is an error, never a wrong message.
        #[test]
        fn truncated_messages_are_errors(oid in any::<u32>(), new in prop::collection::vec(cell_strategy(), 1..6)) {
            let bytes = encode(&Message::Insert { oid, new: cells(&new) });
            for cut in 1..bytes.len() {
                prop_assert!(decode(&bytes[..cut]).is_err());
            }
        }
    }
}
