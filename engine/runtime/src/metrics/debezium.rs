//! Debezium's connector metrics, under the names Debezium's Prometheus JMX-exporter
//! configuration gives them (`debezium-examples/monitoring/debezium-jmx-exporter/config.yml`:
//! `debezium_metrics_<Attribute>{plugin, name, context}`, CamelCase, booleans as 1/0, the
//! `RowsScanned` map with a `table` label), so Debezium's Grafana dashboard reads Sluice.
//!
//! They are worked out from what the source emits, before the pipeline's transforms (the
//! transform stage sends each batch's [`Batch`] facts; this recorder's thread keeps the counts
//! and sets the gauges): each event's `source` block gives the connector (`plugin`, as Debezium names its MBeans:
//! `postgres`, `mysql`, `sql_server`, ...), the logical name (`name`), whether it is a snapshot
//! row (`snapshot` `true`/`first`/`last`: context `snapshot`, else `streaming`), its table and
//! its time (`ts_ms`, for `MilliSecondsBehindSource`). Queue metrics are the source queue's.
//! What a source alone knows comes through the kit: the snapshot's tables (`TotalTableCount`,
//! `RemainingTableCount`) and what it left out (`NumberOfEventsFiltered`,
//! `NumberOfErroneousEvents`); chunk ids and the binlog file are strings, not exported.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use metrics::Gauge;

use super::facts::{Batch, Changes, Identity, Run, TableRows};
use sluice_engine::queue::BoundedQueue;

/// The gauges of one context (`snapshot` or `streaming`).
struct Context {
    labels: Vec<(&'static str, String)>,
    events_seen: Gauge,
    creates: Gauge,
    updates: Gauge,
    deletes: Gauge,
    ms_since_last: Gauge,
    queue_total: Gauge,
    queue_remaining: Gauge,
    queue_bytes: Gauge,
    queue_max_bytes: Gauge,
    filtered: Gauge,
    erroneous: Gauge,
    counts: [u64; 4],
    last: Option<Instant>,
}

impl Context {
    fn new(plugin: &str, name: &str, context: &str) -> Self {
        let labels = vec![
            ("plugin", plugin.to_owned()),
            ("name", name.to_owned()),
            ("context", context.to_owned()),
        ];
        let g = |attribute: &str| metrics::gauge!(format!("debezium_metrics_{attribute}"), &labels);
        Context {
            events_seen: g("TotalNumberOfEventsSeen"),
            creates: g("TotalNumberOfCreateEventsSeen"),
            updates: g("TotalNumberOfUpdateEventsSeen"),
            deletes: g("TotalNumberOfDeleteEventsSeen"),
            ms_since_last: g("MilliSecondsSinceLastEvent"),
            queue_total: g("QueueTotalCapacity"),
            queue_remaining: g("QueueRemainingCapacity"),
            queue_bytes: g("CurrentQueueSizeInBytes"),
            queue_max_bytes: g("MaxQueueSizeInBytes"),
            filtered: g("NumberOfEventsFiltered"),
            erroneous: g("NumberOfErroneousEvents"),
            counts: [0; 4],
            last: None,
            labels,
        }
    }

    fn gauge(&self, attribute: &str) -> Gauge {
        metrics::gauge!(format!("debezium_metrics_{attribute}"), &self.labels)
    }
}

/// The gauges, created with the first event (which names the connector and the server).
struct Named {
    snapshot: Context,
    streaming: Context,
    snapshot_running: Gauge,
    snapshot_completed: Gauge,
    connected: Gauge,
    behind: Gauge,
    rows: HashMap<String, (Gauge, u64)>,
    running: bool,
    /// The last snapshot stopped before its end.
    aborted: bool,
    snapshot_aborted: Gauge,
    snapshot_seconds: Gauge,
    /// When the last snapshot started, and when it ended (completed or aborted).
    snapshot_time: Option<(Instant, Option<Instant>)>,
    /// `MilliSecondsBehindSource` as last set.
    behind_ms: Option<i64>,
    /// Rows read by incremental snapshots, by table (`db.schema.table`), for the status.
    incremental: HashMap<String, u64>,
}

/// Debezium's metrics of one pipeline's source.
pub struct DebeziumMetrics {
    queue: Arc<BoundedQueue>,
    capacity: (usize, usize),
    named: Option<Named>,
    /// The snapshot's tables as the source announced them.
    plan: sluice_engine::component::SnapshotPlan,
    /// What the source left out.
    counters: Arc<sluice_engine::component::SourceCounters>,
    /// When the table counts were last set (twice a second at most: not per batch).
    counted: Option<Instant>,
    /// Whether they were set once the snapshot had finished (then they no longer change).
    final_counted: bool,
    /// The sequence number of the last batch observed in this generation.
    seen: Option<u64>,
}

/// The last two parts of a dotted name (`schema.table` of `db.schema.table`).
fn tail(name: &str) -> &str {
    let mut dots = name.rmatch_indices('.').map(|(i, _)| i);
    match (dots.next(), dots.next()) {
        (Some(_), Some(i)) => &name[i + 1..],
        _ => name,
    }
}

/// A planned table: its name, the rows read of it, the database's estimate.
type Planned = (String, u64, Option<u64>);

/// Debezium's `plugin` label for a `source.connector` value (its MBeans' connector type).
fn plugin(connector: &str) -> &str {
    match connector {
        "postgresql" => "postgres",
        "sqlserver" => "sql_server",
        other => other,
    }
}

impl DebeziumMetrics {
    /// Metrics of the source feeding `queue` (`capacity`: its events and bytes limits).
    pub fn new(queue: Arc<BoundedQueue>, capacity: (usize, usize)) -> Self {
        DebeziumMetrics {
            queue,
            capacity,
            named: None,
            plan: Default::default(),
            counters: Arc::default(),
            counted: None,
            final_counted: false,
            seen: None,
        }
    }

