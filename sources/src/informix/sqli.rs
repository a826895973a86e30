//! SQLI's message framing after login (`docs/informix-notes.md`): a request is tagged messages,
//! each a big-endian `i16` tag and its body, ended by `SQ_EOT`; an answer is tagged messages
//! ended the same way. Strings are an `i16` length and the bytes, padded to an even length.
//! The messages themselves (prepare, describe, fetch, ...) are built on these pieces.

/// Message tags.
pub mod tag {
    pub const PREPARE: i16 = 2;
    pub const ID: i16 = 4;
    pub const BIND: i16 = 5;
    pub const EXECUTE: i16 = 7;
    pub const DESCRIBE: i16 = 8;
    pub const NFETCH: i16 = 9;
    pub const CLOSE: i16 = 10;
    pub const RELEASE: i16 = 11;
    pub const EOT: i16 = 12;
    pub const ERR: i16 = 13;
    pub const TUPLE: i16 = 14;
    pub const DONE: i16 = 15;
    pub const DBOPEN: i16 = 36;
    pub const COST: i16 = 55;
    pub const EXIT: i16 = 56;
    pub const XACTSTAT: i16 = 99;
}

/// Why an answer cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The answer ended inside a message.
    #[error("an SQLI message cut short: {needs} more bytes needed at byte {at}")]
    Short { at: usize, needs: usize },
    /// A length that cannot be.
    #[error("an SQLI string of length {0}")]
    Length(i16),
    /// A string longer than SQLI's 16-bit length can say (never cut).
    #[error("a string of {0} bytes is longer than an SQLI message can carry (32,767)")]
    TooLong(usize),
}

/// A request being written.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Request {
    bytes: Vec<u8>,
    /// A string too long for its length field, refused by [`Self::end`].
    too_long: Option<usize>,
}

impl Request {
    /// A message tag.
    pub fn tag(mut self, tag: i16) -> Self {
        self.bytes.extend_from_slice(&tag.to_be_bytes());
        self
    }

    /// A 16-bit integer.
    pub fn short(mut self, value: i16) -> Self {
        self.bytes.extend_from_slice(&value.to_be_bytes());
        self
    }

    /// A 32-bit integer.
    pub fn int(mut self, value: i32) -> Self {
        self.bytes.extend_from_slice(&value.to_be_bytes());
        self
    }

    /// A string: its length, its bytes, and a zero byte when the length is odd.
    pub fn string(mut self, text: &[u8]) -> Self {
        let Ok(len) = i16::try_from(text.len()) else {
            self.too_long = Some(text.len());
            return self;
        };
        self.bytes.extend_from_slice(&len.to_be_bytes());
        self.bytes.extend_from_slice(text);
        if len % 2 == 1 {
            self.bytes.push(0);
        }
        self
    }

    /// A statement action (`[SQ_ID][i32 action]`: execute, release, ...).
    pub fn action(self, action: i16) -> Self {
        self.tag(tag::ID).int(i32::from(action))
    }

    /// The request, ended by `SQ_EOT`; an error when a string was too long for it.
    pub fn end(self) -> Result<Vec<u8>, WireError> {
        match self.too_long {
            Some(len) => Err(WireError::TooLong(len)),
            None => Ok(self.tag(tag::EOT).bytes),
        }
    }
}

/// An answer being read.
#[derive(Debug, Clone)]
pub struct Answer<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Answer<'a> {
    /// An answer's bytes, read from the start.
    pub fn new(bytes: &'a [u8]) -> Self {
        Answer { bytes, at: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(WireError::Short {
                at: self.at,
                needs: n - (self.bytes.len() - self.at),
            });
        };
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    /// A 16-bit integer.
    pub fn short(&mut self) -> Result<i16, WireError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    /// A 32-bit integer.
    pub fn int(&mut self) -> Result<i32, WireError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A padded string's bytes.
    pub fn string(&mut self) -> Result<&'a [u8], WireError> {
        let len = self.short()?;
        let Ok(n) = usize::try_from(len) else {
            return Err(WireError::Length(len));
        };
        let text = self.take(n)?;
        if n % 2 == 1 {
            self.take(1)?;
        }
        Ok(text)
    }

    /// Whether every byte was read.
    pub fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

/// An `SQ_ERR` message's body: the server's SQLCODE and ISAM code, where in the statement, and
/// the token it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    pub sqlcode: i16,
    pub isam: i16,
    pub offset: i32,
    pub near: String,
}

