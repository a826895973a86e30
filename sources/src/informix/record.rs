//! The records of an Informix CDC session, as `ifx_lo_read` returns them (HCL Informix's
//! "Change Data Capture API Programmer's Guide", "CDC record format"): a 16-byte header (header
//! size, payload size, packet scheme 66, record number; 4 bytes each, big-endian), the header
//! of the record's type, then the payload. One read may return several records or part of
//! one: [`Frames`] joins them.
//!
//! | type | after the common header | payload |
//! |---|---|---|
//! | BEGINTX (1) | sequence 8, transaction 4, start time 8, OS user 4 | — |
//! | COMMTX (2) | sequence 8, transaction 4, commit time 8 | — |
//! | RBTX (3) | sequence 8, transaction 4 | — |
//! | INSERT, DELETE, UPDBEF, UPDAFT (40–43) | sequence 8, transaction 4, table 4, flags 4, then the size of each variable-length column (4 each) | the row: fixed-length columns, then variable-length ones |
//! | DISCARD (62) | sequence 8, transaction 4 | — |
//! | TRUNCATE (119) | sequence 8, transaction 4, table 4 | — |
//! | TABSCHEMA (200) | table 4, flags 4, fixed-length size 4, fixed column count 4, variable column count 4 | the columns, as `CREATE TABLE` writes them |
//! | TIMEOUT (201) | sequence 8 | — |
//! | ERROR (202) | flags 4, error code 4 | — |
//!
//! `table` is the number the source gave the table in `cdc_startcapture`.

/// The common header's size.
pub const COMMON_HEADER: usize = 16;
/// The only packet scheme (`CDC_PKTSCHEME_LRECBINARY`).
pub const PACKET_SCHEME: u32 = 66;
/// A row record's header without its variable-length column sizes.
const ROW_HEADER: usize = 36;
/// More than any record needs: a header size beyond it is no record.
const MAX_HEADER: usize = 64 * 1024;

/// Which image of a row a row record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowImage {
    /// `CDC_REC_INSERT` (40).
    Insert,
    /// `CDC_REC_DELETE` (41).
    Delete,
    /// `CDC_REC_UPDBEF` (42): the row before an update.
    Before,
    /// `CDC_REC_UPDAFT` (43): the row after an update.
    After,
}

/// A row as a row record holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row<'a> {
    /// The fixed-length columns' bytes, in the table's order.
    pub fixed: &'a [u8],
    /// Each variable-length column's bytes, in the table's order.
    pub variable: Vec<&'a [u8]>,
}

/// One CDC record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    /// A transaction begins (`start`: seconds since the epoch).
    Begin {
        sequence: u64,
        transaction: u32,
        start: i64,
        user: u32,
    },
    /// A transaction commits (`time`: seconds since the epoch).
    Commit {
        sequence: u64,
        transaction: u32,
        time: i64,
    },
    /// A transaction rolls back.
    Rollback { sequence: u64, transaction: u32 },
    /// A row changed.
    Row {
        image: RowImage,
        sequence: u64,
        transaction: u32,
        table: u32,
        flags: u32,
        row: Row<'a>,
    },
    /// The transaction's records from `sequence` on are void (a rollback to a savepoint).
    Discard { sequence: u64, transaction: u32 },
    /// A table was truncated.
    Truncate {
        sequence: u64,
        transaction: u32,
        table: u32,
    },
    /// A table's columns: at the start of its capture, and after each change of them.
    TableSchema {
        table: u32,
        flags: u32,
        fixed_size: u32,
        fixed_columns: u32,
        variable_columns: u32,
        /// `c1 integer, c2 char(10), ...` (fixed-length columns first).
        columns: &'a str,
    },
    /// Nothing came within the session's timeout; `sequence`: the last one read.
    Timeout { sequence: u64 },
    /// The session failed (`code`: the server's; `flags & 1`: the session is gone).
    Error { flags: u32, code: i32 },
}

/// Why bytes are no CDC record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Not the one packet scheme.
    #[error("a CDC record of packet scheme {0}, not {PACKET_SCHEME}")]
    Scheme(u32),
    /// A record type the API does not define.
    #[error("a CDC record of unknown type {0}")]
    Type(u32),
    /// A header size that cannot be (too small for its type, or absurdly large).
    #[error("a CDC record of type {kind} with a header of {size} bytes")]
    Header { kind: u32, size: usize },
    /// A row's variable-length columns are larger than its payload.
    #[error("a row record's variable-length columns ({columns} bytes) exceed its payload ({payload} bytes)")]
    Columns { columns: usize, payload: usize },
    /// A TABSCHEMA record's columns are not UTF-8.
    #[error("a TABSCHEMA record's columns are not UTF-8")]
    Text,
    /// Fewer bytes than the record's header says it has.
    #[error("a CDC record of {needs} bytes cut at {has}")]
    Truncated { needs: usize, has: usize },
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_be_bytes(word)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_be_bytes(word)
}

