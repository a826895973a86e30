#!/usr/bin/env bash
# Instructions per event of sluice binaries, counted by `valgrind --tool=callgrind` (independent
# of the machine's load, unlike time): for each binary, each case run twice, the whole run's
# total printed (start-up and the idle second before `--stop-when-idle` included).
#   - PostgreSQL → file: a snapshot of N rows of the reference `customers` table (11 columns),
#     then N inserts in transactions of 100 read from the slot;
#   - SQLite → file: `tests/bench/sqlite.sh N`'s snapshot and streaming catch-up.
# Runs of one binary vary by about 1% (polling depends on timing): compare binaries by runs
# interleaved, as this script does.
#
#   tests/bench/instructions.sh BIN [BIN ...]      (N: SLUICE_BENCH_ROWS, default 20000;
#                                                   PGHOST/PGPORT default 127.0.0.1:5432)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SHARED=${SLUICE_SHARED:-$ROOT/../shared}
N=${SLUICE_BENCH_ROWS:-20000}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
[ $# -gt 0 ] || { echo "usage: $0 BIN [BIN ...]" >&2; exit 2; }
command -v valgrind > /dev/null || { echo "valgrind is not installed" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
psqlq() { psql -X -q -At -v ON_ERROR_STOP=1 -U postgres -h "$PGHOST" -p "$PGPORT" "$@"; }
total() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }

rows() { # first count: insert rows first..first+count-1
  echo "insert into customers (id, first_name, last_name, email, ssn, balance, birth, active, notes, tags) select g, 'f'||g, 'l'||g, 'e'||g||'@x.com', '123-45-6789', g*0.5, '1980-01-01', g%3=0, 'note '||g, '{\"a\":1}' from generate_series($1, $(($1 + $2 - 1))) g;"
}

pg_yaml() { # db name mode
  cat <<Y
name: $2
data_dir: $WORK/data-$2
source:
  type: postgres
  database.hostname: $PGHOST
  database.port: $PGPORT
  database.user: postgres
  database.dbname: $1
  topic.prefix: dbserver1
  slot.name: ${1}_$2
  publication.name: ${1}_$2
  publication.autocreate.mode: filtered
  table.include.list: public.customers
  snapshot.mode: $3
sinks:
  - type: file
    path: $WORK/$2.jsonl
    schemas.enable: false
Y
}

drop_db() {
  psqlq -d postgres -c "select pg_drop_replication_slot(slot_name) from pg_replication_slots where database = '$1' and not active" > /dev/null
  psqlq -d postgres -c "drop database if exists $1 with (force)" 2> /dev/null
}

postgres() { # bin label
  local bin=$1 db=sluice_instructions_$2
  drop_db "$db"
  psqlq -d postgres -c "create database $db"
  psqlq -d "$db" -v tbl=customers -f "$SHARED/debezium/schema.sql" 2> /dev/null
  psqlq -d "$db" -c "$(rows 1 "$N")"
  pg_yaml "$db" snap initial_only > "$WORK/snap.yaml"
  valgrind --tool=callgrind --callgrind-out-file="$WORK/snap.cg" "$bin" run "$WORK/snap.yaml" > /dev/null 2> "$WORK/snap.err"
  printf '%-40s postgres snapshot  %6d events %12d instructions\n' "$bin" "$(wc -l < "$WORK/snap.jsonl")" "$(total "$WORK/snap.cg")"
  pg_yaml "$db" stream no_data > "$WORK/stream.yaml"
  "$bin" run "$WORK/stream.yaml" --stop-when-idle 1s > /dev/null 2>&1
  for t in $(seq 0 $((N / 100 - 1))); do rows $((N + 1 + t * 100)) 100; done | psqlq -d "$db" > /dev/null
  valgrind --tool=callgrind --callgrind-out-file="$WORK/stream.cg" "$bin" run "$WORK/stream.yaml" --stop-when-idle 1s > /dev/null 2> "$WORK/stream.err"
  printf '%-40s postgres streaming %6d events %12d instructions\n' "$bin" "$(wc -l < "$WORK/stream.jsonl")" "$(total "$WORK/stream.cg")"
  drop_db "$db"
  rm -rf "$WORK"/data-* "$WORK"/*.jsonl "$WORK"/*.cg
}

sqlite() { # bin
  local wrap="$WORK/wrap" out="$WORK/sqlite-cg"
  mkdir -p "$out"
  rm -f "$out"/*
  printf '#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s/%%p.cg %s "$@"\n' "$out" "$1" > "$wrap"
  chmod +x "$wrap"
  SLUICE_BIN=$wrap bash "$HERE/sqlite.sh" "$N" > /dev/null 2>&1
  # The runs of the script, in order: `capture enable`, the snapshot, the stream's start and
  # its catch-up (the largest of the stream's two).
  local snap stream
  snap=$(grep -l 'snapshot.yaml' "$out"/*.cg)
  stream=$(ls -S $(grep -l 'stream.yaml' "$out"/*.cg) | head -1)
  printf '%-40s sqlite snapshot    %6d rows   %12d instructions\n' "$1" "$N" "$(total "$snap")"
  printf '%-40s sqlite streaming   %6d changes %11d instructions\n' "$1" "$N" "$(total "$stream")"
}

for round in 1 2; do
  i=0
  for bin in "$@"; do
    i=$((i + 1))
    postgres "$bin" "r${round}b$i"
    sqlite "$bin"
  done
done
