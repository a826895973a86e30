//! Informix, read through its Change Data Capture API (issue 43; seeds 000 and 001). Under
//! construction: so far the decoders of its CDC records, of a row's columns and of the values
//! Informix stores, tested on their own; the source itself, its native SQLI client and the
//! emulated server follow.

pub mod columns;
pub mod decimal;
pub mod record;
