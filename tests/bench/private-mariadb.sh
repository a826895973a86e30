# Sourced by the MariaDB benchmark and fixture scripts: `private_mariadb DIR PORT` starts a
# private MariaDB with the binlog on (ROW, FULL images and metadata, UTC) in DIR on PORT,
# reporting a MySQL 5.7-style version as Debezium's MySQL connector needs
# (../shared/debezium/README.md), waits until it answers, and sets SERVER to its pid.
# MARIADBD_EXTRA: more server options (`--lower-case-table-names=1`).
private_mariadb() {
  local dir=$1 port=$2
  mariadb-install-db --no-defaults --datadir="$dir/data" --user=root --auth-root-authentication-method=normal >/dev/null
  printf '[mariadbd]\nversion=5.7.44-mariadb-compat\n' > "$dir/my.cnf"
  mariadbd --defaults-file="$dir/my.cnf" --datadir="$dir/data" --port="$port" --bind-address=127.0.0.1 \
    --socket="$dir/sock" --user=root --log-bin="$dir/data/binlog" --server-id=1 --binlog-format=ROW \
    --binlog-row-image=FULL --binlog-row-metadata=FULL --default-time-zone=+00:00 ${MARIADBD_EXTRA:-} >"$dir/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 100); do mariadb -h127.0.0.1 -P"$port" -uroot -e 'select 1' >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "the private MariaDB did not start: $(cat "$dir/server.log")" >&2
  return 1
}
