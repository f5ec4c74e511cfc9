#!/usr/bin/env bash
# Decisions/s and p99 through the service over TLS against plain text, in one sitting: HTTP GET
# /v1/auth (wrk, keep-alive connections) over HTTPS and over HTTP, and gRPC ShouldRateLimit
# (rls_load) over TLS and plain; memory store, 2 I/O threads, 10,000 keys. Two servers run side by
# side (one plain, one TLS with certificates made now); the runs alternate, ROUNDS of each, and
# the medians are printed as a Markdown table, with the server's own CPU time per decision (user +
# system, from /proc: the load generators share the machine's cores, and their TLS work with it).
#   bench/http/compare_tls.sh build/release/floodgate build/release/bench/rls_load [seconds] [rounds]
# HTTP's load generator is bench/http/http_load (beside rls_load; 64 connections), which spends
# 5.5 µs of CPU per plain request and 6.5–7 per HTTPS one; HTTP_CLIENT=wrk uses wrk instead, which
# spends 7.3 and 11.0 (its TLS reads, OpenSSL 3.0): on two cores shared with the servers, wrk's own
# TLS work alone holds the HTTPS/HTTP rate ratio under 0.80 for a server whose TLS were free.
# PIN=1: measured the way a server is measured, the load generator off the server's core: the
# servers run on core 0 with one I/O thread (`taskset -c 0`, `--threads 1`), http_load (one thread) and
# rls_load on core 1. The table then also says how busy the server's core was: near 100% means
# the server was the bottleneck and the rates compare the server's own work; well below it means
# the load generator was, and the script says so.
set -euo pipefail
floodgate="$1"; load="$2"; seconds="${3:-10}"; rounds="${4:-3}"
pin="${PIN:-0}"
if [[ "$pin" == 1 ]]; then
  on_server=(taskset -c 0); on_load=(taskset -c 1); threads=1
else
  on_server=(); on_load=(); threads=2
fi
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../tests/support/scratch_dir.sh"  # $work, cleaned up on exit
"$here/../../tests/support/make_test_certs.sh" "$work/certs" >"$work/certs.log" 2>&1
source "$here/../grpc/bench_config.sh"
write_bench_config "$work"  # $work/rules, $work/bench.yaml
start() {  # NAME serve-args…
  "${on_server[@]}" "$floodgate" serve --config "$work/bench.yaml" --listen 127.0.0.1:0 --threads "$threads" --port-file "$work/$1.port" \
    --grpc-port-file "$work/$1.grpc" "${@:2}" 2>"$work/$1.log" &
  echo $! >"$work/$1.pid"
  for _ in $(seq 100); do [[ -s "$work/$1.port" ]] && break; sleep 0.05; done
}
start plain
start tls --tls-cert "$work/certs/server.crt" --tls-key "$work/certs/server.key"

# wrk's p99 ("850.00us", "1.20ms", "2.00s") in µs
micros() { awk '{ v = $1 + 0; if ($1 ~ /ms$/) v *= 1000; else if ($1 ~ /[0-9]s$/) v *= 1000000; print v }' <<<"$1"; }
ticks() { awk '{ print $14 + $15 }' "/proc/$(cat "$work/$1.pid")/stat"; }
# cpu NAME TICKS_BEFORE RATE: the server's CPU µs per decision over the last run, and the share
# of one core it used (%)
cpu() { awk -v a="$2" -v b="$(ticks "$1")" -v hz="$(getconf CLK_TCK)" -v r="$3" -v s="$seconds" \
  'BEGIN { printf "%.2f %.0f", (b - a) / hz * 1e6 / (r * s), (b - a) / hz * 100 / s }'; }
