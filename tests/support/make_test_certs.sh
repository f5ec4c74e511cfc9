#!/usr/bin/env bash
# Certificates for the TLS tests, made now with openssl: EC P-256 keys (fast to make), valid for two
# days; nothing is kept in the tree.
#   make_test_certs.sh DIR              DIR/ca.{crt,key}: a CA; DIR/other-ca.{crt,key}: a CA nobody
#                                       trusts; DIR/server.{crt,key}: the CA's certificate for
#                                       localhost and 127.0.0.1; DIR/client.{crt,key}: a client's
#   make_test_certs.sh DIR server NAME  one more server certificate from DIR's CA, with a serial of
#                                       its own: DIR/NAME.{crt,key}
set -euo pipefail
dir=${1:?usage: make_test_certs.sh DIR [server NAME]}
mkdir -p "$dir"
cd "$dir"
key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)

server_cert() {  # NAME
  openssl req "${key[@]}" -keyout "$1.key" -out "$1.csr" -subj "/CN=localhost"
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 2 -extfile "$1.ext"
}

if [[ "${2:-}" == server ]]; then
  server_cert "${3:?NAME}"
  exit 0
fi
openssl req -x509 "${key[@]}" -keyout ca.key -out ca.crt -days 2 -subj "/CN=floodgate test CA"
openssl req -x509 "${key[@]}" -keyout other-ca.key -out other-ca.crt -days 2 -subj "/CN=untrusted CA"
server_cert server
openssl req "${key[@]}" -keyout client.key -out client.csr -subj "/CN=floodgate client"
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 2
