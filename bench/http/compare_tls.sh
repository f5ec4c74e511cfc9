#!/usr/bin/env bash
# Decisions/s and p99 through the service over TLS against plain text, in one sitting: HTTP GET
# /v1/auth (wrk, keep-alive connections) over HTTPS and over HTTP, and gRPC ShouldRateLimit
# (rls_load) over TLS and plain; memory store, 2 I/O threads, 10,000 keys. Two servers run side by
# side (one plain, one TLS with certificates made now); the runs alternate, ROUNDS of each, and
# the medians are printed as a Markdown table.
#   bench/http/compare_tls.sh build/release/floodgate build/release/bench/rls_load [seconds] [rounds]
set -euo pipefail
floodgate="$1"; load="$2"; seconds="${3:-10}"; rounds="${4:-3}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
cleanup() {
  for p in "$work"/*.pid; do [[ -f "$p" ]] && kill "$(cat "$p")" 2>/dev/null || true; done
  sleep 0.3
  rm -rf "$work"
}
trap cleanup EXIT
"$here/../../tests/support/make_test_certs.sh" "$work/certs" >"$work/certs.log" 2>&1
mkdir -p "$work/rules"
cat >"$work/rules/bench.yaml" <<YAML
domain: bench
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000}
YAML
start() {  # NAME serve-args…
  cat >"$work/$1.yaml" <<YAML
log_level: warn
policies:
  - {name: web, strategy: fixed-window, limit: 1000000/second, key: {header: X-Real-IP}}
rls:
  config: $work/rules
  listen: 127.0.0.1:0
YAML
  "$floodgate" serve --config "$work/$1.yaml" --listen 127.0.0.1:0 --threads 2 --port-file "$work/$1.port" \
    --grpc-port-file "$work/$1.grpc" "${@:2}" 2>"$work/$1.log" &
  echo $! >"$work/$1.pid"
  for _ in $(seq 100); do [[ -s "$work/$1.port" ]] && break; sleep 0.05; done
}
start plain
start tls --tls-cert "$work/certs/server.crt" --tls-key "$work/certs/server.key"

# wrk's p99 ("850.00us", "1.20ms", "2.00s") in µs
micros() { awk '{ v = $1 + 0; if ($1 ~ /ms$/) v *= 1000; else if ($1 ~ /[0-9]s$/) v *= 1000000; print v }' <<<"$1"; }
http() {  # SCHEME PORT → "req/s p99µs"
  local out
  out="$(wrk -t2 -c64 -d"${seconds}s" --latency -s "$here/keys.lua" "$1://127.0.0.1:$2/v1/auth?policy=web")"
  echo "$(awk '/Requests\/sec/ {print $2}' <<<"$out") $(micros "$(awk '$1 == "99%" {print $2}' <<<"$out")")"
}
grpc() {  # PORT [--ca FILE] → "decisions/s p99µs"
  local out
  out="$("$load" --target "127.0.0.1:$1" --domain bench --key remote_address --keys 10000 --concurrency 64 \
    --channels 2 --seconds "$seconds" "${@:2}")"
  echo "$(sed -n 's/^decisions\/s: \([0-9]*\).*/\1/p' <<<"$out") \
$(sed -n 's/.* p99 \([0-9.]*\) .*/\1/p' <<<"$out" | awk '{print $1 * 1000}')"
}
for name in plain tls; do  # warm up (and check that each answers)
  scheme=http; [[ $name == tls ]] && scheme=https
  wrk -t2 -c64 -d1s -s "$here/keys.lua" "$scheme://127.0.0.1:$(cat "$work/$name.port")/v1/auth?policy=web" >/dev/null
done
for r in $(seq "$rounds"); do
  http http "$(cat "$work/plain.port")" >>"$work/http_plain"
  http https "$(cat "$work/tls.port")" >>"$work/http_tls"
  grpc "$(cat "$work/plain.grpc")" >>"$work/grpc_plain"
  grpc "$(cat "$work/tls.grpc")" --ca "$work/certs/ca.crt" >>"$work/grpc_tls"
  echo "round $r done" >&2
done
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { cut -d' ' -f"$2" "$work/$1" | median; }
echo "| transport | plain decisions/s | p99 µs | TLS decisions/s | p99 µs | TLS ÷ plain |"
echo "|---|---|---|---|---|---|"
for t in http grpc; do
  p="$(col "${t}_plain" 1)"; q="$(col "${t}_tls" 1)"
  echo "| $t | $p | $(col "${t}_plain" 2) | $q | $(col "${t}_tls" 2) | $(awk -v a="$q" -v b="$p" 'BEGIN { printf "%.2f", a / b }') |"
done
echo "(medians of $rounds runs of ${seconds}s each; raw: $(tr '\n' ';' <"$work/http_plain") / $(tr '\n' ';' <"$work/http_tls") / $(tr '\n' ';' <"$work/grpc_plain") / $(tr '\n' ';' <"$work/grpc_tls"))"
