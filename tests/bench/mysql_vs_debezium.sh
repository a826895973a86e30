#!/usr/bin/env bash
# Side-by-side benchmark on MariaDB: Debezium 3.6.3's MySQL connector
# (../shared/debezium/reference.sh) and Sluice's mysql source, both writing JSON lines to a file,
# schemas off and on, in one run:
#   (a) the initial snapshot of the 200k-row `bench` table of ../shared/debezium/mariadb-schema.sql;
#   (b) the streaming catch-up of ../shared/debezium/mariadb-workload.sql (100k inserts in 1,000
#       transactions, an update of every 4th row, a delete of every 10th row: 235k events with
#       tombstones), read from the binlog after the workload ran, from a position each connector
#       committed before it.
# Prints records/s of each (from process start to the last event: Sluice's measured here,
# Debezium's from its own summary), the ratio, peak RSS and the first event's delay. It starts a private MariaDB with the binlog on, reporting a 5.7-style
# version as Debezium needs.
#   tests/bench/mysql_vs_debezium.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SHARED=${SLUICE_SHARED:-$ROOT/../shared}
PORT=${PORT:-3398}
WORK=$(mktemp -d)
SLUICE=${SLUICE_BIN:-$ROOT/target/release/sluice}
# Debezium's MySQL connector reaches MariaDB through MariaDB's JDBC driver (reference.sh adds it).
[ -f /usr/share/java/mariadb-java-client.jar ] || {
  echo "needs MariaDB's JDBC driver: apt-get install libmariadb-java" >&2; exit 1; }
[ -n "${SLUICE_BIN:-}" ] || (cd "$ROOT" && cargo build --release --quiet)
# shellcheck source=private-mariadb.sh
. "$HERE/private-mariadb.sh"
SERVER=
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
private_mariadb "$WORK" "$PORT"
sql() { mariadb -h127.0.0.1 -P"$PORT" -uroot "$@"; }
sql -e 'create database inventory'
sql inventory < "$SHARED/debezium/mariadb-schema.sql"
sql inventory -e 'create table marker (id int primary key)'
STREAMED=235000

# Progress on stderr, so a slow phase shows where it is.
say() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
# Every run is bounded: a phase that hangs fails the benchmark instead of waiting for ever.
LIMIT=${LIMIT:-900}

rss() { awk '/Maximum resident set size/ {print int($6/1024)}' "$1"; }
now() { date +%s.%N; }

# sluice_yaml NAME MODE SCHEMAS: a pipeline writing $WORK/NAME.jsonl, data in $WORK/NAME-data.
sluice_yaml() {
  cat > "$WORK/$1.yaml" <<Y
name: bench
data_dir: $WORK/$1-data
source:
  type: mysql
  database.hostname: 127.0.0.1
  database.port: $PORT
  database.user: root
  database.server.id: 5402
  database.include.list: inventory
  topic.prefix: dbserver1
  snapshot.mode: $2
sinks:
  - type: file
    path: $WORK/$1.jsonl
    schemas.enable: $3
Y
}

# dbz_properties NAME MODE SCHEMAS SCHEMA_CHANGES: offsets and history in $WORK/NAME-*.dat.
dbz_properties() {
  cat > "$WORK/$1.properties" <<P
name=bench
connector.class=io.debezium.connector.mysql.MySqlConnector
database.hostname=127.0.0.1
database.port=$PORT
database.user=root
database.password=
database.server.id=5401
database.jdbc.driver=org.mariadb.jdbc.Driver
database.protocol=jdbc:mariadb
topic.prefix=dbserver1
database.include.list=inventory
snapshot.mode=$2
include.schema.changes=$4
schema.history.internal=io.debezium.storage.file.history.FileSchemaHistory
schema.history.internal.file.filename=$WORK/$1-history.dat
offset.storage=org.apache.kafka.connect.storage.FileOffsetBackingStore
offset.storage.file.filename=$WORK/$1-offsets.dat
offset.flush.interval.ms=1000
key.converter.schemas.enable=$3
value.converter.schemas.enable=$3
P
}

# Debezium's seconds from process start to its last event, from reference.sh's summary line
# (its exit can wait for an idle timeout).
dbz_seconds() { awk '{for (i=1;i<=NF;i++) {split($i,kv,"="); v[kv[1]]=kv[2]}} END {print v["first_event_after_s"] + v["span_s"]}' "$1"; }

# report WHAT N_SLUICE S_SLUICE RSS_SLUICE N_DBZ S_DBZ RSS_DBZ DBZ_SUMMARY
report() {
  local rs rd
  rs=$(echo "$2 / $3" | bc -l)
  rd=$(echo "$5 / $6" | bc -l)
  printf '%s\n' "$1"
  printf '  sluice:   %7d events in %6.2f s = %8.0f/s, peak RSS %5d MB\n' "$2" "$3" "$rs" "$4"
  printf '  debezium: %7d events in %6.2f s = %8.0f/s, peak RSS %5d MB (%s)\n' "$5" "$6" "$rd" "$7" "$8"
  printf '  ratio: %.1fx\n' "$(echo "$rs / $rd" | bc -l)"
}

