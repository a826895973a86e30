//! Record encodings. JSON as Kafka Connect's JsonConverter writes it; Avro comes with the
//! Kafka sink.

pub mod json;

pub use json::{JsonEncoder, JsonOptions};
