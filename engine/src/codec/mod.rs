//! Record encodings. JSON as Kafka Connect's JsonConverter writes it; Avro comes with the
//! Kafka sink.

pub mod json;
pub mod json_decode;

pub use json::{JsonEncoder, JsonOptions};
pub use json_decode::{decode_record, decode_schema, decode_value, JsonDecodeError};
