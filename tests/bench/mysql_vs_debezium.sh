#!/usr/bin/env bash
# Side-by-side benchmark on MariaDB: Debezium 3.6.3's MySQL connector
# (../shared/debezium/reference.sh) and Sluice's mysql source, both writing JSON lines without
# schemas to a file: the initial snapshot of the 200k-row `bench` table of
# ../shared/debezium/mariadb-schema.sql. Prints records/s of each (from process start to the
# last event), the ratio and peak RSS. It starts a private MariaDB with the binlog on, reporting
# a 5.7-style version as Debezium needs. (The streaming catch-up of mariadb-workload.sql is not
# measured yet.)
#   tests/bench/mysql_vs_debezium.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SHARED=${SLUICE_SHARED:-$ROOT/../shared}
PORT=${PORT:-3398}
WORK=$(mktemp -d)
SLUICE=${SLUICE_BIN:-$ROOT/target/release/sluice}
[ -n "${SLUICE_BIN:-}" ] || (cd "$ROOT" && cargo build --release --quiet)
# shellcheck source=private-mariadb.sh
. "$HERE/private-mariadb.sh"
SERVER=
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
private_mariadb "$WORK" "$PORT"
mariadb -h127.0.0.1 -P$PORT -uroot -e 'create database inventory'
mariadb -h127.0.0.1 -P$PORT -uroot inventory < "$SHARED/debezium/mariadb-schema.sql"

rss() { awk '/Maximum resident set size/ {print int($6/1024)}' "$1"; }

# Sluice.
cat > "$WORK/sluice.yaml" <<Y
name: bench
data_dir: $WORK/sluice-data
source:
  type: mysql
  database.hostname: 127.0.0.1
  database.port: $PORT
  database.user: root
  database.server.id: 5402
  database.include.list: inventory
  topic.prefix: dbserver1
  snapshot.mode: initial_only
sinks:
  - type: file
    path: $WORK/sluice.jsonl
    schemas.enable: false
Y
t0=$(date +%s.%N)
/usr/bin/time -v "$SLUICE" run "$WORK/sluice.yaml" 2> "$WORK/sluice.time" >/dev/null
t1=$(date +%s.%N)
n_sluice=$(wc -l < "$WORK/sluice.jsonl")
s_sluice=$(echo "$t1 - $t0" | bc -l)

# Debezium.
cat > "$WORK/dbz.properties" <<P
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
snapshot.mode=initial_only
include.schema.changes=false
schema.history.internal=io.debezium.storage.file.history.FileSchemaHistory
schema.history.internal.file.filename=$WORK/dbz-history.dat
offset.storage=org.apache.kafka.connect.storage.FileOffsetBackingStore
offset.storage.file.filename=$WORK/dbz-offsets.dat
offset.flush.interval.ms=1000
key.converter.schemas.enable=false
value.converter.schemas.enable=false
P
t0=$(date +%s.%N)
/usr/bin/time -v "$SHARED/debezium/reference.sh" "$WORK/dbz.properties" "$WORK/dbz.jsonl" 200000 10 2> "$WORK/dbz.time" > "$WORK/dbz.out"
t1=$(date +%s.%N)
n_dbz=$(wc -l < "$WORK/dbz.jsonl")
s_dbz=$(echo "$t1 - $t0" | bc -l)

r_sluice=$(echo "$n_sluice / $s_sluice" | bc -l)
r_dbz=$(echo "$n_dbz / $s_dbz" | bc -l)
printf 'snapshot 200k rows, no schemas, to a file (process start to exit)\n'
printf '  sluice:   %7d events in %6.2f s = %8.0f/s, peak RSS %5d MB\n' "$n_sluice" "$s_sluice" "$r_sluice" "$(rss "$WORK/sluice.time")"
printf '  debezium: %7d events in %6.2f s = %8.0f/s, peak RSS %5d MB (%s)\n' "$n_dbz" "$s_dbz" "$r_dbz" "$(rss "$WORK/dbz.time")" "$(tail -1 "$WORK/dbz.out")"
printf '  ratio: %.1fx\n' "$(echo "$r_sluice / $r_dbz" | bc -l)"
