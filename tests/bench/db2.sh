#!/usr/bin/env bash
# The Db2 source's polling core against the emulated ASN capture on the local PostgreSQL
# (tests/support/src/db2/asncdc.sql), through unixODBC and the PostgreSQL ODBC driver: no Db2
# runs on these machines, and an emulation is not the server (its triggers, PostgreSQL and the
# ODBC driver take their share of the time). (a) snapshot of N rows of a customers-shaped
# table, (b) streaming catch-up of N inserts in 100-row transactions from the change-data table,
# both to a JSON-lines file (schemas off). Prints events/s and Sluice's peak RSS, and for scale
# the time PostgreSQL takes to COPY the same rows out (the service's own read speed).
#
#   tests/bench/db2.sh [N]          (default 200000)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
N=${1:-200000}
WORK=$(mktemp -d)
DB=sluice_db2_bench
PG="psql -X -q -v ON_ERROR_STOP=1 -U postgres -h ${SLUICE_TEST_PG_HOST:-127.0.0.1} -p ${SLUICE_TEST_PG_PORT:-5432}"
SLUICE=${SLUICE_BIN:-$ROOT/target/release/sluice}
[ -n "${SLUICE_BIN:-}" ] || (cd "$ROOT" && cargo build --release --quiet)
cleanup() { rm -rf "$WORK"; $PG -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" 2>/dev/null || true; }
trap cleanup EXIT
$PG -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
$PG -d $DB -f "$ROOT/tests/support/src/db2/asncdc.sql"
$PG -d $DB -c "SELECT asncdc.asncdcservices('start', 'asncdc')" >/dev/null
T='"DB2INST1"."CUSTOMERS"'
$PG -d $DB -c "CREATE SCHEMA \"DB2INST1\"; CREATE TABLE $T (\"ID\" integer PRIMARY KEY, \"FIRST_NAME\" varchar(255) NOT NULL, \"LAST_NAME\" varchar(255) NOT NULL, \"EMAIL\" varchar(255) NOT NULL, \"BALANCE\" decimal(12,2), \"CREATED\" timestamp NOT NULL)"
$PG -d $DB -c "INSERT INTO $T SELECT g, 'first ' || g, 'last ' || g, 'user' || g || '@example.org', g * 1.25, timestamp '2024-01-01' + g * interval '1 second' FROM generate_series(1, $N) g"
$PG -d $DB -c "CALL asncdc.addtable('DB2INST1', 'CUSTOMERS')"

# UseDeclareFetch: the PostgreSQL driver reads a result through a cursor, 2048 rows at a time,
# as IBM's CLI driver reads Db2's in blocks (without it, it holds a whole result in memory).
yaml() { # name mode
  cat <<Y
name: $1
data_dir: $WORK/data-$1
source:
  type: db2
  odbc.connection.string: "Driver={PostgreSQL Unicode};Server=${SLUICE_TEST_PG_HOST:-127.0.0.1};Port=${SLUICE_TEST_PG_PORT:-5432};Database=$DB;Uid=postgres;Pwd=;UseDeclareFetch=1;Fetch=2048;"
  database.dbname: BENCH
  topic.prefix: bench
  snapshot.mode: $2
  include.schema.changes: false
  poll.interval.ms: 50
sinks:
  - type: file
    path: $WORK/$1.jsonl
    schemas.enable: false
Y
}
peak_mb() { awk '/Maximum resident set size/ {printf "%.0f", $NF/1024}' "$1"; }
run() { # name mode [args]
  local name=$1 mode=$2; shift 2
  yaml "$name" "$mode" > "$WORK/$name.yaml"
  local start; start=$(date +%s.%N)
  /usr/bin/time -v "$SLUICE" run "$WORK/$name.yaml" "$@" > /dev/null 2> "$WORK/$name.time"
  local end; end=$(stat -c %.Y "$WORK/$name.jsonl" 2>/dev/null || date +%s.%N)
  local events; events=$(wc -l < "$WORK/$name.jsonl" 2>/dev/null || echo 0)
  awk -v n="$events" -v a="$start" -v b="$end" -v m="$(peak_mb "$WORK/$name.time")" -v c="$name" \
    'BEGIN { d = b - a; if (d <= 0) d = 0.001; printf "%-28s %8d events %9.0f events/s  peak RSS %d MB\n", c, n, n / d, m }'
}
copy_rate() { # label query
  local start; start=$(date +%s.%N)
  $PG -d $DB -c "\\copy ($2) TO '/dev/null'"
  local end; end=$(date +%s.%N)
  awk -v n="$N" -v a="$start" -v b="$end" -v c="$1" 'BEGIN { printf "%-28s %8d rows   %9.0f rows/s (PostgreSQL COPY, for scale)\n", c, n, n / (b - a) }'
}
echo "emulated Db2 ASN capture on PostgreSQL through the PostgreSQL ODBC driver, $(nproc) cores"
run snapshot initial_only
copy_rate "snapshot rows, COPY" "SELECT * FROM $T"
# Streaming: the position first, then N inserts in 100-row transactions, then the catch-up.
run stream no_data --stop-when-idle 1s > /dev/null
rm -f "$WORK/stream.jsonl"
$PG -d $DB -c "DO \$\$ BEGIN FOR b IN 0..($N / 100 - 1) LOOP INSERT INTO $T SELECT $N + b * 100 + g, 'f', 'l', 'e', 1.5, now() FROM generate_series(1, 100) g; COMMIT; END LOOP; END \$\$"
# Statistics as autovacuum leaves them in a steady state: with none yet for the 200000 new rows,
# PostgreSQL reads each piece's whole remaining range and sorts it (a plan the emulation's
# planner picks; what Db2's would do is not known here).
$PG -d $DB -c "ANALYZE \"ASNCDC\".\"CDC_DB2INST1_CUSTOMERS\"; ANALYZE asncdc.ibmsnap_uow"
run stream no_data --stop-when-idle 1s
copy_rate "change rows, COPY" "SELECT * FROM \"ASNCDC\".\"CDC_DB2INST1_CUSTOMERS\""
