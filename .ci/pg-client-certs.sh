#!/usr/bin/env bash
# Client-certificate authentication for the TLS tests: a test CA, a client certificate for the
# role `sluice_cert` (CN = role name), the server trusting that CA (ssl_ca_file) and a pg_hba
# line that makes `sluice_cert` log in with its certificate only. Idempotent.
#   .ci/pg-client-certs.sh [DIR]   (default /var/lib/postgresql/sluice-ca; tests read SLUICE_PG_CERT_DIR)
set -euo pipefail
DIR=${1:-/var/lib/postgresql/sluice-ca}
PSQL=(psql -X -q -At -U postgres -h 127.0.0.1)
[ "$("${PSQL[@]}" -c 'show ssl')" = on ] || { echo "PostgreSQL runs without TLS: no client certificates"; exit 0; }
mkdir -p "$DIR"
if [ ! -f "$DIR/client.ext" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=sluice test CA" \
    -keyout "$DIR/ca.key" -out "$DIR/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=sluice_cert" \
    -keyout "$DIR/client.key" -out "$DIR/client.csr" 2>/dev/null
  # A version 3 certificate with client-auth usage (rustls refuses version 1 certificates).
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' > "$DIR/client.ext"
  openssl x509 -req -in "$DIR/client.csr" -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" -CAcreateserial \
    -days 3650 -extfile "$DIR/client.ext" -out "$DIR/client.crt" 2>/dev/null
  chmod 600 "$DIR"/*.key
fi
chown -R postgres "$DIR" 2>/dev/null || true
chmod 644 "$DIR/ca.crt" "$DIR/client.crt"
chmod 644 "$DIR/client.key"   # read by the tests, whoever runs them
"${PSQL[@]}" -c "do \$\$ begin if not exists (select 1 from pg_roles where rolname = 'sluice_cert') then create role sluice_cert login superuser; end if; end \$\$"
"${PSQL[@]}" -c "alter system set ssl_ca_file = '$DIR/ca.crt'"
HBA=$("${PSQL[@]}" -c 'show hba_file')
if ! grep -q "sluice_cert" "$HBA"; then
  # First match wins: the certificate rule goes before the catch-all trust rules.
  { echo "hostssl all sluice_cert 127.0.0.1/32 cert"; echo "host all sluice_cert 127.0.0.1/32 reject"; cat "$HBA"; } > "$HBA.new"
  cat "$HBA.new" > "$HBA" && rm -f "$HBA.new"
fi
"${PSQL[@]}" -c "select pg_reload_conf()" >/dev/null
echo "client certificates in $DIR (role sluice_cert)"
