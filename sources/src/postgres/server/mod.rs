//! The server's state: its catalog (setup checks, table definitions, the publication), the
//! replication slot, and what this pipeline created there.

pub(crate) mod catalog;
pub(crate) mod owned;
pub(crate) mod slot;
