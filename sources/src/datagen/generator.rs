//! The deterministic change generator behind `datagen`.

use std::sync::Arc;

use sluice_engine::event::{
    decimal_schema, names, EnvelopeSchema, SourceConstants, SourceTimestamps,
};
use sluice_engine::{ChangeEvent, Op, Position, Record, Schema, SchemaType, Struct, Value};

use super::config::DatagenConfig;

/// SplitMix64: small, fast, and good enough for synthetic data.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

#[derive(Debug)]
struct Table {
    name: Arc<str>,
    topic: Arc<str>,
    schema: EnvelopeSchema,
    /// Live rows: (id, version).
    live: Vec<(i32, u32)>,
    next_id: i32,
}

/// Generates steps; a step is one insert, update or delete (plus its tombstone).
#[derive(Debug)]
pub struct Generator {
    rng: Rng,
    tables: Vec<Table>,
    step: u64,
    mix: (u64, u64, u64),
    padding: String,
    tombstones: bool,
    source_schema: Arc<Schema>,
    constants: Constants,
    emit: bool,
}

/// Strings shared by every event (no copy per event).
#[derive(Debug)]
struct Constants {
    /// `source.version`, `connector` and `name`.
    source: SourceConstants,
    database: Arc<str>,
    schema: Arc<str>,
    ssn: Arc<str>,
    created_at: Arc<str>,
}

sluice_engine::source_block! {
    /// The `datagen` source's `source` block.
    struct DatagenSourceBlock {
        ts_us: Int64 | null,
        ts_ns: Int64 | null,
        schema: String,
        table: String,
        seq: Int64 | null,
    }
}

fn source_schema() -> Arc<Schema> {
    DatagenSourceBlock::schema("io.sluice.connector.datagen.Source")
}

fn row_schema() -> Arc<Schema> {
    let s = |o| Schema::primitive(SchemaType::String, o);
    Schema::struct_builder()
        .field(
            "id",
            Schema::builder(SchemaType::Int32)
                .default_value(Value::Int32(0))
                .build(),
        )
        .field("first_name", s(false))
        .field("last_name", s(true))
        .field("email", s(true))
        .field("ssn", s(true))
        .field("balance", decimal_schema(2, Some(12), true))
        .field(
            "created_at",
            Schema::builder(SchemaType::String)
                .optional()
                .name(names::ZONED_TIMESTAMP)
                .version(1)
                .default_value(Value::from("1970-01-01T00:00:00.000000Z"))
                .build(),
        )
        .field(
            "birth",
            Schema::builder(SchemaType::Int32)
                .optional()
                .name(names::DATE)
                .version(1)
                .build(),
        )
        .field("active", Schema::primitive(SchemaType::Boolean, true))
        .field("notes", s(true))
        .field(
            "tags",
            Schema::builder(SchemaType::String)
                .optional()
                .name(names::JSON)
                .version(1)
                .build(),
        )
        .build()
}

fn key_schema() -> Arc<Schema> {
    Schema::struct_builder()
        .field(
            "id",
            Schema::builder(SchemaType::Int32)
                .default_value(Value::Int32(0))
                .build(),
        )
        .build()
}

impl Generator {
    /// A generator at step 0.
    pub fn new(config: &DatagenConfig) -> Self {
        let source = source_schema();
        let (row, key) = (row_schema(), key_schema());
        let tables = config
            .tables
            .iter()
            .map(|t| {
                let prefix = format!("{}.{}.{}", config.topic_prefix, config.schema, t);
                Table {
                    name: t.as_str().into(),
                    topic: prefix.clone().into(),
                    schema: EnvelopeSchema::new(
                        &prefix,
                        Some(key.clone()),
                        row.clone(),
                        source.clone(),
                    ),
                    live: Vec::new(),
                    next_id: 1,
                }
            })
            .collect();
        let m = config.mix;
        Generator {
            rng: Rng(config.seed),
            tables,
            step: 0,
            mix: (
                u64::from(m.insert),
                u64::from(m.update),
                u64::from(m.delete),
            ),
            padding: "x".repeat(config.payload_bytes),
            tombstones: config.tombstones_on_delete,
            source_schema: source,
            constants: Constants {
                source: SourceConstants::new(
                    env!("CARGO_PKG_VERSION"),
                    "datagen",
                    &config.topic_prefix,
                ),
                database: config.database.as_str().into(),
                schema: config.schema.as_str().into(),
                ssn: "123-45-6789".into(),
                created_at: "2024-03-01T10:15:30.123456Z".into(),
            },
            emit: true,
        }
    }

    /// Steps taken so far (the position after the last step).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Advances to step `n` without producing events (resuming after a committed position).
    pub fn skip_to(&mut self, n: u64) {
        self.emit = false;
        let mut sink = Vec::new();
        while self.step < n {
            self.next_step(&mut sink);
        }
        self.emit = true;
    }

    fn row(&self, table: &Table, id: i32, version: u32) -> Struct {
        let n = i64::from(id);
        let values = vec![
            Value::Int32(id),
            Value::from(format!("first{id}")),
            Value::from(format!("last{}", version)),
            Value::from(format!("user{id}@example.com")),
            Value::String(self.constants.ssn.clone()),
            Value::Bytes(Value::decimal_bytes(i128::from(
                n * 50 + i64::from(version) * 100,
            ))),
            Value::String(self.constants.created_at.clone()),
            Value::Int32((id % 20000) - 5000),
            Value::Boolean(version.is_multiple_of(2)),
            Value::from(format!("note {id} v{version}{}", self.padding)),
            Value::from(format!("{{\"n\": {id}, \"v\": {version}}}")),
        ];
        Struct::from_values(table.schema.row.clone(), values)
            .unwrap_or_else(|| Struct::new(table.schema.row.clone()))
    }

