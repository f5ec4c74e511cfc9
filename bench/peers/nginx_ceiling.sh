#!/usr/bin/env bash
# HTTP ceiling: nginx on loopback, measured with wrk (2 threads, 64 connections, WRK_SECONDS
# = 10 s by default). Starts its own nginx (ports HTTP_PORT_BASE..+2, default 18080-18082),
# stops it (by PID) on exit.
#   raw          : no limit_req                       (GET /  -> 200, empty_gif)
#   limit_allow  : limit_req, one key (client addr), rate 1e8 r/s + burst nodelay: never hit
#   limit_deny   : limit_req, one key, 1 r/s, no burst: all but ~1 request/s get 429
#   raw_100k     : no limit_req, wrk Lua request() cycling ?k=0..99999 (the scripted client)
#   limit_100k   : limit_req keyed by $arg_k (100k keys), never hit, same scripted client
# The content handler is empty_gif (content phase), so limit_req (preaccess phase) runs on
# every request; a rewrite-phase `return 200` would bypass limit_req.
# usage: nginx_ceiling.sh RUN_INDEX [case ...]   (one JSON line per measurement on stdout)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/lib.sh"
RUN="${1:-0}"; shift || true
CASES=("$@")
[ ${#CASES[@]} -gt 0 ] || CASES=(raw limit_allow limit_deny raw_100k limit_100k)
DUR="${WRK_SECONDS:-10}"
THREADS="${WRK_THREADS:-2}"
CONNS="${WRK_CONNS:-64}"
WORKERS="${NGINX_WORKERS:-1}"
P0=$HTTP_PORT_BASE; P1=$((P0 + 1)); P2=$((P0 + 2))
ND="$RUN_DIR/nginx"
mkdir -p "$ND/tmp" "$ND/logs"

cat > "$ND/nginx.conf" <<EOF
worker_processes $WORKERS;
pid $ND/nginx.pid;
error_log $ND/logs/error.log error;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $ND/tmp/body;
  proxy_temp_path $ND/tmp/proxy;
  fastcgi_temp_path $ND/tmp/fastcgi;
  uwsgi_temp_path $ND/tmp/uwsgi;
  scgi_temp_path $ND/tmp/scgi;
  keepalive_requests 100000000;
  keepalive_timeout 60s;
  limit_req_status 429;
  limit_req_log_level info;   # below error_log's level: rejections are not logged
  limit_req_zone \$binary_remote_addr zone=fast:1m rate=100000000r/s;
  limit_req_zone \$binary_remote_addr zone=slow:1m rate=1r/s;
  limit_req_zone \$arg_k zone=many:64m rate=100000000r/s;
  server {
    listen 127.0.0.1:$P0;
    location / { empty_gif; }
  }
  server {
    listen 127.0.0.1:$P1;
    location / { limit_req zone=fast burst=10000000 nodelay; empty_gif; }
    location /k { limit_req zone=many burst=10000000 nodelay; empty_gif; }
  }
  server {
    listen 127.0.0.1:$P2;
    location / { limit_req zone=slow; empty_gif; }
  }
}
EOF

cat > "$ND/report.lua" <<'EOF'
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"status_errors":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d,"lat_p50_us":%d,"lat_p99_us":%d,"lat_mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.mean))
end
EOF
# scripted client: each thread cycles through ?k=0..99999 (offset per thread)
cat > "$ND/keys.lua" <<'EOF'
local counter = 0
local nthreads = 0
function setup(thread)  -- runs in the main Lua state; sets the global `offset` in each thread
  thread:set("offset", nthreads * 50000)
  nthreads = nthreads + 1
end
function request()
  counter = counter + 1
  return wrk.format("GET", "/k?k=" .. ((counter + (offset or 0)) % 100000))
end
EOF
cat "$ND/report.lua" >> "$ND/keys.lua"

if curl -s -o /dev/null "http://127.0.0.1:$P0/" 2>/dev/null; then
  echo "port $P0 already serves HTTP (not ours?); refusing" >&2; exit 1
fi
nginx -p "$ND" -c "$ND/nginx.conf" -g 'daemon off;' &
NGINX_PID=$!
trap 'kill "$NGINX_PID" 2>/dev/null; wait "$NGINX_PID" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  curl -s -o /dev/null "http://127.0.0.1:$P0/" && break; sleep 0.1
done
NGINX_VER="$(nginx -v 2>&1 | sed 's|.*nginx/||')"

run_wrk() {  # case port path script limit_req(desc) keys regime
  local name="$1" port="$2" path="$3" script="$4" algo="$5" keys="$6" regime="$7"
  # 1-s warm-up, then the measured run (hard cap: DUR + 10 s)
  timeout 15 wrk -t"$THREADS" -c"$CONNS" -d1s -s "$script" "http://127.0.0.1:$port$path" >/dev/null 2>&1 || true
  local out
  out="$(timeout $((DUR + 10)) wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" -s "$script" "http://127.0.0.1:$port$path" 2>&1)" \
    || { echo "wrk failed: $name" >&2; return 0; }
  echo "$out" | sed -n 's/^WRKJSON //p' | "$PY" -c '
import json, sys
w = json.loads(sys.stdin.read())
name, algo, keys, regime, ver, run, thr, conns, workers = sys.argv[1:10]
secs = w["duration_us"] / 1e6
ok = w["requests"] - w["status_errors"]
print(json.dumps({
  "bench": "http-ceiling", "peer": "nginx", "lang": "c", "version": ver,
  "storage": "memory", "algorithm": algo,
  "api": {"raw": "no limit_req", "raw_100k": "no limit_req (scripted client)"}.get(name,
          "limit_req zone=%s" % ("many ($arg_k)" if keys != "1" else "($binary_remote_addr)")),
  "keys": int(keys), "regime": regime, "ops": w["requests"], "seconds": round(secs, 6),
  "ops_per_s": round(w["requests"] / secs, 1), "allowed": ok,
  "rejected_429": w["status_errors"], "socket_errors": w["connect_errors"] + w["read_errors"]
    + w["write_errors"] + w["timeouts"],
  "lat_p50_ms": w["lat_p50_us"] / 1000, "lat_p99_ms": w["lat_p99_us"] / 1000,
  "threads": int(thr), "concurrency": int(conns), "nginx_workers": int(workers),
  "case": name, "run": int(run)}))
' "$name" "$algo" "$keys" "$regime" "$NGINX_VER" "$RUN" "$THREADS" "$CONNS" "$WORKERS"
}

for c in "${CASES[@]}"; do
  case "$c" in
    raw)         run_wrk raw "$P0" / "$ND/report.lua" none 1 allow ;;
    limit_allow) run_wrk limit_allow "$P1" / "$ND/report.lua" leaky_bucket 1 allow ;;
    limit_deny)  run_wrk limit_deny "$P2" / "$ND/report.lua" leaky_bucket 1 deny ;;
    raw_100k)    run_wrk raw_100k "$P0" /k "$ND/keys.lua" none 100000 allow ;;
    limit_100k)  run_wrk limit_100k "$P1" /k "$ND/keys.lua" leaky_bucket 100000 allow ;;
    *) echo "unknown case $c" >&2 ;;
  esac
done
