#!/usr/bin/env bash
# Side-by-side benchmark: Debezium 3.6.3 (../shared/debezium/reference.sh) and Sluice on the same
# PostgreSQL database and workload, both writing JSON lines to a file.
#   (a) initial snapshot of 200k rows of the reference `customers` table;
#   (b) catch-up of ../shared/debezium/workload.sql (100k inserts in 1,000 transactions, an update
#       of every 4th row, a delete of every 10th row; tombstones included), streamed from a slot
#       created before the workload ran.
# Each with schemas.enable false and true. Prints records/s (both tools counted from their first
# event to their last; Sluice also from its process start, and its first event's delay), the
# ratio, and peak RSS of each.
#
#   tests/bench/pg_vs_debezium.sh            (PGHOST/PGPORT default 127.0.0.1:5432, user postgres)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SHARED=${SLUICE_SHARED:-$ROOT/../shared}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
DB=sluice_bench
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# SLUICE_BIN: a sluice binary to measure instead of this checkout's release build.
SLUICE=${SLUICE_BIN:-$ROOT/target/release/sluice}
[ -n "${SLUICE_BIN:-}" ] || (cd "$ROOT" && cargo build --release --quiet)
psqlq() { psql -X -q -At -v ON_ERROR_STOP=1 -U postgres -h "$PGHOST" -p "$PGPORT" "$@"; }

reset_db() {
  psqlq -d postgres -c "select pg_drop_replication_slot(slot_name) from pg_replication_slots where database = '$DB' and not active" >/dev/null
  psqlq -d postgres -c "drop database if exists $DB with (force)" -c "create database $DB"
  psqlq -d "$DB" -v tbl=customers -f "$SHARED/debezium/schema.sql" 2>/dev/null
}

dbz_props() { # name schemas mode
  cat <<P
name=bench
connector.class=io.debezium.connector.postgresql.PostgresConnector
offset.storage=org.apache.kafka.connect.storage.FileOffsetBackingStore
offset.storage.file.filename=$WORK/dbz-offsets-$1.dat
offset.flush.interval.ms=1000
database.hostname=$PGHOST
database.port=$PGPORT
database.user=postgres
database.password=
database.dbname=$DB
topic.prefix=dbserver1
plugin.name=pgoutput
slot.name=dbz_$1
slot.drop.on.stop=false
publication.name=dbz_$1
publication.autocreate.mode=filtered
table.include.list=public.customers
snapshot.mode=$3
key.converter.schemas.enable=$2
value.converter.schemas.enable=$2
P
}

sluice_yaml() { # name schemas mode
  cat <<Y
name: $1
data_dir: $WORK/sluice-$1
source:
  type: postgres
  database.hostname: $PGHOST
  database.port: $PGPORT
  database.dbname: $DB
  topic.prefix: dbserver1
  slot.name: sl_$1
  publication.name: sl_$1
  publication.autocreate.mode: filtered
  table.include.list: public.customers
  snapshot.mode: $3
sinks:
  - type: file
    path: $WORK/sluice-$1.jsonl
    schemas.enable: $2
Y
}

peak_mb() { awk '/Maximum resident set size/ {printf "%.0f", $NF/1024}' "$1"; }

# Runs Debezium until EXPECTED events or 5 s idle; prints "rate rss_mb".
run_dbz() { # name schemas mode expected
  dbz_props "$1" "$2" "$3" > "$WORK/$1.properties"
  sync # the previous run's output is on disk before this one starts
  /usr/bin/time -v "$SHARED/debezium/reference.sh" "$WORK/$1.properties" "$WORK/dbz-$1.jsonl" "$4" 5 \
    > "$WORK/dbz-$1.out" 2> "$WORK/dbz-$1.time" || true
  local rate; rate=$(sed -n 's/.*events_per_s=\([0-9]*\).*/\1/p' "$WORK/dbz-$1.out")
  echo "${rate:-0} $(peak_mb "$WORK/dbz-$1.time")"
}

# The envelope ts_us of the file's first event (tombstones have none), in seconds.
first_event_s() { # file
  python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    value = json.loads(line)["value"]
    if value is None:
        continue
    print(value.get("payload", value)["ts_us"] / 1e6)
    break
PY
}