http() {  # NAME SCHEME → "req/s p99µs cpuµs busy%"
  local out before rate p99
  before="$(ticks "$1")"
  if [[ "${HTTP_CLIENT:-http_load}" == wrk ]]; then
    out="$("${on_load[@]}" wrk -t"$threads" -c64 -d"${seconds}s" --latency -s "$here/keys.lua" "$2://127.0.0.1:$(cat "$work/$1.port")/v1/auth?policy=web")"
    rate="$(awk '/Requests\/sec/ {print $2}' <<<"$out")"
    p99="$(micros "$(awk '$1 == "99%" {print $2}' <<<"$out")")"
  else
    out="$("${on_load[@]}" "$(dirname "$load")/http_load" --port "$(cat "$work/$1.port")" $([[ "$2" == https ]] && echo --tls) \
      --connections 64 --threads "$threads" --seconds "$seconds")"
    rate="$(awk '{print $2}' <<<"$out")"
    p99="$(awk '{print $4}' <<<"$out")"
  fi
  echo "$rate $p99 $(cpu "$1" "$before" "$rate")"
}
grpc() {  # NAME [--ca FILE] → "decisions/s p99µs cpuµs busy%"
  local out before rate
  before="$(ticks "$1")"
  out="$("${on_load[@]}" "$load" --target "127.0.0.1:$(cat "$work/$1.grpc")" --domain bench --key remote_address --keys 10000 --concurrency 64 \
    --channels 2 --seconds "$seconds" "${@:2}")"
  rate="$(sed -n 's/^decisions\/s: \([0-9]*\).*/\1/p' <<<"$out")"
  echo "$rate $(sed -n 's/.* p99 \([0-9.]*\) .*/\1/p' <<<"$out" | awk '{print $1 * 1000}') $(cpu "$1" "$before" "$rate")"
}
http plain http >/dev/null  # warm up (and check that each answers)
http tls https >/dev/null
for r in $(seq "$rounds"); do
  http plain http >>"$work/http_plain"
  http tls https >>"$work/http_tls"
  grpc plain >>"$work/grpc_plain"
  grpc tls --ca "$work/certs/ca.crt" >>"$work/grpc_tls"
  echo "round $r done" >&2
done
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { cut -d' ' -f"$2" "$work/$1" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
if [[ "$pin" == 1 ]]; then
  echo "(server on core 0 with 1 I/O thread, load generator on core 1)"
  echo "| transport | plain decisions/s | p99 µs | server CPU µs/decision | server core busy | TLS decisions/s | p99 µs | server CPU µs/decision | server core busy | TLS ÷ plain (rate) | TLS ÷ plain (CPU) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
else
  echo "| transport | plain decisions/s | p99 µs | server CPU µs/decision | TLS decisions/s | p99 µs | server CPU µs/decision | TLS ÷ plain (rate) | TLS ÷ plain (CPU) |"
  echo "|---|---|---|---|---|---|---|---|---|"
fi
bottleneck=()
for t in http grpc; do
  p="$(col "${t}_plain" 1)"; q="$(col "${t}_tls" 1)"; pc="$(col "${t}_plain" 3)"; qc="$(col "${t}_tls" 3)"
  if [[ "$pin" == 1 ]]; then
    pb="$(col "${t}_plain" 4)"; qb="$(col "${t}_tls" 4)"
    echo "| $t | $p | $(col "${t}_plain" 2) | $pc | $pb% | $q | $(col "${t}_tls" 2) | $qc | $qb% | $(ratio "$q" "$p") | $(ratio "$qc" "$pc") |"
    for b in "plain $pb" "TLS $qb"; do
      # 90%: the server's core had no idle time worth counting (the rest is interrupts, timers,
      # other processes' moments on the core)
      if awk -v b="${b#* }" 'BEGIN { exit !(b < 90) }'; then bottleneck+=("$t ${b% *}: the server used ${b#* }% of its core"); fi
    done
  else
    echo "| $t | $p | $(col "${t}_plain" 2) | $pc | $q | $(col "${t}_tls" 2) | $qc | $(ratio "$q" "$p") | $(ratio "$qc" "$pc") |"
  fi
done
echo "(medians of $rounds runs of ${seconds}s each; raw: $(tr '\n' ';' <"$work/http_plain") / $(tr '\n' ';' <"$work/http_tls") / $(tr '\n' ';' <"$work/grpc_plain") / $(tr '\n' ';' <"$work/grpc_tls"))"
if [[ "$pin" == 1 ]]; then
  if [[ ${#bottleneck[@]} -eq 0 ]]; then
    echo "the server was the bottleneck in every case (its core at least 90% busy)"
  else
    for b in "${bottleneck[@]}"; do echo "NOT server-bound: $b (the load generator limited the rate)"; done
  fi
fi
