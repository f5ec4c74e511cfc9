#!/usr/bin/env bash
# The service over TLS end to end: the real binary on loopback with certificates made now
# (tests/support/make_test_certs.sh), driven by curl, openssl s_client and @grpc/grpc-js.
#   run.sh CASE FLOODGATE NODE_DIR
#   https      HTTPS and gRPC over TLS: clients that trust the CA are answered, others fail
#   mtls       client certificates required: refused without one (or with one of another CA)
#   reload     SIGHUP with a new certificate: the next handshakes present it (HTTP at once, gRPC
#              within its provider's second); SIGHUP with a broken key: the old one keeps serving
#   erl-env    envoyproxy's GRPC_SERVER_USE_TLS variables (--envoyproxy-env): gRPC over TLS with
#              client certificates, the HTTP port plain text
#   bad-files  a missing, mismatched or broken file stops the start with an error naming it
# NODE_DIR: where tests/integration/grpc/run.sh installed @grpc/grpc-js (the grpc_node fixture).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
proto="$here/../../../proto"
case_=${1:?CASE}
floodgate=${2:?FLOODGATE}
node_dir=${3:?NODE_DIR}
source "$here/../../support/scratch_dir.sh"  # $work, cleaned up on exit
"$here/../../support/make_test_certs.sh" "$work/certs" >"$work/certs.log" 2>&1 || { cat "$work/certs.log"; exit 1; }
certs="$work/certs"
cp "$certs/server.crt" "$work/live.crt"
cp "$certs/server.key" "$work/live.key"

failures=0
check() {  # WHAT COMMAND…: passes when COMMAND succeeds
  if "${@:2}"; then echo "ok: $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi
}
# config [CLIENT_CA]: the service's certificate is live.crt/live.key, named relative to the file.
config() {
  cat >"$work/floodgate.yaml" <<YAML
policies:
  - {name: api, strategy: gcra, limit: 1000/second, key: {header: X-Real-IP}}
rls:
  config: $here/../grpc/rules
  listen: 127.0.0.1:0
tls:
  cert_file: live.crt
  key_file: live.key
YAML
  if [[ -n "${1:-}" ]]; then echo "  client_ca_file: $1" >>"$work/floodgate.yaml"; fi
}
start() {
  rm -f "$work/http.port" "$work/grpc.port"
  "$floodgate" serve --config "$work/floodgate.yaml" --listen 127.0.0.1:0 --threads 2 \
    --port-file "$work/http.port" --grpc-port-file "$work/grpc.port" "$@" 2>"$work/serve.log" &
  echo $! >"$work/pid"
  for _ in $(seq 400); do [[ -s "$work/http.port" ]] && break; sleep 0.05; done
  if [[ ! -s "$work/http.port" ]]; then echo "floodgate serve did not start:"; cat "$work/serve.log"; exit 1; fi
  hport="$(cat "$work/http.port")"
  gport="$(cat "$work/grpc.port")"
}
# status URL CURL_ARGS…: the HTTP status, or "failed" when curl fails (handshake, verification)
status() {
  local code
  if code="$(curl -sS -o /dev/null -w '%{http_code}' -H 'X-Real-IP: 10.0.0.1' "${@:2}" "$1" 2>>"$work/curl.log")"; then
    echo "$code"
  else
    echo failed
  fi
}
has() { grep -qF -- "$1" "$2" || { echo "  not in $2:"; sed 's/^/    /' "$2"; return 1; }; }
is() { [[ "$1" == "$2" ]] || { echo "  got \"$1\", wanted \"$2\""; return 1; }; }
grpc_call() { NODE_PATH="$node_dir/node_modules" node "$node_dir/tls_client.js" "$gport" "$proto" "$@"; }
refused() { local rc=0; grpc_call "$@" >"$work/node.out" 2>&1 || rc=$?; cat "$work/node.out"; [[ $rc -eq 3 ]]; }
# serial PORT: the serial of the certificate the server presents on a new handshake
serial() { openssl s_client -connect "127.0.0.1:$1" -alpn h2 </dev/null 2>/dev/null | openssl x509 -noout -serial; }
serial_of() { openssl x509 -noout -serial -in "$1"; }
auth="https://localhost:PORT/v1/auth?policy=api"

