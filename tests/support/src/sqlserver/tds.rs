//! The TDS 7.4 wire protocol, server side: packets, the pre-login and login exchange, SQL
//! batches and `sp_executesql` RPC requests in, token streams (COLMETADATA, ROW, DONE, ERROR,
//! ENVCHANGE, LOGINACK) out. Only what SQL Server clients send and need (tiberius, FreeTDS).

use std::io::{self, Read, Write};

use rusqlite::types::Value;

use super::types::SqlType;

pub const BATCH: u8 = 0x01;
pub const RPC: u8 = 0x03;
pub const REPLY: u8 = 0x04;
pub const ATTENTION: u8 = 0x06;
pub const LOGIN7: u8 = 0x10;
pub const PRELOGIN: u8 = 0x12;

/// Packet size the server keeps to (what both clients ask for).
pub const PACKET_SIZE: usize = 4096;

/// Reads one message (packets up to the one marked end-of-message): its type and payload.
/// `None`: the client closed the connection.
pub fn read_message(stream: &mut impl Read) -> io::Result<Option<(u8, Vec<u8>)>> {
    let mut payload = Vec::new();
    loop {
        let mut header = [0u8; 8];
        match stream.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && payload.is_empty() => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        }
        let kind = header[0];
        let len = usize::from(u16::from_be_bytes([header[2], header[3]]));
        if len < 8 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "packet shorter than its header",
            ));
        }
        let start = payload.len();
        payload.resize(start + len - 8, 0);
        stream.read_exact(&mut payload[start..])?;
        if header[1] & 0x01 != 0 {
            return Ok(Some((kind, payload)));
        }
    }
}

/// Writes `payload` as one message of `kind`, cut into packets of [`PACKET_SIZE`].
pub fn write_message(stream: &mut impl Write, kind: u8, payload: &[u8]) -> io::Result<()> {
    let chunk = PACKET_SIZE - 8;
    let mut chunks = payload.chunks(chunk).peekable();
    let mut id = 1u8;
    let mut out = Vec::with_capacity(payload.len() + 8 * (payload.len() / chunk + 1));
    if payload.is_empty() {
        out.extend_from_slice(&[kind, 0x01, 0, 8, 0, 51, 1, 0]);
    }
    while let Some(part) = chunks.next() {
        let last = chunks.peek().is_none();
        let len = u16::try_from(part.len() + 8)
            .unwrap_or(u16::MAX)
            .to_be_bytes();
        out.extend_from_slice(&[kind, u8::from(last), len[0], len[1], 0, 51, id, 0]);
        out.extend_from_slice(part);
        id = id.wrapping_add(1);
    }
    stream.write_all(&out)?;
    stream.flush()
}

/// `ENCRYPT_NOT_SUP` and `ENCRYPT_REQ`, the pre-login encryption values the server answers.
pub const ENCRYPT_NOT_SUP: u8 = 0x02;
pub const ENCRYPT_REQ: u8 = 0x03;

/// The ENCRYPTION option of a client's pre-login message (`None`: it has none).
pub fn prelogin_encryption(data: &[u8]) -> Option<u8> {
    let mut at = 0;
    while let Some(&token) = data.get(at) {
        if token == 0xFF {
            return None;
        }
        let offset = usize::from(u16::from_be_bytes([*data.get(at + 1)?, *data.get(at + 2)?]));
        if token == 0x01 {
            return data.get(offset).copied();
        }
        at += 5;
    }
    None
}

/// The pre-login answer: version, `encryption` (`ENCRYPT_NOT_SUP` or `ENCRYPT_REQ`), no MARS.
pub fn prelogin_reply(encryption: u8) -> Vec<u8> {
    let mut out = Vec::new();
    // VERSION at 16 (6 bytes), ENCRYPTION at 22 (1), MARS at 23 (1), terminator.
    for (token, offset, len) in [(0u8, 16u16, 6u16), (1, 22, 1), (4, 23, 1)] {
        out.push(token);
        out.extend_from_slice(&offset.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
    }
    out.push(0xFF);
    out.extend_from_slice(&[16, 0, 0x10, 0x7F, 0, 0]); // 16.0.4223
    out.push(encryption);
    out.push(0x00);
    out
}

/// What a LOGIN7 message says.
pub struct Login {
    pub user: String,
    pub password: String,
    pub database: String,
}

fn utf16_at(data: &[u8], at: usize) -> String {
    let offset = usize::from(u16::from_le_bytes([data[at], data[at + 1]]));
    let chars = usize::from(u16::from_le_bytes([data[at + 2], data[at + 3]]));
    let bytes = data.get(offset..offset + 2 * chars).unwrap_or_default();
    decode_utf16(bytes)
}

/// Parses a LOGIN7 payload (the password's obfuscation undone).
pub fn parse_login(data: &[u8]) -> io::Result<Login> {
    if data.len() < 94 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "LOGIN7 too short",
        ));
    }
    let offset = usize::from(u16::from_le_bytes([data[44], data[45]]));
    let chars = usize::from(u16::from_le_bytes([data[46], data[47]]));
    let raw: Vec<u8> = data
        .get(offset..offset + 2 * chars)
        .unwrap_or_default()
        .iter()
        .map(|b| {
            let x = b ^ 0xA5;
            x.rotate_left(4)
        })
        .collect();
    Ok(Login {
        user: utf16_at(data, 40),
        password: decode_utf16(&raw),
        database: utf16_at(data, 68),
    })
}