/// The length of the record at the start of `bytes`, once its common header is there (`None`:
/// fewer than 16 bytes).
pub fn record_len(bytes: &[u8]) -> Result<Option<usize>, RecordError> {
    if bytes.len() < COMMON_HEADER {
        return Ok(None);
    }
    let header = u32_at(bytes, 0) as usize;
    let payload = u32_at(bytes, 4) as usize;
    let scheme = u32_at(bytes, 8);
    let kind = u32_at(bytes, 12);
    if scheme != PACKET_SCHEME {
        return Err(RecordError::Scheme(scheme));
    }
    if !(COMMON_HEADER..=MAX_HEADER).contains(&header) {
        return Err(RecordError::Header { kind, size: header });
    }
    Ok(Some(header + payload))
}

/// The record at the start of `bytes` (whole: as long as [`record_len`] says).
pub fn parse(bytes: &[u8]) -> Result<Record<'_>, RecordError> {
    let truncated = |needs| RecordError::Truncated {
        needs,
        has: bytes.len(),
    };
    let len = record_len(bytes)?.ok_or(truncated(COMMON_HEADER))?;
    if bytes.len() < len {
        return Err(truncated(len));
    }
    let bytes = &bytes[..len];
    let header = u32_at(bytes, 0) as usize;
    let kind = u32_at(bytes, 12);
    let needs = |size: usize| {
        if header < size {
            Err(RecordError::Header { kind, size: header })
        } else {
            Ok(())
        }
    };
    let (head, payload) = bytes.split_at(header);
    let sequence = || u64_at(head, 16);
    let transaction = || u32_at(head, 24);
    Ok(match kind {
        1 => {
            needs(40)?;
            Record::Begin {
                sequence: sequence(),
                transaction: transaction(),
                start: u64_at(head, 28) as i64,
                user: u32_at(head, 36),
            }
        }
        2 => {
            needs(36)?;
            Record::Commit {
                sequence: sequence(),
                transaction: transaction(),
                time: u64_at(head, 28) as i64,
            }
        }
        3 | 62 => {
            needs(28)?;
            let (sequence, transaction) = (sequence(), transaction());
            match kind {
                3 => Record::Rollback {
                    sequence,
                    transaction,
                },
                _ => Record::Discard {
                    sequence,
                    transaction,
                },
            }
        }
        40..=43 => row(kind, head, payload)?,
        119 => {
            needs(32)?;
            Record::Truncate {
                sequence: sequence(),
                transaction: transaction(),
                table: u32_at(head, 28),
            }
        }
        200 => {
            needs(36)?;
            let text = std::str::from_utf8(payload).map_err(|_| RecordError::Text)?;
            Record::TableSchema {
                table: u32_at(head, 16),
                flags: u32_at(head, 20),
                fixed_size: u32_at(head, 24),
                fixed_columns: u32_at(head, 28),
                variable_columns: u32_at(head, 32),
                // The text may end with a NUL.
                columns: text.trim_end_matches('\0'),
            }
        }
        201 => {
            needs(24)?;
            Record::Timeout {
                sequence: sequence(),
            }
        }
        202 => {
            needs(24)?;
            Record::Error {
                flags: u32_at(head, 16),
                code: u32_at(head, 20) as i32,
            }
        }
        other => return Err(RecordError::Type(other)),
    })
}

/// A row record (`kind` 40 to 43): its header's variable-length column sizes split the payload.
fn row<'a>(kind: u32, head: &[u8], payload: &'a [u8]) -> Result<Record<'a>, RecordError> {
    if head.len() < ROW_HEADER || !(head.len() - ROW_HEADER).is_multiple_of(4) {
        return Err(RecordError::Header {
            kind,
            size: head.len(),
        });
    }
    let sizes: Vec<usize> = (ROW_HEADER..head.len())
        .step_by(4)
        .map(|at| u32_at(head, at) as usize)
        .collect();
    let columns = sizes.iter().fold(0usize, |sum, &s| sum.saturating_add(s));
    let Some(fixed_len) = payload.len().checked_sub(columns) else {
        return Err(RecordError::Columns {
            columns,
            payload: payload.len(),
        });
    };
    let (fixed, mut rest) = payload.split_at(fixed_len);
    let mut variable = Vec::with_capacity(sizes.len());
    for size in sizes {
        let (column, after) = rest.split_at(size);
        variable.push(column);
        rest = after;
    }
    let image = match kind {
        40 => RowImage::Insert,
        41 => RowImage::Delete,
        42 => RowImage::Before,
        _ => RowImage::After,
    };
    Ok(Record::Row {
        image,
        sequence: u64_at(head, 16),
        transaction: u32_at(head, 24),
        table: u32_at(head, 28),
        flags: u32_at(head, 32),
        row: Row { fixed, variable },
    })
}

