#!/usr/bin/env bash
# User-space instructions per request of floodgate's GET /v1/auth and of nginx's limit_req doing the
# same decision, counted by Valgrind's callgrind (Debian's valgrind): unlike CPU time, the count
# does not move with the machine's load, so it shows what a change to the request path costs or
# saves. Kernel work (the socket calls, the same number for both servers) is not counted. Each
# server runs alone under callgrind; wrk (1 thread, 8 connections) warms it up for 2 s, the
# counters are zeroed, then it sends requests for SECONDS more; the count is divided by the
# requests wrk completed. Prints a Markdown table, allowed and denied, and floodgate ÷ nginx.
#   bench/http/instructions.sh build/release/floodgate [seconds] [floodgate…]
set -euo pipefail
source "$(dirname "$0")/auth_setup.sh"
binaries=("$1" "${@:3}")
seconds="${2:-4}"
prefix="$(mktemp -d)"
cleanup() { pkill -f "callgrind-out-file=$prefix" 2>/dev/null || true; sleep 0.3; rm -rf "$prefix"; }
trap cleanup EXIT
write_floodgate_conf "$prefix"
nport="$(free_port)"
write_nginx_conf "$prefix" "$nport" 1 single

# count URL PID OUT → instructions per request of the process PID (callgrind, writing OUT*)
count() {
  local url="$1" pid="$2" out="$3" n total file
  wrk -t1 -c8 -d2s -H 'X-Real-IP: 10.1.2.3' "$url" >/dev/null
  callgrind_control -z "$pid" >/dev/null 2>&1
  wrk -t1 -c8 -d"${seconds}s" -H 'X-Real-IP: 10.1.2.3' "$url" >"$prefix/wrk.out"
  callgrind_control -d "$pid" >/dev/null 2>&1
  n="$(awk '/requests in/ { print $1 }' "$prefix/wrk.out")"
  for _ in $(seq 50); do file="$(ls -t "$out".* 2>/dev/null | head -1)"; [[ -n "$file" ]] && break; sleep 0.1; done
  total="$(awk '/^(summary|totals):/ { print $2; exit }' "$file")"
  rm -f "$out".*
  echo $((total / n))
}
wait_port() { for _ in $(seq 300); do [[ -s "$1" ]] && return; sleep 0.1; done; echo "no port in $1" >&2; exit 1; }

declare -A got
for i in "${!binaries[@]}"; do
  valgrind --tool=callgrind --callgrind-out-file="$prefix/fg$i.cg" "${binaries[$i]}" serve \
    --config "$prefix/floodgate.yaml" --listen 127.0.0.1:0 --threads 2 --port-file "$prefix/fg$i.port" 2>/dev/null &
  pid=$!
  wait_port "$prefix/fg$i.port"
  fport="$(cat "$prefix/fg$i.port")"
  for c in allow deny; do got[$i.$c]="$(count "http://127.0.0.1:$fport/v1/auth?policy=$c" "$pid" "$prefix/fg$i.cg")"; done
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
valgrind --tool=callgrind --callgrind-out-file="$prefix/nginx.cg" nginx -p "$prefix" -c "$prefix/nginx.conf" 2>/dev/null &
pid=$!
for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$nport") 2>/dev/null && break; sleep 0.1; done
for c in allow deny; do got[nginx.$c]="$(count "http://127.0.0.1:$nport/$c" "$pid" "$prefix/nginx.cg")"; done
kill "$pid"; wait "$pid" 2>/dev/null || true

echo "| server | mostly allowed: instructions per request | mostly denied | ÷ nginx (allowed / denied) |"
echo "|---|---|---|---|"
for i in "${!binaries[@]}"; do
  echo "| ${binaries[$i]} | ${got[$i.allow]} | ${got[$i.deny]} | $(awk -v a="${got[$i.allow]}" -v b="${got[nginx.allow]}" -v c="${got[$i.deny]}" -v d="${got[nginx.deny]}" 'BEGIN { printf "%.2f / %.2f", a / b, c / d }') |"
done
echo "| nginx limit_req | ${got[nginx.allow]} | ${got[nginx.deny]} | 1.00 / 1.00 |"