# (a) Snapshots.
for schemas in false true; do
  sluice_yaml "snap-$schemas" initial_only "$schemas"
  say "sluice snapshot, schemas=$schemas"
  t0=$(now)
  /usr/bin/time -v timeout "$LIMIT" "$SLUICE" run "$WORK/snap-$schemas.yaml" 2> "$WORK/snap-$schemas.time" >/dev/null
  t1=$(now)
  n_s=$(wc -l < "$WORK/snap-$schemas.jsonl")
  dbz_properties "dsnap-$schemas" initial_only "$schemas" false
  say "debezium snapshot, schemas=$schemas"
  /usr/bin/time -v timeout "$LIMIT" "$SHARED/debezium/reference.sh" "$WORK/dsnap-$schemas.properties" "$WORK/dsnap-$schemas.jsonl" 200000 10 \
    2> "$WORK/dsnap-$schemas.time" > "$WORK/dsnap-$schemas.out"
  report "snapshot 200k rows, schemas=$schemas, to a file (process start to exit)" \
    "$n_s" "$(echo "$t1 - $t0" | bc -l)" "$(rss "$WORK/snap-$schemas.time")" \
    "$(wc -l < "$WORK/dsnap-$schemas.jsonl")" "$(dbz_seconds "$WORK/dsnap-$schemas.out")" "$(rss "$WORK/dsnap-$schemas.time")" \
    "$(tail -1 "$WORK/dsnap-$schemas.out")"
  rm -f "$WORK/snap-$schemas.jsonl" "$WORK/dsnap-$schemas.jsonl"
done

# (b) Streaming catch-up. Each connector first commits a position before the workload: started
# without a snapshot, it streams one marker row, then stops.
say "committing a position before the workload"
sluice_yaml stream-base no_data false
"$SLUICE" run "$WORK/stream-base.yaml" 2> "$WORK/stream-base.log" >/dev/null &
base=$!
dbz_properties dstream-base no_data false true
"$SHARED/debezium/reference.sh" "$WORK/dstream-base.properties" "$WORK/dstream-base.jsonl" 0 5 > "$WORK/dstream-base.out" 2>&1 &
dbase=$!
waited=0
until [ "$(sql -N -e 'show processlist' | grep -c 'Binlog Dump')" -ge 2 ]; do
  sleep 0.5; waited=$((waited + 1))
  [ $waited -lt $((LIMIT * 2)) ] || { say "the connectors did not both connect to the binlog"; exit 1; }
done
sql inventory -e 'insert into marker values (1)'
waited=0
until [ -s "$WORK/stream-base.jsonl" ]; do
  sleep 0.2; waited=$((waited + 1))
  [ $waited -lt $((LIMIT * 5)) ] || { say "sluice did not stream the marker row"; exit 1; }
done
kill -TERM $base; wait $base
wait $dbase
say "running the workload"
sql inventory < "$SHARED/debezium/mariadb-workload.sql"
for schemas in false true; do
  rm -rf "$WORK/stream-data"; cp -r "$WORK/stream-base-data" "$WORK/stream-data"
  sluice_yaml stream no_data "$schemas"
  rm -f "$WORK/stream.jsonl"
  say "sluice catch-up, schemas=$schemas"
  t0=$(now)
  /usr/bin/time -v "$SLUICE" run "$WORK/stream.yaml" 2> "$WORK/stream.time" >/dev/null &
  run=$!
  first=
  while :; do
    n=$( (wc -l < "$WORK/stream.jsonl") 2>/dev/null || echo 0)
    [ -z "$first" ] && [ "$n" -gt 0 ] && first=$(echo "$(now) - $t0" | bc -l)
    [ "$n" -ge "$STREAMED" ] && break
    kill -0 $run 2>/dev/null || { say "sluice stopped after $n events"; exit 1; }
    [ "$(echo "$(now) - $t0 < $LIMIT" | bc -l)" = 1 ] || { say "sluice streamed $n of $STREAMED events in $LIMIT s"; exit 1; }
    sleep 0.1
  done
  t1=$(now)
  kill -TERM "$(pgrep -P $run sluice || echo $run)" 2>/dev/null || true
  wait $run || true
  n_s=$(wc -l < "$WORK/stream.jsonl")
  cp "$WORK/dstream-base-offsets.dat" "$WORK/dstream-offsets.dat"
  cp "$WORK/dstream-base-history.dat" "$WORK/dstream-history.dat"
  dbz_properties dstream no_data "$schemas" false
  say "debezium catch-up, schemas=$schemas"
  /usr/bin/time -v timeout "$LIMIT" "$SHARED/debezium/reference.sh" "$WORK/dstream.properties" "$WORK/dstream.jsonl" "$STREAMED" 30 \
    2> "$WORK/dstream.time" > "$WORK/dstream.out"
  report "streaming catch-up of the workload, schemas=$schemas (first event after $(printf '%.2f' "$first") s for sluice)" \
    "$n_s" "$(echo "$t1 - $t0" | bc -l)" "$(rss "$WORK/stream.time")" \
    "$(wc -l < "$WORK/dstream.jsonl")" "$(dbz_seconds "$WORK/dstream.out")" "$(rss "$WORK/dstream.time")" \
    "$(tail -1 "$WORK/dstream.out")"
done
