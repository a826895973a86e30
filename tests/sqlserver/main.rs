//! The SQL Server source end to end through the `sluice` binary, against the emulated SQL Server
//! of `sluice_test_support::sqlserver` (no SQL Server can run on these machines), and the
//! emulator itself checked with FreeTDS's `tsql`, a client independent of Sluice's.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod emulator;