case "$case_" in
https)
  config && start
  url="${auth/PORT/$hport}"
  check "curl --cacert: /v1/auth answered 204 over HTTPS" is "$(status "$url" --cacert "$certs/ca.crt")" 204
  check "curl without the CA: verification fails" is "$(status "$url")" failed
  check "curl trusting another CA: verification fails" is "$(status "$url" --cacert "$certs/other-ca.crt")" failed
  check "plain HTTP to the HTTPS port gets no answer" is "$(status "http://127.0.0.1:$hport/healthz")" failed
  # An answer without keep-alive ends with the server's close_notify, not a bare TCP FIN.
  printf 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' |
    timeout 5 openssl s_client -connect "127.0.0.1:$hport" -CAfile "$certs/ca.crt" -servername localhost \
      -ign_eof -msg >"$work/notify.out" 2>&1 || true
  check "HTTPS: Connection: close ends with the server's close_notify" \
    has "<<< TLS 1.3, Alert [length 0002], warning close_notify" "$work/notify.out"
  # Failed handshakes on the gRPC port are counted (before the Node clients, whose retries would
  # add an unknown number).
  grpc_failures() {
    curl -sS --cacert "$certs/ca.crt" "https://localhost:$hport/metrics" |
      awk '$1 == "floodgate_grpc_tls_handshake_failures_total" {print $2}'
  }
  before="$(grpc_failures)"
  curl -s -m 2 "http://127.0.0.1:$gport/" >/dev/null 2>&1 || true  # plain text to the TLS port
  openssl s_client -connect "127.0.0.1:$gport" -alpn h2 -CAfile "$certs/other-ca.crt" -verify_return_error \
    </dev/null >/dev/null 2>&1 || true
  for _ in $(seq 50); do [[ "$(grpc_failures)" == "$((before + 2))" ]] && break; sleep 0.02; done
  check "gRPC: the two failed TLS handshakes are counted" is "$(grpc_failures)" "$((before + 2))"
  check "gRPC over TLS: ShouldRateLimit answered OK" grpc_call "$certs/ca.crt"
  check "gRPC client trusting another CA is refused" refused "$certs/other-ca.crt"
  ;;
mtls)
  config "certs/ca.crt" && start
  url="${auth/PORT/$hport}"
  check "mTLS: curl without a client certificate is refused" is "$(status "$url" --cacert "$certs/ca.crt")" failed
  check "mTLS: curl with the client certificate gets 204" \
    is "$(status "$url" --cacert "$certs/ca.crt" --cert "$certs/client.crt" --key "$certs/client.key")" 204
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/self.key" \
    -out "$work/self.crt" -days 1 -subj "/CN=self-signed client" 2>/dev/null
  check "mTLS: curl with a certificate of another issuer is refused" \
    is "$(status "$url" --cacert "$certs/ca.crt" --cert "$work/self.crt" --key "$work/self.key")" failed
  failures_metric() {
    curl -sS --cacert "$certs/ca.crt" --cert "$certs/client.crt" --key "$certs/client.key" \
      "https://localhost:$hport/metrics" | awk '$1 == "floodgate_http_tls_handshake_failures_total" {print $2}'
  }
  for _ in $(seq 50); do [[ "$(failures_metric)" == 2 ]] && break; sleep 0.02; done  # counted after the alert
  check "mTLS: the two refused HTTPS handshakes are counted" is "$(failures_metric)" 2
  check "mTLS: gRPC with the client certificate is answered" grpc_call "$certs/ca.crt" "$certs/client.crt" "$certs/client.key"
  check "mTLS: gRPC without a client certificate is refused" refused "$certs/ca.crt"
  check "mTLS: gRPC with a certificate of another issuer is refused" refused "$certs/ca.crt" "$work/self.crt" "$work/self.key"
  ;;
reload)
  config && start
  old="$(serial_of "$certs/server.crt")"
  check "before: HTTPS presents the first certificate" is "$(serial "$hport")" "$old"
  check "before: gRPC presents the first certificate" is "$(serial "$gport")" "$old"
  "$here/../../support/make_test_certs.sh" "$certs" server server2 >>"$work/certs.log" 2>&1
  new="$(serial_of "$certs/server2.crt")"
  cp "$certs/server2.crt" "$work/live.crt.tmp" && mv "$work/live.crt.tmp" "$work/live.crt"
  cp "$certs/server2.key" "$work/live.key.tmp" && mv "$work/live.key.tmp" "$work/live.key"
  kill -HUP "$(cat "$work/pid")"
  for _ in $(seq 100); do grep -q "TLS certificate for new connections" "$work/serve.log" && break; sleep 0.02; done
  check "SIGHUP: the next HTTPS handshake presents the new certificate" is "$(serial "$hport")" "$new"
  got=""
  for _ in $(seq 40); do got="$(serial "$gport")"; [[ "$got" == "$new" ]] && break; sleep 0.1; done
  check "SIGHUP: a gRPC handshake within 4 s presents the new certificate" is "$got" "$new"
  check "the new certificate verifies" is "$(status "${auth/PORT/$hport}" --cacert "$certs/ca.crt")" 204
  echo "not a key" >"$work/live.key"
  kill -HUP "$(cat "$work/pid")"
  for _ in $(seq 100); do grep -q "rejected" "$work/serve.log" && break; sleep 0.02; done
  check "a broken key is logged, naming the file" has "tls.key_file $work/live.key: no unencrypted PEM private key" "$work/serve.log"
  check "the failed reload is counted" is "$(curl -sS --cacert "$certs/ca.crt" "https://localhost:$hport/metrics" |
    awk '$1 == "floodgate_config_reloads_total{result=\"failed\"}" {print $2}')" 1
  sleep 1.2  # a gRPC provider read, had the broken file reached it
  check "after the broken key: HTTPS still presents the good certificate" is "$(serial "$hport")" "$new"
  check "after the broken key: gRPC still presents the good certificate" is "$(serial "$gport")" "$new"
  check "after the broken key: still answering over HTTPS" is "$(status "${auth/PORT/$hport}" --cacert "$certs/ca.crt")" 204
  check "after the broken key: still answering over gRPC" grpc_call "$certs/ca.crt"
  ;;
