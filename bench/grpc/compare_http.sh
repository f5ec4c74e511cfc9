#!/usr/bin/env bash
# ShouldRateLimit decisions/s (our async C++ gRPC load generator) against HTTP GET /v1/auth (wrk),
# same rule (fixed window 1,000,000/second, 10,000 keys), same server process, memory store and
# then a scratch Redis, in one run.
#   bench/grpc/compare_http.sh build/release/floodgate build/release/bench/rls_load [seconds] [concurrency]
set -euo pipefail
floodgate="$1"; load="$2"; seconds="${3:-10}"; concurrency="${4:-64}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
redis_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
cleanup() {
  [[ -f "$work/floodgate.pid" ]] && kill "$(cat "$work/floodgate.pid")" 2>/dev/null || true
  redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --dir "$work" --logfile "$work/redis.log"
for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done

source "$here/bench_config.sh"
write_bench_config "$work"  # $work/rules, $work/bench.yaml

run() {  # run STORAGE-URL LABEL
  rm -f "$work/port" "$work/grpc.port"
  "$floodgate" serve --config "$work/bench.yaml" --storage "$1" --listen 127.0.0.1:0 --threads 2 \
    --port-file "$work/port" --grpc-port-file "$work/grpc.port" 2>"$work/serve.log" &
  echo $! >"$work/floodgate.pid"
  for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.05; done
  echo "== $2: gRPC ShouldRateLimit, rls_load --concurrency $concurrency --channels 2, ${seconds}s"
  "$load" --target "127.0.0.1:$(cat "$work/grpc.port")" --domain bench --key remote_address --keys 10000 \
    --concurrency "$concurrency" --channels 2 --seconds "$seconds" | tee "$work/grpc.txt"
  echo "== $2: HTTP GET /v1/auth, wrk -t2 -c$concurrency -d${seconds}s"
  wrk -t2 -c"$concurrency" -d"${seconds}s" --latency -s "$here/../http/keys.lua" \
    "http://127.0.0.1:$(cat "$work/port")/v1/auth?policy=web" >"$work/wrk.txt"
  grep -E "Requests/sec|50%|99%|Non-2xx" "$work/wrk.txt"
  local g h
  g="$(sed -n 's/^decisions\/s: \([0-9]*\).*/\1/p' "$work/grpc.txt")"
  h="$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$work/wrk.txt")"
  echo "== $2: gRPC / HTTP = $(python3 -c "print(f'{$g/$h:.2f}')")"
  kill "$(cat "$work/floodgate.pid")"; wait "$(cat "$work/floodgate.pid")" 2>/dev/null || true
  rm -f "$work/floodgate.pid"
}
run memory "memory"
run "redis://127.0.0.1:$redis_port?pool=4" "redis"