# Runs Sluice. Two rates: over the span from the first event to the output file's last write
# (Debezium's measure: its DbzBaseline counts from its first event to its last), and from the
# process start. Prints "span_rate rss_mb events MB/s start_rate first_event_ms".
run_sluice() { # name schemas mode [--stop-when-idle 2s]
  local name=$1 schemas=$2 mode=$3; shift 3
  sluice_yaml "$name" "$schemas" "$mode" > "$WORK/$name.yaml"
  sync # the previous run's output (Debezium's) is on disk before this one starts
  local start; start=$(date +%s.%N)
  /usr/bin/time -v "$SLUICE" run "$WORK/$name.yaml" "$@" > /dev/null 2> "$WORK/sluice-$name.time"
  local end; end=$(stat -c %.Y "$WORK/sluice-$name.jsonl" 2>/dev/null || date +%s.%N)
  local events; events=$(wc -l < "$WORK/sluice-$name.jsonl" 2>/dev/null || echo 0)
  local rate; rate=$(awk -v n="$events" -v a="$start" -v b="$end" 'BEGIN { d = b - a; if (d <= 0) d = 0.001; printf "%.0f", n / d }')
  local first; first=$(first_event_s "$WORK/sluice-$name.jsonl" 2>/dev/null || echo "$start")
  local span; span=$(awk -v n="$events" -v a="$first" -v b="$end" 'BEGIN { d = b - a; if (d <= 0) d = 0.001; printf "%.0f", n / d }')
  local first_ms; first_ms=$(awk -v a="$start" -v b="$first" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
  local mbs; mbs=$(awk -v n="$(stat -c %s "$WORK/sluice-$name.jsonl" 2>/dev/null || echo 0)" -v a="$first" -v b="$end" 'BEGIN { d = b - a; if (d <= 0) d = 0.001; printf "%.0f", n / d / 1e6 }')
  echo "$span $(peak_mb "$WORK/sluice-$name.time") $events $mbs $rate $first_ms"
}

report() { # case dbz_rate dbz_rss sluice_rate sluice_rss
  awk -v c="$1" -v dr="$2" -v dm="$3" -v sr="$4" -v sm="$5" 'BEGIN {
    printf "%-34s debezium %8d rec/s %6d MB | sluice %8d rec/s %5d MB | %5.1fx faster, %5.1fx less memory\n",
      c, dr, dm, sr, sm, (dr > 0 ? sr / dr : 0), (sm > 0 ? dm / sm : 0) }'
}

echo "PostgreSQL $(psqlq -d postgres -c 'show server_version'), $(nproc) cores"
# What the disk takes (1 GiB written, then fdatasync), for the with-schemas runs' share of it.
disk_mbs=$(dd if=/dev/zero of="$WORK/disk.test" bs=1M count=1024 conv=fdatasync 2>&1 | awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "copied,") { printf "%.0f", 1073.741824 / $(i + 1) } }')
rm -f "$WORK/disk.test"
echo "disk: ${disk_mbs} MB/s (dd, 1 GiB, fdatasync)"
for schemas in false true; do
  # (a) snapshot of 200k rows.
  reset_db
  psqlq -d "$DB" -c "insert into customers (first_name,last_name,email,ssn,balance,birth,active,notes,tags)
    select 'f'||g, 'l'||g, 'e'||g||'@example.com', '123-45-6789', (g*0.5)::numeric(12,2), date '1980-01-01' + (g%9000), g%3=0, 'note '||g, jsonb_build_object('n', g)
    from generate_series(1, 200000) g"
  # Settled before the runs, so that autovacuum and a checkpoint do not land in one tool's run.
  psqlq -d "$DB" -c "vacuum analyze customers" -c "checkpoint"
  read -r dr dm < <(run_dbz "snap_$schemas" "$schemas" initial_only 200000)
  read -r sr sm se smb swall sfirst < <(run_sluice "snap_$schemas" "$schemas" initial_only)
  report "snapshot 200k, schemas=$schemas" "$dr" "$dm" "$sr" "$sm"
  echo "  sluice: first event ${sfirst} ms after start; ${swall} rec/s counted from the process start"
  [ "$schemas" = false ] || echo "  sluice wrote ${smb} MB/s, $(( 100 * smb / disk_mbs ))% of the disk's ${disk_mbs} MB/s"
  # (b) streaming catch-up: slots first, then the workload, then drain.
  reset_db
  # Debezium's slot and publication (the publication must exist before the workload is decoded).
  psqlq -d "$DB" -c "create publication dbz_strm_$schemas for table customers" \
    -c "select pg_create_logical_replication_slot('dbz_strm_$schemas', 'pgoutput')" >/dev/null
  run_sluice "strm_$schemas" "$schemas" no_data --stop-when-idle 1s > /dev/null
  rm -f "$WORK/sluice-strm_$schemas.jsonl" "$WORK/dbz-strm_$schemas.jsonl"
  psqlq -d "$DB" -v tbl=customers -f "$SHARED/debezium/workload.sql"
  psqlq -d "$DB" -c "vacuum analyze customers" -c "checkpoint"
  read -r dr dm < <(run_dbz "strm_$schemas" "$schemas" no_data 0)
  read -r sr sm se smb swall sfirst < <(run_sluice "strm_$schemas" "$schemas" no_data --stop-when-idle 3s)
  report "streaming workload ($se rec), schemas=$schemas" "$dr" "$dm" "$sr" "$sm"
  echo "  sluice: first event ${sfirst} ms after start; ${swall} rec/s counted from the process start"
  [ "$schemas" = false ] || echo "  sluice wrote ${smb} MB/s, $(( 100 * smb / disk_mbs ))% of the disk's ${disk_mbs} MB/s"
  reset_db
done
psqlq -d postgres -c "drop database if exists $DB with (force)"
