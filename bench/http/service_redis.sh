#!/usr/bin/env bash
# Decisions per second through the service with a Redis storage, against the storage's own batch
# benchmark on the same scratch Redis, in one run. The service coalesces concurrent requests into
# one pipelined round trip per I/O thread (batching: auto).
#   bench/http/service_redis.sh build/release/floodgate build/release/bench/floodgate_redis_benchmark [seconds]
set -euo pipefail
floodgate="$1"; storage_bench="$2"; seconds="${3:-10}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
cleanup() {
  [[ -f "$work/floodgate.pid" ]] && kill "$(cat "$work/floodgate.pid")" 2>/dev/null || true
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
trap cleanup EXIT
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --dir "$work" --logfile "$work/redis.log"
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done

echo "== the storage's batch benchmark (2 clients, pipeline 32, 10,000 keys)"
"$storage_bench" --port "$port" --clients 2 --pipeline 32 --seconds "$seconds" --keys 10000 \
  --no-redis-benchmark | tee "$work/storage.txt"

cat >"$work/floodgate.yaml" <<YAML
log_level: warn
policies:
  - {name: web, strategy: gcra, limit: 1000000/second, key: {header: X-Real-IP}}
YAML
"$floodgate" serve --config "$work/floodgate.yaml" --storage "redis://127.0.0.1:$port?pool=4" \
  --listen 127.0.0.1:0 --threads 2 --port-file "$work/port" 2>"$work/serve.log" &
echo $! >"$work/floodgate.pid"
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.05; done
echo "== the service: wrk -t2 -c64 -d${seconds}s GET /v1/auth, 10,000 keys"
wrk -t2 -c64 -d"${seconds}s" --latency -s "$here/keys.lua" \
  "http://127.0.0.1:$(cat "$work/port")/v1/auth?policy=web" | tee "$work/wrk.txt" | grep -E "Requests/sec|99%|Non-2xx"
