//! What the server sends: the `pgoutput` logical replication messages, COPY's text format, and
//! TLS for the SQL connection.

pub(crate) mod copy;
pub(crate) mod pgoutput;
pub(crate) mod tls;
