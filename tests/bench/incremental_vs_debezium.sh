#!/usr/bin/env bash
# Incremental snapshot of a 1M-row table, Debezium 3.6.3 (../shared/debezium/reference.sh) and
# Sluice side by side on the same database: streaming starts with no snapshot, a signal row
# asks for an incremental snapshot (chunks of 1024), and each tool writes JSON lines (no
# schemas) to a file. Prints rows/s of each (first to last snapshot row), the ratio and peak RSS.
#
#   tests/bench/incremental_vs_debezium.sh [ROWS]     (PGHOST/PGPORT default 127.0.0.1:5432)
#   env: CHUNK (default 1024), KEEP=1 keeps the work dir, SKIP_DEBEZIUM=1 runs Sluice alone,
#        SSLMODE (default prefer), READ_ONLY=true (no watermark writes), WRITER=N: N pgbench
#        clients update random rows (all but the last) while each tool snapshots.
# The rate of each tool is its snapshot rows over the span of their envelope ts_ms (both stamp
# the time they made the event); without a writer Sluice's rate from the signal's insert to the
# last row written is printed too.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SHARED=${SLUICE_SHARED:-$ROOT/../shared}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
ROWS=${1:-1000000}
CHUNK=${CHUNK:-1024}
DB=sluice_inc_bench
WORK=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT; echo "work dir: $WORK" >&2
# SLUICE_BIN: a sluice binary to measure instead of this checkout's release build.
SLUICE=${SLUICE_BIN:-$ROOT/target/release/sluice}
[ -n "${SLUICE_BIN:-}" ] || (cd "$ROOT" && cargo build --release --quiet)
psqlq() { psql -X -q -At -v ON_ERROR_STOP=1 -U postgres -h "$PGHOST" -p "$PGPORT" "$@"; }

reset_db() {
  psqlq -d postgres -c "select pg_drop_replication_slot(slot_name) from pg_replication_slots where database = '$DB' and not active" >/dev/null
  psqlq -d postgres -c "drop database if exists $DB with (force)" -c "create database $DB"
  psqlq -d "$DB" -c "create table debezium_signal (id varchar(64) primary key, type varchar(32) not null, data text)" \
    -c "create table items (id int primary key, region int not null, name text not null, amount numeric(12,2), updated timestamptz not null default now())" \
    -c "insert into items select g, g % 7, 'item ' || g, g * 0.5, now() from generate_series(1, $ROWS) g"
  # Settled before each run, so that autovacuum and a checkpoint do not land in one tool's run.
  psqlq -d "$DB" -c "vacuum analyze items" -c "checkpoint"
}
signal() { # id
  psqlq -d "$DB" -c "insert into debezium_signal values ('$1', 'execute-snapshot', '{\"data-collections\": [\"public.items\"], \"type\": \"incremental\"}')"
}
peak_mb() { awk '/Maximum resident set size/ {printf "%.0f", $NF/1024}' "$1"; }
# The writer (WRITER=N pgbench clients): updates random rows, never the last one, whose snapshot
# row marks the end of Debezium's snapshot.
echo "\\set id random(1, $((ROWS - 1)))
update items set amount = amount + 1, updated = now() where id = :id;" > "$WORK/writer.sql"
start_writer() { # log
  pgbench -n -h "$PGHOST" -p "$PGPORT" -U postgres -c "$WRITER" -T 3600 -f "$WORK/writer.sql" "$DB" > "$1" 2>&1 &
  echo $!
}
# Snapshot rows/s from the output itself: rows marked incremental over the span of their
# envelope ts_ms (both tools stamp the time they made the event).
span_rate() { # file
  python3 - "$1" <<'PY'
import json, sys
n, first, last = 0, None, None
for line in open(sys.argv[1]):
    if '"snapshot":"incremental"' not in line:
        continue
    try:  # a line cut short when a tool was stopped mid-write is not counted
        ts = json.loads(line)["value"]["ts_ms"]
    except ValueError:
        continue
    n += 1
    first = ts if first is None else min(first, ts)
    last = ts if last is None else max(last, ts)
print(round(n * 1000 / max(last - first, 1)) if n else 0)
PY
}

# Debezium (SKIP_DEBEZIUM=1 measures Sluice alone).
dbz_rate=0; dbz_rows=0
if [ -z "${SKIP_DEBEZIUM:-}" ]; then
reset_db
cat > "$WORK/dbz.properties" <<P
name=incbench
connector.class=io.debezium.connector.postgresql.PostgresConnector
offset.storage=org.apache.kafka.connect.storage.MemoryOffsetBackingStore
offset.flush.interval.ms=10000
database.hostname=$PGHOST
database.port=$PGPORT
database.user=postgres
database.password=
database.dbname=$DB
topic.prefix=dbserver1
plugin.name=pgoutput
slot.name=dbz_inc
slot.drop.on.stop=true
publication.name=dbz_inc
publication.autocreate.mode=filtered
table.include.list=public.items,public.debezium_signal
snapshot.mode=no_data
signal.data.collection=public.debezium_signal
incremental.snapshot.chunk.size=$CHUNK
key.converter.schemas.enable=false
value.converter.schemas.enable=false
P
# The signal goes in once Debezium streams (a signal written before its slot exists is lost).
# With WRITER, the writer runs from the signal until the table's last row comes out as a
# snapshot row; Debezium then stops after 20 s without events.
( until psqlq -d "$DB" -c "select 1 from pg_replication_slots where slot_name = 'dbz_inc' and active" | grep -q 1; do sleep 0.2; done
  sleep 2; signal dbz-1
  if [ -n "${WRITER:-}" ]; then
    w=$(start_writer "$WORK/dbz-writer.out")
    # Only what was written since the last look (with an overlap for a line cut in two);
    # `grep -q` ends the pipe early, which pipefail would count as a failure.
    set +o pipefail
    seen=0
    until size=$(stat -c %s "$WORK/dbz.jsonl" 2>/dev/null || echo 0)
      tail -c +$((seen + 1)) "$WORK/dbz.jsonl" 2>/dev/null | head -c $((size - seen)) |
        grep -q "\"key\":{\"id\":$ROWS}.*\"snapshot\":\"incremental\""; do
      seen=$(( size > 100000 ? size - 100000 : 0 )); sleep 0.5
    done
    kill -TERM "$w" 2>/dev/null
  fi ) &
