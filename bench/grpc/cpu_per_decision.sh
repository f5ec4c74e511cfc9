#!/usr/bin/env bash
# The server's own CPU time per decision (user + system, from /proc) for gRPC ShouldRateLimit
# (rls_load, 64 calls in flight on 2 channels) against HTTP GET /v1/auth (wrk -t2 -c64), plain
# text, memory store, --threads 2, 10,000 keys, a fixed window of 1,000,000/second (every call is
# admitted and charged). The runs alternate, ROUNDS of each; prints the medians and gRPC ÷ HTTP.
# With more floodgate binaries, each gets its own server and the rounds alternate between them
# too (before/after comparisons in one sitting; compare the ratios, the machine is shared).
#   bench/grpc/cpu_per_decision.sh build/release/floodgate build/release/bench/rls_load [seconds] [rounds] [floodgate...]
set -euo pipefail
load="$2"; seconds="${3:-10}"; rounds="${4:-3}"
binaries=("$1" "${@:5}")
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../tests/support/scratch_dir.sh"  # $work, cleaned up on exit
source "$here/bench_config.sh"
write_bench_config "$work"  # $work/rules, $work/bench.yaml
for i in "${!binaries[@]}"; do
  "${binaries[$i]}" serve --config "$work/bench.yaml" --listen 127.0.0.1:0 --threads 2 --port-file "$work/$i.port" \
    --grpc-port-file "$work/$i.grpc" 2>"$work/$i.log" &
  echo $! >"$work/$i.pid"
  for _ in $(seq 100); do [[ -s "$work/$i.port" && -s "$work/$i.grpc" ]] && break; sleep 0.05; done
done

ticks() { awk '{ print $14 + $15 }' "/proc/$(cat "$work/$1.pid")/stat"; }
cpu() {  # SERVER TICKS_BEFORE RATE → the server's CPU µs per decision over the last run
  awk -v a="$2" -v b="$(ticks "$1")" -v hz="$(getconf CLK_TCK)" -v r="$3" -v s="$seconds" \
    'BEGIN { printf "%.2f", (b - a) / hz * 1e6 / (r * s) }'
}
http() {  # SERVER → "req/s cpuµs"
  local before rate
  before="$(ticks "$1")"
  rate="$(wrk -t2 -c64 -d"${seconds}s" -s "$here/../http/keys.lua" "http://127.0.0.1:$(cat "$work/$1.port")/v1/auth?policy=web" |
    awk '/Requests\/sec/ {print $2}')"
  echo "$rate $(cpu "$1" "$before" "$rate")"
}
grpc() {  # SERVER → "decisions/s cpuµs"
  local before rate
  before="$(ticks "$1")"
  rate="$("$load" --target "127.0.0.1:$(cat "$work/$1.grpc")" --domain bench --key remote_address --keys 10000 \
    --concurrency 64 --channels 2 --seconds "$seconds" | sed -n 's/^decisions\/s: \([0-9]*\).*/\1/p')"
  echo "$rate $(cpu "$1" "$before" "$rate")"
}
for i in "${!binaries[@]}"; do  # warm up (and check that each answers)
  http "$i" >/dev/null
  grpc "$i" >/dev/null
done
for r in $(seq "$rounds"); do
  for i in "${!binaries[@]}"; do
    h="$(http "$i")"; g="$(grpc "$i")"
    echo "$h $g" | awk '{ printf "%s %s %s %s %.3f\n", $1, $2, $3, $4, $4 / $2 }' >>"$work/$i.runs"
  done
  echo "round $r done" >&2
done
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { cut -d' ' -f"$2" "$work/$1.runs" | median; }
echo "| floodgate | HTTP req/s | HTTP server CPU µs | gRPC decisions/s | gRPC server CPU µs | gRPC ÷ HTTP (CPU) |"
echo "|---|---|---|---|---|---|"
for i in "${!binaries[@]}"; do
  echo "| ${binaries[$i]} | $(col "$i" 1) | $(col "$i" 2) | $(col "$i" 3) | $(col "$i" 4) | $(col "$i" 5) |"
done
for i in "${!binaries[@]}"; do
  echo "(${binaries[$i]}: medians of $rounds alternating runs of ${seconds}s each, the ratio per round; raw: $(tr '\n' ';' <"$work/$i.runs"))"
done
