#!/usr/bin/env bash
# The SQL Server source's polling core against the emulated SQL Server (no SQL Server runs on
# these machines: an emulator is not the server, and its SQLite store and TDS encoding take
# their share of the time): (a) snapshot of N rows of a customers-shaped table, (b) streaming
# catch-up of N inserts in 100-row transactions from the change table, both to a JSON-lines
# file (schemas off). Prints events/s and Sluice's peak RSS.
#
#   tests/bench/sqlserver.sh [N]          (default 200000)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
N=${1:-200000}
WORK=$(mktemp -d)
# SLUICE_BIN: a sluice binary to measure instead of this checkout's release build.
SLUICE=${SLUICE_BIN:-$ROOT/target/release/sluice}
[ -n "${SLUICE_BIN:-}" ] || (cd "$ROOT" && cargo build --release --quiet)
(cd "$ROOT" && cargo build --release --quiet -p sluice-test-support --bin sqlserver-emulator)
EMULATOR=$ROOT/target/release/sqlserver-emulator

mkfifo "$WORK/in"
"$EMULATOR" "$N" < "$WORK/in" > "$WORK/emulator.out" &
EMU=$!
exec 3> "$WORK/in"
cleanup() { exec 3>&- 2>/dev/null || true; kill "$EMU" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
for _ in $(seq 1 600); do grep -q '^port' "$WORK/emulator.out" 2>/dev/null && break; sleep 0.1; done
PORT=$(awk '/^port/ {print $2}' "$WORK/emulator.out")

yaml() { # name mode
  cat <<Y
name: $1
data_dir: $WORK/data-$1
source:
  type: sqlserver
  database.hostname: 127.0.0.1
  database.port: $PORT
  database.user: sa
  database.password: Sluice-Test-1
  database.names: benchDB
  topic.prefix: bench
  snapshot.mode: $2
  poll.interval.ms: 50
  max.iteration.transactions: 0
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
echo "emulated SQL Server (SQLite store, TDS 7.4), $(nproc) cores"
run snapshot initial_only
# Streaming: the position first, then N inserts in 100-row transactions, then the catch-up.
run stream no_data --stop-when-idle 1s > /dev/null
rm -f "$WORK/stream.jsonl"
echo "changes $N" >&3
for _ in $(seq 1 6000); do grep -q '^done' "$WORK/emulator.out" && break; sleep 0.1; done
run stream no_data --stop-when-idle 1s