/// `record` as the server sends it (the emulated server's writer, and the tests').
pub fn write(record: &Record<'_>) -> Vec<u8> {
    let mut head: Vec<u8> = Vec::with_capacity(ROW_HEADER);
    let mut payload: Vec<u8> = Vec::new();
    let (kind, sequence_transaction) = match record {
        Record::Begin {
            sequence,
            transaction,
            ..
        } => (1, Some((sequence, transaction))),
        Record::Commit {
            sequence,
            transaction,
            ..
        } => (2, Some((sequence, transaction))),
        Record::Rollback {
            sequence,
            transaction,
        } => (3, Some((sequence, transaction))),
        Record::Row {
            image,
            sequence,
            transaction,
            ..
        } => {
            let kind = match image {
                RowImage::Insert => 40,
                RowImage::Delete => 41,
                RowImage::Before => 42,
                RowImage::After => 43,
            };
            (kind, Some((sequence, transaction)))
        }
        Record::Discard {
            sequence,
            transaction,
        } => (62, Some((sequence, transaction))),
        Record::Truncate {
            sequence,
            transaction,
            ..
        } => (119, Some((sequence, transaction))),
        Record::TableSchema { .. } => (200, None),
        Record::Timeout { .. } => (201, None),
        Record::Error { .. } => (202, None),
    };
    if let Some((sequence, transaction)) = sequence_transaction {
        head.extend_from_slice(&sequence.to_be_bytes());
        head.extend_from_slice(&transaction.to_be_bytes());
    }
    match record {
        Record::Begin { start, user, .. } => {
            head.extend_from_slice(&start.to_be_bytes());
            head.extend_from_slice(&user.to_be_bytes());
        }
        Record::Commit { time, .. } => head.extend_from_slice(&time.to_be_bytes()),
        Record::Row {
            table, flags, row, ..
        } => {
            head.extend_from_slice(&table.to_be_bytes());
            head.extend_from_slice(&flags.to_be_bytes());
            payload.extend_from_slice(row.fixed);
            for column in &row.variable {
                let size = u32::try_from(column.len()).unwrap_or(u32::MAX);
                head.extend_from_slice(&size.to_be_bytes());
                payload.extend_from_slice(column);
            }
        }
        Record::Truncate { table, .. } => head.extend_from_slice(&table.to_be_bytes()),
        Record::TableSchema {
            table,
            flags,
            fixed_size,
            fixed_columns,
            variable_columns,
            columns,
        } => {
            for word in [table, flags, fixed_size, fixed_columns, variable_columns] {
                head.extend_from_slice(&word.to_be_bytes());
            }
            payload.extend_from_slice(columns.as_bytes());
        }
        Record::Timeout { sequence } => head.extend_from_slice(&sequence.to_be_bytes()),
        Record::Error { flags, code } => {
            head.extend_from_slice(&flags.to_be_bytes());
            head.extend_from_slice(&code.to_be_bytes());
        }
        Record::Rollback { .. } | Record::Discard { .. } => {}
    }
    let header = u32::try_from(COMMON_HEADER + head.len()).unwrap_or(u32::MAX);
    let size = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(COMMON_HEADER + head.len() + payload.len());
    for word in [header, size, PACKET_SCHEME, kind] {
        out.extend_from_slice(&word.to_be_bytes());
    }
    out.extend_from_slice(&head);
    out.extend_from_slice(&payload);
    out
}

/// The bytes of a session as they are read, cut into whole records.
#[derive(Debug, Default)]
pub struct Frames {
    buffer: Vec<u8>,
    /// Where the next record starts in `buffer`.
    start: usize,
}

impl Frames {
    /// Appends what a read returned.
    pub fn push(&mut self, read: &[u8]) {
        if self.start > 0 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        self.buffer.extend_from_slice(read);
    }

    /// The next whole record (`None`: its bytes have not all come yet).
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, RecordError> {
        let Some(len) = record_len(&self.buffer[self.start..])? else {
            return Ok(None);
        };
        if self.buffer.len() - self.start < len {
            return Ok(None);
        }
        let at = self.start;
        self.start += len;
        parse(&self.buffer[at..at + len]).map(Some)
    }

    /// Bytes read and not yet a whole record.
    pub fn pending(&self) -> usize {
        self.buffer.len() - self.start
    }
}

#[cfg(test)]
mod tests;