erl-env)
  # envoyproxy's GRPC_SERVER_USE_TLS/_CERT/_KEY and GRPC_CLIENT_TLS_CACERT through --envoyproxy-env:
  # the gRPC service speaks TLS and requires client certificates; PORT stays plain text, as there.
  HOST=127.0.0.1 PORT=0 GRPC_HOST=127.0.0.1 GRPC_PORT=0 RUNTIME_ROOT="$here/../grpc" RUNTIME_APPDIRECTORY=rules \
    GRPC_SERVER_USE_TLS=true GRPC_SERVER_TLS_CERT="$work/live.crt" GRPC_SERVER_TLS_KEY="$work/live.key" \
    GRPC_CLIENT_TLS_CACERT="$certs/ca.crt" "$floodgate" serve --envoyproxy-env --storage memory --threads 2 \
    --port-file "$work/http.port" --grpc-port-file "$work/grpc.port" 2>"$work/serve.log" &
  echo $! >"$work/pid"
  for _ in $(seq 400); do [[ -s "$work/http.port" ]] && break; sleep 0.05; done
  if [[ ! -s "$work/http.port" ]]; then echo "floodgate serve did not start:"; cat "$work/serve.log"; exit 1; fi
  hport="$(cat "$work/http.port")"
  gport="$(cat "$work/grpc.port")"
  check "PORT is plain HTTP: /healthcheck answered 200" is "$(status "http://127.0.0.1:$hport/healthcheck")" 200
  check "gRPC over TLS with the client certificate: answered" grpc_call "$certs/ca.crt" "$certs/client.crt" "$certs/client.key"
  check "gRPC over TLS without a client certificate: refused" refused "$certs/ca.crt"
  check "gRPC trusting another CA: refused" refused "$certs/other-ca.crt" "$certs/client.crt" "$certs/client.key"
  ;;
bad-files)
  # start_fails WHAT EXPECTED_MESSAGE serve-args…: exit status 2 and the message on stderr
  start_fails() {
    local rc=0
    "$floodgate" serve --listen 127.0.0.1:0 "${@:3}" >/dev/null 2>"$work/err" || rc=$?
    check "$1: exit 2" is "$rc" 2
    check "$1: \"$2\"" has "$2" "$work/err"
  }
  start_fails "missing certificate" "tls.cert_file $work/nope.crt: No such file or directory" \
    --tls-cert "$work/nope.crt" --tls-key "$certs/server.key"
  start_fails "key of another certificate" \
    "tls.key_file $certs/client.key: the key does not match the certificate of tls.cert_file $certs/server.crt" \
    --tls-cert "$certs/server.crt" --tls-key "$certs/client.key"
  echo "-----BEGIN CERTIFICATE-----" >"$work/broken.crt"
  start_fails "broken certificate" "tls.cert_file $work/broken.crt: no PEM certificate in it" \
    --tls-cert "$work/broken.crt" --tls-key "$certs/server.key"
  start_fails "a directory as the client CA" "tls.client_ca_file $work: not a regular file" \
    --tls-cert "$certs/server.crt" --tls-key "$certs/server.key" --tls-client-ca "$work"
  start_fails "a key alone" "tls.key_file is set without tls.cert_file" --tls-key "$certs/server.key"
  start_fails "a client CA alone" "client certificates need tls.cert_file and tls.key_file" \
    --tls-client-ca "$certs/ca.crt"
  config "certs/ca.crt"
  echo "  # unused" >>"$work/floodgate.yaml"
  cp "$certs/client.key" "$work/live.key"
  rc=0
  "$floodgate" serve --check-config "$work/floodgate.yaml" >/dev/null 2>"$work/err" || rc=$?
  check "--check-config checks the files too" is "$rc" 1
  check "--check-config names the key file" has "tls.key_file $work/live.key: the key does not match" "$work/err"
  ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
if [[ $failures -ne 0 ]]; then
  echo "$failures failed; floodgate log:"
  cat "$work/serve.log" 2>/dev/null || true
  exit 1
fi
echo "all passed"