    fn source(&self, table: &Table, ts: SourceTimestamps) -> Struct {
        DatagenSourceBlock {
            head: self.constants.source.head(
                Value::String(self.constants.database.clone()),
                ts.millis(),
                "false",
            ),
            ts_us: Value::Int64(ts.micros()),
            ts_ns: Value::Int64(ts.nanos),
            schema: Value::String(self.constants.schema.clone()),
            table: Value::String(table.name.clone()),
            seq: Value::Int64(self.step as i64),
        }
        .into_struct(&self.source_schema)
    }

    /// Takes one step, appending its events (when not replaying).
    pub fn next_step(&mut self, out: &mut Vec<ChangeEvent>) {
        let t = self.rng.below(self.tables.len() as u64) as usize;
        let (ins, upd, del) = self.mix;
        let roll = self.rng.below(ins + upd + del);
        let pick = self.rng.next();
        let table = &mut self.tables[t];
        let op = if table.live.is_empty() || roll < ins {
            Op::Create
        } else if roll < ins + upd {
            Op::Update
        } else {
            Op::Delete
        };
        let (id, before_v, after_v) = match op {
            Op::Create => {
                let id = table.next_id;
                table.next_id += 1;
                table.live.push((id, 0));
                (id, None, Some(0))
            }
            Op::Update => {
                let i = (pick % table.live.len() as u64) as usize;
                let (id, v) = table.live[i];
                table.live[i].1 = v + 1;
                (id, Some(v), Some(v + 1))
            }
            _ => {
                let i = (pick % table.live.len() as u64) as usize;
                let (id, v) = table.live.swap_remove(i);
                (id, Some(v), None)
            }
        };
        self.step += 1;
        if !self.emit {
            return;
        }
        let table = &self.tables[t];
        let ts = SourceTimestamps::now();
        let position = Position::Offset(self.step);
        let key = table.schema.key.as_ref().map(|schema| Record {
            schema: schema.clone(),
            value: Struct::from_values(schema.clone(), vec![Value::Int32(id)])
                .map_or(Value::Null, Value::Struct),
        });
        let before = before_v.map(|v| self.row(table, id, v));
        let after = after_v.map(|v| self.row(table, id, v));
        let source = self.source(table, ts);
        let value = table.schema.value(op, before, after, source, None, ts);
        let event = ChangeEvent {
            topic: table.topic.clone(),
            key,
            value: Some(value),
            headers: Vec::new(),
            position,
        };
        let tombstone =
            (op == Op::Delete && self.tombstones).then(|| sluice_kit::records::tombstone(&event));
        out.push(event);
        out.extend(tombstone);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> DatagenConfig {
        DatagenConfig {
            topic_prefix: "dg".into(),
            database: "db".into(),
            schema: "public".into(),
            tables: vec!["a".into(), "b".into()],
            rate: 0,
            max_events: None,
            mix: super::super::OpMix {
                insert: 50,
                update: 30,
                delete: 20,
            },
            seed: 7,
            payload_bytes: 0,
            tombstones_on_delete: true,
        }
    }

    fn summary(events: &[ChangeEvent]) -> Vec<(String, Option<&'static str>, Option<Position>)> {
        events
            .iter()
            .map(|e| {
                (
                    e.topic.to_string(),
                    e.op().map(Op::code),
                    Some(e.position.clone()),
                )
            })
            .collect()
    }

    #[test]
    fn replaying_to_a_position_continues_with_the_same_events() {
        let mut full = Generator::new(&config());
        let mut all = Vec::new();
        for _ in 0..500 {
            full.next_step(&mut all);
        }
        let mut resumed = Generator::new(&config());
        resumed.skip_to(200);
        let mut tail = Vec::new();
        for _ in 0..300 {
            resumed.next_step(&mut tail);
        }
        let expected: Vec<_> = all
            .iter()
            .filter(|e| matches!(e.position, Position::Offset(n) if n > 200))
            .cloned()
            .collect();
        assert_eq!(summary(&tail), summary(&expected));
        let keys = |es: &[ChangeEvent]| es.iter().map(|e| e.key.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&tail), keys(&expected));
    }

    #[test]
    fn deletes_only_hit_live_rows_and_leave_tombstones() {
        let mut g = Generator::new(&config());
        let mut events = Vec::new();
        for _ in 0..2000 {
            g.next_step(&mut events);
        }
        let mut live = std::collections::HashSet::new();
        let mut i = 0;
        while i < events.len() {
            let e = &events[i];
            let id = format!("{}:{:?}", e.topic, e.key.as_ref().map(|k| k.value.clone()));
            match e.op() {
                Some(Op::Create) => assert!(live.insert(id)),
                Some(Op::Update) => assert!(live.contains(&id)),
                Some(Op::Delete) => {
                    assert!(live.remove(&id));
                    assert!(events[i + 1].is_tombstone());
                    i += 1;
                }
                other => panic!("unexpected op {other:?}"),
            }
            i += 1;
        }
    }
}