pub fn decode_utf16(bytes: &[u8]) -> String {
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16_lossy(&units)
}

/// UCS-2/UTF-16LE, as TDS writes text (ASCII widened directly: rows of megabytes).
pub(super) fn utf16(s: &str) -> Vec<u8> {
    if s.is_ascii() {
        let mut out = vec![0u8; s.len() * 2];
        for (pair, b) in out.chunks_exact_mut(2).zip(s.bytes()) {
            pair[0] = b;
        }
        return out;
    }
    let mut out = Vec::with_capacity(s.len() * 2);
    for unit in s.encode_utf16() {
        out.extend_from_slice(&unit.to_le_bytes());
    }
    out
}

fn b_varchar(out: &mut Vec<u8>, s: &str) {
    let units = s.encode_utf16().count();
    out.push(u8::try_from(units).unwrap_or(u8::MAX));
    out.extend_from_slice(&utf16(s));
}

fn us_varchar(out: &mut Vec<u8>, s: &str) {
    let units = s.encode_utf16().count();
    out.extend_from_slice(&u16::try_from(units).unwrap_or(u16::MAX).to_le_bytes());
    out.extend_from_slice(&utf16(s));
}

/// The collation every character column has: `SQL_Latin1_General_CP1_CI_AS` (windows-1252).
pub const COLLATION: [u8; 5] = [0x09, 0x04, 0xD0, 0x00, 0x34];

fn env_change(out: &mut Vec<u8>, kind: u8, new: &str, old: &str) {
    let mut body = vec![kind];
    b_varchar(&mut body, new);
    b_varchar(&mut body, old);
    out.push(0xE3);
    out.extend_from_slice(&u16::try_from(body.len()).unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&body);
}

/// The tokens that accept a login to `database`.
pub fn login_reply(database: &str) -> Vec<u8> {
    let mut out = Vec::new();
    env_change(&mut out, 1, database, "master");
    out.extend_from_slice(&[0xE3, 0x08, 0x00, 0x07, 0x05]);
    out.extend_from_slice(&COLLATION);
    out.push(0x00);
    let name = "Microsoft SQL Server";
    let mut ack = vec![0x01, 0x74, 0x00, 0x00, 0x04];
    b_varchar(&mut ack, name);
    ack.extend_from_slice(&[16, 0, 0x10, 0x7F]);
    out.push(0xAD);
    out.extend_from_slice(&u16::try_from(ack.len()).unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&ack);
    env_change(
        &mut out,
        4,
        &PACKET_SIZE.to_string(),
        &PACKET_SIZE.to_string(),
    );
    done(&mut out, 0, 0);
    out
}

/// DONE status bits.
pub const DONE_MORE: u16 = 0x01;
pub const DONE_ERROR: u16 = 0x02;
pub const DONE_COUNT: u16 = 0x10;

pub fn done(out: &mut Vec<u8>, status: u16, rows: u64) {
    out.push(0xFD);
    out.extend_from_slice(&status.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&rows.to_le_bytes());
}

/// An ERROR token (severity 16) followed by its DONE.
pub fn error(out: &mut Vec<u8>, number: i32, message: &str) {
    let mut body = Vec::new();
    body.extend_from_slice(&number.to_le_bytes());
    body.push(1); // state
    body.push(16); // class
    us_varchar(&mut body, message);
    b_varchar(&mut body, "emulator");
    b_varchar(&mut body, "");
    body.extend_from_slice(&1u32.to_le_bytes());
    out.push(0xAA);
    out.extend_from_slice(&u16::try_from(body.len()).unwrap_or(u16::MAX).to_le_bytes());
    out.extend_from_slice(&body);
    done(out, DONE_ERROR, 0);
}

/// COLMETADATA for `columns`.
pub fn col_metadata(out: &mut Vec<u8>, columns: &[(String, SqlType)]) {
    out.push(0x81);
    out.extend_from_slice(&u16::try_from(columns.len()).unwrap_or(0).to_le_bytes());
    for (name, ty) in columns {
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&0x0001u16.to_le_bytes()); // nullable
        ty.type_info(out);
        b_varchar(out, name);
    }
}

/// One ROW token; a value its type cannot hold is an error message.
pub fn row(
    out: &mut Vec<u8>,
    columns: &[(String, SqlType)],
    values: &[Value],
) -> Result<(), String> {
    let start = out.len();
    out.push(0xD1);
    for ((name, ty), value) in columns.iter().zip(values) {
        if let Err(e) = ty.encode(out, value) {
            out.truncate(start);
            return Err(format!("column {name}: {e}"));
        }
    }
    Ok(())
}