    /// Reads the snapshot's tables from `plan` (`TotalTableCount`, `RemainingTableCount`,
    /// the status's estimates).
    pub fn with_plan(mut self, plan: sluice_engine::component::SnapshotPlan) -> Self {
        self.plan = plan;
        self
    }

    /// Reads what the source left out from `counters` (`NumberOfEventsFiltered`,
    /// `NumberOfErroneousEvents`, streaming).
    pub fn with_counters(
        mut self,
        counters: Arc<sluice_engine::component::SourceCounters>,
    ) -> Self {
        self.counters = counters;
        self
    }

    /// The planned tables with the rows read of each and the database's estimate, and how
    /// many are still to read: those not started, and the one being read while the snapshot
    /// runs. A table is found by its `schema.table` (the rows' labels are `db.schema.table`).
    fn planned(&self) -> Option<(Vec<Planned>, usize)> {
        let guard = self.plan.lock().unwrap_or_else(|p| p.into_inner());
        let plan = guard.as_ref()?;
        let n = self.named.as_ref();
        let mut rows: HashMap<&str, u64> = HashMap::new();
        for (label, (_, r)) in n.iter().flat_map(|n| n.rows.iter()) {
            rows.insert(label.as_str(), *r);
            rows.insert(tail(label), *r);
        }
        let running = n.is_some_and(|n| n.running);
        let finished = n.is_some_and(|n| !n.running && !n.aborted && !n.rows.is_empty());
        let tables: Vec<Planned> = (plan.iter())
            .map(|(table, estimate)| {
                let read = rows.get(table.as_str()).or_else(|| rows.get(tail(table)));
                (table.clone(), read.copied().unwrap_or(0), *estimate)
            })
            .collect();
        let not_started = tables.iter().filter(|(_, r, _)| *r == 0).count();
        let remaining = match (finished, running) {
            (true, _) => 0,
            (false, true) => (not_started + 1).min(tables.len()),
            (false, false) => tables.len(),
        };
        Some((tables, remaining))
    }

    /// Counts a batch of the source's events, from what it tells ([`Batch`]; the per-event
    /// work was done where the events are, its cost measured by
    /// `tests/bench/metrics_overhead.sh`).
    pub fn record(&mut self, batch: &Batch) {
        self.seen = Some(batch.seq);
        if batch.runs.is_empty() {
            return;
        }
        if self.named.is_none() {
            let Some(Identity { connector, name }) = &batch.identity else {
                return;
            };
            self.name_as(connector, name);
        }
        for run in &batch.runs {
            match run {
                Run::Snapshot { tables, ended } => {
                    self.snapshot_starts(batch.seq);
                    self.snapshot_rows(tables, *ended);
                }
                // Events without a `source` block (a snapshot's notifications): no change, and
                // no end of the snapshot they are sent within.
                Run::Stream {
                    changes,
                    incremental,
                    ts_ms: None,
                } if changes.all == 0 && incremental.is_empty() => {}
                Run::Stream {
                    changes,
                    incremental,
                    ts_ms,
                } => self.streamed(changes, incremental, *ts_ms),
            }
        }
        self.tick();
    }

