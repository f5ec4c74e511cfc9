#!/usr/bin/env bash
# One hot key through 1, 2 and 4 `floodgate serve` processes on one Redis, with and without budget
# slices, then in process (one Limiter, 2 threads) with and without. Loopback only; starts and
# stops its own Redis and serve processes; about 6 × (SECONDS + 2) + 2 × SECONDS seconds.
#
#   bench/hotkey/run.sh FLOODGATE_BINARY [SECONDS] [LIMIT]
#     HOTKEY_INPROCESS=build/release/bench/hotkey_inprocess  (default: beside FLOODGATE_BINARY)
#
# The policy: fixed window, LIMIT (default 20000) per second, blocked_cache 1000; with slices
# `budget_slice: {max_slice: 500, interval_ms: 100}`. Load: one wrk per process (1 thread, 16
# connections) on GET /v1/auth with one X-Real-IP. Prints one JSON line per run:
#   processes, slices, seconds, decisions_per_s, store_calls_per_decision (Redis script calls —
#   FCALL/EVALSHA — per decision), admitted, limit (LIMIT × the windows the run touched),
#   held_back_max (the most units sitting in the processes' slices, sampled every 20 ms, in a
#   sample where some process's denials grew), bound (processes × max_slice).
set -euo pipefail
floodgate="$(realpath "$1")"; seconds="${2:-5}"; limit="${3:-20000}"
inprocess="${HOTKEY_INPROCESS:-$(dirname "$floodgate")/bench/hotkey_inprocess}"
max_slice=500
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port="$(free_port)"
trap cleanup EXIT
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --dir "$work" --logfile "$work/redis.log"
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done

script_calls() {  # script calls (FCALL, EVALSHA, …) since the last CONFIG RESETSTAT
  redis-cli -p "$port" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '$1 ~ /^cmdstat_(evalsha|eval|fcall|fcall_ro)$/ {n += $3} END {print n + 0}'
}

run_serve() {  # processes slices
  local n="$1" slices="$2" slice_line=""
  [[ "$slices" == true ]] && slice_line="    budget_slice: {max_slice: $max_slice, interval_ms: 100}"
  cat >"$work/floodgate.yaml" <<YAML
log_level: warn
policies:
  - name: hot
    strategy: fixed-window
    limit: $limit/second
    blocked_cache: 1000
$slice_line
YAML
  redis-cli -p "$port" flushall >/dev/null; redis-cli -p "$port" config resetstat >/dev/null
  local ports=() serve_pids=()
  for i in $(seq "$n"); do
    rm -f "$work/port$i"
    "$floodgate" serve --config "$work/floodgate.yaml" --storage "redis://127.0.0.1:$port?pool=2" \
      --listen 127.0.0.1:0 --threads 1 --port-file "$work/port$i" 2>"$work/serve$i.log" &
    serve_pids+=($!); pids+=($!)
  done
  for i in $(seq "$n"); do
    for _ in $(seq 200); do [[ -s "$work/port$i" ]] && break; sleep 0.05; done
    ports+=("$(cat "$work/port$i")")
  done
  # Samples every 20 ms: held units and denials of each process.
  python3 - "$work/samples" "$seconds" "${ports[@]}" <<'PY' &
import re, sys, time, urllib.request
out, seconds, ports = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
def read(p):
    t = urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=1).read().decode()
    held = re.search(r"^floodgate_budget_held_units (\d+)", t, re.M)
    denied = re.search(r'^floodgate_decisions_total\{policy="hot",result="denied"\} (\d+)', t, re.M)
    return int(held.group(1)) if held else 0, int(denied.group(1)) if denied else 0
last, best = None, 0
end = time.time() + seconds + 0.5
while time.time() < end:
    now = [read(p) for p in ports]
    if last is not None and any(d > l[1] for (_, d), l in zip(now, last)):
        best = max(best, sum(h for h, _ in now))
    last = now
    time.sleep(0.02)
open(out, "w").write(str(best))
PY
  local poller=$!
  local start end
  start="$(date +%s.%N)"
  local wrks=()
  for p in "${ports[@]}"; do
    wrk -t1 -c16 -d"${seconds}s" -H "X-Real-IP: 10.0.0.1" "http://127.0.0.1:$p/v1/auth?policy=hot" \
      >"$work/wrk$p.txt" 2>&1 &
    wrks+=($!)
  done
  for w in "${wrks[@]}"; do wait "$w"; done
  end="$(date +%s.%N)"
  wait "$poller"
  local allowed=0 denied=0
  for p in "${ports[@]}"; do
    local m; m="$(curl -s "http://127.0.0.1:$p/metrics")"
    allowed=$((allowed + $(awk '/^floodgate_decisions_total\{policy="hot",result="allowed"\}/ {print $2}' <<<"$m")))
    denied=$((denied + $(awk '/^floodgate_decisions_total\{policy="hot",result="denied"\}/ {print $2}' <<<"$m")))
  done
  for p in "${serve_pids[@]}"; do kill -TERM "$p"; done
  for p in "${serve_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  local calls; calls="$(script_calls)"
  python3 - "$n" "$slices" "$start" "$end" "$allowed" "$denied" "$calls" "$limit" "$(cat "$work/samples")" \
    "$((n * max_slice))" <<'PY'
import json, math, sys
n, slices, start, end, allowed, denied, calls, limit, held, bound = sys.argv[1:]
start, end = float(start), float(end)
decisions = int(allowed) + int(denied)
windows = math.floor(end) - math.floor(start) + 1
print(json.dumps({"processes": int(n), "slices": slices == "true", "seconds": round(end - start, 2),
                  "decisions_per_s": round(decisions / (end - start)),
                  "store_calls_per_decision": round(int(calls) / max(decisions, 1), 6),
                  "admitted": int(allowed), "limit": int(limit) * windows, "held_back_max": int(held),
                  "bound": int(bound) if slices == "true" else 0}))
PY
}

run_inprocess() {  # slices (0|1)
  redis-cli -p "$port" flushall >/dev/null; redis-cli -p "$port" config resetstat >/dev/null
  local out; out="$("$inprocess" --storage "redis://127.0.0.1:$port?pool=2" --threads 2 --seconds "$seconds" \
    --limit "$limit" --max-slice "$max_slice" --slices "$1")"
  python3 - "$1" "$out" "$(script_calls)" "$limit" "$max_slice" <<'PY'
import json, math, sys
slices, out, calls, limit, max_slice = sys.argv[1:]
f = out.split()
v = {f[i]: float(f[i + 1]) for i in range(0, len(f), 2)}
windows = math.floor(v["end_us"] / 1e6) - math.floor(v["start_us"] / 1e6) + 1
print(json.dumps({"processes": "in-process, 2 threads", "slices": slices == "1", "seconds": v["seconds"],
                  "decisions_per_s": round(v["decisions"] / v["seconds"]),
                  "store_calls_per_decision": round(int(calls) / max(v["decisions"], 1), 6),
                  "admitted": int(v["admitted"]), "limit": int(limit) * windows,
                  "held_back_max": 0, "bound": int(max_slice) if slices == "1" else 0}))
PY
}

for n in 1 2 4; do
  for slices in false true; do run_serve "$n" "$slices"; done
done
if [[ -x "$inprocess" ]]; then
  for slices in 0 1; do run_inprocess "$slices"; done
else
  echo "(no $inprocess: build the hotkey_inprocess target for the in-process runs)" >&2
fi
