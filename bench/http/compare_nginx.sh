#!/usr/bin/env bash
# wrk against floodgate's GET /v1/auth (memory store) and against nginx's limit_req doing the same
# decision in-process, one after the other in one run on this machine, both when most requests are
# allowed and when most are denied, ROUNDS times alternating (default 3). Prints a Markdown table
# of the medians, then each round's figures.
#   [ROUNDS=3] bench/http/compare_nginx.sh build/release/floodgate [seconds per measurement]
set -euo pipefail
source "$(dirname "$0")/auth_setup.sh"
floodgate="$1"
seconds="${2:-10}"
prefix="$(mktemp -d)"
cleanup() {
  [[ -f "$prefix/floodgate.pid" ]] && kill "$(cat "$prefix/floodgate.pid")" 2>/dev/null || true
  [[ -f "$prefix/nginx.pid" ]] && kill "$(cat "$prefix/nginx.pid")" 2>/dev/null || true
  sleep 0.3
  rm -rf "$prefix"
}
trap cleanup EXIT
write_floodgate_conf "$prefix"
"$floodgate" serve --config "$prefix/floodgate.yaml" --listen 127.0.0.1:0 --threads 2 \
  --port-file "$prefix/floodgate.port" 2>"$prefix/floodgate.log" &
echo $! >"$prefix/floodgate.pid"
for _ in $(seq 100); do [[ -s "$prefix/floodgate.port" ]] && break; sleep 0.05; done
fport="$(cat "$prefix/floodgate.port")"

nport="$(free_port)"
write_nginx_conf "$prefix" "$nport" 2
nginx -p "$prefix" -c "$prefix/nginx.conf"
sleep 0.5

# CPU ticks (user + system) of a server's processes: floodgate's one, nginx's master and workers
ticks() {  # PID…
  local t=0 p
  for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done
  echo "$t"
}
server_pids() {  # floodgate|nginx
  if [[ "$1" == floodgate ]]; then cat "$prefix/floodgate.pid"; return; fi
  local master
  master="$(cat "$prefix/nginx.pid")"
  echo "$master" $(pgrep -P "$master")
}
# requests/s, p99 latency (from `wrk --latency`), the server's CPU µs per request and wrk's (the
# client's: bash's `time` of the wrk process, user + system)
run() {  # URL floodgate|nginx
  local out before after client
  before="$(ticks $(server_pids "$2"))"
  local TIMEFORMAT='%U %S'
  { time wrk -t2 -c64 -d"${seconds}s" --latency -H 'X-Real-IP: 10.1.2.3' "$1" >"$prefix/wrk.out"; } 2>"$prefix/wrk.time"
  after="$(ticks $(server_pids "$2"))"
  out="$(cat "$prefix/wrk.out")"
  client="$(awk '{ print $1 + $2 }' "$prefix/wrk.time")"
  local rps p99
  rps="$(awk '/Requests\/sec/ {print $2}' <<<"$out")"
  p99="$(awk '$1 == "99%" {print $2}' <<<"$out")"
  echo "$rps $p99 $(awk -v a="$before" -v b="$after" -v hz="$(getconf CLK_TCK)" -v r="$rps" -v s="$seconds" \
    'BEGIN { printf "%.2f", (b - a) / hz * 1e6 / (r * s) }') $(awk -v c="$client" -v r="$rps" -v s="$seconds" \
    'BEGIN { printf "%.2f", c * 1e6 / (r * s) }')"
}
# warm both
wrk -t2 -c64 -d1s -H 'X-Real-IP: 10.1.2.3' "http://127.0.0.1:$fport/v1/auth?policy=allow" >/dev/null
wrk -t2 -c64 -d1s -H 'X-Real-IP: 10.1.2.3' "http://127.0.0.1:$nport/allow" >/dev/null

# ROUNDS rounds (default 3), the four measurements alternating within each, and the medians of
# the rounds: this machine is shared, and one run of either server can be off by a tenth.
rounds="${ROUNDS:-3}"
declare -A got
for ((i = 0; i < rounds; i++)); do
  got[f_allow]+="$(run "http://127.0.0.1:$fport/v1/auth?policy=allow" floodgate);"
  got[n_allow]+="$(run "http://127.0.0.1:$nport/allow" nginx);"
  got[f_deny]+="$(run "http://127.0.0.1:$fport/v1/auth?policy=deny" floodgate);"
  got[n_deny]+="$(run "http://127.0.0.1:$nport/deny" nginx);"
done
# median FIELD of a case's rounds ("rps p99 cpu client;" each; p99 as wrk prints it, in us, ms or s).
median() {
  tr ';' '\n' <<<"${got[$1]}" | awk -v f="$2" 'NF {
      v = $f
      if (f == 2) { u = v; gsub(/[0-9.]/, "", u); sub(/[a-z]+$/, "", v); v = (u == "us") ? v / 1000 : (u == "s") ? v * 1000 : v }
      print v }' | sort -g | awk '{ a[NR] = $1 } END { printf "%.2f", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "| case (medians of $rounds rounds) | floodgate GET /v1/auth req/s | p99 ms | server CPU µs/req | wrk CPU µs/req | nginx limit_req req/s | p99 ms | server CPU µs/req | wrk CPU µs/req | floodgate ÷ nginx (rate) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for c in allow deny; do
  label="mostly allowed"; [[ "$c" == deny ]] && label="mostly denied"
  echo "| $label | $(median "f_$c" 1) | $(median "f_$c" 2) | $(median "f_$c" 3) | $(median "f_$c" 4) | $(median "n_$c" 1) | $(median "n_$c" 2) | $(median "n_$c" 3) | $(median "n_$c" 4) | $(ratio "$(median "f_$c" 1)" "$(median "n_$c" 1)") |"
done
echo
echo "Rounds (req/s, p99, server µs/req, wrk µs/req): floodgate allowed ${got[f_allow]} nginx allowed ${got[n_allow]}"
echo "floodgate denied ${got[f_deny]} nginx denied ${got[n_deny]}"