    /// Names the gauges after connector type `connector` and logical name `name`.
    fn name_as(&mut self, connector: &str, name: &str) {
        let plugin = plugin(connector);
        let snapshot = Context::new(plugin, name, "snapshot");
        let streaming = Context::new(plugin, name, "streaming");
        let named = Named {
            snapshot_running: snapshot.gauge("SnapshotRunning"),
            snapshot_completed: snapshot.gauge("SnapshotCompleted"),
            snapshot_aborted: snapshot.gauge("SnapshotAborted"),
            snapshot_seconds: snapshot.gauge("SnapshotDurationInSeconds"),
            snapshot_time: None,
            behind_ms: None,
            connected: streaming.gauge("Connected"),
            behind: streaming.gauge("MilliSecondsBehindSource"),
            snapshot,
            streaming,
            rows: HashMap::new(),
            running: false,
            aborted: false,
            incremental: HashMap::new(),
        };
        named.connected.set(1.0);
        self.named = Some(named);
    }

    /// A snapshot row in batch `seq`: a snapshot starts unless one runs. Its counts start over
    /// (an earlier, aborted read of the tables is not added to them); where an earlier
    /// snapshot ended is forgotten.
    fn snapshot_starts(&mut self, seq: u64) {
        let Some(n) = &mut self.named else { return };
        if n.running {
            return;
        }
        if self.counters.snapshot_through().is_some_and(|t| t < seq) {
            self.counters.snapshot_end_seen();
        }
        n.running = true;
        n.aborted = false;
        n.snapshot_running.set(1.0);
        n.snapshot_completed.set(0.0);
        n.snapshot_aborted.set(0.0);
        n.snapshot_time = Some((Instant::now(), None));
        for (gauge, rows) in n.rows.values_mut() {
            *rows = 0;
            gauge.set(0.0);
        }
        self.counted = None;
        self.final_counted = false;
    }

    /// The source said its snapshot ended with a batch already handled: completed (also when
    /// no row was marked `last`, its last table being empty).
    fn snapshot_end(&mut self) {
        let (Some(n), Some(seen)) = (&mut self.named, self.seen) else {
            return;
        };
        if self.counters.snapshot_through().is_some_and(|t| t <= seen) {
            self.counters.snapshot_end_seen();
            if n.running {
                n.snapshot_ended(true);
            }
        }
    }

    /// Snapshot rows, by table; `ended`: the snapshot's last row is among them.
    fn snapshot_rows(&mut self, tables: &[TableRows], ended: bool) {
        let Some(n) = &mut self.named else { return };
        for TableRows { table, rows, .. } in tables {
            let (gauge, read) = n.rows.entry(table.clone()).or_insert_with(|| {
                let mut labels = n.snapshot.labels.clone();
                labels.push(("table", table.clone()));
                (metrics::gauge!("debezium_metrics_RowsScanned", &labels), 0)
            });
            *read += rows;
            gauge.set(*read as f64);
            n.snapshot.counts[0] += rows;
        }
        n.snapshot.last = Some(Instant::now());
        if ended {
            n.snapshot_ended(true);
        }
    }

    /// Streamed changes, by kind, and incremental snapshots' rows by table; the time of the
    /// last one (`ts_ms`) gives the lag.
    fn streamed(&mut self, changes: &Changes, incremental: &[TableRows], ts_ms: Option<i64>) {
        let Some(n) = &mut self.named else { return };
        if n.running {
            n.snapshot_ended(true);
        }
        for TableRows { table, rows, .. } in incremental {
            *n.incremental.entry(table.clone()).or_insert(0) += rows;
        }
        let c = &mut n.streaming;
        c.counts[0] += changes.all;
        c.counts[1] += changes.creates;
        c.counts[2] += changes.updates;
        c.counts[3] += changes.deletes;
        c.last = Some(Instant::now());
        if let Some(ts) = ts_ms {
            let now = sluice_engine::component::now_ms() as i64;
            let behind = now.saturating_sub(ts).max(0);
            n.behind.set(behind as f64);
            n.behind_ms = Some(behind);
        }
    }

    /// `MilliSecondsBehindSource` as last set (`None` before a streamed change).
    pub fn behind_ms(&self) -> Option<i64> {
        self.named.as_ref().and_then(|n| n.behind_ms)
    }

