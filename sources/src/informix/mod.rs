//! Informix, read through its Change Data Capture API (issue 43; seeds 000 and 001). Under
//! construction: so far the decoders of its CDC records, of a row's columns and of the values
//! Informix stores, and SQLI's message framing, tested on their own; the source itself, the
//! rest of its native SQLI client and the emulated server follow. The facts they are built
//! from: `docs/informix-notes.md`.

pub mod columns;
pub mod decimal;
pub mod record;
pub mod sqli;