sync
/usr/bin/time -v "$SHARED/debezium/reference.sh" "$WORK/dbz.properties" "$WORK/dbz.jsonl" "$([ -n "${WRITER:-}" ] && echo 0 || echo "$ROWS")" 20 \
  > "$WORK/dbz.out" 2> "$WORK/dbz.time" || true
wait
dbz_rate=$(span_rate "$WORK/dbz.jsonl")
dbz_rows=$(grep -c '"snapshot":"incremental"' "$WORK/dbz.jsonl" || true)
fi

# Sluice.
reset_db
cat > "$WORK/sluice.yaml" <<Y
name: incbench
data_dir: $WORK/sluice-data
source:
  type: postgres
  database.hostname: $PGHOST
  database.port: $PGPORT
  database.dbname: $DB
  topic.prefix: dbserver1
  slot.name: sl_inc
  publication.name: sl_inc
  publication.autocreate.mode: filtered
  slot.drop.on.stop: true
  table.include.list: public.items
  snapshot.mode: no_data
  signal.data.collection: public.debezium_signal
  incremental.snapshot.chunk.size: $CHUNK
  database.sslmode: ${SSLMODE:-prefer}
  read.only: ${READ_ONLY:-false}
sinks:
  - type: file
    path: $WORK/sluice.jsonl
    schemas.enable: false
Y
sync # Debezium's output is on disk before this run starts
/usr/bin/time -v "$SLUICE" run "$WORK/sluice.yaml" > /dev/null 2> "$WORK/sluice.time" &
pid=$!
until psqlq -d "$DB" -c "select 1 from pg_replication_slots where slot_name = 'sl_inc' and active" | grep -q 1; do sleep 0.1; done
start=$(date +%s.%N)
signal sl-1
if [ -n "${WRITER:-}" ]; then
  writer=$(start_writer "$WORK/writer.out")
  until grep -q 'notification="COMPLETED"' "$WORK/sluice.time"; do
    kill -0 $pid 2>/dev/null || { grep -v '^\s' "$WORK/sluice.time" | tail -3 >&2; exit 1; }
    sleep 0.05
  done
  end=$(date +%s.%N)
  kill -TERM $writer 2>/dev/null; wait $writer 2>/dev/null || true
  updates=$(psqlq -d "$DB" -c "select count(*) from items where amount <> id * 0.5")
  echo "writer: $WRITER clients, $updates rows updated during the snapshot" >&2
else
# Waits for the COMPLETED notification in the log (a small file) before counting lines: counting
# the growing output file every 50 ms took 15% of this 2-core machine's CPU away from the run.
until grep -q 'notification="COMPLETED"' "$WORK/sluice.time"; do
  kill -0 $pid 2>/dev/null || { grep -v '^\s' "$WORK/sluice.time" | tail -3 >&2; exit 1; }
  sleep 0.05
done
until [ "$(wc -l < "$WORK/sluice.jsonl" 2>/dev/null || echo 0)" -ge "$ROWS" ]; do
  kill -0 $pid 2>/dev/null || { grep -v '^\s' "$WORK/sluice.time" | tail -3 >&2; exit 1; }
  sleep 0.01
done
end=$(date +%s.%N)
fi
kill -TERM $(pgrep -P $pid) 2>/dev/null || kill -TERM $pid
wait $pid || true
sl_from_signal=$(awk -v n="$ROWS" -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", n / (b - a) }')
sl_rate=$(span_rate "$WORK/sluice.jsonl")
sl_rows=$(grep -c '"snapshot":"incremental"' "$WORK/sluice.jsonl" || true)
psqlq -d postgres -c "drop database if exists $DB with (force)"

awk -v dr="$dbz_rate" -v dm="$(peak_mb "$WORK/dbz.time" 2>/dev/null || echo 0)" -v dn="$dbz_rows" -v sr="$sl_rate" -v sm="$(peak_mb "$WORK/sluice.time")" -v sn="$sl_rows" -v n="$ROWS" 'BEGIN {
  printf "incremental snapshot of %d rows: debezium %d rows/s %d MB (%d rows) | sluice %d rows/s %d MB (%d rows) | %.1fx faster, %.1fx less memory\n",
    n, dr, dm, dn, sr, sm, sn, (dr > 0 ? sr / dr : 0), (sm > 0 ? dm / sm : 0) }'
[ -n "${WRITER:-}" ] || echo "  sluice: $sl_from_signal rows/s counted from the signal's insert to the last row written"
