#!/usr/bin/env bash
# Peak RSS against row size, with default queue limits (4 MiB per queue): a table of about
# 200 MB in rows of 1 KB, 100 KB, 1 MB and 10 MB is read by (a) the initial snapshot and (b) the
# stream, after one transaction updates every row (a slot created before the update). Memory
# must stay near the queues' bytes plus a few rows in flight, whatever the row size.
#
#   tests/bench/memory_by_row_size.sh     (PGHOST/PGPORT default 127.0.0.1:5432, user postgres)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
DB=sluice_rowsize
TOTAL=${TOTAL_BYTES:-200000000}
WORK=$(mktemp -d)
cleanup() { # the slots and the database this script made
  psql -X -q -At -U postgres -h "$PGHOST" -p "$PGPORT" -d postgres \
    -c "select pg_drop_replication_slot(slot_name) from pg_replication_slots where database = '$DB' and not active" \
    -c "drop database if exists $DB with (force)" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
SLUICE=${SLUICE_BIN:-$ROOT/target/release/sluice}
[ -n "${SLUICE_BIN:-}" ] || (cd "$ROOT" && cargo build --release --quiet)
psqlq() { psql -X -q -At -v ON_ERROR_STOP=1 -U postgres -h "$PGHOST" -p "$PGPORT" "$@"; }
peak_mb() { awk '/Maximum resident set size/ {printf "%.0f", $NF/1024}' "$1"; }

sluice_yaml() { # name mode
  cat <<Y
name: $1
data_dir: $WORK/sluice-$1
source:
  type: postgres
  database.hostname: $PGHOST
  database.port: $PGPORT
  database.user: postgres
  database.dbname: $DB
  topic.prefix: dbserver1
  slot.name: rs_$1
  publication.name: rs_$1
  publication.autocreate.mode: filtered
  table.include.list: public.rows
  snapshot.mode: $2
sinks:
  - type: file
    path: $WORK/sluice-$1.jsonl
    schemas.enable: false
Y
}

# Runs Sluice to the end of its work; prints "events rss_mb seconds" (seconds include the wait
# for idleness of the stream's runs: the server decodes a large transaction before it sends it).
run_sluice() { # name mode args...
  local name=$1 mode=$2; shift 2
  sluice_yaml "$name" "$mode" > "$WORK/$name.yaml"
  local t0; t0=$(date +%s.%N)
  /usr/bin/time -v "$SLUICE" run "$WORK/$name.yaml" "$@" > /dev/null 2> "$WORK/$name.time"
  local t1; t1=$(date +%s.%N)
  local events; events=$(wc -l < "$WORK/sluice-$name.jsonl" 2>/dev/null || echo 0)
  echo "$events $(peak_mb "$WORK/$name.time") $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')"
}

echo "PostgreSQL $(psqlq -d postgres -c 'show server_version'), $(nproc) cores, $((TOTAL / 1000000)) MB of rows per case, default queue limits"
printf "%-8s %7s | %-26s | %-26s\n" "row" "rows" "snapshot: events RSS time" "stream: events RSS time"
for size in ${SIZES:-1000 100000 1000000 10000000}; do
  rows=$((TOTAL / size))
  psqlq -d postgres -c "select pg_drop_replication_slot(slot_name) from pg_replication_slots where database = '$DB' and not active" >/dev/null
  psqlq -d postgres -c "drop database if exists $DB with (force)" -c "create database $DB"
  # Values that do not compress (md5 chains), so the server stores and sends every byte.
  psqlq -d "$DB" -c "create table rows (id int primary key, v text not null)" \
    -c "alter table rows alter column v set storage external" \
    -c "insert into rows select g, (select string_agg(md5(g::text || '-' || i), '') from generate_series(1, $size / 32) i) from generate_series(1, $rows) g"
  snap=$(run_sluice "snap$size" initial_only)
  # The stream: a slot taken first (no data), then one transaction updates every row.
  run_sluice "str$size" no_data --stop-when-idle 1s > /dev/null
  rm -f "$WORK/sluice-str$size.jsonl"
  psqlq -d "$DB" -c "update rows set v = 'x' || substr(v, 2)"
  stream=$(run_sluice "str$size" no_data --stop-when-idle "${STREAM_IDLE:-10s}")
  printf "%-8s %7d | %-26s | %-26s\n" "$size" "$rows" "$snap" "$stream"
done
