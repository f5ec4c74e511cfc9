#!/usr/bin/env bash
# Decisions per second through the service with a Redis storage, against the storage's own batch
# benchmark on the same scratch Redis, in one run. The service coalesces concurrent requests into
# one pipelined round trip per I/O thread (batching: auto).
#   bench/http/service_redis.sh build/release/floodgate build/release/tests/integration/redis/bench/floodgate_redis_benchmark [seconds]
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
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # user + system, in clock ticks
redis_pid="$(redis-cli -p "$port" info server | tr -d '\r' | awk -F: '$1 == "process_id" {print $2}')"
redis_before="$(cpu "$redis_pid")"; floodgate_before="$(cpu "$(cat "$work/floodgate.pid")")"
/usr/bin/time -o "$work/wrk.time" -f '%U %S' wrk -t2 -c64 -d"${seconds}s" --latency -s "$here/keys.lua" \
  "http://127.0.0.1:$(cat "$work/port")/v1/auth?policy=web" | tee "$work/wrk.txt" | grep -E "Requests/sec|99%|Non-2xx"
storage_rate="$(awk '$1 == "bench-gcra" {print $2}' "$work/storage.txt")"
service_rate="$(awk '/Requests\/sec/ {print $2}' "$work/wrk.txt")"
python3 -c "import sys; s, v = float(sys.argv[1]), float(sys.argv[2]); print(f'== ratio: service {v:,.0f}/s / storage gcra {s:,.0f}/s = {v / s:.2f}')" \
  "$storage_rate" "$service_rate"
redis_after="$(cpu "$redis_pid")"; floodgate_after="$(cpu "$(cat "$work/floodgate.pid")")"
python3 - "$service_rate" "$seconds" "$(getconf CLK_TCK)" "$redis_before" "$redis_after" \
  "$floodgate_before" "$floodgate_after" "$(cat "$work/wrk.time")" <<'PY'
import sys
rate, seconds, tck = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
rb, ra, fb, fa = (float(x) for x in sys.argv[4:8])
wrk_cpu = sum(float(x) for x in sys.argv[8].split())
n = rate * seconds
parts = {"redis-server": (ra - rb) / tck, "floodgate serve": (fa - fb) / tck, "wrk": wrk_cpu}
print("== CPU per decision: " + ", ".join(f"{k} {v / n * 1e6:.1f} µs" for k, v in parts.items())
      + f"; total {sum(parts.values()) / n * 1e6:.1f} µs of {2 / rate * 1e6:.1f} µs available on 2 cores")
PY