impl ServerError {
    /// Reads the body after the `SQ_ERR` tag.
    pub fn read(answer: &mut Answer<'_>) -> Result<Self, WireError> {
        Ok(ServerError {
            sqlcode: answer.short()?,
            isam: answer.short()?,
            offset: answer.int()?,
            near: String::from_utf8_lossy(answer.string()?).into_owned(),
        })
    }
}

/// An `SQ_DONE` message's body: rows affected, the last row id and serial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    pub warnings: i16,
    pub rows: i32,
    pub rowid: i32,
    pub serial: i32,
}

impl Done {
    /// Reads the body after the `SQ_DONE` tag.
    pub fn read(answer: &mut Answer<'_>) -> Result<Self, WireError> {
        Ok(Done {
            warnings: answer.short()?,
            rows: answer.int()?,
            rowid: answer.int()?,
            serial: answer.int()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn execute_release_and_dbopen_are_the_bytes_the_drivers_send() {
        let execute = Request::default()
            .action(tag::EXECUTE)
            .end()
            .unwrap_or_default();
        assert_eq!(execute, [0x00, 0x04, 0x00, 0x00, 0x00, 0x07, 0x00, 0x0c]);
        let release = Request::default()
            .action(tag::RELEASE)
            .end()
            .unwrap_or_default();
        assert_eq!(release, [0, 4, 0, 0, 0, 11, 0, 12]);
        // `[SQ_DBOPEN][name, padded][i16 mode][SQ_EOT]`.
        let open = Request::default()
            .tag(tag::DBOPEN)
            .string(b"syscdcv1")
            .short(0)
            .end()
            .unwrap_or_default();
        assert_eq!(
            open,
            [0, 36, 0, 8, b's', b'y', b's', b'c', b'd', b'c', b'v', b'1', 0, 0, 0, 12]
        );
        let odd = Request::default().string(b"abc").end().unwrap_or_default();
        assert_eq!(odd, [0, 3, b'a', b'b', b'c', 0, 0, 12]);
    }

    #[test]
    fn an_error_and_a_done_read_as_the_server_sends_them() {
        let bytes = Request::default()
            .tag(tag::ERR)
            .short(-206)
            .short(-111)
            .int(14)
            .string(b"nosuch")
            .tag(tag::DONE)
            .short(0)
            .int(3)
            .int(259)
            .int(0)
            .end()
            .unwrap_or_default();
        let mut answer = Answer::new(&bytes);
        assert_eq!(answer.short(), Ok(tag::ERR));
        let error = ServerError::read(&mut answer).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((error.sqlcode, error.isam, error.offset), (-206, -111, 14));
        assert_eq!(error.near, "nosuch");
        assert_eq!(answer.short(), Ok(tag::DONE));
        let done = Done::read(&mut answer).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((done.rows, done.rowid), (3, 259));
        assert_eq!(answer.short(), Ok(tag::EOT));
        assert!(answer.is_done());
    }

    #[test]
    fn a_cut_or_negative_length_is_an_error() {
        let long = vec![b'x'; 40_000];
        assert_eq!(
            Request::default().string(&long).end(),
            Err(WireError::TooLong(40_000))
        );
        let mut answer = Answer::new(&[0, 5, b'a']);
        assert_eq!(answer.string(), Err(WireError::Short { at: 2, needs: 4 }));
        let mut answer = Answer::new(&[0xff, 0xff]);
        assert_eq!(answer.string(), Err(WireError::Length(-1)));
        assert_eq!(
            Answer::new(&[0]).int(),
            Err(WireError::Short { at: 0, needs: 3 })
        );
    }

    proptest! {
        #[test]
        fn strings_written_read_back(texts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..6)) {
            let request = texts.iter().fold(Request::default(), |r, t| r.string(t)).end()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let mut answer = Answer::new(&request);
            for text in &texts {
                prop_assert_eq!(answer.string().map(<[u8]>::to_vec), Ok(text.clone()));
            }
            prop_assert_eq!(answer.short(), Ok(tag::EOT));
            prop_assert!(answer.is_done());
        }

        #[test]
        fn any_answer_bytes_read_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut answer = Answer::new(&bytes);
            let _ = ServerError::read(&mut answer);
            let _ = Done::read(&mut Answer::new(&bytes));
        }
    }
}
