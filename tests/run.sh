#!/usr/bin/env bash
# The test command (README "Tests"): makes this machine fit for the tests, then runs them.
# Idempotent: what is already in place is left as it is. Needs root for PostgreSQL's settings
# and packages (a fresh machine of the project's kind is set up this way by .ci/run too).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
TANSU_VERSION=0.6.0

# PostgreSQL with logical decoding (wal_level=logical), restarted only when needed.
if command -v pg_ctlcluster >/dev/null 2>&1; then
  ver=$(ls /etc/postgresql | sort -n | tail -1)
  pg_ctlcluster --skip-systemctl-redirect "$ver" main start 2>/dev/null || true
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -q && break; sleep 1; done
  if [ "$(psql -U postgres -h 127.0.0.1 -Atc 'show wal_level')" != "logical" ]; then
    psql -U postgres -h 127.0.0.1 -qc "alter system set wal_level = logical"
    pg_ctlcluster --skip-systemctl-redirect "$ver" main restart
    for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -q && break; sleep 1; done
  fi
  echo "postgres wal_level=$(psql -U postgres -h 127.0.0.1 -Atc 'show wal_level')"
  # The contrib extensions the type tests use (hstore, citext, ltree).
  have=$(psql -U postgres -h 127.0.0.1 -Atc "select count(*) from pg_available_extensions where name in ('hstore','citext','ltree')")
  if [ "$have" != 3 ]; then
    apt-get update -qq && apt-get install -y -qq "postgresql-contrib-$ver" || apt-get install -y -qq postgresql-contrib
  fi
  # A test CA and a role that logs in by client certificate only (TLS tests).
  .ci/pg-client-certs.sh
fi

# FreeTDS's tsql: a SQL Server client independent of Sluice's, which checks the emulated SQL
# Server the sqlserver tests run against (tests/sqlserver/emulator.rs).
if ! command -v tsql >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq freetds-bin
fi

# The PostgreSQL ODBC driver (registered in /etc/odbcinst.ini): the db2 source reads Db2 over
# ODBC (its driver manager compiled in), and its tests reach the emulated ASN capture (on the
# local PostgreSQL) through the PostgreSQL driver. The sqlite3 shell: the boundary scenario's
# independent reader of SQLite.
if ! command -v odbcinst >/dev/null 2>&1 || ! odbcinst -q -d -n "PostgreSQL Unicode" >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq unixodbc odbc-postgresql
fi
if ! command -v sqlite3 >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq sqlite3
fi

# Headless Chromium: the status page's test renders it in a real browser.
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq chromium
fi

# Kafka-compatible broker for the Kafka tests: tansu (memory storage, no topic auto-create, no
# transactions), installed once (about 20 minutes on 2 cores) and started on 127.0.0.1:9092.
if ! tansu --version 2>/dev/null | grep -q "$TANSU_VERSION"; then
  cargo install --locked tansu --version "$TANSU_VERSION" --features dynostore
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/9092) 2>/dev/null; then
  broker_dir=$(mktemp -d) # tansu reads a .env from its working directory: give it an empty one
  (cd "$broker_dir" && nohup tansu broker --storage-engine memory://tansu/ \
    --listener-url tcp://127.0.0.1:9092 --advertised-listener-url tcp://127.0.0.1:9092 \
    >"$broker_dir/tansu.log" 2>&1 &)
  for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/9092) 2>/dev/null && break; sleep 0.2; done
fi
echo "kafka broker: $(tansu --version 2>/dev/null | head -1) on 127.0.0.1:9092"

# The sink suites use the machine's Redis (6379) and RabbitMQ (5672), and start private
# redis-server, nats-server and RabbitMQ nodes of their own: the packages, and the shared
# services started as the machine starts them when they are not running.
for pkg in redis-server nats-server rabbitmq-server; do
  command -v "$pkg" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$pkg"; }
done
if ! (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  rabbitmq-server -detached
  for _ in $(seq 1 120); do (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null && break; sleep 0.5; done
fi

cargo test --workspace --locked

# Tests that restart the PostgreSQL server cannot share it with the parallel suite: run alone.
cargo test --locked --test postgres -- --ignored --test-threads=1 server_restart
