#!/usr/bin/env bash
# A client's flood of one inline moving-window limit with a huge amount, POST /v1/hit on one key
# with wrk: every hit at a new microsecond is a log entry (16 bytes) kept for the period. Prints
# the requests, the non-2xx answers (503 once the log bound is reached), the server's RSS before
# and after, its log refusals and /readyz; the memory store's URL says the bound (default
# max_request_log_bytes = 256 MiB; `memory://?max_request_log_bytes=100000000000` for none).
#   bench/http/inline_flood.sh build/release/floodgate [seconds=10] [storage URL=memory]
set -euo pipefail
floodgate="$1"
seconds="${2:-10}"
storage="${3:-memory}"
prefix="$(mktemp -d)"
cleanup() {
  [[ -f "$prefix/floodgate.pid" ]] && kill "$(cat "$prefix/floodgate.pid")" 2>/dev/null || true
  sleep 0.3
  rm -rf "$prefix"
}
trap cleanup EXIT

cat >"$prefix/floodgate.yaml" <<YAML
log_level: warn
storage: "$storage"
inline_limits: true
policies:
  - {name: api, strategy: fixed-window, limit: 10/second}
YAML
cat >"$prefix/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"limit": "1000000000/hour", "strategy": "moving-window", "key": "k"}'
wrk.headers["Content-Type"] = "application/json"
LUA
"$floodgate" serve --config "$prefix/floodgate.yaml" --listen 127.0.0.1:0 --threads 2 \
  --port-file "$prefix/floodgate.port" 2>"$prefix/floodgate.log" &
pid=$!
echo $pid >"$prefix/floodgate.pid"
for _ in $(seq 100); do [[ -s "$prefix/floodgate.port" ]] && break; sleep 0.05; done
port="$(cat "$prefix/floodgate.port")"
rss() { awk '/VmRSS/{print $2}' "/proc/$pid/status"; }
before="$(rss)"
wrk -t1 -c16 -d"${seconds}s" -s "$prefix/post.lua" "http://127.0.0.1:$port/v1/hit" >"$prefix/wrk.out"
after="$(rss)"
requests="$(awk '/requests in/{print $1}' "$prefix/wrk.out")"
non2xx="$(awk '/Non-2xx/{print $NF}' "$prefix/wrk.out")"
refusals="$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^floodgate_memory_log_refusals_total /{print $2}')"
ready="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")"
echo "storage=$storage seconds=$seconds requests=$requests non2xx=${non2xx:-0} rss_before_kb=$before rss_after_kb=$after grew_kb=$((after - before)) log_refusals=$refusals readyz=$ready"
