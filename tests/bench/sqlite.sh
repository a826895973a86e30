#!/usr/bin/env bash
# The SQLite source alone (no peer to compare with): (a) snapshot of N rows of a customers-shaped
# table, (b) streaming catch-up of N changes (inserts in 100-row transactions) from the change
# table, both to a JSON-lines file (schemas off, fsync). Prints events/s and peak RSS.
#
#   tests/bench/sqlite.sh [N]          (default 200000)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
N=${1:-200000}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# SLUICE_BIN: a sluice binary to measure instead of this checkout's release build.
SLUICE=${SLUICE_BIN:-$ROOT/target/release/sluice}
[ -n "${SLUICE_BIN:-}" ] || (cd "$ROOT" && cargo build --release --quiet)
DB="$WORK/bench.db"

python3 - "$DB" "$N" <<'PY'
import sqlite3, sys
db, n = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
c.executescript("""create table customers (id integer primary key, first_name varchar(255) not null, last_name varchar(255),
  email varchar(255), ssn char(11), balance decimal(12,2), created_at datetime, birth date, active boolean, notes text);""")
c.executemany("insert into customers values (?,?,?,?,?,?,?,?,?,?)",
  ((i, 'f%d' % i, 'l%d' % i, 'e%d@example.com' % i, '123-45-6789', i * 0.5, '2024-01-01 10:00:00', '1980-01-01', i % 3 == 0, 'note %d' % i) for i in range(1, n + 1)))
c.commit()
PY
"$SLUICE" capture enable "$DB" customers > /dev/null

yaml() { # name mode
  cat <<Y
name: $1
data_dir: $WORK/data-$1
source:
  type: sqlite
  database.path: $DB
  topic.prefix: bench
  snapshot.mode: $2
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
echo "SQLite $(python3 -c 'import sqlite3; print(sqlite3.sqlite_version)') (writer) / bundled (Sluice), $(nproc) cores"
run snapshot initial_only
# Streaming: the position first, then N inserts in 100-row transactions, then the catch-up.
run stream no_data --stop-when-idle 1s > /dev/null
rm -f "$WORK/stream.jsonl"
python3 - "$DB" "$N" <<'PY'
import sqlite3, sys
db, n = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
for start in range(n + 1, 2 * n + 1, 100):
    c.executemany("insert into customers values (?,?,?,?,?,?,?,?,?,?)",
      ((i, 'f%d' % i, 'l%d' % i, 'e%d@example.com' % i, '123-45-6789', i * 0.5, '2024-01-01 10:00:00', '1980-01-01', 1, 'note') for i in range(start, min(start + 100, 2 * n + 1))))
    c.commit()
PY
run stream no_data --stop-when-idle 1s