    /// Brings the time and queue gauges up to date (on every batch, and while idle).
    pub fn tick(&mut self) {
        if self.named.is_none() {
            // The source said who it is before its first event.
            let counters = self.counters.clone();
            if let Some((connector, name)) = counters.identity() {
                self.name_as(connector, name);
            }
        }
        self.snapshot_end();
        let finished = self
            .named
            .as_ref()
            .is_some_and(|n| !n.running && !n.aborted && !n.rows.is_empty());
        let due = !(finished && self.final_counted)
            && self
                .counted
                .is_none_or(|t| t.elapsed() >= std::time::Duration::from_millis(500));
        if due && finished {
            self.final_counted = true;
        }
        let planned = if due {
            self.counted = Some(Instant::now());
            self.planned()
        } else {
            None
        };
        let Some(n) = &mut self.named else { return };
        if let Some((started, ended)) = n.snapshot_time {
            let until = ended.unwrap_or_else(Instant::now);
            n.snapshot_seconds
                .set(until.duration_since(started).as_secs() as f64);
        }
        if let Some((tables, remaining)) = planned {
            n.snapshot.gauge("TotalTableCount").set(tables.len() as f64);
            n.snapshot
                .gauge("RemainingTableCount")
                .set(remaining as f64);
        }
        let (filtered, erroneous) = self.counters.counts();
        n.streaming.filtered.set(filtered as f64);
        n.streaming.erroneous.set(erroneous as f64);
        let (events, bytes) = self.queue.depth();
        for c in [&mut n.snapshot, &mut n.streaming] {
            c.events_seen.set(c.counts[0] as f64);
            c.creates.set(c.counts[1] as f64);
            c.updates.set(c.counts[2] as f64);
            c.deletes.set(c.counts[3] as f64);
            if let Some(last) = c.last {
                c.ms_since_last.set(last.elapsed().as_millis() as f64);
            }
            c.queue_total.set(self.capacity.0 as f64);
            c.queue_remaining
                .set(self.capacity.0.saturating_sub(events) as f64);
            c.queue_bytes.set(bytes as f64);
            c.queue_max_bytes.set(self.capacity.1 as f64);
        }
    }

    /// The snapshot's progress for the status: whether it runs or completed, and the rows read
    /// so far by table (`null` before the source emitted anything).
    pub fn snapshot_json(&self) -> serde_json::Value {
        let Some(n) = &self.named else {
            return serde_json::Value::Null;
        };
        let tables: serde_json::Map<String, serde_json::Value> = (n.rows.iter())
            .map(|(t, (_, rows))| (t.clone(), serde_json::Value::from(*rows)))
            .collect();
        let mut json = serde_json::json!({
            "running": n.running,
            "completed": !n.running && !n.aborted && !tables.is_empty(),
            "aborted": n.aborted,
            "incremental": n.incremental,
            "tables": tables,
        });
        if let Some((planned, remaining)) = self.planned() {
            let estimated: serde_json::Map<String, serde_json::Value> = (planned.iter())
                .map(|(t, _, e)| (t.clone(), serde_json::json!(e)))
                .collect();
            json["total_tables"] = planned.len().into();
            json["remaining_tables"] = remaining.into();
            json["estimated_rows"] = estimated.into();
        }
        json
    }

    /// A new generation of stages reads from `queue`: `Connected` 1 again (the counts go on).
    /// Where the last generation's snapshot ended was forgotten before its stages started
    /// (the supervisor's `SourceCounters::forget_snapshot_end`).
    pub fn generation(&mut self, queue: Arc<BoundedQueue>) {
        self.queue = queue;
        self.seen = None;
        if let Some(n) = &self.named {
            n.connected.set(1.0);
        }
    }

    /// The source stopped: `Connected` 0; a snapshot it was reading is aborted.
    pub fn disconnected(&mut self) {
        if let Some(n) = &mut self.named {
            n.connected.set(0.0);
            if n.running {
                n.snapshot_ended(false);
            }
        }
        self.tick();
    }
}

impl Named {
    /// The snapshot ended: completed, or aborted (`SnapshotAborted`); its duration stops.
    fn snapshot_ended(&mut self, completed: bool) {
        self.running = false;
        self.aborted = !completed;
        self.snapshot_running.set(0.0);
        self.snapshot_completed
            .set(if completed { 1.0 } else { 0.0 });
        self.snapshot_aborted.set(if completed { 0.0 } else { 1.0 });
        if let Some((_, ended)) = &mut self.snapshot_time {
            ended.get_or_insert_with(Instant::now);
        }
    }
}

#[cfg(test)]
mod tail_tests {
    #[test]
    fn the_tail_is_schema_and_table() {
        assert_eq!(super::tail("db.public.t"), "public.t");
        assert_eq!(super::tail("public.t"), "public.t");
        assert_eq!(super::tail("t"), "t");
    }
}
