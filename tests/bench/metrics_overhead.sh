#!/usr/bin/env bash
# The cost of the metrics: the SQLite snapshot of N rows to a JSON-lines file, without an admin
# endpoint (no recorder, no Debezium metrics) and with one scraped every second (`GET
# /metrics`), alternating, R rounds each. Prints events/s of each run and the ratio of the
# medians.
#
#   tests/bench/metrics_overhead.sh [N] [R]     (default 500000 rows, 3 rounds)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
N=${1:-500000}
R=${2:-3}
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
SLUICE=${SLUICE_BIN:-$ROOT/target/release/sluice}
[ -n "${SLUICE_BIN:-}" ] || (cd "$ROOT" && cargo build --release --quiet)
DB="$WORK/bench.db"
python3 - "$DB" "$N" <<'PY'
import sqlite3, sys
db, n = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
c.executescript("create table customers (id integer primary key, first_name text not null, last_name text, email text, balance decimal(12,2), notes text);")
c.executemany("insert into customers values (?,?,?,?,?,?)",
  ((i, 'f%d' % i, 'l%d' % i, 'e%d@example.com' % i, i * 0.5, 'note %d' % i) for i in range(1, n + 1)))
c.commit()
PY
"$SLUICE" capture enable "$DB" customers > /dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
yaml() { # name admin?
  echo "name: $1"
  [ "$2" = yes ] && echo "admin: { bind: \"127.0.0.1:$PORT\" }"
  cat <<Y
data_dir: $WORK/data-$1
source:
  type: sqlite
  database.path: $DB
  topic.prefix: bench
  snapshot.mode: initial_only
sinks:
  - type: file
    path: $WORK/$1.jsonl
    schemas.enable: false
Y
}
run() { # name admin?
  yaml "$1" "$2" > "$WORK/$1.yaml"
  rm -rf "$WORK/data-$1" "$WORK/$1.jsonl"
  if [ "$2" = yes ]; then
    (while sleep 1; do curl -s "http://127.0.0.1:$PORT/metrics" > /dev/null || true; done) &
    SCRAPER=$!
  fi
  local start; start=$(date +%s.%N)
  "$SLUICE" run "$WORK/$1.yaml" > /dev/null 2>&1
  local end; end=$(date +%s.%N)
  [ "$2" = yes ] && kill "$SCRAPER" 2>/dev/null
  local events; events=$(wc -l < "$WORK/$1.jsonl")
  awk -v n="$events" -v a="$start" -v b="$end" 'BEGIN { printf "%.0f\n", n / (b - a) }'
}
plain=(); scraped=()
for i in $(seq "$R"); do
  plain+=("$(run plain no)"); scraped+=("$(run scraped yes)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mp=$(median "${plain[@]}"); ms=$(median "${scraped[@]}")
echo "without metrics: ${plain[*]} events/s (median $mp)"
echo "scraped every 1 s: ${scraped[*]} events/s (median $ms)"
awk -v a="$mp" -v b="$ms" 'BEGIN { printf "ratio scraped/plain: %.3f (%.1f%% %s)\n", b / a, (a > b ? (a - b) : (b - a)) / a * 100, (a > b ? "slower" : "faster") }'
