//! Whole pipelines through the `sluice` binary, one test binary (linked once): the command
//! line, kill -9 and SIGTERM, Debezium's JSON, one pipeline fanned out to every message sink, a
//! full disk under the file sink, and the `http` sink against a webhook receiver.

mod cli;
mod crash;
mod debezium_json;
mod fanout;
mod full_disk;
mod http;