/// A request: the SQL text and, for an RPC, its parameters (`@P1`…).
pub struct Request {
    pub sql: String,
    pub params: Vec<Value>,
}

fn skip_all_headers(data: &[u8]) -> &[u8] {
    // ALL_HEADERS: its total length (u32) counts itself.
    match data.get(0..4) {
        Some(b) => {
            let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
            if len >= 4 && len <= data.len() && len < 1024 {
                &data[len..]
            } else {
                data
            }
        }
        None => data,
    }
}

/// A SQL batch's text.
pub fn parse_batch(data: &[u8]) -> Request {
    Request {
        sql: decode_utf16(skip_all_headers(data)),
        params: Vec::new(),
    }
}

struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> io::Result<&[u8]> {
        let part = self
            .data
            .get(self.at..self.at + n)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "RPC request cut short"))?;
        self.at += n;
        Ok(part)
    }
    fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> io::Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> io::Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn plp(&mut self) -> io::Result<Option<Vec<u8>>> {
        let total = u64::from_le_bytes(self.take(8)?.try_into().unwrap_or([0; 8]));
        if total == u64::MAX {
            return Ok(None);
        }
        let mut out = Vec::new();
        loop {
            let n = self.u32()? as usize;
            if n == 0 {
                return Ok(Some(out));
            }
            out.extend_from_slice(self.take(n)?);
        }
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// One RPC parameter's value (the types clients send for `sp_executesql`).
fn rpc_value(c: &mut Cursor) -> io::Result<Value> {
    let ty = c.u8()?;
    match ty {
        0x1F => Ok(Value::Null),
        0x26 | 0x68 | 0x6D => {
            let _max = c.u8()?;
            let n = usize::from(c.u8()?);
            let b = c.take(n)?;
            Ok(match (ty, n) {
                (_, 0) => Value::Null,
                (0x6D, 4) => Value::Real(f64::from(f32::from_le_bytes(
                    b.try_into().map_err(|_| bad("float"))?,
                ))),
                (0x6D, _) => {
                    Value::Real(f64::from_le_bytes(b.try_into().map_err(|_| bad("float"))?))
                }
                _ => {
                    let mut buf = [0u8; 8];
                    buf[..n].copy_from_slice(b);
                    let v = i64::from_le_bytes(buf);
                    // Sign-extend the narrower widths.
                    let shift = 64 - 8 * n as u32;
                    Value::Integer(if ty == 0x26 && n < 8 {
                        (v << shift) >> shift
                    } else {
                        v
                    })
                }
            })
        }
        0xE7 | 0xEF | 0xA7 | 0xAF | 0xA5 | 0xAD => {
            let max = c.u16()?;
            if matches!(ty, 0xE7 | 0xEF | 0xA7 | 0xAF) {
                c.take(5)?;
            }
            let bytes = if max == 0xFFFF {
                c.plp()?
            } else {
                let n = c.u16()?;
                if n == 0xFFFF {
                    None
                } else {
                    Some(c.take(usize::from(n))?.to_vec())
                }
            };
            Ok(match bytes {
                None => Value::Null,
                Some(b) if matches!(ty, 0xE7 | 0xEF) => Value::Text(decode_utf16(&b)),
                Some(b) if matches!(ty, 0xA7 | 0xAF) => {
                    Value::Text(b.iter().map(|&x| char::from(x)).collect())
                }
                Some(b) => Value::Blob(b),
            })
        }
        other => Err(bad(&format!(
            "RPC parameter type 0x{other:02X} is not emulated"
        ))),
    }
}

/// An RPC request: `sp_executesql` (by id 10 or by name) with its statement and parameters.
pub fn parse_rpc(data: &[u8]) -> io::Result<Request> {
    let mut c = Cursor {
        data: skip_all_headers(data),
        at: 0,
    };
    let name_len = c.u16()?;
    if name_len == 0xFFFF {
        let id = c.u16()?;
        if id != 10 {
            return Err(bad(&format!(
                "RPC procedure id {id} is not emulated (only sp_executesql)"
            )));
        }
    } else {
        let name = decode_utf16(c.take(usize::from(name_len) * 2)?);
        if !name.eq_ignore_ascii_case("sp_executesql") {
            return Err(bad(&format!("RPC procedure {name} is not emulated")));
        }
    }
    c.u16()?; // option flags
    let mut values = Vec::new();
    while c.at < c.data.len() {
        let name_chars = usize::from(c.u8()?);
        c.take(name_chars * 2)?;
        c.u8()?; // status
        values.push(rpc_value(&mut c)?);
    }
    let mut values = values.into_iter();
    let sql = match values.next() {
        Some(Value::Text(s)) => s,
        _ => return Err(bad("sp_executesql without a statement")),
    };
    values.next(); // the parameter declarations
    Ok(Request {
        sql,
        params: values.collect(),
    })
}
